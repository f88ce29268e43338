"""The runner's wire rules and value codec, on the host, without Docker.

The modules imported here are the very files the image ships (``image.runner_files``
reads the same folder); the first test checks that, byte for byte.
"""

from __future__ import annotations

import ast
import collections
import datetime
import decimal
import fractions
import json
import math
import os
import sys
import threading
import types
import uuid
from pathlib import Path
from typing import Any

import pytest

from selfheal_jupyter.sandbox import image
from selfheal_jupyter.sandbox.runner import codec, exception_classes, frames, outcome, tagged_values

# --------------------------------------------------------------------------- the files


def test_the_modules_tested_here_are_the_files_the_image_ships():
    shipped = image.runner_files()
    assert shipped is not None
    for module in (frames, codec, outcome):
        path = Path(module.__file__ or "")
        assert path.parent == image.RUNNER_SOURCE_DIR
        assert shipped[path.name] == path.read_bytes()


def test_runner_modules_import_each_other_relatively_and_only_at_start_up():
    """The folder runs alone in the image under another name, and a candidate drops
    its modules from ``sys.modules``: a runner import inside a function, or of the host
    package, would fail (or find a program's file) there."""
    for path in sorted(image.RUNNER_SOURCE_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert id(node) in top, f"{path.name}:{node.lineno} imports a runner module late"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    root = name.split(".")[0]
                    assert root in sys.stdlib_module_names or (
                        id(node) not in top and root in ("numpy", "pandas", "matplotlib")
                    ), f"{path.name}:{node.lineno} imports {name}"


# --------------------------------------------------------------------------- frames


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def test_frames_round_trip_in_order(pipe):
    r, w = pipe
    sent = [
        {"op": "run", "code": "print('é')\n", "n": [1, 2.5, None, True]},
        {"text": "\ud800 lone surrogate", "nested": {"a": {"b": []}}},
        {},
    ]
    for obj in sent:
        frames.write_frame(w, obj)
    reader = frames.FrameReader(r)
    assert [reader.wait() for _ in sent] == sent
    os.close(w)
    assert reader.wait() is None and reader.eof


def test_a_frame_larger_than_a_pipe_arrives_whole(pipe):
    r, w = pipe
    payload = {"data": "x" * (3 << 20)}
    writer = threading.Thread(target=frames.write_frame, args=(w, payload))
    writer.start()
    got = frames.FrameReader(r).wait()
    writer.join()
    assert got == payload


def test_a_partial_frame_waits_for_the_rest(pipe):
    r, w = pipe
    os.set_blocking(r, False)
    data = json.dumps({"op": "put", "name": "x"}).encode()
    whole = frames.HEADER.pack(len(data)) + data
    reader = frames.FrameReader(r)
    for cut in (2, frames.HEADER.size + 5):  # inside the header, then inside the body
        os.write(w, whole[:cut])
        reader.feed()
        assert reader.next() is None and not reader.eof
        os.write(w, whole[cut:])
        reader.feed()
        assert reader.next() == {"op": "put", "name": "x"}
    reader.feed()  # nothing there: would block, not EOF
    assert reader.next() is None and not reader.eof


def test_a_frame_cut_by_eof_is_no_frame(pipe):
    r, w = pipe
    os.write(w, frames.HEADER.pack(100) + b'{"op": ')
    os.close(w)
    assert frames.FrameReader(r).wait() is None


def test_a_frame_over_the_limit_is_refused_and_ends_the_stream(pipe):
    r, w = pipe
    frames.write_frame(w, {"data": "y" * 200})
    frames.write_frame(w, {"op": "after"})
    reader = frames.FrameReader(r, limit=100)
    assert reader.wait() is None  # not a peer that follows the protocol: nothing more is read
    assert reader.eof and not reader.buf
    assert frames.FrameReader(r, limit=frames.MAX_RESULT_BYTES).limit == 64 << 20


def test_a_frame_that_is_not_a_json_object_is_malformed(pipe):
    r, w = pipe
    for body in (b"not json", b"[1, 2]", b"\xff\xfe"):
        os.write(w, frames.HEADER.pack(len(body)) + body)
    reader = frames.FrameReader(r)
    assert [reader.wait() for _ in range(3)] == [{"op": "malformed"}] * 3


def test_read_all_reads_to_eof_and_closes(pipe):
    r, w = pipe
    os.write(w, b"abc" * 1000)
    os.close(w)
    assert frames.read_all(r) == b"abc" * 1000
    with pytest.raises(OSError):
        os.fstat(r)


def test_a_capture_keeps_up_to_its_cap_and_finds_one_frame():
    capture = outcome.Capture(cap=10)
    assert not capture.add(b"0123456789")
    assert capture.add(b"abc")  # the cap has been passed
    assert capture.total == 13 and bytes(capture.data) == b"0123456789"
    assert capture.text("stdout") == "0123456789\n[selfheal: stdout truncated after 10 bytes]"
    report = outcome.Capture(cap=1 << 20)
    data = json.dumps({"tests": []}).encode()
    report.add(frames.HEADER.pack(len(data)) + data[:-1])
    assert report.frame() is None
    report.add(data[-1:])
    assert report.frame() == {"tests": []}


# --------------------------------------------------------------------------- codec


class _Refs:
    """Both ends of a reference table, as the RPC's two sides keep them."""

    def __init__(self) -> None:
        self.objects: list = []

    def ref_of(self, obj: Any) -> dict:
        self.objects.append(obj)
        return {"$": "ref", "id": len(self.objects) - 1}

    def deref(self, v: dict) -> Any:
        return self.objects[int(v["id"])]


def _through_json(value: Any, refs: _Refs | None = None) -> tuple[Any, Any]:
    """A program's value as the checker gets it: encoded by the program's side, decoded
    by the checker's."""
    refs = refs or _Refs()
    encoded = json.loads(json.dumps(codec.ProgramCodec(refs.ref_of, refs.deref).encode(value)))  # plain JSON
    return encoded, codec.CheckerCodec(refs.ref_of, refs.deref).decode(encoded)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of exactly the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


PLAIN = [
    None,
    True,
    False,
    0,
    -7,
    2**100,
    1.5,
    -0.0,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    "text é \u2603",
    b"\x00\xffbytes",
    bytearray(b"ba"),
    complex(1.5, -2),
    range(1, 10, 3),
    [1, [2, [3]]],
    (1, "a", None),
    {1, 2, 3},
    frozenset({"a"}),
    {"k": [1, 2], 3: (4,), None: {}},
    decimal.Decimal("1.10"),
    fractions.Fraction(3, 7),
    datetime.datetime(2026, 11, 25, 12, 30, 1, 5),
    datetime.date(2026, 1, 2),
    datetime.time(23, 59),
    datetime.timedelta(days=2, seconds=3, microseconds=4),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_values_round_trip_with_their_exact_types(value):
    encoded, decoded = _through_json(value)
    assert _same(decoded, value), (value, encoded, decoded)


def test_a_subclass_of_a_plain_type_crosses_as_the_plain_value_it_holds():
    """Never with its methods: a lying ``__eq__``, ``__iter__`` or ``__str__`` stays behind.
    One of the program's own crosses as a reference (its class and methods stay the
    program's) whose plain value (``ProgramCodec.plain``, what the checker compares) is
    this; a library's, as the plain value itself."""

    class Sneaky(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    class Yes(float):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = float.__hash__

    class Hollow(list):
        def __iter__(self):  # type: ignore[override]
            return iter(())

    class Loud(str):
        def __str__(self) -> str:
            return "something else"

    class Few(dict):
        def items(self):  # type: ignore[override]
            return []

    for value, plain in (
        (Sneaky(3), 3),
        (Yes(0.5), 0.5),
        (Hollow([1, 2]), [1, 2]),
        (Loud("abc"), "abc"),
        (Few(a=1), {"a": 1}),
        ([1, Sneaky(2)], [1, 2]),
        (type("C", (complex,), {})(1 + 2j), 1 + 2j),
    ):
        encoded, decoded = _through_json(value)
        assert "ref" in json.dumps(encoded)  # a class of the tests' module: not a library's
        encoded = json.loads(json.dumps(codec.ProgramCodec(_Refs().ref_of, _Refs().deref).plain(value)))
        assert "ref" not in json.dumps(encoded)
        decoded = codec.CheckerCodec(_Refs().ref_of, _Refs().deref).decode(encoded)
        assert _same(decoded, plain), (value, decoded)
    import http

    assert _same(_through_json(http.HTTPStatus.OK)[1], 200)  # a library's IntEnum: its value


def test_objects_travel_as_references_never_by_value():
    class Thing:
        pass

    refs = _Refs()
    thing = Thing()
    for value in (thing, len, [1, thing]):
        encoded, _ = _through_json(value, refs)
        assert "ref" in json.dumps(encoded)
    assert refs.objects == [thing, len, thing]


LibraryPoint = collections.namedtuple("LibraryPoint", "x y")


def test_library_containers_are_rebuilt_here_from_data():
    point = LibraryPoint  # a library's named tuple (the program's own is a reference)
    counts = collections.Counter("abca")
    ordered = collections.OrderedDict([("b", 1), ("a", 2)])
    default = collections.defaultdict(list, {"k": [1]})
    queue = collections.deque([1, 2, 3], maxlen=5)
    for value in (point(1, 2), counts, ordered, default, queue):
        encoded, decoded = _through_json(value)
        assert "ref" not in json.dumps(encoded) and decoded == value
    _, p = _through_json(point(1, 2))
    assert (p.x, p.y) == (1, 2) and p == (1, 2) and type(p) is not point  # made here
    _, d = _through_json(default)
    assert d["missing"] == [] and type(d) is collections.defaultdict
    odd = collections.defaultdict(lambda: 7, {"k": 1})
    assert _through_json(odd)[1].default_factory is None  # no factory by name
    assert _through_json(queue)[1].maxlen == 5


def test_the_checker_loads_no_class_the_program_names():
    checker = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    with pytest.raises(ValueError, match="not accepted"):
        checker.decode({"$": "class", "v": "unittest.mock:ANY"})
    program = codec.ProgramCodec(_Refs().ref_of, _Refs().deref)
    import unittest.mock

    assert program.decode({"$": "class", "v": "unittest.mock:MagicMock"}) is unittest.mock.MagicMock


def test_an_exception_from_the_program_is_a_builtin_or_a_stand_in_made_here():
    import unittest

    class SkipTest(Exception):
        pass

    SkipTest.__module__, SkipTest.__qualname__ = "unittest.case", "SkipTest"  # a loaded class's name
    checker = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    described = exception_classes.describe_exception(SkipTest("skip me"))
    with pytest.raises(Exception) as raised:
        checker.raise_described(described)
    assert not isinstance(raised.value, unittest.SkipTest)
    assert type(raised.value).__name__ == "SkipTest" and str(raised.value) == "skip me"
    assert described["module"] == exception_classes.UNVERIFIED  # its names do not lead back to it
    # ... while the program's side may resolve the names the tests send it
    real = exception_classes.describe_exception(unittest.SkipTest("skip me"))
    program_side = codec.ProgramCodec(_Refs().ref_of, _Refs().deref).exception_class(real)
    assert program_side is unittest.SkipTest

    class Base(ValueError):
        pass

    class Special(Base):
        pass

    for cls in (Base, Special):
        cls.__module__ = "__main__"
    special = checker.exception_class(exception_classes.describe_exception(Special("x")))
    base = checker.exception_class(exception_classes.describe_class(Base))
    assert issubclass(special, base) and issubclass(base, ValueError)
    assert special is not Special and base is not Base
    assert checker.exception_class(exception_classes.describe_class(Special)) is special  # one per chain
    assert checker.exception_class(exception_classes.describe_class(KeyError)) is KeyError
    with pytest.raises(UnicodeError):  # a builtin that takes more than a message
        checker.raise_described(exception_classes.describe_exception(UnicodeDecodeError("utf-8", b"x", 0, 1, "r")))


def test_plain_mode_makes_records_of_the_program_s_own_objects_only():
    class Account:
        def __init__(self, balance: int) -> None:
            self.balance = balance
            self.history = [balance]

    class Slotted:
        __slots__ = ("x",)

        def __init__(self) -> None:
            self.x = 1

    for cls in (Account, Slotted):
        cls.__module__ = "__main__"
    c = codec.ProgramCodec(_Refs().ref_of, _Refs().deref)
    checker = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    record = checker.decode(json.loads(json.dumps(c.plain(Account(2)))))
    assert isinstance(record, tagged_values.ProgramRecord) and record.fields == {"balance": 2, "history": [2]}
    assert record == checker.decode(c.plain(Account(2))) and record != checker.decode(c.plain(Account(3)))
    assert record != 2 and record != {"balance": 2, "history": [2]}
    assert checker.decode(c.plain(Slotted())).fields == {"x": 1}
    for other in (len, threading.Lock(), Account):
        with pytest.raises(tagged_values.Unencodable):
            c.plain(other)


def test_a_value_over_the_budget_or_too_deep_is_a_reference():
    refs = _Refs()
    c = codec.ProgramCodec(refs.ref_of, refs.deref)
    budget = tagged_values.Budget()
    budget.left = 10
    big = list(range(20))
    assert c.encode(big, budget) == {"$": "ref", "id": 0}
    deep: list = []
    for _ in range(150):
        deep = [deep]
    assert c.encode(deep) == {"$": "ref", "id": 1}
    assert refs.objects == [big, deep]


def test_decode_refuses_what_encode_never_makes():
    c = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    with pytest.raises(ValueError):
        c.decode([1, 2])  # lists always travel tagged
    with pytest.raises(ValueError, match="unknown value tag"):
        c.decode({"$": "no-such-tag", "v": 1})


def test_exceptions_cross_as_their_builtin_base_and_message():
    checker = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    with pytest.raises(KeyError) as info:
        checker.raise_described(exception_classes.describe_exception(KeyError("k")))
    assert type(info.value) is KeyError and info.value.args == ("'k'",)

    class Custom(ValueError):
        pass

    Custom.__module__ = "__main__"
    described = exception_classes.describe_exception(Custom("bad"))
    assert {k: described[k] for k in ("module", "name", "base", "message")} == {
        "module": "__main__",
        "name": Custom.__qualname__,
        "base": "ValueError",
        "message": "bad",
    }
    with pytest.raises(ValueError, match="bad") as raised:
        checker.raise_described(described)
    assert type(raised.value) is not Custom  # a local stand-in, never the program's class
    assert type(raised.value).__name__ == "Custom"


def test_numpy_arrays_and_scalars_round_trip():
    np = pytest.importorskip("numpy")
    values = [
        np.arange(6, dtype=np.int32).reshape(2, 3),
        np.array([1.5, np.nan, -np.inf]),
        np.array([True, False]),
        np.array([1 + 2j]),
        np.array(["a", "bc"]),
        np.array(7, dtype=np.int64),
        np.zeros((0, 3)),
    ]
    for value in values:
        encoded, decoded = _through_json(value)
        assert encoded["$"] == "ndarray"
        assert type(decoded) is np.ndarray and decoded.dtype == value.dtype
        assert decoded.shape == value.shape
        assert np.array_equal(decoded, value, equal_nan=value.dtype.kind == "f")
    objects = np.array([1, "a", None], dtype=object)
    _, decoded = _through_json(objects)
    assert decoded.dtype == object and list(decoded) == [1, "a", None]
    for scalar in (np.float32(1.25), np.int16(-3), np.bool_(True), np.complex128(1j)):
        encoded, decoded = _through_json(scalar)
        assert encoded["$"] == "npscalar" and type(decoded) is type(scalar) and decoded == scalar
    with pytest.raises(ValueError, match="unexpected dtype"):
        codec.CheckerCodec(_Refs().ref_of, _Refs().deref).decode(
            {"$": "ndarray", "dtype": "object; import os", "shape": [0], "v": {"$": "list", "v": []}}
        )


def test_pandas_objects_are_rebuilt_from_data():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {"n": [1, 2, 3], "x": [0.5, None, 2.0], "s": ["a", "b", None]}, index=pd.Index([10, 20, 30], name="id")
    )
    _, decoded = _through_json(frame)
    pd.testing.assert_frame_equal(decoded, frame)
    series = pd.Series([1.0, 2.0], index=["a", "b"], name="v")
    _, decoded = _through_json(series)
    pd.testing.assert_series_equal(decoded, series)
    multi = pd.MultiIndex.from_tuples([("a", 1), ("b", 2)], names=["k", "n"])
    _, decoded = _through_json(multi)
    pd.testing.assert_index_equal(decoded, multi)
    _, decoded = _through_json(pd.RangeIndex(0, 10, 2, name="r"))
    pd.testing.assert_index_equal(decoded, pd.RangeIndex(0, 10, 2, name="r"))
    for value in (pd.Timestamp("2026-11-25 12:00"), pd.Timedelta(seconds=90)):
        _, decoded = _through_json(value)
        assert type(decoded) is type(value) and decoded == value
    assert _through_json(pd.NaT)[1] is pd.NaT and _through_json(pd.NA)[1] is pd.NA
    duplicated = pd.DataFrame([[1, 2]], columns=["a", "a"])
    encoded, _ = _through_json(duplicated)
    assert encoded["$"] == "ref"  # columns that are not unique cannot be rebuilt: a reference


# --------------------------------------------------------------------------- the checker's trust


@pytest.fixture
def program():
    """A program's namespace served over real pipes in a thread (the program's end), and
    the checker's end of the link; ``seen`` holds every request the program received."""
    from selfheal_jupyter.sandbox.runner import checker_rpc, program_rpc

    to_program, to_checker = os.pipe(), os.pipe()
    main = types.ModuleType("__main__")  # its classes are the program's own
    ns: dict = main.__dict__
    objects = program_rpc.ProgramObjects(main)
    seen: list = []
    handle = objects.handle

    def spy(req: dict) -> Any:
        seen.append(json.loads(json.dumps(req)))
        return handle(req)

    objects.handle = spy  # type: ignore[method-assign]
    server = threading.Thread(target=objects.serve, args=(to_program[0], to_checker[1]), daemon=True)
    link = checker_rpc.ProgramLink(to_program[1], to_checker[0])
    yield ns, link, seen, server
    link.done()
    server.join(timeout=10)
    for fd in (*to_program, *to_checker):
        os.close(fd)


def _names(link: Any, ns_names: list) -> dict:
    return link.ask("names", names=ns_names)


def test_a_handle_compares_and_computes_here_and_the_tests_values_stay_here(program):
    from selfheal_jupyter.sandbox.runner.checker_rpc import Remote

    ns, link, seen, server = program
    exec(
        "class Liar:\n"
        "    def __eq__(self, o): return True\n"
        "    def __sub__(self, o): return 0.0\n"
        "    __rsub__ = __sub__\n"
        "    def __abs__(self): return 0.0\n"
        "    def __lt__(self, o): return True\n"
        "    def __bool__(self): return True\n"
        "class Yes(float):\n"
        "    def __eq__(self, o): return True\n"
        "    __hash__ = float.__hash__\n"
        "    def __sub__(self, o): return Yes(0)\n"
        "def liar(*a): return Liar()\n"
        "def yes(*a): return Yes(7.5)\n",
        ns,
    )
    server.start()
    got = _names(link, ["liar", "yes", "Liar"])
    liar, yes = got["liar"], got["yes"]
    assert type(yes(1)) is not float and yes(1) == 7.5 and yes(1) != 2.5 and abs(yes(1) - 2.5) > 1
    value = liar(1)
    assert type(value) is Remote and value.__class__ is got["Liar"]  # a handle; its class the program's
    assert value != 41.125  # a record of the program's class: equal to no plain value
    for attempt in (
        lambda: abs(value - 41.125) < 1e-9,
        lambda: 41.125 - value,
        lambda: value < 41.125,
        lambda: bool(value),
        lambda: -value,
        lambda: float(value),
        lambda: f"{value:.2f}",
    ):
        with pytest.raises(TypeError, match="Liar"):
            attempt()
    assert not any("41.125" in json.dumps(req) for req in seen)  # never sent to the program
    assert {req["op"] for req in seen} <= {"names", "call", "value", "type"}


def test_two_of_the_program_s_objects_compare_as_data_and_by_the_program(program):
    ns, link, seen, server = program
    exec(
        "class Point:\n"
        "    def __init__(self, x): self.x = x\n"
        "    def __eq__(self, o): return isinstance(o, Point) and o.x == self.x\n"
        "    def __add__(self, o): return Point(self.x + o.x)\n"
        "class Bare:\n"
        "    def __init__(self, x): self.x = x\n"
        "class AlwaysEqual:\n"
        "    def __init__(self, x): self.x = x\n"
        "    def __eq__(self, o): return True\n",
        ns,
    )
    server.start()
    got = _names(link, ["Point", "Bare", "AlwaysEqual"])
    Point, Bare, AlwaysEqual = got["Point"], got["Bare"], got["AlwaysEqual"]
    assert Point(1) == Point(1) and Point(1) != Point(2)
    assert Point(1) + Point(2) == Point(3)  # an operator between two of its own objects
    assert Bare(1) != Bare(1)  # equal as data, but not to Python: no __eq__
    assert AlwaysEqual(1) != AlwaysEqual(2)  # equal to the program, not as data
    p = Point(1)
    assert p == p and {p: 1}[p] == 1


def test_type_checks_of_a_handle_are_the_program_s_classes_and_load_nothing(program):
    from selfheal_jupyter.sandbox.runner.checker_rpc import checker_isinstance, checker_issubclass

    ns, link, seen, server = program
    exec(
        "class Base: pass\nclass Child(Base): pass\nclass Fake: pass\n"
        "Fake.__module__, Fake.__qualname__ = 'unittest.case', 'TestCase'\n"
        "def make(): return Child()\ndef fake(): return Fake()\n",
        ns,
    )
    server.start()
    got = _names(link, ["Base", "Child", "make", "fake"])
    child = got["make"]()
    assert checker_isinstance(child, got["Base"]) and checker_isinstance(child, (int, got["Child"]))
    assert checker_issubclass(got["Child"], got["Base"]) and not checker_issubclass(got["Base"], got["Child"])
    assert not checker_isinstance(child, (int, float, str, list, dict))  # plain values cross as values
    assert checker_isinstance(child, object) and checker_isinstance(got["Base"], type)
    import unittest

    fake = got["fake"]()
    assert not checker_isinstance(fake, unittest.TestCase)  # a class that only names itself so is none
    assert type(fake) is not unittest.TestCase and fake.__class__ is not unittest.TestCase
    with pytest.raises(TypeError):  # and it is no value here
        fake == 1  # noqa: B015 - the comparison itself is what must raise
    assert checker_isinstance(3, int) and not checker_isinstance(3, str)


def test_the_tests_own_exception_comes_back_through_the_program(program):
    ns, link, seen, server = program
    exec(
        "def apply(f):\n    try:\n        return f()\n    except Exception:\n        raise\n"
        "class Oops(KeyError): pass\n"
        "def fail(): raise Oops('k')\n",
        ns,
    )
    server.start()
    got = _names(link, ["apply", "fail", "Oops"])

    class Signal(BaseException):
        pass

    def stop() -> None:
        raise Signal("stop")

    with pytest.raises(Signal) as raised:
        got["apply"](stop)
    assert str(raised.value) == "stop"
    with pytest.raises(KeyError) as oops:
        got["fail"]()
    assert type(oops.value) is got["Oops"]  # the stand-in made here for the program's class
    assert got["Oops"] is not ns["Oops"]


def test_the_tests_names_come_from_the_sources_not_from_the_program(program):
    import math

    from selfheal_jupyter.sandbox.runner.checker import ProgramNames
    from selfheal_jupyter.sandbox.runner.checker_rpc import Remote

    ns, link, seen, server = program
    source = (
        "import math as m\nimport os.path\nfrom json import dumps as show, loads\n"
        "from collections import *\n"
        "def abs(x):\n    return 0\n"
        "def f(x):\n    return x\n"
        "def loads(text):\n    return text\n"
        "for i in range(2):\n    total = i\n"
        "globals()['sneaky'] = 1\n"
        "m = 'a fake math'\n"
    )
    exec(source, ns)
    server.start()
    names = ProgramNames.of([source], ["data"])
    assert names.own >= {"abs", "f", "i", "total", "data", "m"} and "sneaky" not in names.own
    got = names.resolve(["abs", "f", "os", "show", "deque", "sneaky", "math", "total", "random", "m", "loads"], link)
    assert "abs" not in got and "math" not in got and "random" not in got  # the checker's own
    assert got["os"] is sys.modules["os"] and got["m"] is math  # a module stays the checker's
    import collections
    import json as json_module

    assert got["show"] is json_module.dumps and got["deque"] is collections.deque
    assert "sneaky" not in got  # bound at run time only: not the program's to give
    assert type(got["f"]) is Remote and got["total"] == 1
    assert type(got["loads"]) is Remote  # its own definition beats the import of the same name
    assert [req["names"] for req in seen if req["op"] == "names"] == [["f", "total", "loads"]]
    assert math.floor(2.5) == 2


def test_a_bare_assert_evaluates_each_side_once():
    from selfheal_jupyter.sandbox.runner import checker

    calls: list = []
    ns = {"f": lambda: calls.append(1) or len(calls)}
    with pytest.raises(checker.CompareFailed) as failed:
        checker.run_statement(ast.parse("assert f() == 5").body[0], ns, "t.py")
    assert calls == [1] and failed.value.detail == "left = 1, right = 5"
    assert checker.failure_message(failed.value) == "AssertionError (left = 1, right = 5)"
    with pytest.raises(AssertionError, match="^two$"):
        checker.run_statement(ast.parse("assert f() == 5, 'two'").body[0], ns, "t.py")
    checker.run_statement(ast.parse("assert f() in (3, 4)").body[0], ns, "t.py")
    assert calls == [1, 1, 1]


# --------------------------------------------------------------------------- status


def _status(report: dict) -> str:
    capture = outcome.Capture(cap=100)
    return outcome.describe_result(
        1 << 8, "", capture, outcome.Capture(cap=100), report, None, "", 0, 0.1, 100, 1.0, 512 << 20
    )["status"]


def test_oom_from_the_builtin_memory_error_itself_never_from_a_name():
    error = {"type": "MemoryError", "message": "", "line": 1, "frames": [], "locals": {}}
    assert _status({"error": error, "outputs": [], "memory_error": False}) == "error"
    assert _status({"error": error, "outputs": []}) == "error"
    assert _status({"error": error, "outputs": [], "memory_error": True}) == "oom"


def test_the_end_check_leaves_to_the_spec_guard_only_what_the_text_shows():
    """The names an assert's end check does not hold are those the program's text binds
    again after it (later top-level statements, ``global`` declarations), which the spec
    guard judges from the same text; a binding by no statement stays held."""
    from selfheal_jupyter.sandbox.runner.checker import ProgramNames
    from selfheal_jupyter.spec.rules import _bound_at_top

    source = (
        "def mean(xs):\n    return sum(xs)\n\nassert mean([1]) == 1\n\n"
        "import functools as ft\nmean = ft.lru_cache(mean)\n"
        "match {}:\n    case {**rest}:\n        pass\n"
        "def reset():\n    global model\n\n"
        "globals()['hidden'] = len\nexec('sneaky = len')\n"
    )
    after = ProgramNames.bound_after(source, 4, 0)
    assert after == {"ft", "mean", "rest", "reset", "model"}
    assert ProgramNames.bound_after(source, 5, 0) == set()  # no statement there
    tree = ast.parse(source)
    assert after - {"model"} <= _bound_at_top(tree.body[2:])  # every one the guard sees too


def test_an_assert_unconfirmed_at_the_end_fails_only_a_run_that_is_otherwise_ok():
    """The checker could not read an assert's callables again at the program's end: an
    exit status of 0 confirms nothing (the assert fails); a run that failed anyway keeps
    the assert as it was checked (its feedback is the failure)."""
    from selfheal_jupyter.sandbox.runner.end_check import UNCONFIRMED

    def settled(status: int) -> dict:
        held = {
            "source": "assert f(1) == 1",
            "line": 3,
            "passed": True,
            "message": "",
            UNCONFIRMED: "`f` could not be read again at the program's end",
        }
        result = outcome.describe_result(
            status,
            "",
            outcome.Capture(cap=100),
            outcome.Capture(cap=100),
            {"error": None, "outputs": []},
            {"tests": [held]},
            "",
            0,
            0.1,
            100,
            1.0,
            512 << 20,
            [[3, 0, "assert f(1) == 1"]],
        )
        (test,) = result["tests"]
        assert UNCONFIRMED not in test
        return test

    assert settled(0) == {
        "source": "assert f(1) == 1",
        "line": 3,
        "passed": False,
        "message": "`f` could not be read again at the program's end",
    }
    assert settled(1 << 8)["passed"] is True


def test_a_library_exception_from_the_program_answers_type_checks_by_name():
    """``assertRaises(json.JSONDecodeError)`` around a program's call: the stand-in made
    here answers issubclass / isinstance by the names the program gave; it is not the
    library's class, and nothing was looked up."""
    import json as json_module

    from selfheal_jupyter.sandbox.runner.checker_rpc import checker_isinstance, checker_issubclass

    try:
        json_module.loads("{")
    except json_module.JSONDecodeError as exc:
        described = exception_classes.describe_exception(exc)
    stand_in = codec.CheckerCodec(_Refs().ref_of, _Refs().deref).exception_class(described)
    assert stand_in is not json_module.JSONDecodeError and issubclass(stand_in, ValueError)
    assert checker_issubclass(stand_in, json_module.JSONDecodeError)
    assert checker_isinstance(stand_in("x"), (KeyError, json_module.JSONDecodeError))
    assert not checker_issubclass(stand_in, KeyError) and not checker_issubclass(ValueError, stand_in)


# --------------------------------------------------------------------------- types (issue 41)
TYPED_PROGRAM = (
    "import typing\nfrom dataclasses import dataclass, field\nfrom typing import Optional\n"
    "def greet(name: str, times: int = 1, *, sep: 'str' = ' ') -> str:\n    return sep.join([name] * times)\n"
    "def area(r: float) -> float:\n    return 3.14159 * r * r\n"
    "def shapes(xs: list[int], ys: typing.List[typing.Tuple[int, ...]]) -> 'int | None':\n    return None\n"
    "def maybe(x: Optional[str], y: int | None, z: typing.Callable[[int], str], w: typing.Literal['a', 1]):\n"
    "    return x\n"
    "class Animal:\n    pass\n"
    "class Dog(Animal):\n    pass\n"
    "@dataclass\nclass Point:\n    x: float\n    y: float = 0.0\n    tags: list = field(default_factory=list)\n"
    "    def moved(self, dx: float) -> 'Point':\n        return Point(self.x + dx, self.y)\n"
    "def make(): return Point(1.0)\n"
    "T = typing.TypeVar('T')\nclass Box(typing.Generic[T]):\n    pass\n"
    "def generic(x: typing.Generic[T]):\n    return x\n"
)


def _typed(program: Any) -> dict:
    ns, link, seen, server = program
    exec(compile(TYPED_PROGRAM, "<program>", "exec", dont_inherit=True), ns)  # no future flags of this file
    server.start()
    return _names(link, ["greet", "area", "shapes", "maybe", "Animal", "Dog", "Point", "make", "generic"])


def test_builtin_and_standard_types_cross_as_the_checker_s_own(program):
    """Annotations, signatures and the class of a value cross by the table of types: the
    checker's own ``str``, ``float``, ``typing.Optional[str]``... so ``==`` / ``is`` hold."""
    import inspect
    import typing

    from selfheal_jupyter.sandbox.runner.checker_rpc import Remote, type_of

    got = _typed(program)
    sig = inspect.signature(got["greet"])
    params = sig.parameters
    assert params["name"].annotation == str and params["name"].annotation is str
    assert sig.return_annotation == str and params["times"].annotation is int
    assert params["times"].default == 1 and params["name"].default is inspect.Parameter.empty
    assert params["sep"].annotation == "str" and params["sep"].kind is inspect.Parameter.KEYWORD_ONLY
    assert str(sig) == "(name: str, times: int = 1, *, sep: 'str' = ' ') -> str"
    assert inspect.signature(got["area"]).return_annotation is float
    assert type_of(type, got["area"](2.0)) is float and type_of(type, got["area"](2.0)) != int
    shapes = inspect.signature(got["shapes"])
    assert shapes.parameters["xs"].annotation == list[int]
    assert shapes.parameters["ys"].annotation == typing.List[typing.Tuple[int, ...]]
    maybe = inspect.signature(got["maybe"]).parameters
    assert maybe["x"].annotation == typing.Optional[str] and maybe["y"].annotation == (int | None)
    assert maybe["z"].annotation == typing.Callable[[int], str]
    assert maybe["w"].annotation == typing.Literal["a", 1]
    assert got["greet"].__annotations__ == {"name": str, "times": int, "sep": "str", "return": str}
    assert got["greet"].__name__ == "greet" and got["greet"].__defaults__ == (1,)
    generic = inspect.signature(got["generic"]).parameters["x"].annotation  # a form not in the table
    assert type(generic) is Remote and repr(generic) == "typing.Generic[~T]"
    assert type_of(type, got["greet"]) is __import__("types").FunctionType


def test_the_program_s_classes_are_handles_compared_by_identity(program):
    import dataclasses
    import inspect

    from selfheal_jupyter.sandbox.runner.checker_rpc import checker_isinstance, checker_issubclass, type_of

    got = _typed(program)
    Point, Dog, Animal = got["Point"], got["Dog"], got["Animal"]
    p = got["make"]()
    assert type_of(type, p) is Point and p.__class__ is Point and type_of(type, p) == Point
    assert type_of(type, p) is not Dog and type_of(type, p) != Animal and Point != str
    assert checker_isinstance(p, (int, Point)) and not checker_isinstance(p, (Dog, str))
    assert checker_issubclass(Dog, Animal) and checker_issubclass(Dog, (str, Animal))
    assert not checker_issubclass(Animal, Dog) and checker_issubclass(Dog, object)
    assert checker_isinstance(Point, type) and type_of(type, Point) is type
    assert Point.__name__ == "Point" and Point.__qualname__ == "Point" and Point.__module__ == "__main__"
    assert {Point: 1, Dog: 2}[Point] == 1 and Point in (Dog, Point) and bool(Point)
    assert Dog.__mro__ == (Dog, Animal, object) and Dog.__bases__ == (Animal,)
    fields = dataclasses.fields(Point)
    assert [f.name for f in fields] == ["x", "y", "tags"] and [f.type for f in fields] == [float, float, list]
    assert fields[1].default == 0.0 and fields[0].default is dataclasses.MISSING and fields[2].default_factory is list
    assert [f.name for f in dataclasses.fields(p)] == ["x", "y", "tags"]
    assert vars(p) == {"x": 1.0, "y": 0.0, "tags": []} and "x" in p.__dict__
    vars(p)["x"] = 5.0  # the program's own __dict__, changed there
    assert p.x == 5.0 and got["make"]().x == 1.0
    moved = inspect.signature(p.moved)
    assert list(moved.parameters) == ["dx"] and moved.return_annotation == "Point"
    assert inspect.signature(Point).parameters["x"].annotation is float


def test_library_functions_read_a_handle_in_the_program(monkeypatch):
    """``typing.get_type_hints`` of a program's function evaluates its string annotations
    where its names are (the program); ``asdict`` / ``is_dataclass`` of its instance."""
    import builtins

    from selfheal_jupyter.sandbox.runner import checker_rpc

    for module, name, _view in checker_rpc.LIBRARY_VIEWS:  # put back after the test
        monkeypatch.setattr(module, name, getattr(module, name))
    for name in ("isinstance", "issubclass"):
        monkeypatch.setattr(builtins, name, getattr(builtins, name))
    checker_rpc.install_type_checks()
    _check_views()


def _check_views() -> None:
    import dataclasses
    import inspect
    import typing

    from selfheal_jupyter.sandbox.runner import checker_rpc, program_rpc

    to_program, to_checker = os.pipe(), os.pipe()
    main = types.ModuleType("__main__")
    source = (
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: 'float'\n    y: float = 0.0\n"
        "def f(p: 'Point', n: 'int') -> 'list[Point]':\n    return [p] * n\n"
    )
    exec(compile(source, "<program>", "exec", dont_inherit=True), main.__dict__)
    objects = program_rpc.ProgramObjects(main)
    server = threading.Thread(target=objects.serve, args=(to_program[0], to_checker[1]), daemon=True)
    server.start()
    link = checker_rpc.ProgramLink(to_program[1], to_checker[0])
    try:
        got = link.ask("names", names=["Point", "f"])
        Point, f = got["Point"], got["f"]
        assert typing.get_type_hints(f) == {"p": Point, "n": int, "return": list[Point]}
        assert inspect.get_annotations(f) == {"p": "Point", "n": "int", "return": "list[Point]"}
        assert inspect.signature(f, eval_str=True).parameters["n"].annotation is int
        p = Point(1.5)
        assert dataclasses.is_dataclass(p) and dataclasses.is_dataclass(Point) and not dataclasses.is_dataclass(f)
        assert dataclasses.asdict(p) == {"x": 1.5, "y": 0.0} and dataclasses.astuple(p) == (1.5, 0.0)
        assert dataclasses.replace(p, y=2.0).y == 2.0 and isinstance(p, Point)
        assert typing.get_type_hints(Point) == {"x": float, "y": float}
    finally:
        link.done()
        server.join(timeout=10)
        for fd in (*to_program, *to_checker):
            os.close(fd)


def test_an_exception_the_program_returns_is_of_its_exception_classes(program):
    from selfheal_jupyter.sandbox.runner.checker_rpc import checker_isinstance, type_of

    ns, link, seen, server = program
    exec("class Bad(ValueError):\n    pass\n\ndef check(x):\n    return Bad('no') if x < 0 else None\n", ns)
    server.start()
    got = _names(link, ["Bad", "check"])
    err = got["check"](-1)
    assert type_of(type, err) is got["Bad"] and checker_isinstance(err, (KeyError, got["Bad"]))
    assert checker_isinstance(err, ValueError) and not checker_isinstance(err, KeyError)


def test_a_class_crosses_by_its_identity_never_by_the_names_it_gives():
    """A class of the program that names itself ``builtins.str`` (or a class put in
    place of a module's name after the table was made) is a handle, not ``str``."""
    from selfheal_jupyter.sandbox.runner.type_table import TypeTable

    refs = _Refs()
    program_side = codec.ProgramCodec(refs.ref_of, refs.deref)
    liar = type("str", (), {"__module__": "builtins", "__qualname__": "str"})
    meta = type("Meta", (type,), {"__eq__": lambda c, o: True, "__hash__": lambda c: hash(str)})
    loud = meta("Loud", (), {})
    for cls in (liar, loud):
        assert program_side.encode(cls)["$"] == "ref"
    assert program_side.encode(str) == {"$": "type", "v": "builtins.str"}
    table = TypeTable()
    table.freeze()
    import collections

    real = collections.OrderedDict
    collections.OrderedDict = liar  # type: ignore[misc]  # a program rebinding a module's name
    try:
        assert table.name_of(liar) is None and table.class_named("collections.OrderedDict") is real
    finally:
        collections.OrderedDict = real  # type: ignore[misc]


@pytest.mark.parametrize(
    "forged",
    [
        {"$": "type", "v": "unittest.mock.ANY"},
        {"$": "type", "v": "os.system"},
        {"$": "type", "v": "builtins.eval"},
        {"$": "type", "v": ["builtins.str"]},
        {"$": "typing", "name": "cast"},
        {"$": "typing", "name": "ForwardRef", "args": ["__import__('os')"]},
        {"$": "alias", "origin": {"$": "float", "v": "1.5"}, "args": []},
        {"$": "signature", "parameters": [1], "return": None},
    ],
)
def test_the_checker_resolves_only_names_of_its_table(forged):
    checker = codec.CheckerCodec(_Refs().ref_of, _Refs().deref)
    with pytest.raises((ValueError, TypeError)):
        checker.decode(forged)


def test_type_in_the_tests_text_is_the_program_s_class_for_a_handle(program):
    from selfheal_jupyter.sandbox.runner import checker

    ns, link, seen, server = program
    exec("class Point:\n    pass\np = Point()\nx = 2.5\n", ns)
    server.start()
    names = _names(link, ["Point", "p", "x"])
    tests_ns = {"__builtins__": checker.tests_builtins(lambda: None), **names}
    for text in (
        "assert type(p) is Point",
        "assert type(p) == Point and type(x) is float",
        "def t(v):\n    assert type(v) is Point\nt(p)",
        "assert (lambda v: type(v))(p) is Point",
        "assert type('T', (), {})().__class__.__name__ == 'T'",
    ):
        for stmt in ast.parse(text).body:
            checker.run_statement(stmt, tests_ns, "t.py")
    with pytest.raises(AssertionError):
        checker.run_statement(ast.parse("assert type(x) is Point").body[0], tests_ns, "t.py")


def test_the_runner_and_the_host_name_frames_alike():
    """The runner is a separate program: the two file names its frames carry are pinned
    to the host's (a frame of the notebook's prelude, the candidate's default name)."""
    from selfheal_jupyter import model
    from selfheal_jupyter.sandbox.runner import layout

    assert (layout.CANDIDATE_FILE, layout.NOTEBOOK_FILE) == (model.CANDIDATE_FILE, model.NOTEBOOK_FILE)
