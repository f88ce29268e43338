"""One run in progress: its record, its stop signal, its observer and what it spent.

Apart from the orchestrator so that what the model client, the agents and the judge
call back while a round works (a token streamed, a request admitted, the clock) lands
here, and the orchestrator is entered only to drive rounds.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from ..model import Candidate, Iteration, Run, Task, Timings, Totals, Usage
from ..sandbox.serialize import Pickled
from . import rounds
from . import verdict as judging
from .events import Event, EventHandler, ModelWaiting, TokensStreamed

log = logging.getLogger(__name__)

STOP_POLL_S = 0.05


class StopSignal:
    """One event set when the user cancels OR the wall-clock budget runs out.

    The LLM client and the sandbox watch this single event, so either cause stops
    them within a fraction of a second.
    """

    def __init__(self, user: threading.Event | None, deadline: float | None) -> None:
        self.user = user
        self.deadline = deadline
        self.event = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if user is not None or deadline is not None:
            self._thread = threading.Thread(target=self._watch, daemon=True, name="selfheal-stop")
            self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self.cancelled or self.expired:
                self.event.set()
                return
            self._done.wait(STOP_POLL_S)

    @property
    def cancelled(self) -> bool:
        return self.user is not None and self.user.is_set()

    @property
    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


class Emitter:
    """Calls the observer; an observer that raises is logged, never steers the loop."""

    def __init__(self, handler: EventHandler | None) -> None:
        self.handler = handler
        self.failures = 0

    def __call__(self, event: Event) -> None:
        if self.handler is None:
            return
        try:
            self.handler(event)
        except Exception:
            self.failures += 1
            if self.failures == 1:
                log.exception("an event handler failed on %s", type(event).__name__)

    def tokens(self, stage: str, iteration: int, text: str) -> None:
        """A streamed delta of the planner's or the developer's reply."""
        self(TokensStreamed(stage, iteration, text))  # type: ignore[arg-type]

    def waiting(self, ahead: int) -> None:
        """The model server's queue holds ``ahead`` requests before ours."""
        self(ModelWaiting(ahead))


@dataclass
class RoundSoFar:
    """The round in progress: what it spent and the first program it got."""

    index: int
    code: str | None = None
    reply: str = ""
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0


@dataclass
class RunState:
    """One run in progress: its record, its stop signal and what it spent so far."""

    run: Run
    stop: StopSignal
    emit: Emitter
    started: float
    tokens: int = 0
    llm_s: float = 0.0
    sandbox_inputs: dict[str, Pickled] = field(default_factory=dict)
    progress: rounds.Progress = field(default_factory=rounds.Progress)
    """What the last round hands to the next (:func:`~selfheal_jupyter.loop.rounds.next_step`)."""
    round: RoundSoFar | None = None
    """The round in progress (None between rounds)."""

    def programs(self) -> list[tuple[int, str]]:
        """(round, program) of every round so far that had one, the latest first."""
        return [(it.index, it.candidate.code) for it in reversed(self.run.iterations) if it.candidate.code]

    def keep_round(self, exc: Exception) -> None:
        """A failure ended the run in the middle of a round: what that round wrote and
        spent is kept in the record (an iteration without a sandbox result), and the
        tokens of a request that failed (a reply stopped at its cap) are counted."""
        spent = getattr(exc, "usage", None) or Usage()
        so_far, self.round = self.round, None
        if so_far is None:  # the planner's or the check designer's request
            self.run.planning_usage = self.run.planning_usage + spent
            return
        usage = so_far.usage + spent
        if not usage.total_tokens and so_far.code is None:
            return
        self.run.iterations.append(
            Iteration(
                index=so_far.index,
                candidate=Candidate(code=so_far.code or "", iteration=so_far.index, reply=so_far.reply),
                result=None,
                verdict=judging.unfinished(),
                usage=usage,
                timings=Timings(llm_s=so_far.llm_s),
            )
        )

    def finish(self) -> None:
        """The run's totals, from its record and what was spent outside its rounds."""
        run = self.run
        if run.outcome is None:  # pragma: no cover - every path sets one
            run.outcome = "failed"
        totals = Totals(iterations=len(run.iterations))
        usage = run.planning_usage
        for it in run.iterations:
            usage = usage + it.usage
            totals.llm_s += it.timings.llm_s
            totals.sandbox_s += it.timings.sandbox_s
            totals.overhead_s += it.timings.overhead_s
        totals.llm_s += self.llm_s
        totals.prompt_tokens = usage.prompt_tokens
        totals.completion_tokens = usage.completion_tokens
        totals.duration_s = time.monotonic() - self.started
        run.totals = totals


def data_names(task: Task) -> dict[str, None]:
    """The user's data (inputs and copied notebook values): never to be replaced."""
    ctx = task.context
    return dict.fromkeys([*task.inputs, *(ctx.data_names() if ctx else ())])
