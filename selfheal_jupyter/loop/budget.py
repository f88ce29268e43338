"""What one run may spend, and the messages that say it ran out.

Every bound (rounds, tokens, wall clock, the user's stop) is checked here, at the
steps that would spend it: :meth:`LoopBudget.check` before a step, :meth:`LoopBudget.admit`
before each request to the model (the model client calls it back).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Cancelled
from .advice import advise
from .state import RunState


class OutOfBudget(Exception):
    """Leave the run with this outcome and message (a bound hit, or a round rule's stop)."""

    def __init__(self, outcome: str, message: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


@dataclass
class LoopBudget:
    """What one run may spend: rounds, tokens, wall clock, and the size of what it takes."""

    max_iterations: int
    token_budget: int
    """0 = no limit."""
    time_budget_s: float
    """0 = no limit."""
    max_code_bytes: int = 0
    """The largest program, task text or tests a run takes; 0 = any."""

    def check(self, state: RunState, *, before: str, tokens: bool = True) -> None:
        """Stop before ``before`` when the user stopped, the clock ran out or (``tokens``:
        a step that asks the model) the token budget is used up."""
        if state.stop.cancelled:
            raise Cancelled(f"Stopped before {before}.")
        if state.stop.expired:
            raise OutOfBudget(
                "budget_exhausted",
                f"The wall-clock budget of {self.time_budget_s:g} s ran out before "
                f"{before}. {advise(state.run)} (`%config SelfHeal.time_budget_s` sets the budget; 0 = no limit.)",
            )
        budget = self.token_budget
        if tokens and budget > 0 and state.tokens >= budget:
            raise OutOfBudget(
                "budget_exhausted",
                f"The token budget of {budget} tokens is used up ({state.tokens} used) "
                f"before {before}. Raise `%config SelfHeal.token_budget` (0 = no limit).",
            )

    def tokens_left(self, state: RunState) -> bool:
        """Whether another request may be sent (no token budget, or some of it left)."""
        return self.token_budget <= 0 or state.tokens < self.token_budget

    def admit(self, state: RunState, size: int) -> None:
        """Before each request: one whose prompt cannot fit in what is left of the token
        budget ends the run, before it is sent."""
        budget = self.token_budget
        if budget > 0 and state.tokens + size > budget:
            raise OutOfBudget(
                "budget_exhausted",
                f"The next request to the model is about {size:,} tokens (estimated from its "
                f"size) and only {max(budget - state.tokens, 0):,} of the token budget of "
                f"{budget:,} are left, so it was not sent. Raise `%config "
                "SelfHeal.token_budget` (0 = no limit), or give a smaller program, task or "
                "tests.",
            )

    def stopped(self, state: RunState) -> None:
        """Record why the stop signal fired: the user, or the wall-clock budget."""
        run = state.run
        if state.stop.cancelled or not state.stop.expired:
            run.outcome, run.error = "cancelled", "Stopped by the user."
        else:
            run.outcome = "budget_exhausted"
            run.error = (
                f"The wall-clock budget of {self.time_budget_s:g} s ran out. {advise(run)} "
                "(`%config SelfHeal.time_budget_s` sets the budget; 0 = no limit.)"
            )
