"""The live ipywidgets panel of one run, and the decision it ends with.

It is an observer: :meth:`Panel.handle` turns each loop event into widget updates and
never steers the loop. The only things that reach back are the buttons, through
callbacks the caller gives (Stop → a cancel event; Accept / Insert / Run / Reject →
the controller). ``handle`` must be called on the kernel's main thread (the controller
forwards events there), because comm messages carry the cell's parent header.

While the run lasts the panel says where it is in words ("Attempt 2 of 4 · writing
the fix · 35 s") in a row pinned where the panel ends, with the timer and Stop, so the
bottom stays current as the attempts above it grow; each event moves the words on to
the stage that starts next (a failed check says "Attempt 3 of 4 · writing the fix"
at once, not "failed" until the model's first word). The model's raw reply stays
behind a toggle. When the run ends the live part folds away (the static record below
keeps the history, folded) and the decision is displayed last, where the user is: the
review of the code and Accept / Accept and run / Insert below / Run in my kernel /
Reject; Run in my kernel asks once more when the review flags what the code can do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

import ipywidgets as widgets
from IPython.display import display

from ..loop.events import (
    CandidateReady,
    CheckingFix,
    Event,
    ExecutionDone,
    ExecutionStarted,
    FailureExplained,
    Handlers,
    ModelWaiting,
    PlanReady,
    RunFinished,
    RunStarted,
    TokensStreamed,
    VerdictReady,
    Waiting,
    dispatch,
)
from ..model import DATA_RULES, Run
from .diff import diff_html
from .html import (
    code_html,
    explanation_html,
    iteration_body_html,
    iteration_title,
    plan_html,
    result_html,
    waiting_text,
)
from .style import CODE_BG, GREY, MONO, esc, heading

STREAM_LINES = 12
"""How many of the newest lines of the model's reply the stream toggle shows."""
STREAM_REFRESH_S = 0.15
PIN_STYLE = (
    "<style>.selfheal-panel .selfheal-progress{position:sticky;bottom:0;z-index:3;"
    "background:var(--jp-layout-color0,#fff);border-top:1px solid #d0d7de;padding:2px 0}"
    # a sticky row sticks within its nearest scrolling box: the boxes around a live panel
    # (its own VBox, the output area's) let it reach the notebook's scrolling view
    ".selfheal-panel.selfheal-live,.selfheal-panel .selfheal-live,"
    ".jp-OutputArea-output:has(> .selfheal-live),.jp-OutputArea-child:has(.selfheal-live),"
    ".jp-Cell-outputArea:has(.selfheal-live){overflow:visible !important}</style>"
)
"""Keeps the progress row in view (``position: sticky`` at the bottom of the notebook's view)."""
STREAM_CREEP_CHARS = 1500
"""Characters of a reply over which the bar creeps a quarter of an attempt."""


def stream_tail(text: str, lines: int = STREAM_LINES) -> str:
    """The newest ``lines`` lines of a streamed reply, code fences left out."""
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("```")]
    return "\n".join(kept[-lines:])


class Panel:
    """A VBox: the task, the plan, one Accordion section per attempt, the stream, and
    last the progress row (bar, Stop, status in words, the stream toggle); then the
    decision, displayed apart when the run ends (see the module docstring)."""

    def __init__(
        self,
        prompt: str,
        *,
        kind: str = "",
        max_iterations: int,
        on_stop: Callable[[], None],
        on_action: Callable[[str], None] | None = None,
        context: str = "",
        heal: bool = False,
        kernel_note: str = "",
    ) -> None:
        self._on_stop = on_stop
        self._on_action = on_action
        self._max = max(1, max_iterations)
        self._heal = heal
        self._tokens = ""
        self._token_shown_at = 0.0
        self._sections: dict[int, int] = {}
        self._section_html: dict[int, str] = {}
        self._started = time.monotonic()
        self._where = "Starting"
        self._phase = ""
        self._shown_seconds = -1
        self._finished = False
        self._decided = False

        label = f'<span style="color:{GREY};{MONO}">{esc(kind)}</span> ' if kind else ""
        self.title = widgets.HTML(f'<div style="margin:2px 0">{label}<b>{esc(prompt)}</b></div>{context}')
        self.status = widgets.HTML(self._status_html("Starting…"))
        self.progress = widgets.FloatProgress(
            value=0,
            min=0,
            max=self._max,
            bar_style="info",
            layout=widgets.Layout(width="160px"),
        )
        self.stop_button = widgets.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            tooltip="Cancel this run",
            layout=widgets.Layout(width="90px"),
        )
        self.stop_button.on_click(lambda _b: self._stop())
        self.stream_toggle = widgets.ToggleButton(
            value=False,
            description="Show the model's writing",
            icon="eye",
            tooltip="Show the newest lines the model is writing",
            layout=widgets.Layout(width="auto"),
        )
        self.stream_toggle.observe(lambda _change: self._show_stream(), names="value")
        self.kernel_note = widgets.HTML(
            f'<div class="selfheal-kernel-note" style="color:{GREY};font-size:12px">{esc(kernel_note)}</div>'
            if kernel_note
            else ""
        )
        self.tokens = widgets.HTML("")
        self.explanation = widgets.HTML("")
        """The newest failure, explained by the tool before the model answers."""
        self.plan = widgets.HTML("")
        self.accordion = widgets.Accordion(children=[])
        self.progress_row = widgets.HBox(
            [self.progress, self.stop_button, self.status, self.stream_toggle],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.progress_row.add_class("selfheal-progress")
        # While the panel is taller than the view, its progress row stays on screen, at
        # the view's bottom edge, until the panel's end scrolls up to it.
        self.pin = widgets.HTML(PIN_STYLE)
        self.live = widgets.VBox(
            [
                self.pin,
                self.title,
                self.plan,
                self.accordion,
                self.explanation,
                self.tokens,
                self.progress_row,
                self.kernel_note,
            ],
        )
        self.widget = widgets.VBox([self.live], layout=widgets.Layout(border="1px solid #d0d7de", padding="4px 8px"))
        self.widget.add_class("selfheal-panel")
        self.widget.add_class("selfheal-live")
        self.live.add_class("selfheal-live")

        # ---- the decision (displayed when the run ends, below the record) ----------
        def wide() -> widgets.Layout:  # one Layout each: hiding one button must not hide another
            return widgets.Layout(width="auto")

        self.replace_button = widgets.Button(
            description="Accept (Replace this cell)",
            icon="check",
            button_style="success",
            layout=wide(),
            tooltip="Put the fix into this cell (it is not run)",
        )
        self.insert_button = widgets.Button(
            description="Insert below",
            icon="plus",
            layout=wide(),
            tooltip="Add the code as a new cell right below this one",
        )
        self.replace_run_button = widgets.Button(
            description="Accept and run",
            icon="forward",
            layout=wide(),
            tooltip="Put the fix into this cell and run the cell",
        )
        self.run_button = widgets.Button(
            description="Run in my kernel", icon="play", layout=wide(), tooltip="Run the code in your kernel now"
        )
        self.confirm_button = widgets.Button(
            description="Run it anyway", icon="play", button_style="warning", layout=wide()
        )
        self.cancel_button = widgets.Button(description="Do not run it", icon="times", layout=wide())
        self.reject_button = widgets.Button(
            description="Reject", icon="times", layout=wide(), tooltip="Leave your cell and your kernel as they are"
        )
        for button, name in (
            (self.insert_button, "insert"),
            (self.replace_button, "replace"),
            (self.replace_run_button, "replace-run"),
            (self.run_button, "run"),
            (self.reject_button, "reject"),
            (self.confirm_button, "run-confirmed"),
            (self.cancel_button, "run-cancelled"),
        ):
            button.on_click(lambda _b, name=name: self._action(name))
        self.prompt = widgets.HTML("")
        self.review = widgets.HTML("")
        self.actions = widgets.HBox(
            [self.replace_button, self.replace_run_button, self.insert_button, self.run_button, self.reject_button],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        self.question = widgets.HTML("")
        self.confirmation = widgets.VBox(
            [self.question, widgets.HBox([self.confirm_button, self.cancel_button])],
            layout=widgets.Layout(display="none"),
        )
        self.confirmation.add_class("selfheal-confirm")
        self.outcome = widgets.HTML("")
        self.output = widgets.Output()
        self.decision = widgets.VBox(
            [self.prompt, self.review, self.actions, self.confirmation, self.outcome, self.output],
            layout=widgets.Layout(border="1px solid #d0d7de", padding="4px 8px"),
        )
        self.decision.add_class("selfheal-decision")

    # ------------------------------------------------------------------ display
    def mimebundle(self) -> dict:
        """The panel's display bundle, with a readable text/plain for static viewers."""
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = "selfheal live panel (the run's record is shown below it)"
        return bundle

    # ------------------------------------------------------------------ events
    def handle(self, event: Event) -> None:
        """Each event says what starts next, so the status row is current at once."""
        dispatch(self.HANDLERS, self, event)

    def _run_started(self, event: RunStarted) -> None:
        self._started = time.monotonic()
        self._say("Starting", "")

    def _plan_ready(self, event: PlanReady) -> None:
        self.plan.value = plan_html(event.plan)
        if self._heal:
            self._say(self._label(0), "running your cell in the sandbox")
        else:
            self._say(self._label(1), "writing the code" + (" (the plan is ready)" if event.plan.steps else ""))

    def _candidate_ready(self, event: CandidateReady) -> None:
        self._candidate(event)
        self._say(self._label(event.candidate.iteration), "about to run it in the sandbox")

    def _execution_started(self, event: ExecutionStarted) -> None:
        index = event.iteration
        self._move(index - 0.4)
        self._say(self._label(index), "running your cell in the sandbox" if index == 0 else "running it in the sandbox")

    def _execution_done(self, event: ExecutionDone) -> None:
        index = event.iteration
        if index in self._section_html:
            self._set_section(index, self._section_html[index] + result_html(event.result, ""), None)
        self._say(self._label(index), "checking the result")

    def _failure_explained(self, event: FailureExplained) -> None:
        self.explanation.value = explanation_html(event.explanation)
        if event.iteration in self._section_html:
            body = self._section_html[event.iteration] + explanation_html(event.explanation)
            self._set_section(event.iteration, body, None)
        if event.explanation.diagnosis:
            self._say(self._label(event.iteration), "failed: " + event.explanation.error[:60])

    def _model_waiting(self, event: ModelWaiting) -> None:
        self._say(self._where, waiting_text(event.ahead))

    def _verdict_ready(self, event: VerdictReady) -> None:
        it = event.iteration
        if it.verdict.passed:
            self.explanation.value = ""
        self._ensure_section(it.index)
        self._set_section(it.index, iteration_body_html(it), iteration_title(it))
        self._move(it.index)
        if it.verdict.passed:
            self._say(self._label(it.index), "passed")
            return
        if it.verdict.spec_violations and all(v.rule in DATA_RULES for v in it.verdict.spec_violations):
            why = "it did not use your data as it is"
        elif it.verdict.spec_violations:
            why = "it changed your asserts or tests"
        else:
            why = iteration_title(it).partition("✘")[2].strip() or "it did not pass"
        what = "your cell" if it.index == 0 else f"attempt {it.index}"
        if it.index < self._max:
            self._say(self._label(it.index + 1), f"writing the fix ({what} failed: {why})")
        else:
            self._say(self._label(it.index), f"failed ({why})")

    def tick(self) -> None:
        """Called while the run waits: the seconds in the status move on."""
        if not self._finished and int(time.monotonic() - self._started) != self._shown_seconds:
            self._render_status()

    def waiting(self, text: str) -> None:
        """The run waits its turn in the class service (``text``: how many are ahead)."""
        self._say("Queued", text)

    def checking_fix(self) -> None:
        """The run passed; the fix to hand over is worked out and checked again."""
        self._say("Passed", "leaving out what the fix does not need, each step checked in the sandbox")

    def finish(self, run: Run) -> None:
        """The run ended: the live part folds away (the record below keeps the history)."""
        self._finished = True
        self.tokens.value = ""
        self.stop_button.layout.display = "none"
        self.progress.bar_style = "success" if run.outcome == "success" else "danger"
        self.progress.value = self._max
        self.widget.layout.display = "none"
        for box in (self.widget, self.live):  # the output area scrolls as it did
            box.remove_class("selfheal-live")

    def offer_actions(
        self,
        note: str = "",
        *,
        insert: bool = True,
        replace: bool = False,
        run: bool = True,
        replace_run: bool = False,
        insert_label: str = "Insert below",
        review: str = "",
    ) -> None:
        """Display the decision for a run's code, last in the cell: ``note`` (what the
        buttons do), ``review`` (HTML: the code or its diff to the cell), the buttons
        and Reject. A run that did not pass offers its best attempt to insert only,
        under its own label. ``replace_run``: Accept and run too (a fix the review
        flags nothing of)."""
        self.insert_button.description = insert_label
        self.insert_button.button_style = "" if replace or insert_label != "Insert below" else "success"
        self.insert_button.layout.display = "" if insert else "none"
        self.replace_button.layout.display = "" if replace else "none"
        self.replace_run_button.layout.display = "" if replace and replace_run else "none"
        self.run_button.layout.display = "" if run else "none"
        self.actions.layout.display = "" if (insert or replace or run) else "none"
        self.reject_button.layout.display = "" if (insert or replace or run) else "none"
        self.prompt.value = f'<div style="margin:2px 0">{esc(note)}</div>' if note else ""
        self.review.value = review
        if not self._decided:
            self._decided = True
            bundle = self.decision._repr_mimebundle_()
            bundle["text/plain"] = note or "selfheal: the run's code is in agent_result"
            display(bundle, raw=True)

    def confirm(self, question: str) -> None:
        """Ask once more before a choice (Run in my kernel of code the review flags):
        the buttons give way to ``question`` and Run it anyway / Do not run it."""
        self.actions.layout.display = "none"
        self.question.value = (
            f'<div class="selfheal-question" style="margin:4px 0;font-weight:600">{esc(question)}</div>'
        )
        self.confirmation.layout.display = ""

    def unconfirm(self) -> None:
        """The question was declined: the buttons are back."""
        self.confirmation.layout.display = "none"
        self.question.value = ""
        self.actions.layout.display = ""

    def settle(self, message: str) -> None:
        """After a choice: buttons gone, a note of what happened (the review stays)."""
        self.actions.layout.display = "none"
        self.confirmation.layout.display = "none"
        self.prompt.value = ""
        self.outcome.value = f'<div class="selfheal-settled" style="margin:4px 0;font-weight:600">{esc(message)}</div>'

    # ------------------------------------------------------------------ internals
    def _label(self, index: int) -> str:
        if index == 0:
            return "Your cell"
        return f"Attempt {index} of {self._max}" if index <= self._max else f"Attempt {index}"

    def _say(self, where: str, phase: str) -> None:
        self._where, self._phase = where, phase
        self._render_status()

    def _render_status(self) -> None:
        seconds = int(time.monotonic() - self._started)
        self._shown_seconds = seconds
        parts = [self._where, self._phase, f"{seconds} s"]
        self.status.value = self._status_html(" · ".join(p for p in parts if p))

    def _move(self, value: float) -> None:
        self.progress.value = min(self._max, max(self.progress.value, value))

    def _stop(self) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self._say("Stopping", "killing the sandbox run")
        self._on_stop()

    def _action(self, name: str) -> None:
        if self._on_action is not None:
            self._on_action(name)

    def _stream(self, event: TokensStreamed) -> None:
        self._tokens += event.text
        if event.stage == "planner":
            where, phase = "Planning", "writing the plan"
        else:
            where = self._label(event.iteration)
            phase = "writing the code" if event.iteration == 1 and not self._heal else "writing the fix"
            # the bar creeps while the model writes (a long reply is not a stalled run)
            self._move(event.iteration - 0.7 + 0.25 * min(1.0, len(self._tokens) / STREAM_CREEP_CHARS))
        if (where, phase) != (self._where, self._phase):
            self._say(where, phase)
        now = time.monotonic()
        if now - self._token_shown_at >= STREAM_REFRESH_S:
            self._token_shown_at = now
            self._show_stream()
            self.tick()

    def _show_stream(self) -> None:
        """The toggle's box: the newest lines of the reply (fences left out), so it
        always shows the tail; nothing while the toggle is off."""
        tail = stream_tail(self._tokens) if self.stream_toggle.value and not self._finished else ""
        self.tokens.value = (
            (
                f'<pre class="selfheal-tokens" style="margin:2px 0;padding:4px 8px;{MONO};'
                f'background:{CODE_BG};color:{GREY};white-space:pre-wrap">{esc(tail)}</pre>'
            )
            if tail
            else ""
        )

    def _candidate(self, event: CandidateReady) -> None:
        self._tokens = ""
        self._show_stream()
        index = event.candidate.iteration
        self._ensure_section(index)
        body = heading("Code") + code_html(event.candidate.code)
        if event.diff:
            body += heading("Diff to the previous attempt") + diff_html(event.diff, headers=False)
        label = "your cell" if index == 0 else f"Attempt {index}"
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
        return f'<span class="selfheal-status" style="color:{GREY};margin-left:8px">{esc(text)}</span>'

    HANDLERS: ClassVar[Handlers] = {
        RunStarted: _run_started,
        PlanReady: _plan_ready,
        TokensStreamed: _stream,
        CandidateReady: _candidate_ready,
        ExecutionStarted: _execution_started,
        ExecutionDone: _execution_done,
        FailureExplained: _failure_explained,
        ModelWaiting: _model_waiting,
        VerdictReady: _verdict_ready,
        RunFinished: lambda panel, event: panel.finish(event.run),
        CheckingFix: lambda panel, _event: panel.checking_fix(),
        Waiting: lambda panel, event: panel.waiting(event.text()),
    }
    """The one mapping from each event to what the panel does with it."""
