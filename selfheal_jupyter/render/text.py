"""Plain-text rendering of a run for terminals (``selfheal run`` without ``--json``).

Two observers of the loop's events: :class:`Progress` (stderr: a spinner line on a
terminal, stage lines otherwise) and :class:`Transcript` (stdout:
the plan, each candidate or its diff, what happened, the verdict, the summary).
"""

from __future__ import annotations

import itertools
import textwrap
import threading
from collections.abc import Callable
from typing import ClassVar, TextIO

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
    ignore,
)
from ..model import Iteration, Plan, Run
from .html import blind_sentence, capabilities_sentence, tried_lines, waiting_text
from .terminal import MAX_CHARS, MAX_LINES, clip, printable

RULE = "─" * 60
WIDTH = 80
"""Prose is folded to fit a terminal of 80 columns (code is never folded)."""
FULL_RECORD = "the full record: selfheal run ... --json"


def _said(text: str) -> str:
    """What a candidate's run said (its output's end, an error's or a test's message), cut:
    the candidate chooses its length (``raise ValueError("A" * 10**6)``)."""
    return clip(text, 10, 2_000, FULL_RECORD)


def verified_line(run: Run) -> str:
    """What verified a success, in one line (or why nothing did)."""
    blind = blind_sentence(run)
    if run.verified:
        return f"verified by {' and '.join(run.verified_by)}" + (f"; {blind}" if blind else "")
    if blind:
        changed = "it changed what the given program showed, but " if run.changed_behaviour else ""
        return f"not verified: {changed}{blind}"
    return "not verified: it runs, but nothing checked its output (no tests or asserts)"


class Transcript:
    """The readable record, written as the run goes: the plan once, each program once
    (in full the first time, then as changes), what it did, and at the end the final
    program only where it differs from the one last shown in full.

    Every line passes :func:`printable` (model and candidate text is never obeyed by
    the terminal); programs, diffs and outputs are cut at :data:`MAX_LINES` lines with a
    pointer to ``--json``. Once the reader has gone (a closed pipe: ``| head``), nothing
    more is written and ``on_closed`` is called, once.
    """

    def __init__(self, out: TextIO, on_closed: Callable[[], None] | None = None) -> None:
        self.out = out
        self.on_closed = on_closed
        self.closed = False
        self._shown: str | None = None
        """The program last printed in full (None: the last one was shown as changes)."""
        self._shown_label = ""

    def _w(self, text: str = "") -> None:
        if self.closed:
            return
        try:
            self.out.write(printable(text) + "\n")
            self.out.flush()
        except BrokenPipeError:
            self.closed = True
            if self.on_closed is not None:
                self.on_closed()

    def _wrapped(self, text: str, indent: str = "", hang: int = 2) -> None:
        """Prose (verdicts, reasons, messages) folded to the terminal's width; folded
        lines are indented ``hang`` more."""
        for paragraph in text.split("\n"):
            self._w(
                textwrap.fill(
                    paragraph,
                    WIDTH,
                    initial_indent=indent,
                    subsequent_indent=indent + " " * hang,
                    break_on_hyphens=False,
                )
                if len(indent + paragraph) > WIDTH
                else indent + paragraph
            )

    def _block(self, text: str) -> None:
        self._w(clip(text.rstrip("\n"), MAX_LINES, MAX_CHARS, FULL_RECORD))

    def plan(self, plan: Plan) -> None:
        if not plan.steps:
            return
        self._w(f"Plan ({plan.source}):")
        for i, step in enumerate(plan.steps, 1):
            self._wrapped(f"{i}. {step}", indent="  ", hang=len(f"{i}. "))
        self._w()

    def candidate(self, index: int, code: str, diff: str) -> None:
        label = "given program" if index == 0 else f"attempt {index}"
        self._w(RULE)
        if diff:
            self._w(f"{label}: changes to the previous program")
            self._block(diff)
            self._shown = None
        else:
            self._w(f"{label}: program")
            self._block(code)
            self._shown, self._shown_label = code, label

    def verdict(self, it: Iteration) -> None:
        result = it.result
        if result is None:
            self._w(RULE)
            self._w(f"iteration {it.index}: the reply contained no program")
        elif result.error is not None:
            where = f" (line {result.error.line})" if result.error.line else ""
            self._wrapped(f"→ {result.status}: {result.error.type}: {_said(result.error.message)}{where}")
        else:
            self._w(f"→ {result.status} in {result.duration_s:.2f} s")
        if result is not None and result.stdout.strip():
            self._w("  stdout:")
            last = result.stdout.rstrip("\n").splitlines()[-10:]  # the end of what it printed
            self._w("\n".join("    " + ln for ln in _said("\n".join(last)).splitlines()))
        for sentence in it.explanation.diagnosis if it.explanation else []:
            self._wrapped(f"why: {sentence}", indent="  ")
        for t in result.tests if result else []:
            mark = "✓" if t.passed else "✗"
            msg = f" — {_said(t.message)}" if t.message and not t.passed else ""
            self._wrapped(f"{mark} {t.source}{msg}", indent="  ")
        for t in it.checks:
            mark = "✓" if t.passed else "?"
            msg = f" — {_said(t.message)}" if t.message and not t.passed else ""
            self._wrapped(f"{mark} generated check (soft): {t.source}{msg}", indent="  ")
        for v in it.runtime_values:
            self._wrapped(f"value: {v.source} = {v.message if v.passed else 'raises ' + v.message}", indent="  ")
        if it.samples:
            chosen = next(i for i, x in enumerate(it.samples, 1) if x.chosen)
            fresh = [i for i, x in enumerate(it.samples, 1) if x.fresh]
            over = f" (#{', #'.join(map(str, fresh))} started over)" if fresh else ""
            self._w(f"  sampled {len(it.samples)} programs{over}, chose #{chosen}")
        state = "PASSED" if it.verdict.passed else "failed"
        self._wrapped(f"verdict: {state} ({'; '.join(it.verdict.reasons) or 'it ' + it.verdict.rejected_for})")
        for violation in it.verdict.spec_violations:
            self._wrapped(f"✗ spec [{violation.rule}]: {violation.message}", indent="  ")
            self._wrapped(f"to comply: {violation.fix}", indent="    ")
        if it.verdict.notebook_changes:
            names = ", ".join(f"`{n}`" for n in it.verdict.notebook_changes)
            self._wrapped(f"also changes {names}, defined in another cell of your notebook", indent="  ")

    def _program(self, heading: str, code: str) -> None:
        """``code`` under ``heading``, or one line pointing to where it was just shown."""
        self._w(RULE)
        if code == self._shown:
            self._wrapped(f"{heading} the program shown under {self._shown_label} above (the record: --json).")
        else:
            self._w(f"{heading}")
            self._block(code)

    def finish(self, run: Run) -> None:
        t = run.totals
        self._w(RULE)
        self._wrapped(
            f"outcome: {run.outcome} after {run.attempts if run.iterations else t.iterations} attempt(s), "
            f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.duration_s:.1f} s "
            f"(model {t.llm_s:.1f} s, sandbox {t.sandbox_s:.1f} s)"
        )
        if run.outcome == "success":
            self._wrapped(verified_line(run))
        if run.error and run.outcome != "success":
            self._wrapped(run.error)
        best = run.best_attempt
        if run.final_code:
            self._program("final program:", run.final_code)
            self._fix(run)
        elif best is not None:
            self._program(
                f"best attempt (attempt {best.index}, did not pass: {'; '.join(best.verdict.why)}):",
                best.candidate.code,
            )

    def _fix(self, run: Run) -> None:
        """What a notebook would hand over, when it is smaller, and what it newly can do."""
        fix = run.fix
        if fix is None:
            return
        if fix.code.strip() != (run.final_code or "").strip():
            self._program("the fix (the passing program less what it does not need, judged again):", fix.code)
            if fix.dropped:
                self._wrapped("left out: " + "; ".join(fix.dropped), indent="  ")
        said = capabilities_sentence(fix.capabilities)
        for line in [said, *tried_lines(run)]:
            if line:
                self._wrapped(line.rstrip(".") + ".")


class Progress:
    """What the run is doing right now, on stderr; forwards events to a transcript.

    On a terminal, one spinner line that counts the reply's chunks as the model writes;
    otherwise one line per stage. The model's raw reply is not echoed: the transcript
    shows the plan and each program once, when they are complete."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.tty = bool(getattr(err, "isatty", lambda: False)())
        self.transcript: Transcript | None = None
        self._text = ""
        self._tokens = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._spinner: threading.Thread | None = None
        if self.tty:
            self._spinner = threading.Thread(target=self._spin, daemon=True)
            self._spinner.start()

    def _spin(self) -> None:
        for frame in itertools.cycle(self.FRAMES):
            if self._stop.wait(0.1):
                return
            with self._lock:
                if self._text:
                    extra = f" ({self._tokens} chunks)" if self._tokens else ""
                    self._write(f"\r\033[K{frame} {self._text}{extra}")

    def _write(self, text: str) -> None:
        try:
            self.err.write(text)
            self.err.flush()
        except (BrokenPipeError, ValueError):  # stderr gone: progress is not worth a failure
            pass

    def status(self, text: str) -> None:
        """Say what the run does now, on one line: ``text`` may quote the candidate or the
        user's data (a column name in ``why: ...``), so its controls are shown, never obeyed,
        and it is cut to the terminal's width."""
        text = printable(" ".join(text.splitlines()))
        text = text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"
        with self._lock:
            self._text, self._tokens = text, 0
            if not self.tty and text:
                self._write(text + "\n")

    def clear(self) -> None:
        self._stop.set()
        if self._spinner is not None:
            self._spinner.join(timeout=1)
        if self.tty:
            self._write("\r\033[K")

    def _print_above(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self.tty:
                self._write("\r\033[K")
            fn()

    def on_event(self, event: Event) -> None:
        dispatch(self.HANDLERS, self, event)

    def _plan_ready(self, event: PlanReady) -> None:
        tr = self.transcript
        if tr:
            self._print_above(lambda: tr.plan(event.plan))
        self.status("writing the program…")

    def _tokens_streamed(self, event: TokensStreamed) -> None:
        with self._lock:
            self._tokens += 1

    def _candidate_ready(self, event: CandidateReady) -> None:
        tr = self.transcript
        if tr:
            c = event.candidate
            self._print_above(lambda: tr.candidate(c.iteration, c.code, event.diff))

    def _failure_explained(self, event: FailureExplained) -> None:
        if event.explanation.diagnosis:
            self.status("why: " + event.explanation.diagnosis[0].replace("`", ""))

    def _verdict_ready(self, event: VerdictReady) -> None:
        tr = self.transcript
        if tr:
            self._print_above(lambda: tr.verdict(event.iteration))
        if not event.iteration.verdict.passed:
            self.status(f"repairing (attempt {event.iteration.index + 1})…")

    HANDLERS: ClassVar[Handlers] = {
        RunStarted: lambda progress, _event: progress.status("planning…"),
        PlanReady: _plan_ready,
        TokensStreamed: _tokens_streamed,
        CandidateReady: _candidate_ready,
        ExecutionStarted: lambda progress, event: progress.status(f"running attempt {event.iteration} in the sandbox…"),
        ExecutionDone: lambda progress, _event: progress.status("judging…"),
        FailureExplained: _failure_explained,
        ModelWaiting: lambda progress, event: progress.status(waiting_text(event.ahead) + "…"),
        VerdictReady: _verdict_ready,
        CheckingFix: lambda progress, _event: progress.status(
            "passed; leaving out what the fix does not need (checked in the sandbox)…"
        ),
        RunFinished: lambda progress, _event: progress.status(""),
        Waiting: ignore,
    }
    """The one mapping from each event to what the terminal shows of it."""
