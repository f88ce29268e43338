"""The live ipywidgets panel of one run.

It is an observer: :meth:`Panel.handle` turns each loop event into widget updates and
never steers the loop. The only things that reach back are the buttons, through
callbacks the caller gives (Stop → a cancel event; Insert / Run / Done → the magic).
``handle`` must be called on the kernel's main thread (the magic forwards events
there), because comm messages carry the cell's parent header.
"""

from __future__ import annotations

import time
from typing import Callable

import ipywidgets as widgets

from ..loop.events import (
    CandidateReady,
    Event,
    ExecutionDone,
    ExecutionStarted,
    PlanReady,
    RunFinished,
    RunStarted,
    TokensStreamed,
    VerdictReady,
)
from ..model import Run
from .diff import diff_html
from .html import code_html, iteration_body_html, iteration_title, plan_html, result_html, summary_html
from .style import CODE_BG, GREY, MONO, esc, heading

TOKEN_TAIL_CHARS = 1200
TOKEN_REFRESH_S = 0.15


class Panel:
    """A VBox: task, status + Stop, streamed tokens, plan, one Accordion section per
    iteration, the summary, and (on success) Insert / Run in my kernel / Done."""

    def __init__(
        self,
        prompt: str,
        *,
        max_iterations: int,
        on_stop: Callable[[], None],
        on_action: Callable[[str], None] | None = None,
        context: str = "",
    ) -> None:
        self._on_stop = on_stop
        self._on_action = on_action
        self._tokens = ""
        self._token_shown_at = 0.0
        self._sections: dict[int, int] = {}
        self._section_html: dict[int, str] = {}

        self.title = widgets.HTML(f'<div style="margin:2px 0"><b>{esc(prompt)}</b></div>{context}')
        self.status = widgets.HTML(self._status_html("Starting…"))
        self.progress = widgets.IntProgress(
            value=0, min=0, max=max(1, max_iterations), bar_style="info",
            layout=widgets.Layout(width="160px"),
        )
        self.stop_button = widgets.Button(
            description="Stop", icon="stop", button_style="danger", tooltip="Cancel this run",
            layout=widgets.Layout(width="90px"),
        )
        self.stop_button.on_click(lambda _b: self._stop())
        self.tokens = widgets.HTML("")
        self.plan = widgets.HTML("")
        self.accordion = widgets.Accordion(children=[])
        self.summary = widgets.HTML("")
        def wide() -> widgets.Layout:  # one Layout each: hiding one button must not hide another
            return widgets.Layout(width="auto")

        self.insert_button = widgets.Button(description="Insert below", icon="plus", button_style="success",
                                            tooltip="Add the code as a new cell right below this one", layout=wide())
        self.replace_button = widgets.Button(description="Replace this cell", icon="check", button_style="success",
                                             tooltip="Put the fix into the cell (it is not run)", layout=wide())
        self.run_button = widgets.Button(description="Run in my kernel", icon="play", layout=wide())
        self.done_button = widgets.Button(description="Done", tooltip="Keep the result only in agent_result")
        for button, name in ((self.insert_button, "insert"), (self.replace_button, "replace"),
                             (self.run_button, "run"), (self.done_button, "done")):
            button.on_click(lambda _b, name=name: self._action(name))
        self.review = widgets.HTML("")
        self.actions = widgets.HBox([self.insert_button, self.replace_button, self.run_button, self.done_button],
                                    layout=widgets.Layout(display="none"))
        self.output = widgets.Output()
        self.widget = widgets.VBox(
            [
                self.title,
                widgets.HBox([self.progress, self.stop_button, self.status],
                             layout=widgets.Layout(align_items="center")),
                self.tokens,
                self.plan,
                self.accordion,
                self.summary,
                self.review,
                self.actions,
                self.output,
            ],
            layout=widgets.Layout(border="1px solid #d0d7de", padding="4px 8px"),
        )
        self.widget.add_class("selfheal-panel")

    # ------------------------------------------------------------------ display
    def mimebundle(self) -> dict:
        """The panel's display bundle, with a readable text/plain for static viewers."""
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = "selfheal live panel (the run's record is shown below it)"
        return bundle

    # ------------------------------------------------------------------ events
    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.status.value = self._status_html("Planning…" if event.run.task.plan is None else "Starting…")
        elif isinstance(event, PlanReady):
            self.plan.value = plan_html(event.plan)
        elif isinstance(event, TokensStreamed):
            self._stream(event)
        elif isinstance(event, CandidateReady):
            self._candidate(event)
        elif isinstance(event, ExecutionStarted):
            self.status.value = self._status_html(f"Running iteration {event.iteration} in the sandbox…")
        elif isinstance(event, ExecutionDone):
            index = event.iteration
            if index in self._section_html:
                self._set_section(index, self._section_html[index] + result_html(event.result, ""), None)
        elif isinstance(event, VerdictReady):
            it = event.iteration
            self._ensure_section(it.index)
            self._set_section(it.index, iteration_body_html(it), iteration_title(it))
            self.progress.value = min(self.progress.max, max(self.progress.value, it.index))
            self.status.value = self._status_html(
                "Passed." if it.verdict.passed
                else "Rejected (it changed your spec); repairing…" if it.verdict.spec_violations
                else "Repairing…"
            )
        elif isinstance(event, RunFinished):
            self.finish(event.run)

    def finish(self, run: Run) -> None:
        """Freeze the panel: summary shown, Stop gone, token stream cleared."""
        self.tokens.value = ""
        self.stop_button.layout.display = "none"
        self.progress.bar_style = "success" if run.outcome == "success" else "danger"
        self.progress.value = self.progress.max
        self.status.value = self._status_html("Finished.")
        self.summary.value = summary_html(run)

    def compact(self) -> None:
        """Hide the iteration sections once the static record is shown below the panel."""
        self.plan.value = ""
        self.accordion.layout.display = "none"

    def offer_actions(self, note: str = "", *, insert: bool = True, replace: bool = False,
                      run: bool = True, insert_label: str = "Insert below", review: str = "") -> None:
        """Show the buttons for a run's code (``review``: HTML shown above them, e.g.
        the diff against the cell as typed). A run that did not pass offers its best
        attempt to insert only, under its own label."""
        self.insert_button.description = insert_label
        self.insert_button.layout.display = "" if insert else "none"
        self.replace_button.layout.display = "" if replace else "none"
        self.run_button.layout.display = "" if run else "none"
        self.review.value = review
        self.actions.layout.display = "flex"
        if note:
            self.status.value = self._status_html(note)

    def settle(self, message: str) -> None:
        """After a choice: buttons gone, a note of what happened."""
        self.actions.layout.display = "none"
        self.review.value = ""
        self.status.value = self._status_html(message)

    # ------------------------------------------------------------------ internals
    def _stop(self) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self.status.value = self._status_html("Stopping: killing the sandbox run…")
        self._on_stop()

    def _action(self, name: str) -> None:
        if self._on_action is not None:
            self._on_action(name)

    def _stream(self, event: TokensStreamed) -> None:
        self._tokens += event.text
        now = time.monotonic()
        if now - self._token_shown_at < TOKEN_REFRESH_S:
            return
        self._token_shown_at = now
        who = "Planning" if event.stage == "planner" else f"Writing iteration {event.iteration}"
        self.status.value = self._status_html(f"{who}… ({len(self._tokens):,} chars streamed)")
        tail = self._tokens[-TOKEN_TAIL_CHARS:]
        self.tokens.value = (
            f'<pre class="selfheal-tokens" style="margin:2px 0;padding:4px 8px;{MONO};'
            f'max-height:12em;overflow:auto;background:{CODE_BG};color:{GREY};'
            f'white-space:pre-wrap">{esc(tail)}</pre>'
        )

    def _candidate(self, event: CandidateReady) -> None:
        self._tokens = ""
        self.tokens.value = ""
        index = event.candidate.iteration
        self._ensure_section(index)
        body = heading("Code") + code_html(event.candidate.code)
        if event.diff:
            body += heading("Diff to the previous attempt") + diff_html(event.diff)
        label = "your code" if index == 0 else f"Iteration {index}"
        self._set_section(index, body, f"{label} · running…")
        self.accordion.selected_index = self._sections[index]

    def _ensure_section(self, index: int) -> None:
        if index in self._sections:
            return
        self._sections[index] = len(self.accordion.children)
        self.accordion.children = (*self.accordion.children, widgets.HTML(""))

    def _set_section(self, index: int, body: str, title: str | None) -> None:
        self._section_html[index] = body
        position = self._sections[index]
        self.accordion.children[position].value = body
        if title is not None:
            titles = list(self.accordion.titles) + [""] * (len(self.accordion.children) - len(self.accordion.titles))
            titles[position] = title
            self.accordion.titles = tuple(titles)

    @staticmethod
    def _status_html(text: str) -> str:
        return f'<span style="color:{GREY};margin-left:8px">{esc(text)}</span>'
