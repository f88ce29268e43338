"""Teaching mode's notebook front (``%%hint`` and the **Give me a hint** button).

The hint itself is built in :mod:`selfheal_jupyter.teaching` (no IPython there) and the
flow that runs the cell and asks for the next hint is the runner's
(:meth:`~selfheal_jupyter.runner.base.Runner.hint`: the loop here, or the class
service); this module keeps each cell's :class:`~selfheal_jupyter.teaching.session.HintSession`
under the instructor's policy, shows the hints (a panel with **Another hint**, or plain
HTML) and puts the session's record — the hints and the student's own run, never the
fix before level 3 reveals it — in ``agent_result``. Nothing is inserted, replaced or
run in the kernel.

A spent quota, a Stop and a policy notice are notes under the hints (said once, the
earlier hints kept in view), not errors: the student did nothing wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from IPython.display import display

from ..config import SelfHeal
from ..errors import Cancelled, SelfHealError
from ..model import Hint, Task
from ..render.hints import HintPanel, hint_text, hints_html, note_html
from ..render.inline import show_html
from ..runner import BLOCKING, Pump, Runner, Wait, run_sync, runner_for
from ..runner import HintTurn as Turn
from ..runner.hints import RUNNING, WRITING, words
from ..teaching.policy import Gate, PolicyBlocked
from ..teaching.session import Cells, HintSession
from .cells import current_cell_id
from .controller import RESULT_NAME


class Teacher:
    """The kernel's teaching mode: its sessions per cell, under the policy's gate."""

    def __init__(self, shell: Any, gate: Gate) -> None:
        self.shell = shell
        self.gate = gate
        self.cells = Cells()
        """The cells' sessions, by the id the front end gives a cell (its edits keep it), else by code."""
        self.asked: list[Hint] = []
        """Every hint given in this kernel, in order (``%agent_export --hints``)."""
        self.runners: dict[str, Runner] = {}
        """The runner each cell's run was made with here (its model writes that cell's hints)."""

    def turn(self, settings: SelfHeal, task: Task, *, line_offset: int = 0, cell_id: str | None = None) -> HintTurn:
        """The next hint for this cell (``line_offset`` 1: the cell's first line is ``%%hint``;
        ``cell_id``: the front end's id of the cell, by default the one being executed)."""
        cell_id = current_cell_id(self.shell) if cell_id is None else cell_id
        session = self.cells.open(cell_id, task, self.gate.policy, line_offset=line_offset)
        return HintTurn(self, session.key, session, settings, task)

    def can_hint(self, task: Task) -> bool:
        """A hint may still be given for this cell (the button is offered only then)."""
        session = self.cells.find("", task)
        if session is None:
            return self.gate.hints_left("") != 0
        if self.gate.hints_left(session.key) == 0:
            return False
        return session.needs_run(task) or session.more


class HintTurn:
    """One hint: the run when the cell has none yet, then the next level, shown."""

    def __init__(self, teacher: Teacher, key: str, session: HintSession, settings: SelfHeal, task: Task) -> None:
        self.teacher, self.key, self.session = teacher, key, session
        self.settings, self.task = settings, task
        self.gate = teacher.gate
        self.panel: HintPanel | None = None
        self._handle: Any = None
        self.note = ""
        self._shown = ""
        self.turn: Turn | None = None
        """The runner's last answer (the hints, total, whether more may come, record)."""
        if settings.widget and getattr(teacher.shell, "kernel", None) is not None:
            self.panel = HintPanel(on_another=self.another, on_stop=lambda: self.pump.cancel.set())
        self.pump: Pump[Hint | None] = Pump(self._work, self._on_event)

    # ------------------------------------------------------------------ the work
    def _admit(self) -> None:
        """Raises ``PolicyBlocked`` when the policy says no (shown as a note)."""
        self.gate.admit("hint", run=False)
        if self.gate.hints_left(self.key) == 0:
            self.gate.take_hint(self.key)  # raises: the policy's hints for this cell are spent
        if self.session.needs_run(self.task):
            self.gate.admit("hint")

    def _work(self, emit: Callable[[Any], None], cancel: threading.Event) -> Hint | None:
        key, session = self.key, self.session
        runner = self.teacher.runners.get(key) if not session.needs_run(self.task) else None
        if runner is None:
            runner = runner_for(self.settings)
            runner.start()
        turn = runner.hint(self.task, session, emit, cancel, taken=lambda _hint: self.gate.take_hint(key))
        if session.ran:
            self.teacher.runners[key] = runner
        self.turn = turn
        self.note = " ".join(n for n in (turn.why_no_fix, turn.note) if n)
        if turn.new is None:
            return None
        self.teacher.asked.append(turn.new)  # for %agent_export --hints
        return turn.new

    def _on_event(self, event: Any) -> None:
        text = words(event)
        if text is None:
            return
        if self._shown == text:
            return
        self._shown = text
        if self.panel is not None:
            self.panel.working(text)

    # ------------------------------------------------------------------ running
    def _begin(self) -> bool:
        """Admit and show the panel; False (with the note shown) when the policy says no."""
        try:
            self._admit()
        except PolicyBlocked as exc:
            self.note = str(exc)
            self.show()
            return False
        if self.panel is not None:
            self._handle = display(self.panel.mimebundle(), raw=True, display_id=True)
            self.panel.working(RUNNING if self.session.needs_run(self.task) else WRITING)
        return True

    async def execute(self, wait: Wait) -> Hint | None:
        """Admit, then the hint, shown; ``wait``: blocking, or awaiting in a kernel cell."""
        if not self._begin():
            return None
        return await self._settle(wait)

    def run_sync(self) -> Hint | None:
        return run_sync(self.execute(BLOCKING))

    async def _settle(self, wait: Wait) -> Hint | None:
        try:
            hint = await wait(self.pump)
        except (Cancelled, PolicyBlocked) as exc:
            self._noted(exc)
            return None
        except SelfHealError:
            self.show()  # the panel stops working; the magic says what went wrong, once
            raise
        return self._end(hint)

    def _noted(self, exc: SelfHealError) -> None:
        self.note = str(exc)
        self._end(None)
        return None

    def _end(self, hint: Hint | None) -> Hint | None:
        if self.turn is not None and self.turn.record is not None:
            self.teacher.shell.user_ns[RESULT_NAME] = self.turn.record
        elif self.session.ran or self.session.hints:
            self.teacher.shell.user_ns[RESULT_NAME] = self.session.record()
        self.show()
        return hint

    def show(self) -> None:
        session = self.session
        total = self.turn.total if self.turn is not None else session.total()
        html = hints_html(session.hints, total)
        text = "\n\n".join(hint_text(h, i, total) for i, h in enumerate(session.hints, 1))
        if self.note:
            html += note_html(self.note)
            text = (text + "\n\n" + self.note).strip()
        more = (self.turn.more if self.turn is not None else session.more) and self.gate.hints_left(self.key) != 0
        if self.panel is not None and self._handle is not None:
            self.panel.show(session.hints, total, more=more, note=self.note)
            bundle = self.panel.mimebundle()
            bundle.update({"text/html": html, "text/plain": text})
            self._handle.update(bundle, raw=True)
        else:
            show_html(html, text)

    def another(self) -> None:
        """**Another hint** (after the cell ended): the next level, in this panel."""
        self.note = ""
        self.pump = Pump(self._work, self._on_event)
        try:
            self._admit()
        except PolicyBlocked as exc:
            self.note = str(exc)
            self.show()
            return
        if self.panel is not None:
            self.panel.working(WRITING)
        try:
            run_sync(self._settle(BLOCKING))
        except SelfHealError as exc:  # LLMError, engine...: said in the panel, once
            self.note = str(exc)
            self.show()
