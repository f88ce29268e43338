"""The one wire form between a kernel and the class service: the data model and the
loop's events as JSON, and back.

Why one type-driven codec: a run's events carry the data model's dataclasses (``Run``,
``Iteration``, ``ExecutionResult``...), and the kernel renders them exactly as it renders a
local loop's. Each side decodes by the dataclass's own annotations: a field of the
wrong type, an unknown key or an unknown event is refused (:class:`WireError`), and no
class is ever named by the data. Bytes (the notebook context's pickled copies) travel
as base64 and stay bytes: nothing here unpickles them. ``Task.inputs`` travel as
:class:`~selfheal_jupyter.sandbox.serialize.Pickled` values with what their owner said
they are (type and summary, for the prompt).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, Literal, Union

from ..loop import events as loop_events
from ..model import Hint, Run, Task
from ..sandbox.serialize import Pickled


class WireError(ValueError):
    """A message that does not fit the wire form (what and where)."""


MAX_LINE_OFFSET = 100
"""The most lines a request may say sit above the code in the student's cell (1 for the
``%%hint`` line): hints count lines as the student's editor shows them."""


def read_line_offset(data: Any) -> int:
    """A request's ``line_offset``: a small non-negative whole number (0 when absent)."""
    if data is None:
        return 0
    if type(data) is not int or not 0 <= data <= MAX_LINE_OFFSET:
        raise WireError(f"line_offset should be a whole number from 0 to {MAX_LINE_OFFSET}")
    return data


MAX_CELL_ID = 200
"""The longest cell id a request may give (JupyterLab's are 36-character UUIDs)."""


def read_cell_id(body: dict[str, Any]) -> str:
    """A request's ``cell_id``: one printable line ("" when absent)."""
    data = body.get("cell_id", "")
    if not isinstance(data, str) or len(data) > MAX_CELL_ID or not data.isprintable():
        raise WireError(f"cell_id should be one printable line of at most {MAX_CELL_ID} characters")
    return data


# ====================================================================== the codec
def encode(value: Any) -> Any:
    """A dataclass (or list/dict/scalar of them) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if isinstance(value, Task):
            return _encode_task(value)
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise WireError(f"a {type(value).__name__} cannot travel")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(kind: Any, data: Any, where: str = "message") -> Any:
    """``data`` read as ``kind`` (a dataclass or a typing form over them)."""
    origin = typing.get_origin(kind)
    if kind is Any:
        raise WireError(f"{where}: a value of no declared type cannot travel")
    if origin in (Union, types.UnionType):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return decode(option, data, where)
            except WireError as exc:
                errors.append(str(exc))
        raise WireError("; ".join(errors) or f"{where}: null is not allowed")
    if origin is Literal:
        if data not in typing.get_args(kind):
            raise WireError(f"{where}: {str(data)[:40]!r} is not one of {typing.get_args(kind)}")
        return data
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise WireError(f"{where} should be a list")
        (item,) = typing.get_args(kind)[:1] or (Any,)
        return [decode(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise WireError(f"{where} should be an object")
        _, item = typing.get_args(kind)
        return {str(k): decode(item, v, f"{where}[{k!r:.40}]") for k, v in data.items()}
    if kind is Task:
        return _decode_task(data, where)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _decode_dataclass(kind, data, where)
    if kind is bytes:
        if not isinstance(data, str):
            raise WireError(f"{where} should be base64 text")
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise WireError(f"{where} is not base64") from None
    if kind is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if kind in (str, int, float, bool) and type(data) is kind:
        return data
    raise WireError(f"{where} should be {getattr(kind, '__name__', kind)}, not {type(data).__name__}")


def _decode_dataclass(kind: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise WireError(f"{where} should be an object")
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise WireError(f"{where}: unknown key {unknown[0]!r}")
    hints = _hints(kind)
    values = {name: decode(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    try:
        return kind(**values)
    except TypeError as exc:  # a required field is missing
        raise WireError(f"{where}: {exc}") from None


# ---------------------------------------------------------------- the task's inputs
def _encode_task(task: Task) -> dict[str, Any]:
    """The task; each input as a pickle (pickled here, on the owner's side) with its
    type and summary as the owner described it."""
    from ..agents.inputs import describe_input

    data = {f.name: encode(getattr(task, f.name)) for f in dataclasses.fields(task) if f.name != "inputs"}
    inputs = {}
    for name, value in task.inputs.items():
        if isinstance(value, Pickled):
            inputs[name] = {"type": value.type, "summary": value.summary, "pickle": encode(value.data)}
            continue
        described = describe_input(name, value)
        inputs[name] = {
            "type": described.type,
            "summary": described.summary,
            "pickle": encode(Pickled.of(name, value).data),
        }
    data["inputs"] = inputs
    return data


def _decode_task(data: Any, where: str) -> Task:
    if not isinstance(data, dict):
        raise WireError(f"{where} should be an object")
    rest = {k: v for k, v in data.items() if k != "inputs"}
    task = _decode_dataclass(Task, rest, where)
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise WireError(f"{where}.inputs should be an object")
    for name, item in inputs.items():
        if not isinstance(item, dict) or set(item) != {"type", "summary", "pickle"}:
            raise WireError(f"{where}.inputs[{name!r:.40}] should hold type, summary and pickle")
        task.inputs[str(name)] = Pickled(
            decode(bytes, item["pickle"], f"{where}.inputs.pickle"),
            type=decode(str, item["type"], f"{where}.inputs.type"),
            summary=decode(str, item["summary"], f"{where}.inputs.summary"),
        )
    return task


# ====================================================================== the stream
@dataclasses.dataclass
class Accepted:
    """The service took the request: the run's id (for Stop)."""

    run_id: str


@dataclasses.dataclass
class Working:
    """A hint turn's progress, in words (nothing of a candidate)."""

    text: str


@dataclasses.dataclass
class Finished:
    """A full run's record (the fix worked out)."""

    run: Run


@dataclasses.dataclass
class HintsFinished:
    """A hint turn's end: the cell's hints so far, how many it can get, whether another
    may be asked for, a note, and the hints-mode record (hints and the student's own
    run only)."""

    hints: list[Hint]
    total: int
    more: bool
    note: str
    record: Run | None = None


@dataclasses.dataclass
class Failed:
    """The request ended without a record: what happened, in one line."""

    message: str
    kind: str = "error"
    """``error``, ``policy`` (the instructor's policy refused it) or ``quota``."""


STREAM_EVENTS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        loop_events.RunStarted,
        loop_events.PlanReady,
        loop_events.TokensStreamed,
        loop_events.CandidateReady,
        loop_events.ExecutionStarted,
        loop_events.ExecutionDone,
        loop_events.FailureExplained,
        loop_events.ModelWaiting,
        loop_events.VerdictReady,
        loop_events.RunFinished,
        Accepted,
        loop_events.Waiting,
        loop_events.CheckingFix,
        Working,
        Finished,
        HintsFinished,
        Failed,
    )
}
"""Every event a run's stream may carry, by name (the only classes the reader builds)."""


def event_line(event: Any) -> bytes:
    """One event as a line of the stream (JSON, newline-terminated)."""
    name = type(event).__name__
    if STREAM_EVENTS.get(name) is not type(event):
        raise WireError(f"{name} is no event of the stream")
    return json.dumps({"event": name, "data": encode(event)}, separators=(",", ":")).encode() + b"\n"


def read_event(line: bytes | str) -> Any:
    """The event a line of the stream holds; :class:`WireError` for anything else."""
    try:
        data = json.loads(line)
    except ValueError:
        raise WireError("a line of the stream is not JSON") from None
    if not isinstance(data, dict) or set(data) != {"event", "data"}:
        raise WireError("a line of the stream is no event")
    kind = STREAM_EVENTS.get(data["event"]) if isinstance(data["event"], str) else None
    if kind is None:
        raise WireError(f"unknown event {str(data['event'])[:40]!r}")
    return decode(kind, data["data"], data["event"])
