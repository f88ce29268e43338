"""The checker's end of the RPC: program objects seen from the checker (``Remote``).

What the program answers is data (rebuilt here by the codec's fixed rules) or a
``Remote``: an opaque handle. Comparisons, operators, truth values and conversions of a
handle are computed here on its plain value, fetched as data; a handle with none fails
the test with a clear message. A value of the tests never goes to the program for it to
compare or combine: it goes only as the argument of a call the test makes.

A handle of one of the program's classes is compared by identity only (one handle per
object: ``type(p) is Point``), whatever its metaclass says; the builtin and standard
library classes are never handles, they cross as the checker's own (``type_table``).
What the tests' library functions read of a program's object (``inspect.signature``,
``dataclasses.fields``, ``typing.get_type_hints``) is computed by the program and comes
back as data: nothing the program wrote is evaluated here."""

import builtins
import contextlib
import dataclasses
import functools
import inspect
import operator
import typing
from collections.abc import Callable
from typing import Any

from .codec import MUTABLE, CheckerCodec
from .exception_classes import claimed_names, describe_exception, is_stand_in, local_class
from .frames import FrameReader, write_frame
from .program_rpc import BINARY_OPERATORS
from .tagged_values import Budget, ProgramRecord, Unencodable
from .type_table import TYPES


class ProgramLink:
    """The checker's end: asks the program's process for names, calls, attributes."""

    def __init__(self, rpc_out: int, rpc_in: int) -> None:
        self.out = rpc_out
        self.reader = FrameReader(rpc_in)
        self.remotes: dict = {}
        self.local: list = []
        self.after: dict | None = None
        self.codec = CheckerCodec(self.ref_of, self.remote, handle=Remote)
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


#: Attributes of a program's object that Python names with dunders and that are data
#: about it (its names, annotations, fields, classes, defaults): read from the program.
#: Not ``__doc__`` (``doctest`` would run its examples here) nor ``__code__`` /
#: ``__globals__`` (no data).
DATA_DUNDERS = frozenset(
    {
        "__name__",
        "__qualname__",
        "__module__",
        "__annotations__",
        "__dataclass_fields__",
        "__match_args__",
        "__mro__",
        "__bases__",
        "__base__",
        "__func__",
        "__self__",
        "__defaults__",
        "__kwdefaults__",
        "__dict__",
        "__members__",
        "__slots__",
    }
)
#: The classes whose values always cross as values: a handle is an instance of none.
_PLAIN_TYPES = frozenset({bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, range})


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

    def _is_class(self) -> bool:
        """The program said its object is a class (a handle compared by identity)."""
        return object.__getattribute__(self, "_info").get("class") is True

    def _has_plain(self) -> bool:
        """The program said its object holds a plain value (its own ``IntEnum``, a
        ``namedtuple``, a subclass of ``str``): hashed, searched and combined as that."""
        return object.__getattribute__(self, "_info").get("plain") is True

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

    def _type(self) -> Any:
        """``type()`` of the program's object: a class of the table (the checker's own)
        or a handle of the program's class."""
        return self._ask("type")

    def _view(self, name: str, args: tuple, kwargs: dict) -> Any:
        """A library function of the tests applied to this object, by the program."""
        return self._ask("view", name=name, args=self._enc(list(args)), kwargs=self._enc(dict(kwargs)))

    # -- the program's answers
    def __getattribute__(self, name: str) -> Any:
        if name == "__class__":
            return object.__getattribute__(self, "_type")()
        if name == "__signature__":
            return object.__getattribute__(self, "_view")("signature", (), {})
        if name in DATA_DUNDERS:
            return object.__getattribute__(self, "_ask")("getattr", name=name)
        return object.__getattribute__(self, name)

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
        if self._has_plain():  # a substring of the program's str: on the plain value
            return item in self._value()
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
        if self._is_class():
            return True
        try:
            value = self._value()
        except TypeError:
            raise TypeError(
                f"a {self._kind()} object of the program cannot be used as a truth value in a "
                "test; compare a plain value (e.g. `x == 3`, `len(x) > 0`)"
            ) from None
        return bool(value)

    def __hash__(self) -> int:
        if self._is_class():
            return hash(("selfheal-class", object.__getattribute__(self, "_id")))
        try:
            value = self._plain()
        except TypeError:  # no value: equal to itself only
            return hash(("selfheal-remote", object.__getattribute__(self, "_id")))
        if type(value) is Remote:
            return hash(("selfheal-remote", self._kind()))
        # Hashed as what it is equal to: its plain value (a key "red"), or its record's
        # fields (handles of different values do not all collide in a dict: each would be
        # compared with every other over the RPC). Unhashable as its plain value is.
        return hash(value)

    def __eq__(self, other: Any) -> Any:
        if self._is_class() or (type(other) is not Remote and _REAL_ISINSTANCE(other, type)):
            return other is self  # a class is equal to itself only
        if type(other) is Remote:
            if object.__getattribute__(other, "_id") == object.__getattribute__(self, "_id"):
                return True
            if other._is_class():
                return False
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
        if type(other) is Remote or self._is_class() or _REAL_ISINSTANCE(other, type):
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

    # -- type checks: answered by the program from its classes' MROs (program_rpc.is_subclass)
    def _is_instance(self, cls: Any) -> bool:
        if cls is Remote or cls is object:
            return True  # what this handle is here
        if cls is type:
            return self._is_class()
        if cls in _PLAIN_TYPES and not self._has_plain():
            return False  # plain values cross as values: a handle is none of them
        if is_stand_in(cls):  # an exception class of the program's, as the checker made it
            own = self._type()
            return type(own) is not Remote and checker_issubclass(own, cls)
        return self._type_check("isinstance", cls)

    def _is_subclass(self, cls: Any) -> bool:
        if not self._is_class():
            raise TypeError("issubclass() arg 1 must be a class")
        if cls is object:
            return True
        return self._type_check("issubclass", cls)

    def _type_check(self, op: str, cls: Any) -> bool:
        """Ask the program, for one of its classes or a class it can name (one of the
        table, a library's); a class of the tests' own is none of its objects'."""
        if type(cls) is not Remote and not _REAL_ISINSTANCE(cls, type):
            raise TypeError(f"{op}() arg 2 must be a type, a tuple of types, or a union")
        encoded = self._enc(cls)
        if not isinstance(encoded, dict) or encoded.get("$") not in ("ref", "type", "class", "excclass"):
            return False
        return self._ask(op, cls=encoded) is True


def _value_of(x: Any) -> Any:
    return x._value() if type(x) is Remote else x


def _binop(name: str, fn: Callable[[Any, Any], Any], reflected: bool) -> Callable:
    """An operator: with a value of the tests, on the handle's plain value, here; between
    two of the program's objects (no value of the tests involved), the program's."""

    def method(self: Remote, other: Any) -> Any:
        if type(other) is Remote and not reflected and not (self._has_plain() and other._has_plain()):
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
    """One of ``classes`` is named among the classes a stand-in was described with. Only
    a library's exception class counts (the program's process could have raised that very
    class, which the checker cannot have): never a builtin class or one of the table, nor
    a class its names do not lead back to (the tests' own). Those a stand-in is of by its
    real bases only."""
    return bool(claimed) and any(_REAL_ISINSTANCE(c, type) and _claimable(c) and _spec(c) in claimed for c in classes)


def _spec(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _claimable(cls: type) -> bool:
    """An exception class of a library (by name, on the program's side too)."""
    return (
        _REAL_ISSUBCLASS(cls, BaseException)
        and cls.__module__ != "builtins"
        and TYPES.name_of(cls) is None
        and local_class(_spec(cls)) is cls
    )


def checker_isinstance(obj: Any, classinfo: Any) -> bool:
    """``isinstance`` that also answers for handles (the program's answer, from its
    classes' MROs) and for the stand-ins of its exceptions (by the names the program
    gave): the checker's builtin while tests run."""
    classes = _flatten(classinfo)
    if type(obj) is Remote:  # never Python's own check: it would read the handle's __class__
        return any(obj._is_instance(c) for c in classes)
    local = tuple(c for c in classes if type(c) is not Remote)
    if local and _REAL_ISINSTANCE(obj, local if len(local) > 1 else local[0]):
        return True
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


def type_of(given: Any, obj: Any) -> Any:
    """``type(obj)`` as the tests wrote it (``given`` is what their name ``type`` is): of
    a handle, the class of the program's object (``type(p) is Point``)."""
    if given is builtins.type and type(obj) is Remote:
        return obj._type()
    return given(obj)


#: The tests' library functions that, given a handle, the program computes: (module,
#: function, the name of the view in ``program_rpc.VIEWS``).
LIBRARY_VIEWS = (
    (inspect, "signature", "signature"),
    (typing, "get_type_hints", "type_hints"),
    (inspect, "get_annotations", "annotations"),
    (dataclasses, "is_dataclass", "is_dataclass"),
    (dataclasses, "asdict", "asdict"),
    (dataclasses, "astuple", "astuple"),
    (dataclasses, "replace", "replace"),
)


def _by_the_program(name: str, own: Callable) -> Callable:
    """A library function of the tests that, given a handle, is computed by the program
    (``VIEWS`` in program_rpc)."""

    @functools.wraps(own)
    def view(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(obj) is Remote:
            return obj._view(name, args, kwargs)
        return own(obj, *args, **kwargs)

    return view


def install_type_checks() -> None:
    """Make ``isinstance`` / ``issubclass`` answer for handles everywhere in the checker
    (``unittest``'s ``assertIsInstance`` reads the builtin too), and the library
    functions that read an object's annotations or fields ask the program for a handle:
    ``typing.get_type_hints`` and ``inspect.get_annotations`` would evaluate the
    program's string annotations here."""
    builtins.isinstance = checker_isinstance
    builtins.issubclass = checker_issubclass
    for module, name, view in LIBRARY_VIEWS:
        setattr(module, name, _by_the_program(view, getattr(module, name)))
