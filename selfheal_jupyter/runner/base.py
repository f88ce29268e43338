"""The contract of where a run happens (AutoGen's code executors: a small base and one
module per backend).

A :class:`Runner` does four operations — a full run (``%%agent``, ``%%heal``, the
autoheal button, ``selfheal run``), a hint turn (``%%hint``), a plan only (``--plan-only``)
and the sandbox image's packages (what the notebook context may import there) — with
events out (``emit``) and Stop in (``cancel``). Two implementations:
:class:`~selfheal_jupyter.runner.local.LocalRunner` (the loop in this process; the class
service runs its requests with it too) and
:class:`~selfheal_jupyter.runner.service.ServiceRunner` (the client of ``selfheal
service``). :func:`~selfheal_jupyter.runner.runner_for` chooses, in one place.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import Hint, Plan, Run, Task
from ..teaching.session import HintSession

Emit = Callable[[Any], None]
"""Where a runner hands its events (the loop's, the service's queue, hint progress in words)."""

Taken = Callable[[Hint], None]
"""Called with each new hint where this process counts the hints given (the kernel's policy)."""


@dataclass
class HintTurn:
    """What one hint request gave."""

    hints: list[Hint]
    """The cell's hints so far, the new one last."""
    total: int
    """How many hints the cell can get ("Hint N of M")."""
    more: bool
    """Another hint may be asked for."""
    note: str = ""
    """Why there is no new hint ("" when there is one)."""
    record: Run | None = None
    """What the student may hold (the hints and their own run; the fix only once revealed)."""
    new: Hint | None = None
    tokens: int = 0
    """Model tokens the hint writer spent (they count against a quota)."""
    why_no_fix: str = ""
    """The run ended in an error, so no fix was looked for: what happened (shown under the hints)."""


class Runner(ABC):
    """Where a run happens; every operation raises the package's own errors."""

    preparing = ""
    """What :meth:`start` does, as a terminal says it while it waits ("": nothing slow)."""

    def start(self) -> None:  # noqa: B027 - nothing to prepare is a valid runner
        """Prepare what a run needs (raises the package's own error when it cannot be
        used), so a front says so before it shows anything."""

    @abstractmethod
    def full(self, task: Task, entry: str, emit: Emit, cancel: threading.Event) -> Run:
        """The task's run to its record, with the fix a passing run hands over worked
        out; ``entry`` names the front (``agent``, ``heal``, ``autoheal``, ``run``)."""

    @abstractmethod
    def hint(self, task: Task, session: HintSession, emit: Emit, cancel: threading.Event, *, taken: Taken) -> HintTurn:
        """The next hint for the student's cell (``session``: its hints, and where its
        lines are counted from); ``Cancelled`` when the user stopped it."""

    @abstractmethod
    def plan(self, task: Task, emit: Emit, cancel: threading.Event) -> Plan:
        """Only the planner's steps (nothing runs)."""

    @abstractmethod
    def packages(self) -> dict[str, str] | None:
        """``{distribution: version}`` the sandbox image has (None when it cannot be told)."""


def note_kept(run: Run, where: str) -> None:
    """A run that an error ended after some attempts: its message says where they are."""
    if run.outcome == "error" and run.iterations:
        count = len(run.iterations)
        run.error += f" What was done before it ({count} attempt{'s' if count != 1 else ''}) is kept in {where}."
