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
from dataclasses import dataclass, field, replace
from typing import Any

from ..agents.hint_writer import HintWriter
from ..model import Hint, NotebookContext, Run, Task
from ..teaching import small_fix
from ..teaching.policy import Policy
from ..teaching.session import HintSession, Lines, cell_key

__all__ = ["HintSessions", "Turn", "cell_key", "light"]

KEEP = 50
"""Cells per student whose verified run the service keeps in memory (that student's least
recently asked go first: one student's flood of cells never pushes out another's)."""


@dataclass
class Turn:
    """What one hint request gave."""

    hints: list[Hint]
    total: int
    more: bool
    note: str
    record: Run | None
    new: Hint | None = None
    tokens: int = 0
    """Model tokens the hint writer spent on it (``hint_prose``): they count against the quota too."""


@dataclass
class HintSessions:
    """Every student cell's session, kept while the service runs (the hints given are
    also counted in the run log, so a restart gives no cell more hints)."""

    sessions: dict[str, OrderedDict[str, HintSession]] = field(default_factory=dict)
    """Each student's cells, their most recently asked last."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    keep: int = KEEP

    def session(self, user: str, task: Task, policy: Policy | None = None, *, line_offset: int = 0) -> HintSession:
        """The student's session for this cell; its next hints count lines from
        ``line_offset`` (the request's). The offset is not part of the key: a request that
        says another offset gets the same session, its run and its hints so far, not a
        fresh count of runs and hints."""
        key = cell_key(task)
        with self.lock:
            own = self.sessions.setdefault(user, OrderedDict())
            found = own.get(key)
            if found is None:
                found = own[key] = HintSession(task.initial_code or "", policy or Policy())
                while len(own) > self.keep:  # their oldest cell's run is found again if asked
                    own.popitem(last=False)
            own.move_to_end(key)
            if policy is not None:
                found.policy = policy  # the service reads the policy again when its file changes
            found.lines = Lines(line_offset)
            return found

    def ran(self, user: str, task: Task) -> bool:
        """Whether this student's cell has its run already (asked without keeping anything:
        a refused request leaves no session behind)."""
        with self.lock:
            own = self.sessions.get(user)
            found = own.get(cell_key(task)) if own is not None else None
            return found is not None and found.run is not None

    @staticmethod
    def found(session: HintSession, run: Run, loop: Any, cancel: threading.Event | None = None) -> None:
        """The session's run (with a verified fix or not, kept without the task's copies),
        after the small-change search when the model's rounds verified nothing (as in a kernel).
        Kept for the day, so without the notebook's context (its earlier cells): nothing of
        the session reads it, and the student's kernel has it."""
        if not run.verified and run.outcome != "error":
            tried = run
            run = small_fix.search(tried, lambda code: loop.recheck(tried, code, cancel=cancel), cancel=cancel)
        session.attach(replace(run, task=replace(light(run.task), context=None)))

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
        writer = HintWriter(llm) if prose else None
        hint = session.next_hint(writer, cancel=cancel)
        spent = writer.usage.prompt_tokens + writer.usage.completion_tokens if writer is not None else 0
        return Turn(session.hints, total, session.more, "", session.record(), new=hint, tokens=spent)


def light(task: Task) -> Task:
    """The task without its copies: as it goes back to the kernel (which has them), and as
    a session keeps it (a student's large values are not held for the day)."""
    context = task.context
    if context is not None:
        context = NotebookContext(entries=context.entries, prelude=context.prelude)
    return replace(task, inputs={}, context=context)
