"""The program's end of the RPC: serves the checker's requests from the namespace the
program left, in the program's process."""

import ast
import sys
from typing import Any

from .codec import MUTABLE, Codec, describe_exception, raise_described
from .describe import short_repr
from .frames import FrameReader, write_frame

#: Items of a program's iterable sent to the tests per request.
ITER_CHUNK = 1000
#: Modules whose state the program's process owns (a test that seeds ``random`` or
#: closes pyplot's figures means the program's), given to the tests as the program's.
PROGRAM_STATE_MODULES = ("random", "numpy.random", "matplotlib.pyplot")
#: Names Python itself defines in a module: the tests keep their own.
MODULE_DUNDERS = frozenset({"__name__", "__doc__", "__file__", "__loader__", "__spec__",
                            "__package__", "__builtins__", "__cached__", "__annotations__"})


class ProgramObjects:
    """Serve the checker's requests from the program's namespace, after the program ran."""

    MAX_REFS = 100_000

    def __init__(self, ns: dict) -> None:
        self.ns = ns
        self.objects: list = []
        self.ids: dict = {}
        self.codec = Codec(self.ref_of, self.deref)

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
        if isinstance(obj, type):  # the tests use their own copy when they have the module
            text = f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"
            return {"$": "ref", "id": self.ids[key], "class": text, "type": cls.__qualname__,
                    "module": cls.__module__, "callable": True, "repr": repr(text)}
        return {"$": "ref", "id": self.ids[key], "type": cls.__qualname__,
                "module": getattr(cls, "__module__", ""), "callable": callable(obj),
                "repr": text}

    def deref(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return TestsFunction(self, v)
        return self.objects[int(v["id"])]

    def serve(self, rpc_in: int, rpc_out: int) -> None:
        self.reader = FrameReader(rpc_in)
        self.out = rpc_out
        while True:
            req = self.reader.wait()
            if req is None or req.get("op") == "done":
                return
            if not self.answer(req):
                return

    def answer(self, req: dict) -> bool:
        try:
            value = self.handle(req)
            if isinstance(value, _Called):  # mutable arguments travel back (in-place changes)
                reply = {"ok": self.codec.encode(value.result), "after": value.after(self.codec)}
            else:
                reply = {"ok": self.ref_of(value.obj) if isinstance(value, _Ref)
                         else self.codec.encode(value)}
        except BaseException as exc:  # SystemExit from a called function included
            reply = {"raise": describe_exception(exc)}
        try:
            write_frame(self.out, reply)
        except OSError:
            return False
        return True

    def callback(self, ref: int, args: tuple, kwargs: dict) -> Any:
        """Call a function of the tests' (they passed it to the program)."""
        write_frame(self.out, {"callback": ref, "args": self.codec.encode(list(args)),
                               "kwargs": self.codec.encode(dict(kwargs))})
        while True:
            frame = self.reader.wait()
            if frame is None:
                raise RuntimeError("the tests went away during a callback")
            if "op" in frame:  # the callback asks the program something first
                self.answer(frame)
                continue
            if "raise" in frame:
                raise_described(frame["raise"])
            return self.codec.decode(frame.get("ok"))

    def handle(self, req: dict) -> Any:
        op = req.get("op")
        dec = self.codec.decode
        if op == "names":
            return {n: self.ns[n] for n in req["names"]
                    if isinstance(n, str) and n in self.ns and n not in MODULE_DUNDERS}
        if op == "module":
            return _Ref(sys.modules["__main__"])
        if op == "import" and req.get("name") in PROGRAM_STATE_MODULES:
            import importlib

            return _Ref(importlib.import_module(str(req["name"])))
        if "ref" not in req:
            raise ValueError(f"request {op!r} names no object")
        target: Any = self.objects[int(req["ref"])]
        if op == "call":
            args, kwargs = dec(req["args"]), dec(req["kwargs"])
            return _Called(target(*args, **kwargs), args, kwargs)
        if op == "getattr":
            return getattr(target, str(req["name"]))
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
        if op == "repr":
            return repr(target)
        if op == "binop":
            other = dec(req["other"])
            method = getattr(target, str(req["name"]))
            result = method(other)
            if result is NotImplemented:
                raise TypeError(f"unsupported operand for {req['name']}: "
                                f"{type(target).__name__} and {type(other).__name__}")
            return result
        if op == "compare":  # both sides are the program's own objects
            other = self.objects[int(req["other"])]
            return bool(_COMPARE[str(req["name"])](target, other))
        raise ValueError(f"unknown request {op!r}")


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

    def after(self, codec: "Codec") -> dict:
        return {"args": [codec.encode(a) if type(a) in MUTABLE else None for a in self.args],
                "kwargs": {k: codec.encode(v) for k, v in self.kwargs.items()
                           if type(v) in MUTABLE}}


class _Ref:
    """Forces an object to travel as a reference (the program's module)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
