"""The class service's parts that need no hub: the wire form, the fair queue, the class policy."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from datetime import datetime

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import SandboxError
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
from selfheal_jupyter.runner import hints
from selfheal_jupyter.sandbox.serialize import Pickled
from selfheal_jupyter.service.hints import HintSessions, kept
from selfheal_jupyter.service.queue import FairQueue, QueueFull
from selfheal_jupyter.service.runs import Request
from selfheal_jupyter.service_client import wire
from selfheal_jupyter.service_client.client import ServiceClient
from selfheal_jupyter.teaching.policy import Policy, parse_class


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
    assert student.source == "the instructor's policy (p.json) for cs101 and notebooks exam/*.ipynb"
    exam = policy.resolve({"cs101"}, "a.ipynb", during)
    assert exam.mode == "off" and "midterm" in exam.source
    assert policy.resolve({"other"}, "a.ipynb", during).mode == "full"


def test_a_broken_class_policy_closes_everything():
    with pytest.raises(ValueError, match="ends before it starts"):
        parse_class({"windows": [{"start": "2026-12-01T11:00", "end": "2026-12-01T09:00"}]}, source="s")
    with pytest.raises(ValueError, match="unknown key"):
        parse_class({"groups": {"g": {"mode": "hints", "fix": True}}}, source="s")


def test_a_notebook_path_the_student_names_only_narrows_what_their_groups_allow():
    """The notebook's path is the student's word (their kernel reports it): claiming a path
    whose rule says more must not give a student more than their course allows."""
    policy = parse_class(
        {
            "mode": "full",
            "groups": {"cs101": {"mode": "hints", "reveal_fix": False, "max_hints": 2, "quota": {"runs": 3}}},
            "notebooks": {"lab/*": {"mode": "full", "reveal_fix": True, "max_hints": 5, "quota": {"runs": 9}}},
            "windows": [
                {
                    "name": "lab",
                    "start": "2026-12-01T09:00",
                    "end": "2026-12-01T11:00",
                    "mode": "full",
                    "notebooks": ["*"],
                }
            ],
        },
        source="p",
    )
    claimed = policy.resolve({"cs101"}, "lab/mine.ipynb", datetime(2026, 12, 1, 10, 0))
    assert (claimed.mode, claimed.reveal_fix, claimed.max_hints, claimed.quota.runs) == ("hints", False, 2, 3)
    tighter = parse_class({"mode": "full", "notebooks": {"hw/*": {"mode": "hints", "max_hints": 1}}}, source="p")
    assert tighter.resolve(set(), "hw/1.ipynb", datetime(2026, 12, 1)).mode == "hints"


@pytest.mark.parametrize(
    "rule",
    [
        {"notebooks": {"lab/*": {"mode": "full"}}},
        {"notebooks": {"lab/*": {"reveal_fix": True}}},
        {"notebooks": {"lab/*": {"max_hints": 4}}},
        {"notebooks": {"lab/*": {"quota": {"runs": 11}}}},
        {"windows": [{"start": "2026-12-01T09:00", "end": "2026-12-01T11:00", "mode": "full", "notebooks": ["x*"]}]},
    ],
)
def test_a_notebook_rule_that_gives_more_than_the_class_is_refused_saying_why(rule):
    base = {"mode": "hints", "reveal_fix": False, "max_hints": 3, "quota": {"runs": 10}}
    with pytest.raises(ValueError, match="gives more than the whole class"):
        parse_class({**base, **rule}, source="p")


def test_one_students_flood_of_cells_never_costs_another_student_their_verified_run(tmp_path):
    """Hint sessions were one list for the class, and a refused request made one: a student
    with no runs left could push every other student's verified run out (their next hint
    then needed a run their quota no longer had)."""
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Refused, Request, Service
    from selfheal_jupyter.teaching.policy import Policy, Quota

    service = Service(SelfHeal(), policy=None, log=RunLog(tmp_path / "log.jsonl"))
    service.hints.keep = 10
    policy = Policy(mode="hints", quota=Quota(runs=1))
    context = NotebookContext([ContextEntry("df", "value", "DataFrame")], values={"df": b"x" * 1000})
    bobs = Task(prompt="", initial_code="def f():\n    return 1\n\nassert f() == 2\n", context=context)
    service.hints.session("bob", bobs).attach(kept(Run(task=bobs)))
    for user in ("ann", "bob"):
        service.log.write({"user": user, "entry": "hint", "runs": 1})
    for i in range(3 * service.hints.keep):
        with pytest.raises(Refused, match="runs of today's quota"):
            service.admit("ann", policy, Request("hint", Task(prompt="", initial_code=f"assert {i} < 0\n"), "", {}))
    service.admit("bob", policy, Request("hint", bobs, "", {}))  # no run needed: bob's is still there
    held = service.hints.session("bob", bobs).run
    assert held is not None and held.task.context is None  # nor does the service hold bob's copies


# ====================================================================== hints' line numbers
AVERAGE = "def average(scores):\n    return sum(scores) // len(scores)\n\nassert average([1, 2]) == 1.5\n"
AVERAGE_FIXED = AVERAGE.replace("//", "/")


def average_run() -> Run:
    """A verified run of AVERAGE: round 0 fails on its assert (line 4), round 1 changes line 2."""
    task = Task(prompt="", initial_code=AVERAGE)
    failed = ExecutionResult(status="error", exit_code=1, error=ErrorInfo("AssertionError", "", 4))
    fixed = ExecutionResult(status="ok", exit_code=0)
    return Run(
        task=task,
        iterations=[
            Iteration(0, Candidate(AVERAGE, 0), failed, Verdict(False, ["it fails"], spec_checked=True)),
            Iteration(
                1, Candidate(AVERAGE_FIXED, 1), fixed, Verdict(True, spec_checked=True, verified_by=["your asserts"])
            ),
        ],
        outcome="success",
    )


class Ran:
    """A loop whose run of the cell is already known (the hint flow reads only its record)
    and that runs nothing more: the two runs' values are not compared here."""

    def __init__(self, run: Run) -> None:
        self.done = run

    def run(self, task: Task, *, on_event=None, cancel=None) -> Run:
        return self.done

    def execute(self, run: Run, code: str, *, prelude: str = "", cancel=None) -> ExecutionResult:
        raise SandboxError("no sandbox in the unit lane")


def found(session, run: Run) -> None:
    """The service's hint flow's first step for ``run``: the session keeps what the service keeps."""
    hints.find(session, Ran(run), run.task, lambda _event: None, threading.Event(), keep=kept)


def test_a_hint_request_carries_the_hint_lines_offset_and_the_service_reads_only_a_small_whole_number():
    client = ServiceClient("http://127.0.0.1:9/services/selfheal/", "token")
    task = Task(prompt="", initial_code=AVERAGE)
    body = json.loads(json.dumps(client.request("hint", task, SelfHeal(), line_offset=1)))
    assert Request.parse(body).line_offset == 1
    assert "line_offset" not in client.request("heal", task, SelfHeal())
    assert Request.parse({**body, "line_offset": None}).line_offset == 0
    del body["line_offset"]
    assert Request.parse(body).line_offset == 0  # an older kernel's request
    for bad in (-1, wire.MAX_LINE_OFFSET + 1, 10**40, True, 1.0, "1", [1], {"n": 1}):
        with pytest.raises(wire.WireError, match="line_offset"):
            Request.parse({**body, "line_offset": bad})


def test_the_services_hints_count_lines_as_the_students_editor_and_another_offset_is_the_same_cell():
    sessions = HintSessions()
    task = Task(prompt="", initial_code=AVERAGE)
    policy = Policy(mode="hints", reveal_fix=False)
    session = sessions.session("ann", task, policy, line_offset=1)  # the cell's first line is %%hint
    found(session, average_run())
    first = hints.next_turn(session, lambda _event: None, None).new
    assert first is not None
    # the assert is the code's line 4 and the fix changes its line 2: the editor shows 5 and 3
    assert "It fails on line 5:" in first.text and "line 3: `return sum(scores) // len(scores)`" in first.text
    # a request that says another offset is the same cell: its run and hints go on, no fresh count
    again = sessions.session("ann", task, policy, line_offset=7)
    assert again is session and again.ran and len(again.hints) == 1
    second = hints.next_turn(again, lambda _event: None, None, given_before=1).new
    assert second is not None and second.level == 2 and "line 9" in second.text
    assert sessions.session("bob", task, policy, line_offset=1) is not session


class _Stream:
    def __init__(self) -> None:
        self.shut = False

    def closed(self) -> bool:
        return self.shut

    def close(self) -> None:
        self.shut = True


def test_past_the_limit_a_new_connection_pushes_out_the_oldest_idle_never_a_held_one():
    from selfheal_jupyter.service.connections import MOST, Connections

    assert Connections.for_this_process().most <= MOST  # the file limit may be a million: memory is not
    connections = Connections(3)
    student, *flood = [_Stream() for _ in range(6)]
    connections.accepted(student)
    connections.hold(student)  # the hub vouched for its request
    for stream in flood:
        connections.accepted(stream)
    assert not student.shut and [s.shut for s in flood] == [True, True, True, False, False]
    connections.release(student)  # its request ended: idle again, the newest of the idle
    connections.accepted(_Stream())
    assert not student.shut and flood[3].shut


def test_a_hint_session_keeps_its_run_without_the_notebook_s_context():
    context = NotebookContext(prelude="import numpy as np\n" + "# earlier cells\n" * 10_000)
    own = Iteration(0, Candidate("x = 1\n", 0), ExecutionResult(status="ok", exit_code=0), Verdict(True, ["ran"]))
    run = Run(task=Task(prompt="", initial_code="x = 1\n", context=context), iterations=[own], outcome="error")
    sessions = HintSessions()
    session = sessions.session("s1", run.task)
    found(session, run)
    assert session.run is not None and session.run.task.context is None


def test_a_student_refused_in_a_loop_grows_the_log_by_a_bounded_amount(tmp_path):
    """A refusal costs a student nothing and each was a log line holding their cell: a loop
    of refused requests (200 KB cells, an exam's "off") grew the run log, and the
    instructor's page's copy of it, without end."""
    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import REFUSALS_LOGGED, Refused, Service

    service = Service(SelfHeal(), policy=None, log=RunLog(tmp_path / "log.jsonl"))
    policy = Policy(mode="off")
    for i in range(3 * REFUSALS_LOGGED):
        request = Request("hint", Task(prompt="", initial_code=f"assert {i} < 0\n"), "exam.ipynb", {})
        with pytest.raises(Refused) as refused:
            service.admit("ann", policy, request)
        service.refused("ann", request, policy, refused.value)
    service.refused("bob", request, policy, refused.value)
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(lines) == REFUSALS_LOGGED + 1 and json.loads(lines[-1])["user"] == "bob"
    assert RunLog(tmp_path / "log.jsonl").refused_today("ann") == REFUSALS_LOGGED  # a restart counts them too


# ====================================================================== what a student is told
SERVER_PATH = re.compile(r"(?:^|[\s(\"'`=])/(?:[\w.+-]+/)+[\w.+-]*")
"""An absolute path (``/etc/selfheal/policy.json``, ``/var/run/docker.sock``)."""


def test_no_refusal_a_student_meets_names_a_path_on_the_server(tmp_path):
    """Every refusal named the policy file as ``the instructor's policy (/…/policy.json)``,
    and a broken file's reason (an OSError) and the engine's start failure said more paths:
    a student is told which rule says no (a course, an exam window), never where the
    service keeps its files."""
    from selfheal_jupyter.service.app import State, unready
    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Refused, Service, to_student

    folder = tmp_path / "srv" / "selfheal"
    folder.mkdir(parents=True)
    path = folder / "policy.json"
    now = datetime.now()
    window = {"name": "Midterm", "start": (now.replace(year=now.year - 1)).isoformat(), "end": "2999-01-01T00:00"}
    rules = {
        "mode": "full",
        "max_hints": 1,
        "quota": {"runs": 1, "hints": 1, "tokens": 10},
        "groups": {"cs101": {"mode": "hints"}, "cs102": {"mode": "off"}},
        "notebooks": {"quiz/*": {"mode": "off"}},
        "windows": [{**window, "groups": ["exam"]}],
    }
    path.write_text(json.dumps(rules))
    log = RunLog(tmp_path / "log.jsonl")
    service = Service(SelfHeal(), policy=str(path), log=log)
    task = Task(prompt="", initial_code="assert 1 < 0\n")
    said: list[str] = []

    def refusal(groups: set[str], entry: str = "hint", notebook: str = "a.ipynb") -> str:
        policy = service.policy_for(groups, notebook)
        with pytest.raises(Refused) as refused:
            service.admit("ann", policy, Request(entry, task, notebook, {}))
        said.append(str(refused.value))
        return said[-1]

    assert "your instructor's policy for cs101" in refusal({"cs101"}, "heal")
    assert "your instructor's policy for cs102" in refusal({"cs102"})
    assert "notebooks quiz/*" in refusal(set(), notebook="quiz/1.ipynb")
    assert "the exam window “Midterm” until" in refusal({"exam"})
    log.write({"user": "ann", "entry": "hint", "runs": 1, "hints": ["h"], "tokens": 10, "cell": "assert 1 < 0\0"})
    refusal(set())  # the quotas, and the cell's hints
    path.write_text("{ broken")
    assert "your instructor's policy cannot be used now" in refusal(set())
    path.unlink()
    path.mkdir()  # unreadable: an OSError names the path
    assert "cannot be used" in refusal(set())
    said.append(unready(State(service, queue=None, hub_auth=None, instructors="i", problem=f"no engine at {path}")))
    said.append(to_student(SandboxError("Docker is not reachable at /var/run/docker.sock")))
    for message in said:
        assert str(tmp_path) not in message and not SERVER_PATH.search(message), message
        assert "\n" not in message


# ====================================================================== a cell across its edits
def test_a_cells_hints_follow_its_id_across_edits_and_no_key_starts_a_fresh_count(tmp_path):
    """The service found a cell by its code: an edited cell (a comment, a space in a name)
    was a new cell with a fresh count of hints under ``max_hints``. Now the cell is its id,
    an edit keeps its session, a new id on old code finds it too, and the log counts the
    hints under the cell's key, so a restart starts no fresh count either."""
    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Refused, Service

    service = Service(SelfHeal(), policy=None, log=RunLog(tmp_path / "log.jsonl"))
    policy = Policy(mode="hints", max_hints=2)
    first = Task(prompt="", initial_code=AVERAGE)
    session = service.hints.session("ann", first, policy, cell_id="cell-1")
    found(session, average_run())
    hints.next_turn(session, lambda _event: None, None)
    service.log.write({"user": "ann", "entry": "hint", "hints": ["h"], "cell": "x\0", "session": session.key})
    edited = Task(prompt="", initial_code=AVERAGE.replace("return", "return  # mine\n    return", 1))
    assert service.hints.session("ann", edited, policy, cell_id="cell-1") is session  # the same cell, edited
    assert service.hints.session("ann", first, policy, cell_id="cell-2") is session  # another id, the same code
    service.log.write({"user": "ann", "entry": "hint", "hints": ["h"], "cell": "y\0", "session": session.key})
    for request in (
        Request("hint", edited, "", {}, cell_id="cell-1"),
        Request("hint", first, "", {}, cell_id="cell-9"),
        Request("hint", first, "", {}),
    ):
        with pytest.raises(Refused, match="all 2 hints this cell may get"):
            service.admit("ann", policy, request)
    restarted = Service(SelfHeal(), policy=None, log=RunLog(tmp_path / "log.jsonl"))
    with pytest.raises(Refused, match="all 2 hints"):
        restarted.admit("ann", policy, Request("hint", edited, "", {}, cell_id="cell-1"))
    client = ServiceClient("http://127.0.0.1:9/services/selfheal/", "token")
    body = json.loads(json.dumps(client.request("hint", first, SelfHeal(), line_offset=1, cell_id="cell-1")))
    assert Request.parse(body).cell_id == "cell-1"
    for bad in ("x" * (wire.MAX_CELL_ID + 1), "a\nb", 7, None):
        with pytest.raises(wire.WireError, match="cell_id"):
            Request.parse({**body, "cell_id": bad})
