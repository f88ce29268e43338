"""The checker's end of the RPC: program objects seen from the checker (``Remote``)."""

from typing import Any, Callable

from .codec import MUTABLE, Budget, Codec, Unencodable, describe_exception, local_class, raise_described
from .frames import FrameReader, write_frame


class ProgramLink:
    """The checker's end: asks the program's process for names, calls, attributes."""

    def __init__(self, rpc_out: int, rpc_in: int) -> None:
        self.out = rpc_out
        self.reader = FrameReader(rpc_in)
        self.remotes: dict = {}
        self.modules: dict = {}
        self.local: list = []
        self.after: "dict | None" = None
        self.codec = Codec(self.ref_of, self.remote, by_name=True)
        self.closed = False

    def ref_of(self, obj: Any) -> dict:
        if isinstance(obj, Remote):
            return {"$": "ref", "id": object.__getattribute__(obj, "_id")}
        if callable(obj):  # a function of the tests, called back by the program
            self.local.append(obj)
            try:
                import inspect

                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = ""
            return {"$": "cref", "id": len(self.local) - 1,
                    "name": str(getattr(obj, "__name__", "function")),
                    "qualname": str(getattr(obj, "__qualname__", "function")),
                    "doc": getattr(obj, "__doc__", None) if isinstance(
                        getattr(obj, "__doc__", None), str) else None,
                    "signature": signature}
        raise TypeError(f"a {type(obj).__name__} from the tests cannot be passed to the program; "
                        "pass plain data (numbers, strings, lists, dicts, arrays, DataFrames)")

    def remote(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return self.local[int(v["id"])]
        key = int(v["id"])
        if v.get("class"):
            local = local_class(str(v["class"]))
            if local is not None:
                return local
        if key not in self.remotes:
            self.remotes[key] = Remote(self, key, f"{v.get('module', '')}:{v.get('type', '')}",
                                       str(v.get("repr", "")), bool(v.get("callable")))
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
            raise_described(reply["raise"])
        self.after = reply.get("after") if isinstance(reply.get("after"), dict) else None
        return self.codec.decode(reply.get("ok"))

    def copy_back(self, args: tuple, kwargs: dict) -> None:
        """The program changed a list / dict / set it was passed: change the tests' too."""
        after, self.after = self.after, None
        if not after:
            return
        pairs = list(zip(args, after.get("args") or []))
        pairs += [(kwargs[k], v) for k, v in (after.get("kwargs") or {}).items() if k in kwargs]
        for local, new in pairs:
            if new is None or type(local) not in MUTABLE:
                continue
            value = self.codec.decode(new)
            if type(value) is not type(local):
                continue
            if isinstance(local, dict):
                local.clear()
                local.update(value)
            elif isinstance(local, set):
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
            reply = {"raise": describe_exception(exc)}
        write_frame(self.out, reply)

    def program_module(self, name: str) -> Any:
        if name not in self.modules:
            self.modules[name] = self.ask("import", name=name)
        return self.modules[name]

    def done(self) -> None:
        try:
            write_frame(self.out, {"op": "done"})
        except OSError:
            pass


class Remote:
    """An object of the program, seen from the checker. Comparisons with plain values
    are never delegated to the program: a remote object equals only itself, or another
    remote object the program says it equals."""

    __slots__ = ("_link", "_id", "_type", "_repr", "_callable")

    def __init__(self, link: ProgramLink, ref: int, type_name: str, text: str,
                 is_callable: bool) -> None:
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_id", ref)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_repr", text)
        object.__setattr__(self, "_callable", is_callable)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105
        """The library class of the same name, so ``isinstance(x, plt.Axes)`` works in a
        test (the program's own classes and unknown ones stay ``Remote``). This is a claim
        of the program's and only answers type checks: values are still compared here."""
        return local_class(object.__getattribute__(self, "_type")) or Remote

    def _ask(self, op: str, **fields: Any) -> Any:
        return object.__getattribute__(self, "_link").ask(
            op, ref=object.__getattribute__(self, "_id"), **fields)

    def _enc(self, value: Any) -> Any:
        return object.__getattribute__(self, "_link").encode(value)

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

    def __bool__(self) -> bool:
        raise TypeError(
            f"a {object.__getattribute__(self, '_type')} object of the program cannot be used "
            "as a truth value in a test; compare a plain value (e.g. `x == 3`, `len(x) > 0`)")

    def __repr__(self) -> str:
        return object.__getattribute__(self, "_repr") or "<program object>"

    def __str__(self) -> str:
        text = self._ask("str")
        return text if type(text) is str else repr(self)

    def __hash__(self) -> int:
        return hash(("selfheal-remote", object.__getattribute__(self, "_id")))

    def _compare(self, other: Any, name: str) -> Any:
        if not isinstance(other, Remote):
            return NotImplemented
        result = self._ask("compare", name=name, other=object.__getattribute__(other, "_id"))
        return result is True

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, Remote) and object.__getattribute__(other, "_id") == \
                object.__getattribute__(self, "_id"):
            return True
        return self._compare(other, "==")

    def __ne__(self, other: Any) -> Any:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")


def _binop(name: str) -> Callable:
    def method(self: Remote, other: Any) -> Any:
        return self._ask("binop", name=name, other=self._enc(other))
    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift"):
    setattr(Remote, f"__{_name}__", _binop(f"__{_name}__"))
    setattr(Remote, f"__r{_name}__", _binop(f"__r{_name}__"))
