"""Host values → files the sandbox reads as its inputs.

Inputs go IN as pickles (written here, from the user's own values, read by the
runner inside the container). Nothing ever comes back this way: results are JSON.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import pickle
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput

FILE_MODE = 0o644  # readable by the container's unprivileged user


@dataclass(frozen=True)
class PickleFile:
    """An input that is already a pickle on disk (``selfheal sandbox exec --input``).

    Its bytes are copied as they are: the host never unpickles it.
    """

    path: Path


@dataclass(frozen=True)
class Pickled:
    """A value already pickled on the host (once per run, not once per iteration).

    Its bytes are written as they are.
    """

    data: bytes = field(repr=False)
    type: str = ""
    """What its owner said it is (the class service holds only the bytes and never
    unpickles them, so the prompt's type and summary come with them)."""
    summary: str = ""

    @classmethod
    def of(cls, name: str, value: Any) -> Pickled:
        return value if isinstance(value, Pickled) else cls(dumps(name, value))


def check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise BadInput(
            f"The input name {name!r} is not a valid Python variable name, so the program "
            "could not refer to it. Use a name like df or sales_2024."
        )


def dumps(name: str, value: Any) -> bytes:
    """Pickle one value (protocol 5), or say which input cannot be sent and why."""
    if isinstance(value, Pickled):
        return value.data
    if isinstance(value, PickleFile):
        try:
            return value.path.read_bytes()
        except OSError as exc:
            raise BadInput(
                f"The input {name!r} should be read from {value.path}, but that file cannot "
                f"be read ({exc.strerror or exc}). Check the path given with --input."
            ) from exc
    try:
        return pickle.dumps(value, protocol=5)
    except Exception as exc:
        raise BadInput(
            f"The input {name!r} (a {type(value).__name__}) cannot be copied into the "
            f"sandbox: it cannot be pickled ({type(exc).__name__}: {exc}). Pass plain data "
            "instead — a DataFrame, array, list, dict, numbers or strings — e.g. "
            "list(the_generator) or the file's path instead of an open file."
        ) from exc


def dump_all(inputs: Mapping[str, Any]) -> dict[str, bytes]:
    """Every input as bytes, or :class:`BadInput` naming the first that cannot be sent."""
    for name in inputs:
        check_name(name)
    return {name: dumps(name, value) for name, value in inputs.items()}


def write_blobs(blobs: Mapping[str, bytes], directory: Path) -> dict[str, str]:
    """Write the pickled inputs into ``directory``; return ``{name: file name}``.

    File names are random, so a directory that others may traverse (``/dev/shm``,
    mode 0711) does not let them guess and read the data.
    """
    written: dict[str, str] = {}
    for name, data in blobs.items():
        filename = f"{secrets.token_hex(12)}.pkl"
        fd = os.open(directory / filename, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        written[name] = filename
    return written


def clear(directory: Path) -> None:
    """Remove the inputs of the previous run."""
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            entry.unlink()
