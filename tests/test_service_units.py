"""The class service's parts that need no hub: the wire form, the fair queue, the class policy."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import pytest

from selfheal_jupyter.loop.events import FailureExplained, ModelWaiting, RunStarted, VerdictReady, Waiting
from selfheal_jupyter.model import (
    Candidate,
    ColumnInfo,
    ContextEntry,
    DataCheck,
    ErrorInfo,
    ExecutionResult,
    Explanation,
    Iteration,
    LineEdit,
    NotebookContext,
    Run,
    Task,
    Verdict,
)
from selfheal_jupyter.sandbox.serialize import Pickled
from selfheal_jupyter.service.queue import FairQueue, QueueFull
from selfheal_jupyter.service_client import wire
from selfheal_jupyter.teaching.policy import parse_class


def test_events_travel_and_come_back_as_the_same_data():
    result = ExecutionResult(status="error", exit_code=1, error=ErrorInfo("ZeroDivisionError", "division by zero", 2))
    it = Iteration(1, Candidate("print(1/0)", 1), result, Verdict(False, ["it fails"]))
    event = VerdictReady(it)
    assert wire.read_event(wire.event_line(event)) == event
    assert wire.read_event(wire.event_line(Waiting(3))).text() == "waiting — 3 runs ahead of yours"
    # the instant explanation and the model's queue travel too (a %%agent / %%heal run in the service)
    explained = Explanation("KeyError: 'Region'", 1, "df['Region']", ["`Region` is not a column of `df`; `region` is."])
    explained.edits.append(LineEdit(1, "'Region'", "'region'"))
    for other in (FailureExplained(0, explained), ModelWaiting(2)):
        assert wire.read_event(wire.event_line(other)) == other
    task = Task(prompt="q", data_checks=[DataCheck("from your data: each `m`", [["jan", "north"]])])
    task.context = NotebookContext(
        entries=[
            ContextEntry("df", "value", "DataFrame 2×1", columns=[ColumnInfo("date", "str", ["str"])], shape=[2, 1])
        ]
    )
    back = wire.decode(Task, wire.encode(task))
    assert back.data_checks == task.data_checks and back.context.entries[0].columns == task.context.entries[0].columns


def test_the_copies_travel_as_bytes_and_are_never_unpickled():
    class Unpicklable:
        def __reduce__(self):  # opening it would run this: the service must never
            raise AssertionError("unpickled")

    context = NotebookContext(
        [ContextEntry("df", "value", "DataFrame")], prelude="import os", values={"df": b"\x80\x05N."}
    )
    task = Task(prompt="p", inputs={"n": 3}, context=context)
    back = wire.decode(Task, json.loads(json.dumps(wire.encode(task))))
    assert back.context.values == {"df": b"\x80\x05N."}
    assert isinstance(back.inputs["n"], Pickled) and back.inputs["n"].type == "int"
    assert RunStarted(Run(task=back)).run.task.inputs["n"].data  # still bytes


def test_the_reader_builds_no_class_the_data_names():
    with pytest.raises(wire.WireError):
        wire.read_event(json.dumps({"event": "os.system", "data": {}}))
    with pytest.raises(wire.WireError):  # an unknown key is refused, not ignored
        wire.decode(Task, {"prompt": "p", "__class__": "x"})
    with pytest.raises(wire.WireError):
        wire.decode(Task, {"prompt": 3})


def test_students_are_served_in_turn_one_run_each_at_a_time():
    async def scenario() -> None:
        queue = FairQueue(slots=1, waiting_per_user=3)
        a1 = queue.submit("ann")
        a2, a3 = queue.submit("ann"), queue.submit("ann")  # a flood
        b1, c1 = queue.submit("bob"), queue.submit("cat")
        assert a1.started.is_set() and not a2.started.is_set()
        queue.submit("ann")  # a third waiting run: the most one student may have waiting
        with pytest.raises(QueueFull):
            queue.submit("ann")
        # bob and cat go before ann's second run
        assert (queue.ahead(b1), queue.ahead(c1), queue.ahead(a2)) == (0, 1, 2)
        order = []
        for _ in range(4):
            running = next(iter(queue.running.values()))
            queue.release(running)
            order.append(next(iter(queue.running.values())).user)
        assert order == ["bob", "cat", "ann", "ann"]
        assert a3.started.is_set()

    asyncio.run(scenario())


def test_the_class_policy_applies_groups_notebooks_then_exam_windows():
    policy = parse_class(
        {
            "mode": "full",
            "quota": {"runs": 5},
            "groups": {"cs101": {"mode": "hints", "max_hints": 2}},
            "notebooks": {"exam/*.ipynb": {"reveal_fix": False}},
            "windows": [
                {"name": "midterm", "start": "2026-12-01T09:00", "end": "2026-12-01T11:00", "groups": ["cs101"]}
            ],
        },
        source="the instructor's policy (p.json)",
    )
    before = datetime(2026, 12, 1, 8, 0)
    during = datetime(2026, 12, 1, 10, 0)
    assert policy.resolve(set(), "a.ipynb", before).mode == "full"
    student = policy.resolve({"cs101"}, "exam/q1.ipynb", before)
    assert (student.mode, student.max_hints, student.reveal_fix, student.quota.runs) == ("hints", 2, False, 5)
    assert "group cs101" in student.source and "notebooks exam/*.ipynb" in student.source
    exam = policy.resolve({"cs101"}, "a.ipynb", during)
    assert exam.mode == "off" and "midterm" in exam.source
    assert policy.resolve({"other"}, "a.ipynb", during).mode == "full"


def test_a_broken_class_policy_closes_everything():
    with pytest.raises(ValueError, match="ends before it starts"):
        parse_class({"windows": [{"start": "2026-12-01T11:00", "end": "2026-12-01T09:00"}]}, source="s")
    with pytest.raises(ValueError, match="unknown key"):
        parse_class({"groups": {"g": {"mode": "hints", "fix": True}}}, source="s")
