"""Values as tagged JSON between the program and the checker (and exceptions)."""

import base64
import builtins
import sys
from typing import Any, Callable

from .describe import safe_str

# Values cross between the program and the checker as tagged JSON. Only these exact
# types travel by value and are rebuilt from plain data on the other side; anything
# else (functions, classes, instances, subclasses of the above) is a reference.
MAX_ENCODED_ITEMS = 500_000
_DTYPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789[], :<>|=/._-+")


class Budget:
    """How many more items one value may encode (a cap on what crosses)."""

    def __init__(self) -> None:
        self.left = MAX_ENCODED_ITEMS


class Unencodable(Exception):
    pass


def _dtype_ok(text: Any) -> str:
    if not isinstance(text, str) or len(text) > 64 or not set(text) <= _DTYPE_CHARS:
        raise ValueError(f"unexpected dtype {text!r}")
    return text


class Codec:
    """Encode / decode values; ``ref_of`` / ``deref`` link references to objects."""

    def __init__(self, ref_of: Callable[[Any], dict], deref: Callable[[dict], Any],
                 by_name: bool = False) -> None:
        self.ref_of = ref_of
        self.deref = deref
        self.by_name = by_name  # library classes travel by name (tests -> program only)

    # -- out
    def encode(self, value: Any, budget: "Budget | None" = None) -> Any:
        budget = budget or Budget()
        try:
            return self._enc(value, budget, 0)
        except (Unencodable, RecursionError):
            return self.ref_of(value)

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
            return {"$": "dict", "v": [[self._enc(k, b, depth + 1), self._enc(v, b, depth + 1)]
                                       for k, v in x.items()]}
        if t in (bytes, bytearray):
            return {"$": t.__name__, "v": base64.b64encode(x).decode()}
        if t is complex:
            return {"$": "complex", "v": [repr(x.real), repr(x.imag)]}
        if t is range:
            return {"$": "range", "v": [x.start, x.stop, x.step]}
        mod = getattr(t, "__module__", "") or ""
        if mod in ("decimal", "fractions", "datetime", "uuid") and t.__name__ in (
                "Decimal", "Fraction", "datetime", "date", "time", "timedelta", "UUID"):
            if t.__name__ == "timedelta":
                return {"$": "timedelta", "v": [x.days, x.seconds, x.microseconds]}
            return {"$": t.__name__, "v": x.isoformat() if hasattr(x, "isoformat") else str(x)}
        if mod == "numpy" or mod.startswith("numpy."):
            return self._enc_numpy(x, b, depth)
        if mod.startswith("pandas"):
            return self._enc_pandas(x, b, depth)
        if isinstance(x, type) and self.by_name:
            spec = f"{getattr(x, '__module__', '')}:{getattr(x, '__qualname__', '')}"
            if local_class(spec) is x:  # a library's class: the program can import it
                return {"$": "class", "v": spec}
        try:
            is_exception_class = isinstance(x, type) and issubclass(x, BaseException)
        except Exception:
            is_exception_class = False
        if is_exception_class:
            return {"$": "excclass", "name": x.__qualname__, "module": x.__module__,
                    "base": _builtin_base(x).__name__}
        return self.ref_of(x)

    def _enc_numpy(self, x: Any, b: Budget, depth: int) -> Any:
        import numpy as np

        if type(x) is np.ndarray and x.dtype.kind in "biufcUSO":
            b.left -= x.size
            if b.left < 0:
                raise Unencodable
            return {"$": "ndarray", "dtype": x.dtype.str, "shape": list(x.shape),
                    "v": self._enc(x.tolist(), b, depth + 1)}
        if isinstance(x, np.generic) and type(x).__module__ == "numpy" and x.dtype.kind in "biufc":
            return {"$": "npscalar", "dtype": x.dtype.str, "v": self._enc(x.item(), b, depth + 1)}
        return self.ref_of(x)

    def _enc_pandas(self, x: Any, b: Budget, depth: int) -> Any:
        import pandas as pd

        t = type(x)
        if t is pd.DataFrame:
            b.left -= x.size
            if b.left < 0 or not x.columns.is_unique:
                raise Unencodable
            cols = [self._enc_column(x.iloc[:, i], b, depth) for i in range(x.shape[1])]
            return {"$": "DataFrame", "columns": self._enc_pandas(x.columns, b, depth + 1),
                    "index": self._enc_pandas(x.index, b, depth + 1), "cols": cols}
        if t is pd.Series:
            b.left -= len(x)
            return {"$": "Series", "name": self._enc(x.name, b, depth + 1),
                    "index": self._enc_pandas(x.index, b, depth + 1),
                    "col": self._enc_column(x, b, depth)}
        if t is pd.RangeIndex:
            return {"$": "RangeIndex", "v": [x.start, x.stop, x.step],
                    "name": self._enc(x.name, b, depth + 1)}
        if t is pd.MultiIndex:
            return {"$": "MultiIndex", "v": self._enc(list(x), b, depth + 1),
                    "names": self._enc(list(x.names), b, depth + 1)}
        if t is pd.Index or t.__name__ in ("DatetimeIndex", "CategoricalIndex"):
            return {"$": "Index", "dtype": str(x.dtype), "v": self._enc(x.tolist(), b, depth + 1),
                    "name": self._enc(x.name, b, depth + 1)}
        if t is pd.Timestamp:
            return {"$": "Timestamp", "v": x.isoformat()}
        if t is pd.Timedelta:
            return {"$": "Timedelta", "v": x.value}
        if x is pd.NaT:
            return {"$": "NaT"}
        if x is pd.NA:
            return {"$": "NA"}
        return self.ref_of(x)

    def _enc_column(self, s: Any, b: Budget, depth: int) -> dict:
        return {"dtype": str(s.dtype), "v": self._enc(s.tolist(), b, depth + 1)}

    # -- in
    def decode(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v
        if isinstance(v, list):  # never produced by encode; be strict
            raise ValueError("untagged list")
        tag = v.get("$")
        d = self.decode
        if tag in ("ref", "cref"):
            return self.deref(v)
        if tag == "class":  # only the program side receives these: it may import
            import importlib

            module, _, qualname = str(v["v"]).partition(":")
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
            return target
        if tag == "float":
            return float(v["v"])
        if tag in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](
                d(i) for i in v["v"])
        if tag == "dict":
            return {d(k): d(val) for k, val in v["v"]}
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

            return getattr(datetime, tag).fromisoformat(str(v["v"]))
        if tag == "timedelta":
            import datetime

            return datetime.timedelta(*[int(i) for i in v["v"]])
        if tag == "UUID":
            import uuid

            return uuid.UUID(str(v["v"]))
        if tag == "excclass":
            return exception_class(str(v["module"]), str(v["name"]), str(v["base"]))
        if tag in ("ndarray", "npscalar"):
            import numpy as np

            dtype = np.dtype(_dtype_ok(v["dtype"]))
            if tag == "npscalar":
                return dtype.type(d(v["v"]))
            shape = tuple(int(i) for i in v["shape"])
            if dtype.kind == "O":
                nested = d(v["v"])
                arr = np.empty(shape, dtype=object)
                for idx in np.ndindex(*shape):
                    item = nested
                    for i in idx:
                        item = item[i]
                    arr[idx] = item
                return arr
            return np.array(d(v["v"]), dtype=dtype).reshape([int(i) for i in v["shape"]])
        return self._dec_pandas(tag, v)

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
            return pd.MultiIndex.from_tuples(d(v["v"]), names=d(v["names"]))
        if tag == "Index":
            return pd.Index(d(v["v"]), dtype=_dtype_ok(v["dtype"]), name=d(v["name"]))
        if tag == "Series":
            return pd.Series(self._dec_column(v["col"]), index=d(v["index"]), name=d(v["name"]))
        if tag == "DataFrame":
            columns = d(v["columns"])
            index = d(v["index"])
            data = {i: pd.Series(self._dec_column(c), index=index) for i, c in enumerate(v["cols"])}
            frame = pd.DataFrame(data, index=index)
            frame.columns = columns
            return frame
        raise ValueError(f"unknown value tag {tag!r}")

    def _dec_column(self, col: dict) -> Any:
        import pandas as pd

        return pd.array(self.decode(col["v"]), dtype=_dtype_ok(col["dtype"]))


def _builtin_base(cls: type) -> type:
    for base in cls.__mro__:
        if getattr(builtins, base.__name__, None) is base:
            return base
    return Exception


_EXCEPTION_CLASSES: dict = {}


def describe_exception(exc: BaseException) -> dict:
    """An exception as it crosses the RPC (either way)."""
    cls = type(exc)
    return {"module": cls.__module__, "name": cls.__qualname__,
            "base": _builtin_base(cls).__name__, "message": safe_str(exc)}


def raise_described(info: dict) -> None:
    """Raise on this side the exception ``describe_exception`` gave on the other."""
    raise exception_class(str(info.get("module")), str(info.get("name")),
                          str(info.get("base")))(str(info.get("message", "")))


def exception_class(module: str, name: str, base: str) -> type:
    """A local stand-in for an exception class the program defined (one per name)."""
    builtin = getattr(builtins, name, None)
    if module == "builtins" and isinstance(builtin, type) and issubclass(builtin, BaseException):
        return builtin
    if module != "__main__":
        known = local_class(f"{module}:{name}")
        if known is not None and issubclass(known, BaseException):
            return known
    key = (module, name)
    if key not in _EXCEPTION_CLASSES:
        parent = getattr(builtins, base, Exception)
        if not (isinstance(parent, type) and issubclass(parent, BaseException)):
            parent = Exception
        _EXCEPTION_CLASSES[key] = type(name.rsplit(".", 1)[-1], (parent,), {"__module__": module})
    return _EXCEPTION_CLASSES[key]


def local_class(spec: str) -> "type | None":
    module, _, qualname = spec.partition(":")
    if not module or module == "__main__" or not qualname:
        return None
    target: Any = sys.modules.get(module)
    if target is None:
        return None
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


#: Argument types whose in-place changes by a program's function travel back to the tests.
MUTABLE = (list, dict, set, bytearray)
