"""The loop's rounds: what one round hands to the next, and what happens after each.

A run is round 0 — the user's own program, run as it is, when the task starts from it —
then rounds 1 to ``max_iterations``, in which the developer writes and QA judges. After
every round :func:`next_step`, a pure function of what the loop carried so far
(:class:`Progress`) and what the round produced (:class:`RoundEnd`), says what happens
next: :class:`Success`, :class:`Stop` (an outcome and a message that says what to do),
:class:`Stopped` (the user's stop or the clock during the sandbox run), or
:class:`Another` round, told what :attr:`Progress.repair` holds. Whether a program passed
is the verdict's (:mod:`selfheal_jupyter.loop.verdict`); this module decides only what
follows from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ..agents.developer import RepairContext
from ..feedback import failure_signature
from ..model import ASSERT_RULES, Iteration, Verdict
from . import verdict as judging

MAX_NO_CODE_IN_A_ROW = 2
MAX_ASSERT_CHANGES = 2
"""Rounds whose candidate changed one of the user's asserts or tests before the run ends
``failed``: a model that keeps doing so believes the assert itself is wrong, and only
the user may decide that."""


@dataclass(frozen=True)
class Rules:
    """The values :func:`next_step` decides by (from ``SelfHeal``, through the loop)."""

    max_iterations: int
    restart_after: int = 0
    """Start over after this many failed repairs in a row (0 = never; ``SelfHeal.restart_after``)."""


@dataclass(frozen=True)
class Progress:
    """What the loop carries from one round to the next (nothing else outlives a round)."""

    repair: RepairContext | None = None
    """What the next round is told: the program as it stands and what went wrong (None:
    write from the task)."""
    origin: RepairContext | None = None
    """Where a start-over begins: the user's code and its feedback (None: from the task)."""
    last_code: str | None = None
    """The last program the model gave (the program as it stands)."""
    last_signature: tuple[str, ...] | None = None
    no_code_in_a_row: int = 0
    failed_repairs: int = 0
    """Failed repairs in a row since the start or the last restart."""
    assert_changes: tuple[tuple[int, str], ...] = ()
    """(round, the user's assert) for every round whose candidate changed an assert/test."""
    soft_pass: Iteration | None = None
    """The pass whose generated checks failed; the round after it ends the run."""
    restart: bool = False
    """The next round starts over from :attr:`origin` (``SelfHeal.restart_after``)."""


@dataclass(frozen=True)
class RoundEnd:
    """What a round produced, as :func:`next_step` reads it."""

    iteration: Iteration
    """The round as recorded (verdict, feedback, checks, whether it restarted)."""
    code: str | None
    """The chosen program (None: the reply had none, or its edits did not apply)."""
    finish_reason: str | None = None
    soft: bool = False
    """A pass with failing generated checks that opens the soft round (:func:`~selfheal_jupyter.loop.verdict.opens_soft_round`)."""
    failing_checks: bool = False
    """The feedback holds failing generated checks."""
    repaired: bool = False
    """The round repaired a program (not round 0, not a start-over, not from the task)."""


@dataclass(frozen=True)
class Success:
    final_index: int | None = None
    """The iteration that stands (None: the last that passed)."""


@dataclass(frozen=True)
class Stop:
    outcome: Literal["failed", "budget_exhausted"]
    message: str


@dataclass(frozen=True)
class Stopped:
    """The stop signal ended the sandbox run (the user's Stop, or the wall clock)."""

    message: str


@dataclass(frozen=True)
class Another:
    """One more round, told :attr:`Progress.repair`."""


Step = Success | Stop | Stopped | Another


def next_step(progress: Progress, end: RoundEnd, rules: Rules, *, stopping: bool = False) -> tuple[Step, Progress]:
    """What follows a round, and what the loop carries into the next one.

    ``stopping``: the stop signal has fired (a killed run is then the stop's, not the
    program's)."""
    it, code = end.iteration, end.code
    verdict, index = it.verdict, it.index
    no_code = 0 if code is not None or it.edit_failure else progress.no_code_in_a_row + 1
    progress = replace(progress, no_code_in_a_row=no_code, restart=False)
    if progress.soft_pass is not None:
        return Success(judging.soft_round_result(progress.soft_pass, it)), progress
    if verdict.passed and not end.soft:
        return Success(), progress
    if it.result is not None and it.result.status == "killed" and stopping:
        return Stopped("Stopped during the sandbox run."), progress
    changed = [v for v in verdict.spec_violations if v.rule in ASSERT_RULES]
    if changed:
        progress = replace(
            progress, assert_changes=(*progress.assert_changes, (index, changed[0].original or changed[0].message))
        )
        if len(progress.assert_changes) >= MAX_ASSERT_CHANGES:
            return Stop("failed", assert_change_message(progress.assert_changes)), progress
    progress = replace(progress, failed_repairs=0 if it.restarted else progress.failed_repairs)
    progress = _told_next(progress, end)
    if progress.no_code_in_a_row >= MAX_NO_CODE_IN_A_ROW and index < rules.max_iterations:
        return Stop("failed", no_code_message(progress.no_code_in_a_row)), progress
    if index >= rules.max_iterations:
        return Stop("budget_exhausted", out_of_rounds_message(rules.max_iterations, verdict)), progress
    restart = rules.restart_after > 0 and progress.failed_repairs >= rules.restart_after
    return Another(), replace(progress, restart=restart)


def _told_next(progress: Progress, end: RoundEnd) -> Progress:
    """What the next round is told: the program as it stands and what went wrong."""
    it, code = end.iteration, end.code
    truncated = end.finish_reason == "length"
    told = progress.repair
    if code is None:
        # The program as it stands did not change: keep its feedback, ask for code
        # (the whole program, saying which block failed, when the edits did not apply).
        repair = RepairContext(
            code=progress.last_code,
            feedback=told.feedback if told else "",
            no_code=not it.edit_failure,
            edit_failure=it.edit_failure,
            truncated=truncated,
            soft_checks=told.soft_checks if told else False,
        )
        return replace(progress, repair=repair)
    signature = failure_signature(it.result)
    repair = RepairContext(
        code=code,
        feedback=it.feedback,
        same_failure=signature == progress.last_signature and not end.soft,
        truncated=truncated,
        soft_checks=end.failing_checks,
    )
    return replace(
        progress,
        repair=repair,
        origin=repair if it.index == 0 else progress.origin,
        last_code=code,
        last_signature=signature,
        soft_pass=it if end.soft else progress.soft_pass,
        failed_repairs=progress.failed_repairs + (1 if end.repaired and not end.soft else 0),
    )


def assert_change_message(changes: tuple[tuple[int, str], ...]) -> str:
    rounds = ", ".join(str(i) for i, _ in changes)
    asserts = "; ".join(dict.fromkeys(f"`{what}`" for _, what in changes))
    return (
        f"Stopped without success: in rounds {rounds} the model changed your assert(s) "
        f"{asserts} instead of making the program satisfy them. Your asserts and tests are "
        "the specification and are never weakened to reach success. If an assert itself "
        "is wrong, correct it and run again; otherwise add detail to the task or try a "
        "stronger model."
    )


def no_code_message(times: int) -> str:
    return (
        f"The model replied {times} times in a row without a "
        "program. Try a stronger model (`%config SelfHeal.model`), or rephrase "
        "the task."
    )


def out_of_rounds_message(max_iterations: int, last: Verdict | None) -> str:
    message = (
        f"No candidate passed within max_iterations={max_iterations}. "
        "Raise `%config SelfHeal.max_iterations`, add detail "
        "to the task, or fix the last program by hand."
    )
    if last is not None and last.spec_violations:
        message += (
            " The last candidate was rejected because it changed your spec ("
            + ", ".join(sorted({v.rule for v in last.spec_violations}))
            + ")."
        )
    return message
