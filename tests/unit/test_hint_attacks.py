"""The student against the hints of issue 49, as an adversary: they write their own cell
(and so what the hint writer reads), edit it between hints, and talk to the class service
with their own token, naming any cell id. What leaves the tool for them must carry
nothing of the fix, and what the instructor set (``max_hints``) must hold. Each attack
here once worked and fails without its fix.
"""

from __future__ import annotations

import json
import threading

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.model import Candidate, ErrorInfo, ExecutionResult, Iteration, Run, Task, Verdict
from selfheal_jupyter.runner import hints
from selfheal_jupyter.service.log import RunLog
from selfheal_jupyter.service.runs import Refused, Request, Service
from selfheal_jupyter.service_client import wire
from selfheal_jupyter.teaching.policy import Policy
from selfheal_jupyter.teaching.session import HintSession
from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_service_units import AVERAGE, average_run, found

# AVERAGE's verified fix turns `//` into `/` on line 2.
NAMES_THE_FIX = "Think about `/` on line 2: work it out by hand."
NAMES_A_STRANGER = "Think about `%` on line 2: work it out by hand."


def what_leaves(reply: str) -> str:
    """The hint turn a student's kernel receives (level 1, the writer's prose scripted) as the wire carries it."""
    with ScriptedServer([Reply(reply, match="hint")] * 2) as model:
        llm = build_llm(SelfHeal(), Endpoint(model.base_url, "k", "scripted-model"))
        session = HintSession(AVERAGE, Policy(mode="hints", reveal_fix=False))
        found(session, average_run())
        turn = hints.next_turn(session, lambda _event: None, threading.Event(), llm=llm)
    assert turn.new is not None and not turn.new.prose  # the checks dropped it
    event = wire.HintsFinished(hints=turn.hints, total=turn.total, more=turn.more, note=turn.note, record=turn.record)
    return wire.event_line(event).decode()


def test_why_the_writers_words_were_dropped_tells_the_student_nothing_of_the_fix():
    """A student's comment can ask the hint writer to name a guess of theirs. The prose is
    dropped either way, but the reason went out with the hint (``Hint.check``, in the
    turn and in the record): "it names an operator the fix changes" for `/`, "it quotes
    code the cell does not hold" for `%` — an oracle that says which guess is the fix."""
    assert what_leaves(NAMES_THE_FIX) == what_leaves(NAMES_A_STRANGER)


def test_a_forged_cell_id_on_an_edited_cell_s_code_starts_no_fresh_count_after_a_restart(tmp_path):
    """The service counts a cell's hints in its log under the session's key (the cell's id)
    and each version's code. Once the service has no session in memory (a restart, or the
    student's own flood of cells pushing it out), a request that names a new id (or none)
    with the code of the cell's latest version was counted by that version's hints alone:
    two hints over two versions under ``max_hints: 2``, and a third was given."""
    from selfheal_jupyter.service.hints import cell_key

    log = RunLog(tmp_path / "log.jsonl")
    policy = Policy(mode="hints", max_hints=2)
    first = Task(prompt="", initial_code=AVERAGE)
    edited = Task(prompt="", initial_code=AVERAGE.replace("return", "total = sum(scores)\n    return", 1))
    for task in (first, edited):  # the lines Service._hint writes for a hint on each version
        log.write({"user": "ann", "entry": "hint", "hints": ["h"], "cell": cell_key(task), "session": "id:c1"})
    restarted = Service(SelfHeal(), policy=None, log=RunLog(tmp_path / "log.jsonl"))
    for request in (
        Request("hint", edited, "", {}, cell_id="c1"),
        Request("hint", edited, "", {}, cell_id="forged"),
        Request("hint", edited, "", {}),
        Request("hint", first, "", {}, cell_id="forged"),
    ):
        with pytest.raises(Refused, match="all 2 hints this cell may get"):
            restarted.admit("ann", policy, request)
    restarted.admit("bob", policy, Request("hint", edited, "", {}, cell_id="c1"))  # another student's count is theirs


def test_new_ids_for_one_cell_hold_no_more_of_the_service_s_memory():
    """A request that names a new id for a cell the service knows (by its code) made the id
    one more key of the session, and nothing ever dropped it: answered free once the cell's
    hints were given, a loop of them grew the service's memory without end. A cell now has
    one id at a time, the latest its kernel named."""
    from selfheal_jupyter.service.hints import HintSessions

    sessions = HintSessions()
    task = Task(prompt="", initial_code=AVERAGE)
    first = sessions.session("ann", task, cell_id="c0")
    for i in range(1, 1000):
        assert sessions.session("ann", task, cell_id=f"forged-{i}") is first
    assert len(sessions.cells["ann"].by_key) <= 2
    assert sessions.session("ann", task, cell_id="c0") is first  # its own id finds it still


MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
MEAN_FIXED = MEAN.replace("(len(xs) + 1)", "len(xs)")


def verified_run(code: str, fixed: str) -> Run:
    """A verified run of ``code``: round 0 fails on its assert (line 4), round 1 is ``fixed``."""
    failed = ExecutionResult(status="error", exit_code=1, error=ErrorInfo("AssertionError", "", 4))
    return Run(
        task=Task(prompt="", initial_code=code),
        iterations=[
            Iteration(0, Candidate(code, 0), failed, Verdict(False, ["it fails"], spec_checked=True)),
            Iteration(
                1,
                Candidate(fixed, 1),
                ExecutionResult(status="ok", exit_code=0),
                Verdict(True, spec_checked=True, verified_by=["your asserts"]),
            ),
        ],
        outcome="success",
    )


def test_a_fix_revealed_for_one_version_of_a_cell_reveals_no_later_version_s():
    """Under ``reveal_fix`` the third hint shows the verified fix, and the record then
    carries the whole run. "Revealed" was said of the cell, not of its code: after the
    reveal the student put another exercise's code in the same cell, and every answer
    for it — a free note, "that was the last hint" — carried that exercise's whole run,
    its fix in it, though no hint had revealed it (nor would a policy changed since)."""
    session = HintSession(AVERAGE, Policy(mode="hints", reveal_fix=True))
    found(session, average_run())
    for _ in range(3):
        turn = hints.next_turn(session, lambda _event: None, None)
    assert turn.new is not None and turn.new.diff and turn.record is not None
    assert "/ len(scores)" in json.dumps(turn.record.to_dict())  # this version's fix: revealed by the hint
    found(session, verified_run(MEAN, MEAN_FIXED))  # the same cell (its id), another exercise's code
    turn = hints.next_turn(session, lambda _event: None, None)
    assert turn.new is None and turn.note and turn.record is not None
    assert "return sum(xs) / len(xs)" not in json.dumps(turn.record.to_dict())
