"""Teaching mode in the service: the verified run and its fix stay here; a hint leaves.

A thin seam over teaching mode's own logic (``teaching/session.py``: a session per
student cell holding its verified run, its facts and the hints given; the next hint of a
level; the hints-mode record), so that the service and a kernel build hints the same
way. The record that leaves is built from the hints and the student's own run (round 0)
only: no candidate, output, diff, plan or fix, unless a level-3 hint under
``reveal_fix`` carries the diff.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..agents.hint_writer import HintWriter
from ..model import Hint, Run, Task
from ..teaching import small_fix
from ..teaching.policy import Policy
from ..teaching.session import HintSession, cell_key

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

    def session(self, user: str, task: Task, policy: Policy | None = None) -> HintSession:
        key = (user, cell_key(task))
        with self.lock:
            found = self.sessions.get(key)
            if found is None:
                found = self.sessions[key] = HintSession(task.initial_code or "", policy or Policy())
                while len(self.sessions) > self.keep:  # the oldest cell's run is found again if asked
                    self.sessions.popitem(last=False)
            self.sessions.move_to_end(key)
            if policy is not None:
                found.policy = policy  # the service reads the policy again when its file changes
            return found

    @staticmethod
    def found(session: HintSession, run: Run, loop: Any, cancel: threading.Event | None = None) -> None:
        """The session's run (with a verified fix or not), after the small-change search
        when the model's rounds verified nothing (as in a kernel)."""
        if not run.verified and run.outcome != "error":
            tried = run
            run = small_fix.search(tried, lambda code: loop.recheck(tried, code, cancel=cancel), cancel=cancel)
        session.attach(run)

    @staticmethod
    def turn(
        session: HintSession,
        policy: Policy,
        given_before: int,
        llm: Any,
        cancel: threading.Event | None,
        *,
        prose: bool = False,
    ) -> Turn:
        """The next hint of the session (``given_before``: hints this student already had
        for the cell, by the log; ``prose``: ``SelfHeal.hint_prose``)."""
        session.policy = policy
        total = session.total()
        if not session.failed:
            return Turn(
                session.hints, total, False, "Your cell runs and passes its checks: there is nothing to hint at.", None
            )
        if max(len(session.hints), given_before) >= total:
            note = f"That was the last hint for this cell ({total} of {total})."
            return Turn(session.hints, total, False, note, session.record())
        hint = session.next_hint(HintWriter(llm) if prose else None, cancel=cancel)
        return Turn(session.hints, total, session.more, "", session.record(), new=hint)
