"""The program's end of the RPC: serves the checker's requests from the namespace the
program left, in the program's process.

Nothing here decides anything: every answer is data or a reference, and the checker
computes comparisons and operators itself. The program's process is the program's to
change, so the checker treats whatever arrives from here as the program's claims."""

import abc
import ast
import dataclasses
import inspect
import operator
import typing
from collections.abc import Callable
from typing import Any

from .codec import MUTABLE, ProgramCodec
from .describe import short_repr
from .exception_classes import describe_exception
from .frames import FrameReader, write_frame
from .tagged_values import Unencodable, plain_base

#: Items of a program's iterable sent to the tests per request.
ITER_CHUNK = 1000
#: Calls of the tests' own modules that reach the program's too: seeding (``random.seed(0)``
#: in a test makes the program's draws reproducible; the test's own draws stay the
#: checker's) and resetting pyplot's figures (a test's ``plt.close()`` between cases).
FORWARDED = {"random": ("seed",), "numpy.random": ("seed",), "matplotlib.pyplot": ("close", "clf", "cla")}
#: Operators the program computes between two of its own objects (never with a value of
#: the tests': those the checker computes on plain values).
BINARY_OPERATORS = (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
    "divmod",
)
#: What the tests may ask of one of the program's objects through their own library
#: functions (``inspect.signature(f)``, ``typing.get_type_hints(f)``...): computed here,
#: where the program's names are (string annotations are evaluated in the program's
#: process, never in the checker's), and sent back as data.
VIEWS: "dict[str, Callable[..., Any]]" = {
    "signature": inspect.signature,
    "type_hints": typing.get_type_hints,
    "annotations": inspect.get_annotations,
    "is_dataclass": dataclasses.is_dataclass,
    "asdict": dataclasses.asdict,
    "astuple": dataclasses.astuple,
    "replace": dataclasses.replace,
}
#: ``ABCMeta``'s own subclass check, taken before any program runs (an ABC's answer for
#: classes that do not name it as a base: ``collections.abc.Iterable``, ``numbers.Real``).
_ABC_META = abc.ABCMeta
_ABC_SUBCLASSCHECK = abc.ABCMeta.__subclasscheck__
_MRO = type.__dict__["__mro__"]
#: Names Python itself defines in a module: the tests keep their own.
MODULE_DUNDERS = frozenset(
    {
        "__name__",
        "__doc__",
        "__file__",
        "__loader__",
        "__spec__",
        "__package__",
        "__builtins__",
        "__cached__",
        "__annotations__",
    }
)


class ProgramObjects:
    """Serve the checker's requests from the program's namespace: its module as the
    runner made it, whatever the program later puts in ``sys.modules["__main__"]``."""

    MAX_REFS = 100_000

    def __init__(self, module: Any) -> None:
        self.module = module
        self.ns = module.__dict__
        self.objects: list = []
        self.ids: dict = {}
        self.codec = ProgramCodec(self.ref_of, self.deref)
        self.reader: FrameReader | None = None
        self.out = -1
        self.escaped: BaseException | None = None  # the last exception a request raised

    def ref_of(self, obj: Any) -> dict:
        if isinstance(obj, TestsFunction):
            return {"$": "cref", "id": obj.ref}
        key = id(obj)
        if key not in self.ids:
            if len(self.objects) >= self.MAX_REFS:
                raise RuntimeError("too many objects referenced by the tests")
            self.ids[key] = len(self.objects)
            self.objects.append(obj)
        try:
            text = short_repr(obj)
        except BaseException:
            text = "<object>"
        cls = type(obj)
        return {
            "$": "ref",
            "id": self.ids[key],
            "type": str(cls.__qualname__),
            "module": str(getattr(cls, "__module__", "")),
            "callable": callable(obj),
            "class": isinstance(obj, type),
            "plain": not isinstance(obj, type) and plain_base(obj) is not None,  # a value as data too
            "repr": text,
        }

    def deref(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return TestsFunction(self, v)
        return self.objects[int(v["id"])]

    def serve(self, rpc_in: int, rpc_out: int) -> "dict | None":
        """Answer requests until the checker says to go on (``resume``, returned) or is
        done (None)."""
        if self.reader is None:
            self.reader = FrameReader(rpc_in)
        self.out = rpc_out
        while True:
            req = self.reader.wait()
            if req is None or req.get("op") == "done":
                return None
            if req.get("op") == "resume":
                return req
            if not self.answer(req):
                return None

    def answer(self, req: dict) -> bool:
        try:
            value = self.handle(req)
            if isinstance(value, _Called):  # mutable arguments travel back (in-place changes)
                reply = {"ok": self.codec.encode(value.result), "after": value.after(self.codec)}
            elif isinstance(value, _Plain):
                reply = {"ok": value.data}
            else:
                reply = {"ok": self.ref_of(value.obj) if isinstance(value, _Ref) else self.codec.encode(value)}
        except BaseException as exc:  # SystemExit from a called function included
            self.escaped = exc
            reply = {"raise": describe_exception(exc)}
        try:
            write_frame(self.out, reply)
        except OSError:
            return False
        return True

    def callback(self, ref: int, args: tuple, kwargs: dict) -> Any:
        """Call a function of the tests' (they passed it to the program)."""
        write_frame(
            self.out,
            {"callback": ref, "args": self.codec.encode(list(args)), "kwargs": self.codec.encode(dict(kwargs))},
        )
        assert self.reader is not None
        while True:
            frame = self.reader.wait()
            if frame is None:
                raise RuntimeError("the tests went away during a callback")
            if "op" in frame:  # the callback asks the program something first
                self.answer(frame)
                continue
            if "raise" in frame:
                self.codec.raise_described(frame["raise"])
            return self.codec.decode(frame.get("ok"))

    def handle(self, req: dict) -> Any:
        op = req.get("op")
        dec = self.codec.decode
        if op == "names":
            return {
                n: self.ns[n] for n in req["names"] if isinstance(n, str) and n in self.ns and n not in MODULE_DUNDERS
            }
        if op == "module":
            return _Ref(self.module)
        if op == "forward" and req.get("name") in FORWARDED.get(str(req.get("module")), ()):
            import importlib

            module = importlib.import_module(str(req["module"]))
            getattr(module, str(req["name"]))(*dec(req["args"]), **dec(req["kwargs"]))
            return None
        if op == "update":  # the user's code, run in the checker, changed this in place
            old: Any = self.ns.get(str(req["name"]))
            new = dec(req["value"])
            if type(old) in MUTABLE and type(new) is type(old):
                if isinstance(old, (dict, set)):
                    old.clear()
                    old.update(new)
                else:
                    old[:] = new
            return None
        if "ref" not in req:
            raise ValueError(f"request {op!r} names no object")
        target: Any = self.objects[int(req["ref"])]
        if op == "call":
            args, kwargs = dec(req["args"]), dec(req["kwargs"])
            return _Called(target(*args, **kwargs), args, kwargs)
        if op == "getattr":
            value = getattr(target, str(req["name"]))
            return _Ref(value) if req["name"] == "__dict__" else value  # changed in place, here
        if op == "setattr":
            setattr(target, str(req["name"]), dec(req["value"]))
            return None
        if op == "getitem":
            return target[dec(req["key"])]
        if op == "setitem":
            target[dec(req["key"])] = dec(req["value"])
            return None
        if op == "delitem":
            del target[dec(req["key"])]
            return None
        if op == "len":
            return int(len(target))
        if op == "iter":
            return _Ref(iter(target))
        if op == "next":  # the next items of an iterator made by "iter", a chunk at a time
            import itertools

            return list(itertools.islice(target, ITER_CHUNK))
        if op == "str":
            return str(target)
        if op == "value":  # the object as data (records for the program's own objects)
            try:
                return _Plain(self.codec.plain(target))
            except Unencodable:
                raise TypeError(f"a {type(target).__name__} has no plain value") from None
        if op == "binop" and req.get("name") in BINARY_OPERATORS:  # two of its own objects
            name = str(req["name"])
            fn = divmod if name == "divmod" else getattr(operator, f"{name}_" if name in ("and", "or") else name)
            return fn(target, self.objects[int(req["other"])])
        if op == "equal":  # two of the program's own objects (never a value of the tests)
            return bool(target == self.objects[int(req["other"])])
        if op == "type":  # its class, as ``type()`` gives it (not what ``__class__`` says)
            return type(target)
        if op == "isinstance":
            return is_subclass(type(target), dec(req["cls"]))
        if op == "issubclass":
            return isinstance(target, type) and is_subclass(target, dec(req["cls"]))
        if op == "view" and req.get("name") in VIEWS:
            return VIEWS[str(req["name"])](target, *dec(req["args"]), **dec(req["kwargs"]))
        raise ValueError(f"unknown request {op!r}")


def is_subclass(cls: type, of: Any) -> bool:
    """``cls`` is ``of`` or derives from it, by the classes' own MROs: no hook of the
    program's classes runs (a metaclass's ``__instancecheck__`` or ``__subclasscheck__``);
    an ABC of the table answers as ``ABCMeta`` does (registered and structural
    subclasses, ``collections.abc.Iterable``)."""
    if not isinstance(of, type):
        raise TypeError("issubclass() arg 2 must be a class")
    if any(klass is of for klass in _MRO.__get__(cls)):
        return True
    return type(of) is _ABC_META and _ABC_SUBCLASSCHECK(of, cls) is True


class TestsFunction:
    """A function of the tests, seen from the program: calling it calls back."""

    def __init__(self, objects: ProgramObjects, info: dict) -> None:
        self.objects = objects
        self.ref = int(info["id"])
        self.__name__ = str(info.get("name") or "function")
        self.__qualname__ = str(info.get("qualname") or self.__name__)
        self.__doc__ = info.get("doc")
        self.__module__ = "selfheal_tests"
        signature = _parse_signature(str(info.get("signature") or ""))
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.objects.callback(self.ref, args, kwargs)


def _parse_signature(text: str) -> Any:
    """An inspect.Signature from its text, when its defaults are plain literals."""
    if not text.startswith("("):
        return None
    try:
        import inspect

        tree = ast.parse(f"def f{text}: pass")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                return None  # only literals may be evaluated
        ns: dict = {}
        exec(compile(tree, "<signature>", "exec", dont_inherit=True), {"__builtins__": {}}, ns)
        return inspect.signature(ns["f"])
    except Exception:
        return None


class _Called:
    """A call's result, and its mutable arguments as they are after the call."""

    def __init__(self, result: Any, args: list, kwargs: dict) -> None:
        self.result, self.args, self.kwargs = result, args, kwargs

    def after(self, codec: "ProgramCodec") -> dict:
        return {
            "args": [codec.encode(a) if type(a) in MUTABLE else None for a in self.args],
            "kwargs": {k: codec.encode(v) for k, v in self.kwargs.items() if type(v) in MUTABLE},
        }


class _Ref:
    """Forces an object to travel as a reference (the program's module)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


class _Plain:
    """An answer already encoded as data."""

    def __init__(self, data: Any) -> None:
        self.data = data
