"""Teaching mode's notebook front (``%%hint`` and the **Give me a hint** button).

The hint itself is built in :mod:`selfheal_jupyter.teaching` (no IPython there: the
class service builds hints the same way); this module runs the loop for a cell once,
asks its :class:`~selfheal_jupyter.teaching.session.HintSession` for the next hint
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
from ..loop.events import ExecutionStarted, TokensStreamed, VerdictReady, Waiting
from ..model import Hint, Task
from ..render.hints import HintPanel, hint_text, hints_html, note_html
from ..render.inline import show_html
from ..teaching.policy import Gate, PolicyBlocked
from ..teaching.session import Cells, HintSession, examine
from .cells import current_cell_id
from .controller import RESULT_NAME, Pump

RUNNING = "Running your cell in the sandbox…"
FINDING = "Finding a hint…"
WRITING = "Writing the hint…"


class Teacher:
    """The kernel's teaching mode: its sessions per cell, under the policy's gate."""

    def __init__(self, shell: Any, gate: Gate) -> None:
        self.shell = shell
        self.gate = gate
        self.cells = Cells()
        """The cells' sessions, by the id the front end gives a cell (its edits keep it), else by code."""
        self.asked: list[Hint] = []
        """Every hint given in this kernel, in order (``%agent_export --hints``)."""
        self.loops: dict[str, Any] = {}
        """The loop each cell's run was made with (its model writes that cell's hints)."""

    def turn(self, settings: SelfHeal, task: Task, *, line_offset: int = 0, cell_id: str | None = None) -> HintTurn:
        """The next hint for this cell (``line_offset`` 1: the cell's first line is ``%%hint``;
        ``cell_id``: the front end's id of the cell, by default the one being executed)."""
        cell_id = current_cell_id(self.shell) if cell_id is None else cell_id
        session = self.cells.open(cell_id, task, self.gate.policy, line_offset=line_offset)
        return HintTurn(self, session.key, session, settings, task, cell_id)

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

    def __init__(
        self, teacher: Teacher, key: str, session: HintSession, settings: SelfHeal, task: Task, cell_id: str = ""
    ) -> None:
        self.teacher, self.key, self.session = teacher, key, session
        self.settings, self.task, self.cell_id = settings, task, cell_id
        self.gate = teacher.gate
        self.panel: HintPanel | None = None
        self._handle: Any = None
        self.note = ""
        self._shown = ""
        self.remote: Any = None
        """The class service's last answer (its hints, total, whether more may come, record)."""
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

    def _remote(self, emit: Callable[[Any], None], cancel: threading.Event) -> Hint | None:
        """The class service decides and builds the hint; only hints come back."""
        from ..service_client.client import ServiceClient

        def progress(event: Any) -> None:
            if isinstance(event, Waiting):
                emit(f"Queued: {event.text()}")
            elif isinstance(event, str) or hasattr(event, "text"):
                emit(event if isinstance(event, str) else event.text)

        client = ServiceClient.from_settings(self.settings)
        turn = client.hint_turn(
            self.settings, self.task, progress, cancel, line_offset=self.session.lines.offset, cell_id=self.cell_id
        )
        self.remote = turn
        self.session.hints = list(turn.hints)
        self.note = turn.note
        if not turn.hints or turn.note:
            return None
        self.teacher.asked.append(turn.hints[-1])  # for %agent_export --hints
        return turn.hints[-1]

    def _work(self, emit: Callable[[Any], None], cancel: threading.Event) -> Hint | None:
        from ..agents.hint_writer import HintWriter
        from ..factory import build_loop

        if self.settings.service_url:
            return self._remote(emit, cancel)
        session = self.session
        if session.needs_run(self.task):
            session.begin(self.task)
            loop = self.teacher.loops[self.key] = build_loop(self.settings)
            run = loop.run(self.task, on_event=emit, cancel=cancel)
            if run.outcome == "cancelled" or not run.iterations:
                raise Cancelled(f"No hint this time: {run.error or 'you stopped it.'} Run %%hint again to look again.")
            if not run.verified and run.outcome != "error":
                emit(f"{FINDING} (trying small changes to your code)")
            run = examine(session, run, loop, cancel)
            if cancel.is_set():
                raise Cancelled("No hint this time: you stopped it. Run %%hint again to look again.")
            if run.outcome == "error" and run.error:
                self.note = run.error  # why no fix was looked for (the endpoint, the engine...)
        loop = self.teacher.loops.get(self.key) or build_loop(self.settings)
        said = session.take_note()
        if said:
            self.note = " ".join(n for n in (self.note, said) if n)
            return None
        emit(WRITING)
        writer = HintWriter(loop.llm) if self.settings.hint_prose else None
        hint = session.next_hint(writer, cancel=cancel)
        self.gate.take_hint(self.key)
        self.teacher.asked.append(hint)
        return hint

    def _on_event(self, event: Any) -> None:
        if isinstance(event, str):
            text = event
        elif isinstance(event, ExecutionStarted) and event.iteration == 0:
            text = RUNNING
        elif isinstance(event, (ExecutionStarted, TokensStreamed)) and event.iteration > 0:
            text = f"{FINDING} (trying an idea, attempt {event.iteration})"
        elif isinstance(event, VerdictReady) and event.iteration.index == 0:
            text = FINDING
        else:
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

    def run_sync(self) -> Hint | None:
        if not self._begin():
            return None
        return self._finish(self.pump.run_sync)

    async def run_async(self) -> Hint | None:
        if not self._begin():
            return None
        try:
            hint = await self.pump.run_async()
        except (Cancelled, PolicyBlocked) as exc:
            self._noted(exc)
            return None
        except SelfHealError:
            self.show()
            raise
        return self._end(hint)

    def _finish(self, wait: Callable[[], Hint | None]) -> Hint | None:
        try:
            hint = wait()
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
        if self.remote is not None:
            if self.remote.record is not None:
                self.teacher.shell.user_ns[RESULT_NAME] = self.remote.record
        elif self.session.ran or self.session.hints:
            self.teacher.shell.user_ns[RESULT_NAME] = self.session.record()
        self.show()
        return hint

    def show(self) -> None:
        session = self.session
        total = self.remote.total if self.remote is not None else session.total()
        html = hints_html(session.hints, total)
        text = "\n\n".join(hint_text(h, i, total) for i, h in enumerate(session.hints, 1))
        if self.note:
            html += note_html(self.note)
            text = (text + "\n\n" + self.note).strip()
        if self.remote is not None:
            more = self.remote.more
        else:
            more = session.more and self.gate.hints_left(self.key) != 0
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
            self._finish(self.pump.run_sync)
        except SelfHealError as exc:  # LLMError, engine...: said in the panel, once
            self.note = str(exc)
            self.show()
