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
from dataclasses import dataclass, field, replace
from typing import Any

from ..agents.hint_writer import HintWriter
from ..model import Hint, NotebookContext, Run, Task
from ..teaching.policy import Policy
from ..teaching.session import Cells, HintSession, cell_key, examine

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

    cells: dict[str, Cells] = field(default_factory=dict)
    """Each student's cells, by the id their kernel gives a cell, else by its code."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    keep: int = KEEP

    def session(
        self, user: str, task: Task, policy: Policy | None = None, *, line_offset: int = 0, cell_id: str = ""
    ) -> HintSession:
        """The student's session for this cell; its next hints count lines from
        ``line_offset`` (the request's). Neither the offset nor the code is the cell's
        identity when the kernel names the cell: an edit, or a request that says another
        offset, gets the same session, its hints so far, not a fresh count of hints."""
        with self.lock:
            own = self.cells.setdefault(user, Cells(self.keep))
            return own.open(cell_id, task, policy or Policy(), line_offset=line_offset)

    def key(self, user: str, task: Task, cell_id: str = "") -> str:
        """What this student's cell is known by (asked without keeping anything: a refused
        request leaves no session behind)."""
        with self.lock:
            own = self.cells.get(user)
            found = own.find(cell_id, task) if own is not None else None
        if found is not None:
            return found.key
        return f"id:{cell_id}" if cell_id else cell_key(task)

    def needs_run(self, user: str, task: Task, cell_id: str = "") -> bool:
        """Whether this student's cell has no run of this code yet (asked without keeping anything)."""
        with self.lock:
            own = self.cells.get(user)
            found = own.find(cell_id, task) if own is not None else None
            return found is None or found.needs_run(task)

    @staticmethod
    def found(session: HintSession, run: Run, loop: Any, cancel: threading.Event | None = None) -> None:
        """What the session learns from the run (as in a kernel: the small-change search,
        the two runs compared, what the edit changed), the run then kept without the task's
        copies. Kept for the day, so without the notebook's context (its earlier cells):
        nothing of the session reads it, and the student's kernel has it."""
        run = examine(session, run, loop, cancel)
        session.keep(replace(run, task=replace(light(run.task), context=None)))

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
        note = session.take_note(spent=given_before >= total)
        if note:
            return Turn(session.hints, total, False, note, session.record() if session.failed else None)
        writer = HintWriter(llm) if prose else None
        hint = session.next_hint(writer, cancel=cancel)
        spent = writer.usage.prompt_tokens + writer.usage.completion_tokens if writer is not None else 0
        return Turn(session.hints, session.total(), session.more, "", session.record(), new=hint, tokens=spent)


def light(task: Task) -> Task:
    """The task without its copies: as it goes back to the kernel (which has them), and as
    a session keeps it (a student's large values are not held for the day)."""
    context = task.context
    if context is not None:
        context = NotebookContext(entries=context.entries, prelude=context.prelude)
    return replace(task, inputs={}, context=context)
