"""Typed events the loop emits while it works.

Renderers (HTML, the widget panel, the CLI transcript) subscribe to them; they are
observers only and never steer the loop. Each event carries the data model objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..model import Candidate, ExecutionResult, Explanation, Iteration, Plan, Run


@dataclass
class RunStarted:
    run: Run


@dataclass
class PlanReady:
    plan: Plan


@dataclass
class TokensStreamed:
    stage: Literal["planner", "developer"]
    iteration: int
    text: str
    """The new text (a delta), not the whole reply so far."""


@dataclass
class CandidateReady:
    candidate: Candidate
    diff: str


@dataclass
class ExecutionStarted:
    iteration: int


@dataclass
class ExecutionDone:
    iteration: int
    result: ExecutionResult


@dataclass
class FailureExplained:
    """A run failed and the tool explained it on its own (:mod:`~selfheal_jupyter.diagnosis`),
    right after the run and before any model call about it."""

    iteration: int
    explanation: Explanation


@dataclass
class ModelWaiting:
    """The model server is busy with other requests: ``ahead`` of ours, in its queue."""

    ahead: int


@dataclass
class VerdictReady:
    iteration: Iteration
    """The complete iteration record (candidate, result, verdict, diff, usage, timings)."""


@dataclass
class RunFinished:
    run: Run


@dataclass
class CheckingFix:
    """A cell's run passed; the smallest change that passes is being checked (emitted by
    the fix hand-over after the loop, in a kernel or in the class service)."""


@dataclass
class Waiting:
    """The class service's queue: the run waits its turn, ``ahead`` runs start before it."""

    ahead: int

    def text(self) -> str:
        """In the panel's words."""
        if self.ahead <= 0:
            return "waiting — yours is next"
        return f"waiting — {self.ahead} run{'s' if self.ahead != 1 else ''} ahead of yours"


Event = (
    RunStarted
    | PlanReady
    | TokensStreamed
    | CandidateReady
    | ExecutionStarted
    | ExecutionDone
    | FailureExplained
    | ModelWaiting
    | VerdictReady
    | RunFinished
    | CheckingFix
    | Waiting
)

EventHandler = Callable[[Event], None]

EVENT_TYPES: tuple[type, ...] = (
    RunStarted,
    PlanReady,
    TokensStreamed,
    CandidateReady,
    ExecutionStarted,
    ExecutionDone,
    FailureExplained,
    ModelWaiting,
    VerdictReady,
    RunFinished,
    CheckingFix,
    Waiting,
)
"""Every event an observer may be handed: the loop's, the fix hand-over's, the class
service's queue. Each renderer maps every one of them to a handler, once
(:func:`dispatch`; a test renders each with each renderer)."""

Handlers = Mapping[type, Callable[[Any, Any], None]]
"""A renderer's one mapping: event type → its handler (called with the renderer and the event)."""


def dispatch(handlers: Handlers, owner: Any, event: Any) -> None:
    """Hand ``event`` to ``owner``'s handler of its type."""
    handlers[type(event)](owner, event)


def ignore(_owner: Any, _event: Any) -> None:
    """The handler of an event a renderer does not show."""
