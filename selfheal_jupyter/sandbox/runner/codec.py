"""The two sides of the RPC between the program and the checker, and what each may encode.

The trust boundary is two types, one per side of the RPC:

* ``CheckerCodec``, the trusted side (the checker). What it may encode: the tests'
  values for the program, a library class by its name, one of the program's objects by
  its reference, a function of the tests as a callback. What the program's bytes decode
  to there: plain data built by the checker itself (from a fixed table of tags), a
  record of one of the program's objects, a reference to an object that stays in the
  program (an opaque handle), or a stand-in exception class it makes. Nothing the
  program sends names a class, module or function for it to load: names from the
  program are only ever compared as strings or used as the name of a class it creates.
* ``ProgramCodec``, the untrusted side (the program's process, which the program may
  change at will). It encodes the program's values (as data, references, or in
  ``plain`` view as records of its own objects), and may resolve the names the tests
  sent (library classes, exceptions) in its own process.
"""

import collections
import contextlib
from collections.abc import Callable
from typing import Any

from .exception_classes import BUILTIN_EXCEPTIONS, local_class, raise_as, stand_in_class
from .tagged_values import NOT_OWN, Budget, Encoding, ProgramRecord, Unencodable, library_class
from .type_table import TYPES


class CheckerCodec(Encoding):
    """The trusted side: the checker.

    Encodes the tests' values for the program: data; a library class by its name (the
    program may load it in its own process); one of the program's objects by its
    reference; anything else by ``ref_of`` (a function of the tests as a callback).
    Decodes the program's bytes to what the checker builds itself: data by the shared
    tags, a record of one of the program's own objects (``ProgramRecord``), a handle
    (``deref``), or a stand-in exception class made here. It refuses a class by name:
    nothing the program sends makes it load anything."""

    def __init__(
        self, ref_of: Callable[[Any], dict], deref: Callable[[dict], Any], handle: "type | None" = None
    ) -> None:
        super().__init__(ref_of, deref)
        self.handle = handle  # the class of the checker's handles of the program's objects

    def _enc(self, x: Any, b: Budget, depth: int) -> Any:
        if type(x) is self.handle:  # one of the program's objects: its reference, always
            return self.ref_of(x)
        return super()._enc(x, b, depth)

    def _enc_class(self, x: type, b: Budget, depth: int) -> Any:
        if TYPES.name_of(x) is None:
            spec = f"{getattr(x, '__module__', '')}:{getattr(x, '__qualname__', '')}"
            if local_class(spec) is x:  # a library's class: the program can import it
                return {"$": "class", "v": spec}
        return super()._enc_class(x, b, depth)

    def _decode_own(self, tag: Any, v: dict) -> Any:
        if tag == "class":
            raise ValueError("a class by name is not accepted from the program")
        if tag == "record":
            d = self.decode
            return ProgramRecord(str(v["module"]), str(v["type"]), {str(k): d(val) for k, val in v["fields"]})
        if tag == "excclass":
            return self.exception_class(v)
        return NOT_OWN

    def exception_class(self, info: dict) -> type:
        """The class here for an exception class the program described: a builtin
        exception itself, else a stand-in made here."""
        return stand_in_class(info)

    def raise_described(self, info: dict) -> None:
        """Raise here the exception ``describe_exception`` gave in the program."""
        raise_as(self.exception_class(info), info)


class ProgramCodec(Encoding):
    """The untrusted side: the program's process (the program may change any of it, so
    the checker takes whatever comes from here as the program's claims).

    Encodes the program's values: data, or references; ``plain`` gives its own objects
    as records of their fields instead. Decodes the tests' bytes, and may resolve the
    names they carry (a library class, an exception class of a loaded module) in this
    process."""

    def _enc_subclass(self, x: Any, base: type, b: Budget, depth: int) -> Any:
        """An instance of the program's own subclass of a plain type is a reference (its
        class, its methods stay the program's; its plain value is ``plain``'s); of a
        library's, the plain value it holds."""
        t = type(x)
        if t in (collections.Counter, collections.OrderedDict, collections.defaultdict) or library_class(t):
            return super()._enc_subclass(x, base, b, depth)
        return self.ref_of(x)

    def plain(self, value: Any) -> Any:
        """The value as data only: the program's own objects as records of their fields;
        raises Unencodable when some part is neither (a function, a library object)."""
        records = _ProgramRecords(self.ref_of, self.deref)
        try:
            return records._enc(value, Budget(), 0)
        except RecursionError:
            raise Unencodable from None

    def _decode_own(self, tag: Any, v: dict) -> Any:
        if tag == "class":
            import importlib

            module, _, qualname = str(v["v"]).partition(":")
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
            return target
        if tag == "excclass":
            return self.exception_class(v)
        return NOT_OWN

    def exception_class(self, info: dict) -> type:
        """The class here for an exception class the tests described: a class of a
        module loaded here is used as it is, else as on the checker's side."""
        module, name = str(info.get("module")), str(info.get("name"))
        if module != "__main__" and not (module == "builtins" and name in BUILTIN_EXCEPTIONS):
            known = local_class(f"{module}:{name}")
            if known is not None and issubclass(known, BaseException):
                return known
        return stand_in_class(info)

    def raise_described(self, info: dict) -> None:
        """Raise here the exception ``describe_exception`` gave in the checker."""
        raise_as(self.exception_class(info), info)


class _ProgramRecords(ProgramCodec):
    """``ProgramCodec.plain``: what is not data is a record of one of the program's own
    objects, or nothing (``Unencodable``); a subclass of a plain type is the plain value
    it holds."""

    _enc_subclass = Encoding._enc_subclass

    def _other(self, x: Any, b: Budget, depth: int) -> Any:
        t = type(x)
        if getattr(t, "__module__", None) != "__main__" or isinstance(x, type) or callable(x):
            raise Unencodable
        fields: dict = {}
        try:
            attrs = object.__getattribute__(x, "__dict__")
        except AttributeError:
            attrs = {}
        if type(attrs) is dict:
            fields.update(attrs)
        for klass in t.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for name in [slots] if isinstance(slots, str) else slots:
                if isinstance(name, str) and name not in ("__dict__", "__weakref__"):
                    with contextlib.suppress(AttributeError):
                        fields[name] = object.__getattribute__(x, name)
        return {
            "$": "record",
            "module": str(t.__module__),
            "type": str(t.__qualname__),
            "fields": [[str(k), self._enc(v, b, depth + 1)] for k, v in fields.items() if isinstance(k, str)],
        }


#: Argument types whose in-place changes by a program's function travel back to the tests.
MUTABLE = (list, dict, set, bytearray)
