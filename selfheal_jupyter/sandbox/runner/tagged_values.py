"""Values as tagged JSON, the encoding both sides of the RPC share (``codec.py`` holds the
two sides and what each may encode and decode).
"""

import base64
import collections
import dataclasses
import functools
import inspect
import math
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

from .exception_classes import describe_class, local_class
from .type_table import TYPES

# Values cross between the program and the checker as tagged JSON. Exact types travel by
# value and are rebuilt from plain data on the other side; a library's subclass of a
# plain type (int, float, str, list, dict...) travels as the plain value it holds,
# without its methods, and one of the program's own (an ``IntEnum``, a ``namedtuple``, a
# ``list`` with methods) as a reference whose plain value is that; a class of the fixed table (``type_table``) by its name there, and what is
# made of such classes (``list[int]``, ``int | None``, ``typing.Optional[str]``, a
# signature, a dataclass's fields) as data; anything else (functions, other classes,
# instances) is a reference.
MAX_ENCODED_ITEMS = 500_000
_DTYPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789[], :<>|=/._-+")

#: The kinds of a signature's parameters, by their numbers.
_PARAMETER_KINDS = {
    int(kind): kind
    for kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}
#: What kind of field of a dataclass a ``dataclasses.Field`` is (what ``fields()`` reads).
_FIELD_KINDS = {
    k: getattr(dataclasses, f"_FIELD{s}")
    for k, s in (("field", ""), ("classvar", "_CLASSVAR"), ("initvar", "_INITVAR"))
}
#: Factories a defaultdict may carry across (by this fixed table, never by name lookup).
_FACTORIES = {f.__name__: f for f in (int, float, complex, str, bytes, list, dict, set, tuple, bool)}


class Budget:
    """How many more items one value may encode (a cap on what crosses)."""

    def __init__(self) -> None:
        self.left = MAX_ENCODED_ITEMS


class Unencodable(Exception):
    pass


class ProgramRecord:
    """An instance of one of the program's own classes, as data: the name of its class
    and its fields. Equal only to a record of the same class name with equal fields
    (compared here); it has no other behaviour."""

    __slots__ = ("module", "type", "fields")

    def __init__(self, module: str, type_name: str, fields: dict) -> None:
        self.module, self.type, self.fields = module, type_name, fields

    def __eq__(self, other: Any) -> bool:
        return (
            type(other) is ProgramRecord
            and self.module == other.module
            and self.type == other.type
            and self.fields == other.fields
        )

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        try:  # by its fields, as it is compared
            return hash((self.module, self.type, frozenset(self.fields.items())))
        except TypeError:
            return hash((self.module, self.type))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"{self.type}({fields})"


def _dtype_ok(text: Any) -> str:
    if not isinstance(text, str) or len(text) > 64 or not set(text) <= _DTYPE_CHARS:
        raise ValueError(f"unexpected dtype {text!r}")
    return text


def library_class(cls: Any) -> bool:
    """A class of a module other than ``__main__``, where its names lead back to it."""
    module = getattr(cls, "__module__", None)
    return module != "__main__" and local_class(f"{module}:{getattr(cls, '__qualname__', '')}") is cls


def plain_base(x: Any) -> "type | None":
    """The plain type a subclass instance holds a value of (None: not a subclass of one)."""
    for base in (int, float, complex, str, bytes, bytearray, tuple, list, dict, frozenset, set):
        if isinstance(x, base):
            return base
    return None


class Encoding:
    """The value rules both sides share: plain data, and the values of the standard
    library, numpy and pandas, rebuilt from data. ``ref_of`` / ``deref`` link references
    to objects; what a side does with classes, with what is not data and with the tags
    only it accepts is that side's type's (``CheckerCodec``, ``ProgramCodec``)."""

    def __init__(self, ref_of: Callable[[Any], dict], deref: Callable[[dict], Any]) -> None:
        self.ref_of = ref_of
        self.deref = deref
        self._namedtuples: dict = {}

    # -- out
    def encode(self, value: Any, budget: "Budget | None" = None) -> Any:
        """The value as data, or as a reference when it is not data (or too large)."""
        budget = budget or Budget()
        try:
            return self._enc(value, budget, 0)
        except (Unencodable, RecursionError):
            return self.ref_of(value)

    def _other(self, x: Any, b: Budget, depth: int) -> Any:
        """What is not plain data: a reference."""
        return self.ref_of(x)

    def _enc_class(self, x: type, b: Budget, depth: int) -> Any:
        """A class: by its name in the table of types, described when it is an exception
        class, else what is not data."""
        name = TYPES.name_of(x)
        if name is not None:
            return {"$": "type", "v": name}
        if x is inspect.Parameter.empty:
            return {"$": "empty"}
        try:
            is_exception_class = issubclass(x, BaseException)
        except Exception:
            is_exception_class = False
        if is_exception_class:
            return {"$": "excclass", **describe_class(x)}
        return self._other(x, b, depth)

    def _enc(self, x: Any, b: Budget, depth: int) -> Any:
        b.left -= 1
        if b.left < 0 or depth > 100:
            raise Unencodable
        t = type(x)
        if x is None or t is bool or t is int or t is str:
            return x
        if t is float:
            return x if x == x and x not in (float("inf"), float("-inf")) else {"$": "float", "v": repr(x)}
        if t in (list, tuple, set, frozenset):
            return {"$": t.__name__, "v": [self._enc(i, b, depth + 1) for i in x]}
        if t is dict:
            return {
                "$": "dict",
                "v": [[self._enc(k, b, depth + 1), self._enc(v, b, depth + 1)] for k, v in x.items()],
            }
        if t in (bytes, bytearray):
            return {"$": t.__name__, "v": base64.b64encode(x).decode()}
        if t is complex:
            return {"$": "complex", "v": [repr(x.real), repr(x.imag)]}
        if t is range:
            return {"$": "range", "v": [x.start, x.stop, x.step]}
        mod = getattr(t, "__module__", "") or ""
        if mod in ("decimal", "fractions", "datetime", "uuid") and t.__name__ in (
            "Decimal",
            "Fraction",
            "datetime",
            "date",
            "time",
            "timedelta",
            "UUID",
        ):
            if t.__name__ == "timedelta":
                return {"$": "timedelta", "v": [x.days, x.seconds, x.microseconds]}
            return {"$": t.__name__, "v": x.isoformat() if hasattr(x, "isoformat") else str(x)}
        if mod == "numpy" or mod.startswith("numpy."):
            found = self._enc_numpy(x, b, depth)
            if found is not None:
                return found
        elif mod.startswith("pandas"):
            found = self._enc_pandas(x, b, depth)
            if found is not None:
                return found
        elif t is collections.deque:
            return {"$": "deque", "v": [self._enc(i, b, depth + 1) for i in x], "maxlen": x.maxlen}
        if isinstance(x, type):
            return self._enc_class(x, b, depth)
        form = self._enc_form(x, b, depth)
        if form is not None:
            return form
        base = plain_base(x)
        if base is not None:
            return self._enc_subclass(x, base, b, depth)
        return self._other(x, b, depth)

    def _enc_form(self, x: Any, b: Budget, depth: int) -> Any:
        """What is made of classes, as data: generic aliases and unions (``list[int]``,
        ``int | None``), ``typing``'s forms, a signature, a dataclass's field (None:
        ``x`` is none of these)."""
        t = type(x)
        enc = self._enc
        if t is types.GenericAlias:
            return {
                "$": "alias",
                "origin": enc(x.__origin__, b, depth + 1),
                "args": [enc(a, b, depth + 1) for a in x.__args__],
            }
        if t is types.UnionType:
            return {"$": "union", "args": [enc(a, b, depth + 1) for a in x.__args__]}
        if x is Ellipsis:
            return {"$": "ellipsis"}
        if x is dataclasses.MISSING:
            return {"$": "missing"}
        if t is inspect.Signature:
            return {
                "$": "signature",
                "parameters": [enc(p, b, depth + 1) for p in x.parameters.values()],
                "return": enc(x.return_annotation, b, depth + 1),
            }
        if t is inspect.Parameter:
            return {
                "$": "parameter",
                "name": x.name,
                "kind": int(x.kind),
                "default": enc(x.default, b, depth + 1),
                "annotation": enc(x.annotation, b, depth + 1),
            }
        if t is dataclasses.Field:
            return self._enc_field(x, b, depth)
        if t is typing.ForwardRef:
            return {"$": "forwardref", "v": str(x.__forward_arg__)}
        if getattr(t, "__module__", None) == "typing":
            name = TYPES.form_name_of(x)
            if name is not None:
                return {"$": "typing", "name": name}
            origin = typing.get_origin(x)
            name = TYPES.form_name_of(origin)
            if name is None and origin is not None:  # ``typing.List[int]``: named as the form of its origin
                said = getattr(x, "_name", None)  # a name an alias gives itself, taken only when
                if TYPES.is_form(said) and typing.get_origin(TYPES.form_named(said)) is origin:  # that form's
                    name = said
            if TYPES.is_form(name) and isinstance(getattr(x, "__args__", None), tuple):
                return {"$": "typing", "name": name, "args": [enc(a, b, depth + 1) for a in typing.get_args(x)]}
        return None

    def _enc_field(self, x: Any, b: Budget, depth: int) -> dict:
        """A dataclass's field (``dataclasses.fields``, ``__dataclass_fields__``)."""
        return {
            "$": "field",
            "name": str(x.name),
            "type": self._enc(x.type, b, depth + 1),
            "default": self._enc(x.default, b, depth + 1),
            "default_factory": self._enc(x.default_factory, b, depth + 1),
            "init": bool(x.init),
            "repr": bool(x.repr),
            "hash": self._enc(x.hash, b, depth + 1),
            "compare": bool(x.compare),
            "metadata": self._enc(dict(x.metadata), b, depth + 1),
            "kw_only": self._enc(x.kw_only, b, depth + 1),
            "kind": next((k for k, v in _FIELD_KINDS.items() if v is getattr(x, "_field_type", None)), "field"),
        }

    def _enc_subclass(self, x: Any, base: type, b: Budget, depth: int) -> Any:
        """A subclass of a plain type: the plain value it holds, read with the plain type's
        own methods (never the subclass's ``__eq__``, ``__iter__``...)."""
        enc = self._enc
        if base is int:
            return int.__int__(x)
        if base is float:
            return enc(float.__float__(x), b, depth)
        if base is complex:
            return enc(complex(complex.real.__get__(x), complex.imag.__get__(x)), b, depth)
        if base is str:
            return str.__str__(x)
        if base in (bytes, bytearray):
            return enc(base(memoryview(x)), b, depth)
        if base is tuple:
            items = [enc(i, b, depth + 1) for i in tuple.__iter__(x)]
            fields = getattr(type(x), "_fields", None)
            if type(fields) is tuple and len(fields) == len(items) and all(type(f) is str for f in fields):
                return {"$": "namedtuple", "name": str(type(x).__name__), "fields": list(fields), "v": items}
            return {"$": "tuple", "v": items}
        if base is list:
            return {"$": "list", "v": [enc(i, b, depth + 1) for i in list.__iter__(x)]}
        if base is dict:
            pairs = [[enc(k, b, depth + 1), enc(v, b, depth + 1)] for k, v in dict.items(x)]
            t = type(x)
            if t is collections.Counter or t is collections.OrderedDict:
                return {"$": t.__name__, "v": pairs}
            if t is collections.defaultdict:
                factory = x.default_factory
                name = getattr(factory, "__name__", "")
                return {"$": "defaultdict", "v": pairs, "factory": name if _FACTORIES.get(name) is factory else None}
            return {"$": "dict", "v": pairs}
        items = [enc(i, b, depth + 1) for i in (set.__iter__(x) if base is set else frozenset.__iter__(x))]
        return {"$": base.__name__, "v": items}

    def _enc_numpy(self, x: Any, b: Budget, depth: int) -> Any:
        import numpy as np

        if type(x) is np.ndarray and x.dtype.kind in "biufcUSO":
            b.left -= x.size
            if b.left < 0:
                raise Unencodable
            return {
                "$": "ndarray",
                "dtype": x.dtype.str,
                "shape": list(x.shape),
                "v": self._enc(x.tolist(), b, depth + 1),
            }
        if isinstance(x, np.generic) and type(x).__module__ == "numpy" and x.dtype.kind in "biufc":
            return {"$": "npscalar", "dtype": x.dtype.str, "v": self._enc(x.item(), b, depth + 1)}
        return None

    def _enc_pandas(self, x: Any, b: Budget, depth: int) -> Any:
        import pandas as pd

        t = type(x)
        if t is pd.DataFrame:
            b.left -= x.size
            if b.left < 0 or not x.columns.is_unique:
                raise Unencodable
            cols = [self._enc_column(x.iloc[:, i], b, depth) for i in range(x.shape[1])]
            return {
                "$": "DataFrame",
                "columns": self._enc_index(x.columns, b, depth + 1),
                "index": self._enc_index(x.index, b, depth + 1),
                "cols": cols,
            }
        if t is pd.Series:
            b.left -= len(x)
            return {
                "$": "Series",
                "name": self._enc(x.name, b, depth + 1),
                "index": self._enc_index(x.index, b, depth + 1),
                "col": self._enc_column(x, b, depth),
            }
        if t is pd.RangeIndex:
            return {"$": "RangeIndex", "v": [x.start, x.stop, x.step], "name": self._enc(x.name, b, depth + 1)}
        if t is pd.MultiIndex:
            return {
                "$": "MultiIndex",
                "v": self._enc(list(x), b, depth + 1),
                "names": self._enc(list(x.names), b, depth + 1),
            }
        if t is pd.Index or t.__name__ in ("DatetimeIndex", "CategoricalIndex"):
            return {
                "$": "Index",
                "dtype": str(x.dtype),
                "v": self._enc(x.tolist(), b, depth + 1),
                "name": self._enc(x.name, b, depth + 1),
            }
        if t is pd.Timestamp:
            return {"$": "Timestamp", "v": x.isoformat()}
        if t is pd.Timedelta:
            return {"$": "Timedelta", "v": x.value}
        if x is pd.NaT:
            return {"$": "NaT"}
        if x is pd.NA:
            return {"$": "NA"}
        return None

    def _enc_index(self, x: Any, b: Budget, depth: int) -> Any:
        found = self._enc_pandas(x, b, depth)
        if found is None:
            raise Unencodable
        return found

    def _enc_column(self, s: Any, b: Budget, depth: int) -> dict:
        return {"dtype": str(s.dtype), "v": self._enc(s.tolist(), b, depth + 1)}

    # -- in
    def decode(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v
        if not isinstance(v, dict):  # lists always travel tagged
            raise ValueError("untagged value")
        tag = v.get("$")
        d = self.decode
        if tag in ("ref", "cref"):
            return self.deref(v)
        own = self._decode_own(tag, v)
        if own is not NOT_OWN:
            return own
        if tag in FORM_TAGS:
            return self._dec_form(tag, v)
        if tag == "float":
            return float(v["v"])
        if tag in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](d(i) for i in v["v"])
        if tag in ("dict", "Counter", "OrderedDict", "defaultdict"):
            pairs = [(d(k), d(val)) for k, val in v["v"]]
            if tag == "defaultdict":
                return collections.defaultdict(_FACTORIES.get(str(v.get("factory"))), pairs)
            if tag == "Counter":
                return collections.Counter(dict(pairs))
            return (dict if tag == "dict" else collections.OrderedDict)(pairs)
        if tag == "namedtuple":
            return self._namedtuple(str(v["name"]), [str(f) for f in v["fields"]])(*[d(i) for i in v["v"]])
        if tag == "deque":
            maxlen = v.get("maxlen")
            return collections.deque((d(i) for i in v["v"]), None if maxlen is None else int(maxlen))
        if tag in ("bytes", "bytearray"):
            data = base64.b64decode(v["v"], validate=True)
            return data if tag == "bytes" else bytearray(data)
        if tag == "complex":
            return complex(float(v["v"][0]), float(v["v"][1]))
        if tag == "range":
            return range(*[int(i) for i in v["v"]])
        if tag in ("Decimal", "Fraction"):
            import decimal
            import fractions

            return (decimal.Decimal if tag == "Decimal" else fractions.Fraction)(str(v["v"]))
        if tag in ("datetime", "date", "time"):
            import datetime

            parse: Any = {"datetime": datetime.datetime, "date": datetime.date, "time": datetime.time}[tag]
            return parse.fromisoformat(str(v["v"]))
        if tag == "timedelta":
            import datetime

            return datetime.timedelta(*[int(i) for i in v["v"]])
        if tag == "UUID":
            import uuid

            return uuid.UUID(str(v["v"]))
        if tag in ("ndarray", "npscalar"):
            import numpy as np

            dtype = np.dtype(_dtype_ok(v["dtype"]))
            if dtype.kind not in ("biufc" if tag == "npscalar" else "biufcUSO") or dtype.shape or dtype.names:
                raise ValueError(f"an array of dtype {dtype} is not decoded")
            if tag == "npscalar":
                return dtype.type(_scalar(d(v["v"])))
            shape = tuple(int(i) for i in v["shape"])
            size = math.prod(shape)
            if min(shape, default=0) < 0 or size > MAX_ENCODED_ITEMS or size * dtype.itemsize > MAX_DECODED_BYTES:
                raise ValueError("an array larger than what crosses")
            nested = d(v["v"])
            _check_nested(nested, shape, dtype.kind == "O")
            if dtype.kind == "O":
                arr = np.empty(shape, dtype=object)
                for idx in np.ndindex(*shape):
                    item = nested
                    for i in idx:
                        item = item[i]
                    arr[idx] = item
                return arr
            return np.array(nested, dtype=dtype).reshape(shape)
        return self._dec_pandas(tag, v)

    def _decode_own(self, tag: Any, v: dict) -> Any:
        """A tag only this side accepts (``NOT_OWN``: none of them)."""
        return NOT_OWN

    def _dec_form(self, tag: str, v: dict) -> Any:
        """A class by its name in this process's table of types, or what is made of
        classes, built here by ``typing``, ``inspect`` and ``dataclasses``."""
        d = self.decode
        if tag == "type":
            return TYPES.class_named(v.get("v"))
        if tag == "empty":
            return inspect.Parameter.empty
        if tag == "ellipsis":
            return ...
        if tag == "missing":
            return dataclasses.MISSING
        if tag == "forwardref":
            return typing.ForwardRef(str(v["v"]))  # compiled, never evaluated here
        if tag == "typing":
            form = TYPES.form_named(v.get("name"))
            return form if v.get("args") is None else form[tuple(d(a) for a in v["args"])]
        if tag == "alias":
            origin = d(v["origin"])
            if not isinstance(origin, type):
                raise ValueError("a generic alias of something that is not a class")
            return types.GenericAlias(origin, tuple(d(a) for a in v["args"]))
        if tag == "union":
            args = [d(a) for a in v["args"]]
            if len(args) > 1 and all(a is None or type(a) in (type, types.GenericAlias) for a in args):
                return functools.reduce(operator.or_, args)
            return TYPES.form_named("Union")[tuple(args)]
        if tag == "parameter":
            kind = _PARAMETER_KINDS[int(v["kind"])]
            return inspect.Parameter(str(v["name"]), kind, default=d(v["default"]), annotation=d(v["annotation"]))
        if tag == "signature":
            parameters = [d(p) for p in v["parameters"]]
            if not all(type(p) is inspect.Parameter for p in parameters):
                raise ValueError("a signature whose parameters are not parameters")
            return inspect.Signature(parameters, return_annotation=d(v["return"]))
        return self._dec_field(v)

    def _dec_field(self, v: dict) -> Any:
        d = self.decode
        metadata = d(v["metadata"])
        field = dataclasses.Field(  # type: ignore[call-arg]  # its arguments in 3.10 and 3.11
            d(v["default"]),
            d(v["default_factory"]),
            bool(v["init"]),
            bool(v["repr"]),
            d(v["hash"]),
            bool(v["compare"]),
            metadata if type(metadata) is dict else {},
            d(v["kw_only"]),
        )
        field.name = str(v["name"])
        field.type = d(v["type"])
        field._field_type = _FIELD_KINDS.get(str(v.get("kind")), _FIELD_KINDS["field"])  # type: ignore[attr-defined]
        return field

    def _namedtuple(self, name: str, fields: list) -> Any:
        """A named tuple class made here for the names the program gave (never looked up)."""
        key = (name, tuple(fields))
        if key not in self._namedtuples:
            make: Any = collections.namedtuple
            try:
                made = make(name, fields, rename=True)
            except ValueError:  # not an identifier
                made = make("namedtuple", fields, rename=True)
            self._namedtuples[key] = made
        return self._namedtuples[key]

    def _dec_pandas(self, tag: Any, v: dict) -> Any:
        import pandas as pd

        d = self.decode
        if tag == "Timestamp":
            return pd.Timestamp(str(v["v"]))
        if tag == "Timedelta":
            return pd.Timedelta(int(v["v"]))
        if tag == "NaT":
            return pd.NaT
        if tag == "NA":
            return pd.NA
        if tag == "RangeIndex":
            return pd.RangeIndex(*[int(i) for i in v["v"]], name=d(v["name"]))
        if tag == "MultiIndex":
            tuples = _flat(d(v["v"]), True)
            for item in tuples:
                if type(item) is not tuple:
                    raise ValueError("a MultiIndex of what is not tuples")
                _flat(list(item), False)
            return pd.MultiIndex.from_tuples(tuples, names=d(v["names"]))
        if tag == "Index":
            return pd.Index(self._dec_column(v), name=d(v["name"]))
        if tag == "Series":
            return pd.Series(self._dec_column(v["col"]), index=_index(d(v["index"])), name=d(v["name"]))
        if tag == "DataFrame":
            columns = _index(d(v["columns"]))
            index = _index(d(v["index"]))
            data = {i: pd.Series(self._dec_column(c), index=index) for i, c in enumerate(v["cols"])}
            frame = pd.DataFrame(data, index=index)
            frame.columns = columns
            return frame
        raise ValueError(f"unknown value tag {tag!r}")

    def _dec_column(self, col: dict) -> Any:
        """A column's (or an index's) values: a list of scalars made into the dtype, or of
        anything for ``object`` (put in one by one: never read as nested sequences)."""
        import numpy as np
        import pandas as pd

        dtype = _dtype_ok(col["dtype"])
        values = _flat(self.decode(col["v"]), dtype == "object")
        if dtype == "object":
            array = np.empty(len(values), dtype=object)
            for i, item in enumerate(values):
                array[i] = item
            return pd.array(array, dtype=dtype)
        return pd.array(values, dtype=dtype)


#: What one decoded array may take (its items are counted by ``MAX_ENCODED_ITEMS``).
MAX_DECODED_BYTES = 64 << 20
#: What numpy and pandas would read as a sequence of items (a size the program picks, not
#: the size of its bytes: ``range(10**10)``, a handle whose ``len`` says anything).
_SEQUENCES = (range, list, tuple, dict, set, frozenset, collections.deque, bytearray, memoryview)


def _is_sequence(x: Any) -> bool:
    return isinstance(x, _SEQUENCES) or hasattr(type(x), "__len__") and not isinstance(x, (str, bytes))


def _scalar(x: Any) -> Any:
    if _is_sequence(x):
        raise ValueError("a scalar that is a sequence")
    return x


def _flat(values: Any, anything: bool) -> list:
    """A decoded list of items for numpy / pandas: a list (never a range or a handle),
    no longer than what crosses, whose items are scalars unless ``anything``."""
    if type(values) is not list or len(values) > MAX_ENCODED_ITEMS:
        raise ValueError("an array's items must be a list of what crosses")
    if not anything:
        for item in values:
            _scalar(item)
    return values


def _check_nested(nested: Any, shape: tuple, anything: bool) -> None:
    """``nested`` is lists ``len(shape)`` deep, each of the length ``shape`` says, with
    scalars at the bottom (anything for an object array, put in one by one)."""
    level = [nested]
    for n in shape:
        below = []
        for item in level:
            if type(item) is not list or len(item) != n:
                raise ValueError("an array's items do not have its shape")
            below.extend(item)
        level = below
    if not anything:
        for item in level:
            _scalar(item)


def _index(x: Any) -> Any:
    import pandas as pd

    if not isinstance(x, pd.Index):
        raise ValueError("an index that is not an index")
    return x


NOT_OWN = object()
FORM_TAGS = frozenset(
    (
        "type",
        "empty",
        "ellipsis",
        "missing",
        "forwardref",
        "typing",
        "alias",
        "union",
        "parameter",
        "signature",
        "field",
    )
)
