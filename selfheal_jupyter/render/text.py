"""Plain-text rendering of a run for terminals (``selfheal run`` without ``--json``).

Two observers of the loop's events: :class:`Progress` (stderr: a spinner line on a
terminal, streamed tokens or stage lines otherwise) and :class:`Transcript` (stdout:
the plan, each candidate or its diff, what happened, the verdict, the summary).
"""

from __future__ import annotations

import itertools
import threading
from typing import TextIO

from ..events import (
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
from ..feedback import tail
from ..model import Iteration, Plan, Run

RULE = "─" * 60


class Transcript:
    """The readable record, written as the run goes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def _w(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def plan(self, plan: Plan) -> None:
        if not plan.steps:
            return
        self._w(f"Plan ({plan.source}):")
        for i, step in enumerate(plan.steps, 1):
            self._w(f"  {i}. {step}")
        self._w()

    def candidate(self, index: int, code: str, diff: str) -> None:
        label = "given program" if index == 0 else f"iteration {index}"
        self._w(RULE)
        if diff:
            self._w(f"{label}: changes to the previous program")
            self._w(diff.rstrip("\n"))
        else:
            self._w(f"{label}: program")
            self._w(code.rstrip("\n"))

    def verdict(self, it: Iteration) -> None:
        result = it.result
        if result is None:
            self._w(RULE)
            self._w(f"iteration {it.index}: the reply contained no program")
        elif result.error is not None:
            where = f" (line {result.error.line})" if result.error.line else ""
            self._w(f"→ {result.status}: {result.error.type}: {result.error.message}{where}")
        else:
            self._w(f"→ {result.status} in {result.duration_s:.2f} s")
        if result is not None and result.stdout.strip():
            self._w("  stdout:")
            self._w("\n".join("    " + ln for ln in tail(result.stdout, 10).splitlines()))
        for t in result.tests if result else []:
            mark = "✓" if t.passed else "✗"
            msg = f" — {t.message}" if t.message and not t.passed else ""
            self._w(f"  {mark} {t.source}{msg}")
        for t in it.checks:
            mark = "✓" if t.passed else "?"
            msg = f" — {t.message}" if t.message and not t.passed else ""
            self._w(f"  {mark} generated check (soft): {t.source}{msg}")
        for v in it.runtime_values:
            self._w(f"  value: {v.source} = {v.message if v.passed else 'raises ' + v.message}")
        if it.samples:
            chosen = next(i for i, x in enumerate(it.samples, 1) if x.chosen)
            fresh = [i for i, x in enumerate(it.samples, 1) if x.fresh]
            over = f" (#{', #'.join(map(str, fresh))} started over)" if fresh else ""
            self._w(f"  sampled {len(it.samples)} programs{over}, chose #{chosen}")
        state = "PASSED" if it.verdict.passed else "failed"
        self._w(f"verdict: {state} ({'; '.join(it.verdict.reasons)})")
        for violation in it.verdict.spec_violations:
            self._w(f"  ✗ spec [{violation.rule}]: {violation.message}")
            self._w(f"    to comply: {violation.fix}")

    def finish(self, run: Run) -> None:
        t = run.totals
        self._w(RULE)
        self._w(
            f"outcome: {run.outcome} after {t.iterations} iteration(s), "
            f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.duration_s:.1f} s "
            f"(model {t.llm_s:.1f} s, sandbox {t.sandbox_s:.1f} s)"
        )
        if run.error and run.outcome != "success":
            self._w(run.error)
        best = run.best_attempt
        if run.final_code:
            self._w(RULE)
            self._w("final program:")
            self._w(run.final_code.rstrip("\n"))
        elif best is not None:
            self._w(RULE)
            self._w(f"best attempt (round {best.index}, did not pass: "
                    f"{'; '.join(best.verdict.reasons)}):")
            self._w(best.candidate.code.rstrip("\n"))


class Progress:
    """What the run is doing right now, on stderr; forwards events to a transcript."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, err: TextIO, *, stream_tokens: bool = True) -> None:
        self.err = err
        self.tty = bool(getattr(err, "isatty", lambda: False)())
        self.stream_tokens = stream_tokens and not self.tty
        self.transcript: Transcript | None = None
        self._text = ""
        self._tokens = 0
        self._stage: tuple[str, int] | None = None
        self._mid_stream = False  # streamed tokens written without their closing newline
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
                    self.err.write(f"\r\033[K{frame} {self._text}{extra}")
                    self.err.flush()

    def status(self, text: str) -> None:
        with self._lock:
            self._text, self._tokens = text, 0
            if not self.tty and not self.stream_tokens:
                self.err.write(text + "\n")
                self.err.flush()

    def clear(self) -> None:
        self._stop.set()
        if self._spinner is not None:
            self._spinner.join(timeout=1)
        if self.tty:
            self.err.write("\r\033[K")
            self.err.flush()

    def _end_stream(self) -> None:
        """Close a line of streamed tokens, so what follows starts on its own line."""
        if self._mid_stream:
            self.err.write("\n")
            self.err.flush()
            self._mid_stream = False

    def _print_above(self, fn) -> None:  # noqa: ANN001 - a transcript method
        with self._lock:
            self._end_stream()
            if self.tty:
                self.err.write("\r\033[K")
                self.err.flush()
            fn()

    def on_event(self, event: Event) -> None:
        tr = self.transcript
        if isinstance(event, RunStarted):
            self.status("planning…")
        elif isinstance(event, PlanReady):
            if tr:
                self._print_above(lambda: tr.plan(event.plan))
            self.status("writing the program…")
        elif isinstance(event, TokensStreamed):
            with self._lock:
                self._tokens += 1
                if self.stream_tokens:
                    stage = (event.stage, event.iteration)
                    if stage != self._stage:
                        label = "plan" if event.stage == "planner" else f"iteration {event.iteration}"
                        self.err.write(f"\n[{label}] ")
                        self._stage = stage
                    self.err.write(event.text)
                    self.err.flush()
                    self._mid_stream = True
        elif isinstance(event, CandidateReady):
            with self._lock:
                self._end_stream()
            if tr:
                c = event.candidate
                self._print_above(lambda: tr.candidate(c.iteration, c.code, event.diff))
        elif isinstance(event, ExecutionStarted):
            self.status(f"running iteration {event.iteration} in the sandbox…")
        elif isinstance(event, ExecutionDone):
            self.status("judging…")
        elif isinstance(event, VerdictReady):
            if tr:
                self._print_above(lambda: tr.verdict(event.iteration))
            if not event.iteration.verdict.passed:
                self.status(f"repairing (iteration {event.iteration.index + 1})…")
        elif isinstance(event, RunFinished):
            self.status("")
