"""Teaching mode (``%%hint`` and the **Give me a hint** button): hints from a verified fix.

The cell's code runs in the sandbox as with ``%%heal`` and the loop looks for a fix
that passes the student's own asserts and tests. The fix stays here, in the kernel
extension: the student gets one hint per turn (level 1 where, 2 why, 3 the fix — the
diff only when the instructor's policy reveals it), built from facts the tool computed
(``agents/hint_facts.py``) plus the hint writer's prose, which is shown only after the leak
check found no line of the fix in it (else it is asked once more, then cut back to the
facts). Nothing is inserted, replaced or run in the kernel; ``agent_result`` holds the
run with its hints and without the fix's code unless the fix was revealed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from IPython.display import display

from ..agents.hint_facts import LEVEL_TITLES, LEVELS, Facts, facts_of, leaks, where_facts, why_facts
from ..config import SelfHeal
from ..errors import Cancelled, LLMError, SelfHealError
from ..loop.events import ExecutionStarted, Waiting
from ..model import Candidate, Hint, Iteration, Run, Task
from ..render.hints import HintPanel, hint_text, hints_html
from ..render.inline import show_html
from ..teaching.policy import Gate, Policy
from .controller import RESULT_NAME, Pump

NO_FIX = (
    "No fix could be verified by running it, so this is all that is certain: "
    "look at the line above and what the error says."
)
UNCHECKED = (
    "A change that runs was found, but nothing checked its result (your cell has no "
    "asserts and no --tests), so it is no verified fix and there are no more hints: add an "
    "assert that says what the right result is, then ask again."
)
HIDDEN = "Your instructor keeps the fix hidden. Try a change of your own and run the cell again."


@dataclass
class HintSession:
    """One student cell (its code and tests): the verified run, kept here, and the hints
    shown for it so far."""

    cell: str
    run: Run | None = None
    loop: Any = None
    facts: Facts = field(default_factory=Facts)
    hints: list[Hint] = field(default_factory=list)

    def total(self, policy: Policy) -> int:
        """How many hints this cell can get ("Hint N of M")."""
        levels = LEVELS if self.facts.verified else 1
        return levels if policy.max_hints is None else max(1, min(levels, policy.max_hints))

    @property
    def failed(self) -> bool:
        return bool(self.facts.error_type or self.facts.failed_test)


def _without_fix(run: Run) -> Run:
    """The run as the student may see it: every program but their own blanked."""

    def blank(it: Iteration) -> Iteration:
        # The tool's explanation of a failure may name the fix itself (a close column and
        # its edit): it stays in the tool, also for the student's own round.
        if it.index == 0:
            return replace(it, explanation=None, feedback="")
        return replace(
            it,
            candidate=Candidate(code="", iteration=it.index),
            diff="",
            feedback="",
            samples=[],
            diagnosis="",
            explanation=None,
        )

    return replace(run, iterations=[blank(it) for it in run.iterations])


def record_of(session: HintSession) -> Run:
    """What ``agent_result`` holds for this cell: the run with its hints, and the fix
    only once a hint revealed it."""
    assert session.run is not None
    revealed = any(h.diff for h in session.hints)
    run = session.run if revealed else _without_fix(session.run)
    return replace(run, hints=list(session.hints))


class HintComposer:
    """Builds the hint of a level from the facts and the writer's checked prose."""

    def __init__(self, writer: Any, policy: Policy) -> None:
        self.writer = writer
        self.policy = policy

    def checked_prose(self, level: int, code: str, facts: Facts, cancel: threading.Event | None) -> tuple[str, str]:
        """The writer's text for ``level`` if it passes the leak check (once more when
        it does not), else ""; and what the check did."""
        leaked: list[str] | None = None
        for attempt in (1, 2):
            try:
                text = self.writer.write(level, code, facts, leaked=leaked, cancel=cancel)
            except LLMError:
                return "", "cut back to the facts (the model could not be asked)"
            leaked = leaks(text, facts.fix_lines)
            if not leaked:
                return text, "passed" if attempt == 1 else "passed on the second try"
        return "", "cut back to the facts"

    def compose(self, level: int, session: HintSession, cancel: threading.Event | None) -> Hint:
        facts, code = session.facts, session.cell
        title = LEVEL_TITLES[level]
        if level == 1:
            lines = where_facts(facts, code)
            if not facts.verified:
                honest = UNCHECKED if session.run is not None and session.run.final_code else NO_FIX
                return Hint(1, title, "\n".join([*lines, honest]), facts=lines, cell=code)
        elif level == 2:
            lines = why_facts(facts)
        else:
            if not self.policy.reveal_fix:
                return Hint(3, title, HIDDEN, cell=code)
            return Hint(3, title, "The verified fix, as a diff to your cell:", cell=code, diff=facts.diff)
        prose, check = self.checked_prose(level, code, facts, cancel)
        text = "\n".join([*lines, prose] if prose else lines)
        return Hint(
            level,
            title,
            text or "(nothing more the tool can say for sure)",
            facts=lines,
            prose=prose,
            check=check,
            cell=code,
        )


def cell_key(task: Task) -> str:
    """Hints continue while the code and its tests stay the same (whitespace aside)."""
    code = "\n".join(line.rstrip() for line in (task.initial_code or "").strip().splitlines())
    return code + "\0" + (task.tests or "").strip()


class Teacher:
    """The kernel's teaching mode: its sessions per cell, under the policy's gate."""

    def __init__(self, shell: Any, gate: Gate) -> None:
        self.shell = shell
        self.gate = gate
        self.sessions: dict[str, HintSession] = {}
        self.asked: list[Hint] = []
        """Every hint given in this kernel, in order (``%agent_export --hints``)."""

    def turn(self, settings: SelfHeal, task: Task) -> HintTurn:
        """The next hint for this cell; raises ``PolicyBlocked`` when the policy says no."""
        key = cell_key(task)
        session = self.sessions.setdefault(key, HintSession(cell=task.initial_code or ""))
        return HintTurn(self, key, session, settings, task)


class HintTurn:
    """One hint: the run when the cell has none yet, then the next level, shown."""

    def __init__(self, teacher: Teacher, key: str, session: HintSession, settings: SelfHeal, task: Task) -> None:
        self.teacher, self.key, self.session = teacher, key, session
        self.settings, self.task = settings, task
        self.gate = teacher.gate
        self.panel: HintPanel | None = None
        self._handle: Any = None
        self.note = ""
        self.remote: Any = None
        """The class service's last answer (its hints, total, whether more may come, record)."""
        if settings.widget and getattr(teacher.shell, "kernel", None) is not None:
            self.panel = HintPanel(on_another=self.another, on_stop=lambda: self.pump.cancel.set())
        self.pump: Pump[Hint | None] = Pump(self._work, self._on_event)

    # ------------------------------------------------------------------ the work
    def _admit(self) -> None:
        session = self.session
        self.gate.admit("hint", run=False)
        if self.gate.hints_left(self.key) == 0:
            self.gate.take_hint(self.key)  # raises: the policy's hints for this cell are spent
        if session.run is None:
            self.gate.admit("hint")

    def _remote(self, emit: Callable[[Any], None], cancel: threading.Event) -> Hint | None:
        """The class service decides and builds the hint; only hints come back."""
        from ..service.client import ServiceClient

        def progress(event: Any) -> None:
            if isinstance(event, Waiting):
                emit(f"Queued: {event.text()}")
            elif isinstance(event, str) or hasattr(event, "text"):
                emit(event if isinstance(event, str) else event.text)

        turn = ServiceClient.from_settings(self.settings).hint_turn(self.settings, self.task, progress, cancel)
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
        if session.run is None:
            loop = build_loop(self.settings)
            run = loop.run(self.task, on_event=emit, cancel=cancel)
            if run.outcome == "cancelled" or not run.iterations:
                raise Cancelled(
                    f"No hint this time: {run.error or 'the run was stopped'} Run %%hint again to look again."
                )
            session.run, session.loop, session.facts = run, loop, facts_of(run)
        if not session.failed:
            self.note = "Your cell runs and passes its checks: there is nothing to hint at."
            return None
        total = session.total(self.gate.policy)
        level = len(session.hints) + 1
        if level > total:
            self.note = f"That was the last hint for this cell ({total} of {total})."
            return None
        emit("Writing the hint…")
        hint = HintComposer(HintWriter(session.loop.llm), self.gate.policy).compose(level, session, cancel)
        self.gate.take_hint(self.key)
        session.hints.append(hint)
        self.teacher.asked.append(hint)
        return hint

    def _on_event(self, event: Any) -> None:
        if isinstance(event, str):
            text = event
        elif isinstance(event, ExecutionStarted):
            text = (
                "Running your cell in the sandbox…"
                if event.iteration == 0
                else f"Looking for a fix that passes your checks (round {event.iteration})…"
            )
        else:
            return
        if self.panel is not None:
            self.panel.working(text)

    # ------------------------------------------------------------------ running
    def _begin(self) -> None:
        self._admit()
        if self.panel is not None:
            self._handle = display(self.panel.mimebundle(), raw=True, display_id=True)
            self.panel.working("Starting…")

    def run_sync(self) -> Hint | None:
        self._begin()
        with self._failing():
            return self._end(self.pump.run_sync())

    async def run_async(self) -> Hint | None:
        self._begin()
        with self._failing():
            return self._end(await self.pump.run_async())

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        """A run that ends in an error leaves the panel saying so (the magic shows the line)."""
        try:
            yield
        except SelfHealError as exc:
            if self.panel is not None:
                self.panel.show(self.session.hints, self.session.total(self.gate.policy), more=False, note=str(exc))
            raise

    def _end(self, hint: Hint | None) -> Hint | None:
        session = self.session
        if self.remote is not None:
            if self.remote.record is not None:
                self.teacher.shell.user_ns[RESULT_NAME] = self.remote.record
        elif session.run is not None:
            self.teacher.shell.user_ns[RESULT_NAME] = record_of(session)
        self.show()
        return hint

    def show(self) -> None:
        session, policy = self.session, self.gate.policy
        total = self.remote.total if self.remote is not None else session.total(policy)
        html = hints_html(session.hints, total)
        text = "\n\n".join(hint_text(h, i, total) for i, h in enumerate(session.hints, 1))
        if self.note:
            html += f"<div>{self.note}</div>"
            text = (text + "\n\n" + self.note).strip()
        if self.remote is not None:
            more = self.remote.more
        else:
            more = session.failed and len(session.hints) < total and self.gate.hints_left(self.key) != 0
        if self.panel is not None:
            self.panel.show(session.hints, total, more=more, note=self.note)
            if self._handle is not None:
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
            if self.panel is not None:
                self.panel.working("Writing the next hint…")
            self._end(self.pump.run_sync())
        except SelfHealError as exc:  # PolicyBlocked, Cancelled, LLMError...
            self.note = str(exc)
            self.show()
