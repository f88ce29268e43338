"""A copy of one notebook value, pickled once at run start (what travels to the sandbox),
with what it holds of the notebook's own classes, and a reason in words when it cannot
be copied. The user's object is only read.
"""

from __future__ import annotations

import io
import pickle
import re
import types
from typing import Any


class TooLarge(Exception):
    pass


class _Sink(io.RawIOBase):
    """Collects pickled bytes; gives up past ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = len(memoryview(b).cast("B"))
        self.size += n
        if self.limit and self.size > self.limit:
            raise TooLarge()
        self.chunks.append(bytes(b))
        return n


class _Tracker(pickle.Pickler):
    """A pickler that notes the notebook definitions and libraries a value refers to."""

    def __init__(self, file: Any) -> None:
        super().__init__(file, protocol=5)
        self.main: dict[str, None] = {}
        self.roots: dict[str, None] = {}

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            module = getattr(obj, "__module__", None) or ""
            if module == "__main__":
                self.main.setdefault(getattr(obj, "__qualname__", "").split(".")[0], None)
            elif module:
                self.roots.setdefault(module.split(".")[0], None)
        else:
            cls = type(obj)
            module = cls.__module__ or ""
            if module == "__main__":
                self.main.setdefault(cls.__qualname__.split(".")[0], None)
            elif module:
                self.roots.setdefault(module.split(".")[0], None)
        return NotImplemented


def copy_value(value: Any, limit: int) -> tuple[bytes, list[str], list[str]]:
    """Pickle ``value`` (protocol 5) → (bytes, notebook definitions it needs, library
    roots). Raises :class:`TooLarge` past ``limit`` bytes, or the pickling error."""
    sink = _Sink(limit)
    tracker = _Tracker(sink)
    tracker.dump(value)
    return b"".join(sink.chunks), list(tracker.main), list(tracker.roots)


def why_not_picklable(value: Any, exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(value, types.GeneratorType) or type(value).__name__ in ("generator", "async_generator", "coroutine"):
        return (
            "a generator: it cannot be copied (its position lives in your kernel). "
            "Make a list of it first, e.g. items = list(gen)"
        )
    if isinstance(value, io.IOBase):
        return "an open file: it cannot be copied. Pass its path (a string) instead"
    module = type(value).__module__ or ""
    tname = type(value).__name__
    if module == "socket" or tname == "socket":
        return "a network socket: it cannot be copied (the sandbox has no network)"
    if tname in ("lock", "RLock", "Condition", "Semaphore", "Event") or module == "_thread":
        return "a lock: it cannot be copied"
    if "connection" in tname.lower() or "cursor" in tname.lower():
        return "a database connection: it cannot be copied. Pass the data you read from it (e.g. a DataFrame) instead"
    match = re.search(r"it's not the same object as __main__\.(\w+)", str(exc))
    if match:
        return (
            f"made from an older definition of {match.group(1)} (the class was "
            "defined again afterwards): run the cell that creates it again"
        )
    if "<lambda>" in str(exc) or "local object" in str(exc):
        return f"it holds a function that cannot be copied ({text})"
    return f"it cannot be copied ({text})"
