"""Teaching mode in the service: the verified run and its fix stay here; a hint leaves.

A thin seam over teaching mode's own logic (a session per student cell: its verified
run, its facts and the hints given; the next hint of a level; the hints-mode record),
so that the service and a kernel build hints the same way. The record that leaves is
built from the hints and the student's own run (round 0) only: no candidate, output,
diff, plan or fix, unless a level-3 hint under ``reveal_fix`` carries the diff.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from ..agents.hint_facts import facts_of
from ..agents.hint_writer import HintWriter
from ..model import Hint, Run, Task
from ..notebook.teaching import HintComposer, HintSession, cell_key
from ..teaching.policy import Policy

__all__ = ["HintSessions", "Turn", "cell_key"]

KEEP = 2000
"""Student cells whose verified run the service keeps in memory (the least recently asked go first)."""


@dataclass
class Turn:
    """What one hint request gave."""

    hints: list[Hint]
    total: int
    more: bool
    note: str
    record: Run | None
    new: Hint | None = None


@dataclass
class HintSessions:
    """Every student cell's session, kept while the service runs (the hints given are
    also counted in the run log, so a restart gives no cell more hints)."""

    sessions: OrderedDict[tuple[str, str], HintSession] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    keep: int = KEEP

    def session(self, user: str, task: Task) -> HintSession:
        key = (user, cell_key(task))
        with self.lock:
            found = self.sessions.get(key)
            if found is None:
                found = self.sessions[key] = HintSession(cell=task.initial_code or "")
                while len(self.sessions) > self.keep:  # the oldest cell's run is found again if asked
                    self.sessions.popitem(last=False)
            self.sessions.move_to_end(key)
            return found

    @staticmethod
    def found(session: HintSession, run: Run, loop: Any) -> None:
        """The session's run (with a verified fix or not) and its facts."""
        session.run, session.loop, session.facts = run, loop, facts_of(run)

    @staticmethod
    def turn(session: HintSession, policy: Policy, given_before: int, llm: Any, cancel: threading.Event | None) -> Turn:
        """The next hint of the session (``given_before``: hints this student already had
        for the cell, by the log)."""
        total = session.total(policy)
        if not session.failed:
            return Turn(
                session.hints, total, False, "Your cell runs and passes its checks: there is nothing to hint at.", None
            )
        level = max(len(session.hints), given_before) + 1
        if level > total:
            note = f"That was the last hint for this cell ({total} of {total})."
            return Turn(session.hints, total, False, note, record(session))
        hint = HintComposer(HintWriter(llm), policy).compose(level, session, cancel)
        session.hints.append(hint)
        more = level < total
        return Turn(session.hints, total, more, "", record(session), new=hint)


def record(session: HintSession) -> Run | None:
    """The hints-mode record: the hints and the student's own run (round 0) only."""
    run = session.run
    if run is None:
        return None
    # The tool's explanation of the failure may name the fix (a close column and its
    # edit), and the feedback holds it too: neither leaves the service in hints mode.
    own = [replace(it, explanation=None, feedback="") for it in run.iterations if it.index == 0]
    return Run(task=run.task, iterations=own, model=run.model, hints=list(session.hints))
