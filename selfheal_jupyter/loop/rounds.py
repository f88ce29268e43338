"""The loop's rounds: what one round hands to the next, and what happens after each.

A run is round 0 — the user's own program, run as it is, when the task starts from it —
then rounds 1 to ``max_iterations``, in which the developer writes and QA judges. After
every round :func:`next_step`, a pure function of what the loop carried so far
(:class:`Progress`) and what the round produced (:class:`RoundEnd`), says what happens
next: :class:`Success`, :class:`Stop` (an outcome and a message that says what to do),
:class:`Stopped` (the user's stop or the clock during the sandbox run), or
:class:`Another` round, told what :attr:`Progress.repair` holds — or running
:attr:`Progress.quick_fix`, the tool's own edit a failure implies, before the model is
asked (``SelfHeal.quick_fixes``; such a round counts only if it passes), and, for a question
about the notebook's data, the tool's own program for it first (:func:`opening`). Whether a
program passed is the verdict's (:mod:`selfheal_jupyter.loop.verdict`); this module
decides only what follows from it: also that an identical program is never run twice
(:func:`repeat_of`), and that a run stops when the model keeps repeating itself
(:data:`MAX_REPEATS`) or keeps failing the same way (:data:`HOPELESS_SAME_FAILURE`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from ..agents.developer import RepairContext
from ..diagnosis import TOP, apply_edits, edit_words
from ..feedback import failure_signature
from ..model import ASSERT_RULES, DATA_CHECK_PREFIX, DataCheck, ExecutionResult, Explanation, Iteration, Verdict
from . import verdict as judging

MAX_NO_CODE_IN_A_ROW = 2
MAX_ASSERT_CHANGES = 2
"""Rounds whose candidate changed one of the user's asserts or tests before the run ends
``failed``: a model that keeps doing so believes the assert itself is wrong, and only
the user may decide that."""
HOPELESS_SAME_FAILURE = 3
"""Rounds in a row that failed the same way before a run stops: the model is not getting
closer, and the rounds left would cost minutes each."""
MAX_REPEATS = 2
"""Rounds whose program repeated an earlier one (never run again) before a run stops."""
MAX_QUICK_FIXES = 3
"""Most of the tool's own edits tried in one run (each is one sandbox run, no model)."""
REPEAT_FEEDBACK = (
    "Your reply was the program of round {round} again, which already failed; it was not "
    "run again. Change the code: take another approach to what went wrong below."
)


@dataclass(frozen=True)
class Rules:
    """The values :func:`next_step` decides by (from ``SelfHeal``, through the loop)."""

    max_iterations: int
    restart_after: int = 0
    """Start over after this many failed repairs in a row (0 = never; ``SelfHeal.restart_after``)."""
    quick_fixes: bool = False
    """Run the edit a failure's own explanation implies before asking the model (``SelfHeal.quick_fixes``)."""

    def last_round(self, progress: Progress) -> int:
        """The last round's index: ``max_iterations``, plus one for each of the tool's own
        edits that did not pass (the model still gets its rounds) and one for the edit
        waiting to run (tried after the model's last round too)."""
        return self.max_iterations + progress.quick_rounds + (progress.quick_fix is not None)


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
    same_failures: int = 0
    """Rounds in a row that failed the same way (the last one included)."""
    repeats: int = 0
    """Rounds whose program was one already run (so not run again)."""
    quick_fix: tuple[str, str] | None = None
    """The program the last failure's explanation implies and what changed: the next
    round runs it, no model asked (None: the next round asks the model)."""
    quick_fixes_tried: int = 0
    quick_rounds: int = 0
    """Rounds that ran the tool's own edit and did not pass (they do not count against
    ``max_iterations``)."""


@dataclass(frozen=True)
class RoundEnd:
    """What a round produced, as :func:`next_step` reads it."""

    iteration: Iteration
    """The round as recorded (verdict, feedback, checks, whether it restarted)."""
    code: str | None
    """The chosen program (None: the reply had none, or its edits did not apply)."""
    finish_reason: str | None = None
    failing_checks: tuple[str, ...] = ()
    """The generated checks (and checks from the data) that failed, as the model reads
    them: on a pass, they open the soft round (:func:`opens_soft_round`)."""
    repaired: bool = False
    """The round repaired a program (not round 0, not a start-over, not from the task)."""
    quick_fix: tuple[str, str] | None = None
    """The edit the round's failure implies, as a program not run yet and what changed
    (:func:`quick_fix`); the next round runs it when :attr:`Rules.quick_fixes` allows."""
    advice: str = ""
    """What the user could do next if the run ends here (:func:`~selfheal_jupyter.loop.advice.advise`):
    the messages of the stops that the run's own findings explain end with it."""


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
    soft = opens_soft_round(progress, verdict, end.failing_checks, index, rules)
    no_code = 0 if code is not None or it.edit_failure or it.repeat_of is not None else progress.no_code_in_a_row + 1
    progress = replace(progress, no_code_in_a_row=no_code, restart=False, quick_fix=None)
    if it.quick_fix and not (verdict.passed and not soft):
        progress = replace(progress, quick_rounds=progress.quick_rounds + 1)
    last = rules.last_round(progress)
    if progress.soft_pass is not None:
        return Success(judging.soft_round_result(progress.soft_pass, it)), progress
    if verdict.passed and not soft:
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
    if it.repeat_of is not None:
        # Not run again: the program as it stands and its failure are unchanged; the next
        # round is told so, at the retry temperature.
        progress = replace(progress, repeats=progress.repeats + 1)
        if progress.repeats >= MAX_REPEATS:
            return Stop("failed", repeats_message(index, progress.repeats, end.advice)), progress
        told = progress.repair
        repair = RepairContext(
            code=progress.last_code,
            feedback=it.feedback,
            same_failure=True,
            soft_checks=told.soft_checks if told else False,
        )
        progress = replace(progress, repair=repair)
    else:
        progress = replace(progress, failed_repairs=0 if it.restarted else progress.failed_repairs)
        progress = _told_next(progress, end, soft)
    # Not for a program that changed the user's assert: the edit keeps the change, so it
    # cannot pass, and its round would count as the model changing the assert again.
    quick = (
        end.quick_fix if rules.quick_fixes and not changed and progress.quick_fixes_tried < MAX_QUICK_FIXES else None
    )
    if quick is not None:
        # The failure's own explanation implies one edit: the next round runs it first,
        # before any stop (it asks no model and counts as a round only if it passes).
        return Another(), replace(progress, quick_fix=quick, quick_fixes_tried=progress.quick_fixes_tried + 1)
    if (
        it.repeat_of is None
        and code is not None
        and index > 0
        and not soft
        and progress.same_failures >= HOPELESS_SAME_FAILURE
        and index < last
    ):
        return Stop(
            "failed", same_failure_message(index, progress.same_failures, it.result, end.advice, verdict)
        ), progress
    if progress.no_code_in_a_row >= MAX_NO_CODE_IN_A_ROW and index < last:
        return Stop("failed", no_code_message(progress.no_code_in_a_row, end.finish_reason == "length")), progress
    if index >= last:
        return Stop("budget_exhausted", out_of_rounds_message(rules.max_iterations, verdict, end.advice)), progress
    restart = rules.restart_after > 0 and progress.failed_repairs >= rules.restart_after
    return Another(), replace(progress, restart=restart)


def _told_next(progress: Progress, end: RoundEnd, soft: bool) -> Progress:
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
    signature = failure_signature(it.result, it.verdict)
    same = signature == progress.last_signature
    repair = RepairContext(
        code=code,
        feedback=it.feedback,
        same_failure=same and not soft,
        truncated=truncated,
        soft_checks=bool(end.failing_checks),
    )
    return replace(
        progress,
        repair=repair,
        origin=repair if it.index == 0 else progress.origin,
        last_code=code,
        last_signature=signature,
        # Round 1 starts the count: the user's program failing is not the model's doing.
        same_failures=progress.same_failures + 1 if same and it.index >= 2 else 1,
        soft_pass=it if soft else progress.soft_pass,
        failed_repairs=progress.failed_repairs + (1 if end.repaired and not soft else 0),
    )


def opens_soft_round(
    progress: Progress, verdict: Verdict, failing_checks: Iterable[str], index: int, rules: Rules
) -> bool:
    """A pass with failing generated checks gets one more round, once per run and never
    after the last (:func:`~selfheal_jupyter.loop.verdict.opens_soft_round`)."""
    return judging.opens_soft_round(
        verdict, list(failing_checks), index=index, max_iterations=rules.max_iterations, soft_pass=progress.soft_pass
    )


def feedback_sent(
    progress: Progress, verdict: Verdict, feedback: str, failing_checks: Iterable[str], index: int, rules: Rules
) -> str:
    """What a round's record says the next round is told: the failure's ``feedback``;
    for a pass that opens the soft round, the generated checks it failed; else nothing."""
    failing = list(failing_checks)
    if opens_soft_round(progress, verdict, failing, index, rules):
        return "\n".join(failing)
    return "" if verdict.passed else feedback


def soft_pass_stands(progress: Progress, outcome: str | None) -> bool:
    """A run that ended without success during the round after a soft pass is a success
    (:func:`~selfheal_jupyter.loop.verdict.soft_pass_stands`)."""
    return judging.soft_pass_stands(progress.soft_pass, outcome)


def tool_program(
    rules: Rules,
    verdict: Verdict,
    data_checks: Iterable[DataCheck],
    code: str | None,
    explanation: Explanation | None,
    earlier: Iterable[tuple[int, str]],
) -> tuple[str, str] | None:
    """The tool's own next program after a failed round, only when
    :attr:`Rules.quick_fixes` allows one (nothing is worked out otherwise): for a
    question about the notebook's data, its program for the question as the check from
    that data reads it (:func:`data_answer`, known to pass that check); else the edit the
    failure's explanation implies (:func:`quick_fix`)."""
    if not rules.quick_fixes or verdict.passed:
        return None
    earlier = list(earlier)
    return data_answer(data_checks, earlier) or quick_fix(code, explanation, earlier)


def repeat_of(code: str | None, earlier: Iterable[tuple[int, str]]) -> int | None:
    """The round whose program ``code`` is again (layout and comments aside,
    :func:`~selfheal_jupyter.loop.verdict.same_program`): the first of ``earlier`` (round,
    program) that it repeats, or None. A program is never run twice: a repeat is recorded
    as such (:func:`~selfheal_jupyter.loop.verdict.repeated`) and the next round told."""
    if code is None:
        return None
    return next((index for index, program in earlier if program and judging.same_program(program, code)), None)


def quick_fix(
    code: str | None, explanation: Explanation | None, earlier: Iterable[tuple[int, str]]
) -> tuple[str, str] | None:
    """The program a failure's own explanation implies (its precise edits applied,
    :func:`~selfheal_jupyter.diagnosis.apply_edits`) and what changed; None when it
    implies none, or that program already ran."""
    if code is None or explanation is None or not explanation.edits:
        return None
    fixed = apply_edits(code, explanation.edits)
    if fixed is None or repeat_of(fixed, earlier) is not None:
        return None
    changes = "; ".join(edit_words(e) for e in explanation.edits if e.old)
    line = next((e.line for e in explanation.edits if e.line != TOP), explanation.line)
    return fixed, f"line {line}: {changes}"


def data_answer(checks: Iterable[DataCheck], earlier: Iterable[tuple[int, str]]) -> tuple[str, str] | None:
    """The tool's own program for a question about the notebook's data, as its check
    reads it (:mod:`~selfheal_jupyter.agents.data_answers`), and what it answers; None
    when no check has one, or it already ran. Offered after the model's answer failed in
    any way (a printed answer the check refused, a crash, a broken rule): the model
    answers first, the check judges both alike."""
    found = [(c.program, c.source.removeprefix(DATA_CHECK_PREFIX)) for c in checks if c.program]
    if len(found) != 1 or repeat_of(found[0][0], earlier) is not None:
        return None
    program, read = found[0]
    return program, read.partition("; ")[0]


def opening(checks: Iterable[DataCheck], rules: Rules) -> Progress:
    """What round 1 of a task that starts from no program is handed: the tool's own program
    for a question about the notebook's data when its check has one (:func:`data_answer`),
    run before any model is asked — the model's answer would be judged by that same check,
    and the tool's program is known to pass it, so asking first only spends a request. The
    model writes when there is no such program, or it did not pass (its round does not
    count, :attr:`Progress.quick_rounds`)."""
    answer = data_answer(checks, []) if rules.quick_fixes else None
    return Progress(quick_fix=answer, quick_fixes_tried=1 if answer is not None else 0)


def repeat_feedback(round_: int, told: RepairContext | None) -> str:
    """What the round after a repeat is told: the program was not run again, and what
    went wrong with it before."""
    before = told.feedback if told else ""
    return REPEAT_FEEDBACK.format(round=round_) + (f"\n{before}" if before else "")


def repeats_message(index: int, times: int, advice: str = "") -> str:
    return _then(
        f"Stopped after round {index}: the model wrote a program it had already written "
        f"({times} times), after being told it failed, so the rounds left would likely end "
        "the same way.",
        advice,
    )


def same_failure_message(
    index: int, times: int, result: ExecutionResult | None, advice: str = "", verdict: Verdict | None = None
) -> str:
    failed = [t.source for t in result.tests if not t.passed] if result is not None else []
    clean = result is not None and result.status == "ok" and verdict is not None
    what = (
        f"{result.error.type}: {result.error.message[:120]}"
        if result is not None and result.error is not None
        else f"failed check `{failed[0][:120]}`"
        if failed
        else f"the same output: {verdict.reasons[0][:160]}"
        if clean and verdict is not None and verdict.held and verdict.reasons
        else f"{verdict.spec_violations[0].rule}: {verdict.spec_violations[0].message[:160]}"
        if clean and verdict is not None and verdict.spec_violations
        else (result.status if result is not None else "no program")
    )
    return _then(
        f"Stopped after round {index}: {times} rounds in a row failed the same way ({what}), "
        "so the rounds left would likely too.",
        advice,
    )


def _then(message: str, advice: str) -> str:
    return f"{message} {advice}" if advice else message


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


def no_code_message(times: int, cut: bool = False) -> str:
    """``cut``: the last reply hit its length limit (then the limit is the advice)."""
    if cut:
        return (
            f"The model replied {times} times in a row without a complete program: the last reply "
            "was cut off at its length limit. Raise `%config SelfHeal.max_tokens`, or ask for a "
            "smaller step."
        )
    return (
        f"The model replied {times} times in a row without a "
        "program. Try a stronger model (`%config SelfHeal.model`), or rephrase "
        "the task."
    )


def out_of_rounds_message(max_iterations: int, last: Verdict | None, advice: str = "") -> str:
    """``advice``: what the run's findings say to do next (without it: the usual ways on)."""
    message = f"No candidate passed within max_iterations={max_iterations}. " + (
        advice or "Raise `%config SelfHeal.max_iterations`, add detail to the task, or fix the last program by hand."
    )
    if last is not None and last.spec_violations:
        message += (
            " The last candidate was rejected because it changed your spec ("
            + ", ".join(sorted({v.rule for v in last.spec_violations}))
            + ")."
        )
    return message
