"""Inline output of a run in a notebook: static HTML per iteration, or the live panel.

Two observers with one interface (``start`` / ``handle`` / ``finish``). Both leave a
complete static record in the saved notebook, so it reads right in JupyterLab, after
nbconvert and in static viewers, with no widget state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol

from IPython.display import display

from ..loop import events as ev
from ..loop.events import Event, Handlers, PlanReady, VerdictReady, dispatch, ignore
from ..model import Run
from .html import (
    context_html,
    context_lines,
    iteration_html,
    plan_html,
    run_html,
    run_title,
    summary_html,
    summary_text,
    task_html,
)
from .widget import Panel


class Renderer(Protocol):
    def start(self, run: Run) -> None: ...

    def handle(self, event: Event) -> None: ...

    def finish(self, run: Run) -> None: ...


def show_html(html: str, text: str) -> None:
    """Display HTML with a meaningful text/plain fallback (terminals, text exports)."""
    display({"text/html": html, "text/plain": text}, raw=True)


class StaticRenderer:
    """Each section is displayed once, as soon as it is final (plan, then each iteration)."""

    def __init__(self, *, quiet: bool = False) -> None:
        self.quiet = quiet

    def start(self, run: Run) -> None:
        if not self.quiet:
            kind, words = run_title(run.task)
            text = "\n".join([f"selfheal ({kind}): {words}", *context_lines(run.task.context)])
            show_html(task_html(run), text)

    def handle(self, event: Event) -> None:
        if not self.quiet:
            dispatch(self.HANDLERS, self, event)

    def _plan_ready(self, event: PlanReady) -> None:
        if event.plan.steps:
            steps = "\n".join(f"{i}. {s}" for i, s in enumerate(event.plan.steps, 1))
            show_html(plan_html(event.plan), "Plan:\n" + steps)

    def _verdict_ready(self, event: VerdictReady) -> None:
        it = event.iteration
        show_html(iteration_html(it), f"iteration {it.index}: {'passed' if it.verdict.passed else 'failed'}")

    HANDLERS: ClassVar[Handlers] = {
        PlanReady: _plan_ready,
        VerdictReady: _verdict_ready,
        # the rest is shown once, from the record (start, finish) or not at all
        ev.RunStarted: ignore,
        ev.TokensStreamed: ignore,
        ev.CandidateReady: ignore,
        ev.ExecutionStarted: ignore,
        ev.ExecutionDone: ignore,
        ev.FailureExplained: ignore,
        ev.ModelWaiting: ignore,
        ev.RunFinished: ignore,
        ev.CheckingFix: ignore,
        ev.Waiting: ignore,
    }
    """The one mapping from each event to what the static output shows of it."""

    def finish(self, run: Run) -> None:
        show_html(summary_html(run), summary_text(run))


class PanelRenderer:
    """The live panel while the run lasts; then the record below it, its history folded
    (the panel's live part folds away), and the decision the controller offers last."""

    def __init__(
        self,
        *,
        max_iterations: int,
        on_stop: Callable[[], None],
        on_action: Callable[[str], None],
        quiet: bool = False,
    ) -> None:
        self.quiet = quiet
        self._max_iterations = max_iterations
        self._on_stop = on_stop
        self._on_action = on_action
        self.panel: Panel | None = None
        self.kernel_note = ""
        """Shown under the progress while the run lasts (why the kernel may look idle)."""

    def start(self, run: Run) -> None:
        kind, words = run_title(run.task)
        self.panel = Panel(
            words,
            kind=kind,
            max_iterations=self._max_iterations,
            on_stop=self._on_stop,
            on_action=self._on_action,
            context=context_html(run.task.context),
            heal=run.task.initial_code is not None,
            kernel_note=self.kernel_note,
        )
        display(self.panel.mimebundle(), raw=True)

    def handle(self, event: Event) -> None:
        if self.panel is not None:
            self.panel.handle(event)

    def finish(self, run: Run) -> None:
        if self.panel is not None:
            self.panel.finish(run)
        show_html(run_html(run, quiet=self.quiet, folded=True), summary_text(run))
