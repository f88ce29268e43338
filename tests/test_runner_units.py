"""The runner's wire rules and value codec, on the host, without Docker.

The modules imported here are the very files the image ships (``image.runner_files``
reads the same folder); the first test checks that, byte for byte.
"""

from __future__ import annotations

import ast
import datetime
import decimal
import fractions
import json
import math
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from selfheal_jupyter.sandbox import image
from selfheal_jupyter.sandbox.runner import codec, frames, outcome

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
    sent = [{"op": "run", "code": "print('é')\n", "n": [1, 2.5, None, True]},
            {"text": "\ud800 lone surrogate", "nested": {"a": {"b": []}}},
            {}]
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
    refs = refs or _Refs()
    c = codec.Codec(refs.ref_of, refs.deref)
    encoded = json.loads(json.dumps(c.encode(value)))  # what crosses is plain JSON
    return encoded, c.decode(encoded)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of exactly the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


PLAIN = [
    None, True, False, 0, -7, 2**100, 1.5, -0.0, float("inf"), float("-inf"), float("nan"),
    "", "text é \u2603", b"\x00\xffbytes", bytearray(b"ba"), complex(1.5, -2), range(1, 10, 3),
    [1, [2, [3]]], (1, "a", None), {1, 2, 3}, frozenset({"a"}), {"k": [1, 2], 3: (4,), None: {}},
    decimal.Decimal("1.10"), fractions.Fraction(3, 7), datetime.datetime(2026, 11, 25, 12, 30, 1, 5),
    datetime.date(2026, 1, 2), datetime.time(23, 59), datetime.timedelta(days=2, seconds=3, microseconds=4),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_values_round_trip_with_their_exact_types(value):
    encoded, decoded = _through_json(value)
    assert _same(decoded, value), (value, encoded, decoded)


def test_subclasses_and_objects_travel_as_references_never_by_value():
    class Sneaky(int):
        def __eq__(self, other: object) -> bool:
            return True

    class Thing:
        pass

    refs = _Refs()
    sneaky, thing = Sneaky(3), Thing()
    for value in (sneaky, thing, len, [1, sneaky]):
        encoded, decoded = _through_json(value, refs)
        assert "ref" in json.dumps(encoded)
    assert refs.objects[:3] == [sneaky, thing, len] and refs.objects[0] is sneaky


def test_a_value_over_the_budget_or_too_deep_is_a_reference():
    refs = _Refs()
    c = codec.Codec(refs.ref_of, refs.deref)
    budget = codec.Budget()
    budget.left = 10
    big = list(range(20))
    assert c.encode(big, budget) == {"$": "ref", "id": 0}
    deep: list = []
    for _ in range(150):
        deep = [deep]
    assert c.encode(deep) == {"$": "ref", "id": 1}
    assert refs.objects == [big, deep]


def test_decode_refuses_what_encode_never_makes():
    c = codec.Codec(_Refs().ref_of, _Refs().deref)
    with pytest.raises(ValueError):
        c.decode([1, 2])  # lists always travel tagged
    with pytest.raises(ValueError, match="unknown value tag"):
        c.decode({"$": "no-such-tag", "v": 1})


def test_exceptions_cross_as_their_builtin_base_and_message():
    with pytest.raises(KeyError) as info:
        codec.raise_described(codec.describe_exception(KeyError("k")))
    assert type(info.value) is KeyError and info.value.args == ("'k'",)

    class Custom(ValueError):
        pass

    Custom.__module__ = "__main__"
    described = codec.describe_exception(Custom("bad"))
    assert described == {"module": "__main__", "name": Custom.__qualname__, "base": "ValueError",
                         "message": "bad"}
    with pytest.raises(ValueError, match="bad") as raised:
        codec.raise_described(described)
    assert type(raised.value) is not Custom  # a local stand-in, never the program's class
    assert type(raised.value).__name__ == "Custom"


def test_numpy_arrays_and_scalars_round_trip():
    np = pytest.importorskip("numpy")
    values = [np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1.5, np.nan, -np.inf]),
              np.array([True, False]), np.array([1 + 2j]), np.array(["a", "bc"]),
              np.array(7, dtype=np.int64), np.zeros((0, 3))]
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
        codec.Codec(_Refs().ref_of, _Refs().deref).decode(
            {"$": "ndarray", "dtype": "object; import os", "shape": [0], "v": {"$": "list", "v": []}})


def test_pandas_objects_are_rebuilt_from_data():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"n": [1, 2, 3], "x": [0.5, None, 2.0], "s": ["a", "b", None]},
                         index=pd.Index([10, 20, 30], name="id"))
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


# --------------------------------------------------------------------------- status


def _status(report: dict) -> str:
    capture = outcome.Capture(cap=100)
    return outcome.describe_result(1 << 8, "", capture, outcome.Capture(cap=100), report, None, "",
                                   0, 0.1, 100, 1.0, 512 << 20)["status"]


def test_oom_from_the_builtin_memory_error_itself_never_from_a_name():
    error = {"type": "MemoryError", "message": "", "line": 1, "frames": [], "locals": {}}
    assert _status({"error": error, "outputs": [], "memory_error": False}) == "error"
    assert _status({"error": error, "outputs": []}) == "error"
    assert _status({"error": error, "outputs": [], "memory_error": True}) == "oom"
