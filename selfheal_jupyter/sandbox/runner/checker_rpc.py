"""The checker's end of the RPC: program objects seen from the checker (``Remote``).

What the program answers is data (rebuilt here by the codec's fixed rules) or a
``Remote``: an opaque handle. Comparisons, operators, truth values and conversions of a
handle are computed here on its plain value, fetched as data; a handle with none fails
the test with a clear message. A value of the tests never goes to the program for it to
compare or combine: it goes only as the argument of a call the test makes."""

import builtins
import contextlib
import operator
from collections.abc import Callable
from typing import Any

from .codec import (
    MUTABLE,
    Budget,
    CheckerCodec,
    ProgramRecord,
    Unencodable,
    claimed_names,
    describe_exception,
)
from .frames import FrameReader, write_frame
from .program_rpc import BINARY_OPERATORS


class ProgramLink:
    """The checker's end: asks the program's process for names, calls, attributes."""

    def __init__(self, rpc_out: int, rpc_in: int) -> None:
        self.out = rpc_out
        self.reader = FrameReader(rpc_in)
        self.remotes: dict = {}
        self.local: list = []
        self.after: dict | None = None
        self.codec = CheckerCodec(self.ref_of, self.remote)
        self.closed = False
        self.raised: BaseException | None = None  # the last exception the program raised
        self.sent: list[BaseException] = []  # exceptions functions of the tests raised

    def ref_of(self, obj: Any) -> dict:
        if type(obj) is Remote:
            return {"$": "ref", "id": object.__getattribute__(obj, "_id")}
        if callable(obj):  # a function of the tests, called back by the program
            self.local.append(obj)
            try:
                import inspect

                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = ""
            return {
                "$": "cref",
                "id": len(self.local) - 1,
                "name": str(getattr(obj, "__name__", "function")),
                "qualname": str(getattr(obj, "__qualname__", "function")),
                "doc": getattr(obj, "__doc__", None) if isinstance(getattr(obj, "__doc__", None), str) else None,
                "signature": signature,
            }
        raise TypeError(
            f"a {type(obj).__name__} from the tests cannot be passed to the program; "
            "pass plain data (numbers, strings, lists, dicts, arrays, DataFrames)"
        )

    def remote(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return self.local[int(v["id"])]
        key = int(v["id"])
        if key not in self.remotes:
            self.remotes[key] = Remote(self, key, v)
        return self.remotes[key]

    def encode(self, value: Any) -> Any:
        """A test-side value for the program; program objects travel as references."""
        try:
            return self.codec._enc(value, Budget(), 0)
        except Unencodable:
            raise TypeError("a value from the tests is too large to pass to the program") from None

    def ask(self, op: str, **fields: Any) -> Any:
        if self.closed:
            raise RuntimeError("the program's process is gone")
        try:
            write_frame(self.out, {"op": op, **fields})
        except OSError:
            self.closed = True
            raise RuntimeError("the program's process ended during the tests") from None
        while True:
            reply = self.reader.wait()
            if reply is None:
                self.closed = True
                raise RuntimeError("the program's process ended during the tests")
            if "callback" not in reply:
                break
            self.call_back(reply)
        if "raise" in reply:
            token = reply["raise"].get("token")
            try:
                if type(token) is int and 0 <= token < len(self.sent):
                    raise self.sent[token]  # the tests' own exception, passed through
                self.codec.raise_described(reply["raise"])
            except BaseException as exc:
                self.raised = exc
                raise
        self.after = reply.get("after") if isinstance(reply.get("after"), dict) else None
        return self.codec.decode(reply.get("ok"))

    def copy_back(self, args: tuple, kwargs: dict) -> None:
        """The program changed a list / dict / set it was passed: change the tests' too."""
        after, self.after = self.after, None
        if not after:
            return
        pairs = list(zip(args, after.get("args") or [], strict=False))
        pairs += [(kwargs[k], v) for k, v in (after.get("kwargs") or {}).items() if k in kwargs]
        for local, new in pairs:
            if new is None or type(local) not in MUTABLE:
                continue
            value = self.codec.decode(new)
            if type(value) is not type(local):
                continue
            if isinstance(local, (dict, set)):
                local.clear()
                local.update(value)
            else:
                local[:] = value

    def call_back(self, frame: dict) -> None:
        try:
            fn = self.local[int(frame["callback"])]
            value = fn(*self.codec.decode(frame["args"]), **self.codec.decode(frame["kwargs"]))
            reply = {"ok": self.encode(value)}
        except BaseException as exc:
            self.sent.append(exc)
            reply = {"raise": {**describe_exception(exc), "token": len(self.sent) - 1}}
        write_frame(self.out, reply)

    def forward(self, module: str, name: str, args: tuple, kwargs: dict) -> None:
        """A test called ``module.name`` of its own (a seed, a figure reset): call the
        program's too."""
        if not self.closed:
            self.ask(
                "forward", module=module, name=name, args=self.encode(list(args)), kwargs=self.encode(dict(kwargs))
            )

    def resume(self, outcome: dict) -> None:
        """The program waits at one of the user's asserts: let it go on (or raise)."""
        try:
            write_frame(self.out, {"op": "resume", **outcome})
        except OSError:
            self.closed = True

    def done(self) -> None:
        with contextlib.suppress(OSError):
            write_frame(self.out, {"op": "done"})


def _no_value(remote: "Remote") -> TypeError:
    return TypeError(f"the program returned a {remote._kind()} where a value was expected")


class Remote:
    """An object of the program, seen from the checker: an opaque handle. Attributes,
    calls, items, ``len`` and iteration are the program's answers (data or handles);
    everything that compares or computes is done here, on the plain value."""

    __slots__ = ("_link", "_id", "_info")

    def __init__(self, link: ProgramLink, ref: int, info: dict) -> None:
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_id", ref)
        object.__setattr__(self, "_info", info)

    # -- what the checker knows of it: strings it only compares, never looks up
    def _kind(self) -> str:
        return str(object.__getattribute__(self, "_info").get("type") or "object")

    def _callable(self) -> bool:
        """The program said its object is callable (a function, a class)."""
        return object.__getattribute__(self, "_info").get("callable") is True

    def _names(self, key: str) -> "list[str]":
        names = object.__getattribute__(self, "_info").get(key)
        return [str(n) for n in names] if isinstance(names, list) else []

    def _ask(self, op: str, **fields: Any) -> Any:
        return object.__getattribute__(self, "_link").ask(op, ref=object.__getattribute__(self, "_id"), **fields)

    def _enc(self, value: Any) -> Any:
        return object.__getattribute__(self, "_link").encode(value)

    def _plain(self) -> Any:
        """The program's object as data (a record for an instance of its own class)."""
        try:
            return self._ask("value")
        except Exception:
            raise _no_value(self) from None

    def _value(self) -> Any:
        """The plain value an operator works on (never a record, never a handle)."""
        value = self._plain()
        if isinstance(value, (ProgramRecord, Remote)):
            raise _no_value(self)
        return value

    # -- the program's answers
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._ask("setattr", name=name, value=self._enc(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._ask("call", args=self._enc(list(args)), kwargs=self._enc(dict(kwargs)))
        object.__getattribute__(self, "_link").copy_back(args, kwargs)
        return result

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key=self._enc(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ask("setitem", key=self._enc(key), value=self._enc(value))

    def __delitem__(self, key: Any) -> None:
        self._ask("delitem", key=self._enc(key))

    def __len__(self) -> int:
        n = self._ask("len")
        if type(n) is not int:
            raise TypeError("len() of a program object did not give an int")
        return n

    def __iter__(self) -> Any:
        iterator = self._ask("iter")
        while True:
            chunk = iterator._ask("next")
            if type(chunk) is not list:
                raise TypeError("the program's iterator did not give plain items")
            if not chunk:
                return
            yield from chunk

    def __contains__(self, item: Any) -> bool:
        return any(item == x for x in self)  # compared here, on plain values

    def __repr__(self) -> str:
        return str(object.__getattribute__(self, "_info").get("repr") or "<program object>")

    def __str__(self) -> str:
        text = self._ask("str")
        return text if type(text) is str else repr(self)

    def __format__(self, spec: str) -> str:
        return format(self._value(), spec) if spec else str(self)

    # -- computed here
    def __bool__(self) -> bool:
        try:
            value = self._value()
        except TypeError:
            raise TypeError(
                f"a {self._kind()} object of the program cannot be used as a truth value in a "
                "test; compare a plain value (e.g. `x == 3`, `len(x) > 0`)"
            ) from None
        return bool(value)

    def __hash__(self) -> int:
        return hash(("selfheal-remote", self._kind()))  # equal handles have equal kinds

    def __eq__(self, other: Any) -> Any:
        if type(other) is Remote:
            if object.__getattribute__(other, "_id") == object.__getattribute__(self, "_id"):
                return True
            try:
                mine, theirs = self._plain(), other._plain()
            except TypeError:
                return False  # objects without a value are equal only to themselves
            same = mine == theirs
            if isinstance(mine, ProgramRecord) and same:
                # Equal as data, and equal to the program (a class without __eq__ is not).
                same = self._ask("equal", other=object.__getattribute__(other, "_id")) is True
            return same
        mine = self._plain()
        return mine == other

    def __ne__(self, other: Any) -> Any:
        if type(other) is Remote:
            return not self.__eq__(other)
        return self._plain() != other

    def __lt__(self, other: Any) -> Any:
        return self._value() < _value_of(other)

    def __le__(self, other: Any) -> Any:
        return self._value() <= _value_of(other)

    def __gt__(self, other: Any) -> Any:
        return self._value() > _value_of(other)

    def __ge__(self, other: Any) -> Any:
        return self._value() >= _value_of(other)

    def __neg__(self) -> Any:
        return -self._value()

    def __pos__(self) -> Any:
        return +self._value()

    def __abs__(self) -> Any:
        return abs(self._value())

    def __invert__(self) -> Any:
        return ~self._value()

    def __round__(self, *args: Any) -> Any:
        return round(self._value(), *args)

    def __int__(self) -> int:
        return int(self._value())

    def __float__(self) -> float:
        return float(self._value())

    def __complex__(self) -> complex:
        return complex(self._value())

    def __index__(self) -> int:
        return operator.index(self._value())

    # -- type checks: against the names the program gave for its object's classes
    def _is_instance(self, cls: Any) -> bool:
        if type(cls) is Remote:  # one of the program's own classes: both sides are its
            return self._ask("isinstance", cls=object.__getattribute__(cls, "_id")) is True
        if cls is type:
            return bool(self._names("bases"))
        if not isinstance(cls, type) or getattr(cls, "__module__", "") == "builtins":
            return False  # plain values cross as values: a handle is none of them
        return f"{cls.__module__}:{cls.__qualname__}" in self._names("mro")

    def _is_subclass(self, cls: Any) -> bool:
        if not self._names("bases"):
            raise TypeError("issubclass() arg 1 must be a class")
        if type(cls) is Remote:
            return self._ask("issubclass", cls=object.__getattribute__(cls, "_id")) is True
        if not isinstance(cls, type):
            return False
        return f"{cls.__module__}:{cls.__qualname__}" in self._names("bases")


def _value_of(x: Any) -> Any:
    return x._value() if type(x) is Remote else x


def _binop(name: str, fn: Callable[[Any, Any], Any], reflected: bool) -> Callable:
    """An operator: with a value of the tests, on the handle's plain value, here; between
    two of the program's objects (no value of the tests involved), the program's."""

    def method(self: Remote, other: Any) -> Any:
        if type(other) is Remote and not reflected:
            return self._ask("binop", name=name, other=object.__getattribute__(other, "_id"))
        mine, theirs = self._value(), _value_of(other)
        return fn(theirs, mine) if reflected else fn(mine, theirs)

    return method


for _name in BINARY_OPERATORS:
    _fn = divmod if _name == "divmod" else getattr(operator, f"{_name}_" if _name in ("and", "or") else _name)
    setattr(Remote, f"__{_name}__", _binop(_name, _fn, False))
    setattr(Remote, f"__r{_name}__", _binop(_name, _fn, True))


_REAL_ISINSTANCE = builtins.isinstance
_REAL_ISSUBCLASS = builtins.issubclass


def _flatten(classinfo: Any) -> list:
    if type(classinfo) is tuple:
        return [c for item in classinfo for c in _flatten(item)]
    args = getattr(classinfo, "__args__", None)  # int | str
    if type(classinfo).__name__ == "UnionType" and isinstance(args, tuple):
        return list(args)
    return [classinfo]


def _named_in(claimed: tuple, classes: "tuple | list") -> bool:
    return bool(claimed) and any(
        _REAL_ISINSTANCE(c, type) and f"{c.__module__}:{c.__qualname__}" in claimed for c in classes
    )


def checker_isinstance(obj: Any, classinfo: Any) -> bool:
    """``isinstance`` that also answers for handles and the program's exceptions, by the
    names the program gave (the checker's builtin while tests run)."""
    classes = _flatten(classinfo)
    local = tuple(c for c in classes if type(c) is not Remote)
    if local and _REAL_ISINSTANCE(obj, local if len(local) > 1 else local[0]):
        return True
    if type(obj) is Remote:
        return any(obj._is_instance(c) for c in classes)
    return _named_in(claimed_names(type(obj)), local)


def checker_issubclass(cls: Any, classinfo: Any) -> bool:
    """``issubclass`` that also answers for handles of the program's classes and for the
    stand-ins of its exceptions (``assertRaises(LibraryError)``), by name."""
    if type(cls) is Remote:
        return any(cls._is_subclass(c) for c in _flatten(classinfo))
    local = tuple(c for c in _flatten(classinfo) if type(c) is not Remote)
    if local and _REAL_ISSUBCLASS(cls, local if len(local) > 1 else local[0]):
        return True
    return _named_in(claimed_names(cls), local)


def install_type_checks() -> None:
    """Make ``isinstance`` / ``issubclass`` answer for handles everywhere in the checker
    (``unittest``'s ``assertIsInstance`` reads the builtin too)."""
    builtins.isinstance = checker_isinstance
    builtins.issubclass = checker_issubclass
