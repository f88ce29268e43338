"""Teaching mode in the service: each student cell's session; the verified run and its
fix stay here, a hint leaves.

The hint flow is the runner's (:mod:`selfheal_jupyter.runner.hints`, as in a kernel);
here is what only the service has: every student's sessions (:class:`HintSessions`) and
what a session keeps of a run (:func:`kept`). The record that leaves is built from the
hints and the student's own run (round 0) only: no candidate, output, diff, plan or fix,
unless a level-3 hint under ``reveal_fix`` carries the diff.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from ..model import NotebookContext, Run, Task
from ..teaching.policy import Policy
from ..teaching.session import Cells, HintSession, cell_key, id_key

__all__ = ["HintSessions", "cell_key", "kept", "light"]

KEEP = 50
"""Cells per student whose verified run the service keeps in memory (that student's least
recently asked go first: one student's flood of cells never pushes out another's)."""


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
        return id_key(cell_id) if cell_id else cell_key(task)

    def needs_run(self, user: str, task: Task, cell_id: str = "") -> bool:
        """Whether this student's cell has no run of this code yet (asked without keeping anything)."""
        with self.lock:
            own = self.cells.get(user)
            found = own.find(cell_id, task) if own is not None else None
            return found is None or found.needs_run(task)


def kept(run: Run) -> Run:
    """What a session keeps of a student's run for the day: without the task's copies and
    without the notebook's context (its earlier cells): nothing of the session reads them,
    and the student's kernel has them."""
    return replace(run, task=replace(light(run.task), context=None))


def light(task: Task) -> Task:
    """The task without its copies: as it goes back to the kernel (which has them), and as
    a session keeps it (a student's large values are not held for the day)."""
    context = task.context
    if context is not None:
        context = NotebookContext(entries=context.entries, prelude=context.prelude)
    return replace(task, inputs={}, context=context)
