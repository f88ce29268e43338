"""When a run showed what its user waits for, read from its events as they came.

Two moments: the first useful feedback (the tool's own explanation of a failure, or else
the first program written for the task) and the passing round (the verdict of the
iteration the run ends with). Seconds from the run's start, on the clock of the process
that ran it; the run's record says what happened, this says when.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EventClock:
    """An ``on_event`` observer that notes the moments (see the module docstring)."""

    started: float = field(default_factory=time.monotonic)
    first_feedback_s: float | None = None
    explained_s: float | None = None
    verdict_s: dict[int, float] = field(default_factory=dict)

    def __call__(self, event: Any) -> None:
        now = time.monotonic() - self.started
        kind = type(event).__name__
        if kind == "FailureExplained" and event.explanation.diagnosis:
            self.explained_s = self.explained_s if self.explained_s is not None else now
            self._feedback(now)
        elif kind == "CandidateReady" and event.candidate.iteration >= 1:
            self._feedback(now)
        elif kind == "VerdictReady":
            self.verdict_s[event.iteration.index] = now

    def _feedback(self, now: float) -> None:
        if self.first_feedback_s is None:
            self.first_feedback_s = now

    def moments(self, run: Any) -> dict[str, float | None]:
        """``first_feedback_s``, ``explained_s`` and ``pass_s`` (None: it never came)."""
        final = run.final_iteration
        passed = self.verdict_s.get(final.index) if final is not None and run.outcome == "success" else None
        return {
            "first_feedback_s": _round(self.first_feedback_s),
            "explained_s": _round(self.explained_s),
            "pass_s": _round(passed),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
