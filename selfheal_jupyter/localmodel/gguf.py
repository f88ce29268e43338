"""A tiny reader of a GGUF file's header and metadata (no tensors).

Why: before loading a gigabyte into llama.cpp we want to tell the user *what* the
assembled file is (name, architecture, licence) and refuse something that is not a
GGUF at all, without depending on the ``gguf`` package. Format: little-endian,
magic ``GGUF``, version, tensor count, key/value count, then typed key/values.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

MAGIC = b"GGUF"

# value type ids of the GGUF spec -> struct format (scalars only)
_SCALARS = {
    0: "<B",  # uint8
    1: "<b",  # int8
    2: "<H",  # uint16
    3: "<h",  # int16
    4: "<I",  # uint32
    5: "<i",  # int32
    6: "<f",  # float32
    7: "<?",  # bool
    10: "<Q",  # uint64
    11: "<q",  # int64
    12: "<d",  # float64
}
_STRING = 8
_ARRAY = 9

# Long arrays (the tokenizer's 150k tokens) are skipped, not kept: we only need
# their length.
MAX_KEPT_ARRAY = 64


class GGUFError(ValueError):
    """The file is not a readable GGUF."""


def _read(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise GGUFError("truncated GGUF header")
    return data


def _unpack(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    length = _unpack(f, "<Q")
    if length > 1 << 26:
        raise GGUFError("implausible string length in GGUF header")
    return _read(f, length).decode("utf-8", errors="replace")


def _value(f: BinaryIO, vtype: int) -> Any:
    if vtype in _SCALARS:
        return _unpack(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _string(f)
    if vtype == _ARRAY:
        itype = _unpack(f, "<I")
        count = _unpack(f, "<Q")
        if itype in _SCALARS and count > MAX_KEPT_ARRAY:
            f.seek(struct.calcsize(_SCALARS[itype]) * count, 1)
            return f"<array of {count}>"
        items = [_value(f, itype) for _ in range(count)]
        return items if count <= MAX_KEPT_ARRAY else f"<array of {count}>"
    raise GGUFError(f"unknown GGUF value type {vtype}")


def read_metadata(path: Path) -> dict[str, Any]:
    """Return the header key/values of a GGUF file (plus ``gguf.version`` and
    ``gguf.tensor_count``). Raises :class:`GGUFError` for anything else."""
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (bad magic)")
        version = _unpack(f, "<I")
        if version not in (2, 3):
            raise GGUFError(f"unsupported GGUF version {version}")
        tensor_count = _unpack(f, "<Q")
        kv_count = _unpack(f, "<Q")
        if kv_count > 100_000:
            raise GGUFError("implausible GGUF key count")
        meta: dict[str, Any] = {"gguf.version": version, "gguf.tensor_count": tensor_count}
        for _ in range(kv_count):
            key = _string(f)
            meta[key] = _value(f, _unpack(f, "<I"))
        return meta


def describe(meta: dict[str, Any]) -> str:
    """One line: name, architecture, size label, licence."""
    parts = [
        str(meta.get("general.name", "?")),
        f"arch={meta.get('general.architecture', '?')}",
    ]
    if "general.size_label" in meta:
        parts.append(f"size={meta['general.size_label']}")
    if "general.license" in meta:
        parts.append(f"license={meta['general.license']}")
    return ", ".join(parts)
