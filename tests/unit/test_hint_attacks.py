"""The student against the hints of issue 49, as an adversary: they write their own cell
(and so what the hint writer reads), edit it between hints, and talk to the class service
with their own token, naming any cell id. What leaves the tool for them must carry
nothing of the fix, and what the instructor set (``max_hints``) must hold. Each attack
here once worked and fails without its fix.
"""

from __future__ import annotations

import threading

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.runner import hints
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
