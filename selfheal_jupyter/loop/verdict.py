"""Where success is decided: the whole rule, in the order it applies, as functions of data.

1. **Judge** (:func:`judge`): a program passes when it exits cleanly AND every one of the
   user's tests passed (the top-level asserts of their own code, checked by the sandbox's
   checker outside the candidate, count among them) AND — when the task started from the
   user's code — the candidate kept the user's spec (:mod:`selfheal_jupyter.spec.guard`:
   their asserts, test functions and tests, neither changed, silenced nor answered by a
   written-in value). With no tests, a clean run passes. A reply without a program never
   passes (:func:`no_program`), nor does a program that repeats an earlier one, which is
   not run again (:func:`repeated`).
2. **Hold rules**: when the task says the given program is wrong, a pass is still no
   success if the passing program is that program — round 0, or a candidate that left it
   unchanged (:func:`hold_known_wrong`) — or shows exactly what it showed on its checks
   (:func:`hold_same_behaviour`). Round 0 (the user's own program, which *is* the spec) is
   judged by :func:`judge_given`, a candidate by :func:`judge_candidate`. A pass whose
   output contradicts a check derived from the notebook's data for a question about it is
   no success either (:func:`hold_data_checks`). Which runs a trial needs is decided
   here too (:func:`observes_given`, :func:`compares_behaviour`,
   :func:`runs_generated_checks`, :func:`reads_data_checks`).
3. **Soft rounds**: a pass whose generated checks (QA's, from the task alone) fail gets one
   more round to fix the program or say why a check is wrong (:func:`opens_soft_round`);
   that round ends the run with success, the later pass standing only when it passes more
   of the generated checks (:func:`soft_round_result`), and the earlier pass standing when
   the run ends otherwise during it (:func:`soft_pass_stands`).
4. **Verified by** (:func:`with_verified_by`): what checked a passing program's output
   beyond its running without an error, recorded on its verdict
   (:attr:`~selfheal_jupyter.model.Verdict.verified_by`, which ``Run.verified_by`` reads).
   A success nothing checked "only runs". A check the program the task says is wrong
   passes too (:class:`WrongPassed`) cannot tell the fix from it: it verifies nothing and is
   named apart (:attr:`~selfheal_jupyter.model.Verdict.blind_checks`).

The judge (:mod:`~selfheal_jupyter.loop.judge`) applies 1, 2 and 4 to each program in
order; the round rules (:mod:`~selfheal_jupyter.loop.rounds`) apply 3. Neither holds a
rule of its own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from ..model import (
    ExecutionResult,
    GeneratedChecks,
    Held,
    Iteration,
    NotebookContext,
    SpecViolation,
    Task,
    TestOutcome,
    Verdict,
    has_assert,
    split_checks,
)
from ..spec.behaviour import Observation
from ..spec.notebook_data import redefined

# ----------------------------------------------------------------------------- 1. judge

NO_PROGRAM = "the reply contained no program"
UNFINISHED = "not finished: the run ended during this round"


def judge(
    result: ExecutionResult | None,
    tests: str | None,
    violations: list[SpecViolation] | None = None,
) -> Verdict:
    """Passed = clean exit AND every user test passed AND the spec was kept.

    ``violations``: None when there is no spec to keep (a task that did not start from
    the user's code); else the result of :func:`selfheal_jupyter.spec.guard.check` (a list,
    possibly empty).
    """
    checked = violations is not None
    violations = list(violations or [])
    if result is None:
        return Verdict(False, [NO_PROGRAM], spec_checked=checked, spec_violations=violations)
    passed_tests = sum(1 for t in result.tests if t.passed)
    failed_tests = len(result.tests) - passed_tests
    reasons: list[str] = []
    clean = result.clean
    if result.status == "blocked":
        what = f"{result.error.type}: {result.error.message}" if result.error else result.message
        reasons.append(f"static pre-check: {what}")
    elif result.error is not None:
        reasons.append(f"raised {result.error.type}: {result.error.message}"[:300])
    elif result.status != "ok":
        reasons.append(
            {
                "timeout": "did not finish within the time limit",
                "oom": "ran out of memory",
                "output_limit": "printed more than the output limit",
                "killed": "was killed",
            }.get(result.status, result.status)
        )
    elif result.exit_code not in (0, None):
        reasons.append(f"exited with code {result.exit_code}")
    # The user's own asserts, checked outside the candidate, are reported as tests too.
    has_tests = bool(tests and tests.strip()) or bool(result.tests)
    if has_tests and clean:
        if not result.tests:
            reasons.append("the tests were not run")
        elif failed_tests:
            reasons.append(f"{failed_tests} of {len(result.tests)} tests failed")
    passed = clean and not reasons and not violations
    if passed:
        reasons.append(f"ran cleanly; all {passed_tests} tests passed" if has_tests else "ran cleanly (no tests given)")
    return Verdict(passed, reasons, passed_tests, failed_tests, checked, violations)


def no_program(edit_failure: str = "") -> Verdict:
    """A reply that gave no program to run: none at all, or SEARCH/REPLACE blocks that did
    not apply (``edit_failure``, which block and why)."""
    if edit_failure:
        return Verdict(False, [f"the reply's SEARCH/REPLACE blocks did not apply: {edit_failure}"])
    return Verdict(False, [NO_PROGRAM])


def repeated(earlier: int) -> Verdict:
    """A program that is round ``earlier``'s again (:func:`same_program`): not run again,
    it fails as that one did (:func:`~selfheal_jupyter.loop.rounds.repeat_of`)."""
    return Verdict(False, [f"the same program as round {earlier}: not run again"])


def unfinished() -> Verdict:
    """A round the run ended in the middle of (an endpoint or sandbox failure, the budget)."""
    return Verdict(False, [UNFINISHED])


def judge_given(result: ExecutionResult, task: Task) -> Verdict:
    """Round 0: the user's own program, judged by their tests without a spec (it is the
    spec, not a candidate against it), and held when the task says it is wrong."""
    return hold_known_wrong(judge(result, task.tests), task, task.initial_code, given=True)


def judge_candidate(
    result: ExecutionResult,
    task: Task,
    code: str,
    violations: list[SpecViolation] | None,
    context: NotebookContext | None = None,
) -> Verdict:
    """A candidate: judged (its spec ``violations``: None when there is no spec), held when
    it is the program the task says is wrong, and, for a repair of the user's code, the
    notebook definitions it changes named (:func:`~selfheal_jupyter.spec.notebook_data.redefined`).
    The behaviour rule (:func:`hold_same_behaviour`) needs a second run and is applied
    after it (:func:`compares_behaviour`)."""
    verdict = hold_known_wrong(judge(result, task.tests, violations), task, code, given=False)
    if task.initial_code:
        verdict = replace(verdict, notebook_changes=redefined(context, task.initial_code, code))
    return verdict


# ------------------------------------------------------------------------ 2. hold rules

GIVEN_IS_WRONG = (
    "it runs{tests}, but the task says this program is wrong: compare what it does with "
    "what the task asks, find the difference and fix it"
)
UNCHANGED = (
    "it is the program the task says is wrong, unchanged: find the code that does not do "
    "what the task asks and change it"
)
SAME_BEHAVIOUR = (
    "it shows exactly what the program the task says is wrong showed: the same output and "
    "the same values ({seen}). So the bug is still there, or your change does not reach "
    "what the checks run: find the code that does not do what the task asks and change "
    "what it computes"
)
UNSTEADY = (
    "it passed its checks, but run on them again it did not run cleanly, so nothing shows "
    "that it behaves otherwise than the program the task says is wrong ({seen}): make it "
    "run the same way every time, and change what it computes"
)


DATA_CHECKS_FAILED = "its output does not show what your data says ({failed} of {total} checks from your data failed)"


def same_program(a: str, b: str) -> bool:
    """The same program up to layout and comments (as text, when a tree of either cannot be read)."""
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return a.strip() == b.strip()


def hold_known_wrong(verdict: Verdict, task: Task, code: str | None, *, given: bool) -> Verdict:
    """A pass is no success when the task says the given program is wrong and the passing
    program is that program (round 0, or a candidate that left it unchanged): its checks
    are too weak to see the bug the user reported."""
    if not (verdict.passed and task.given_is_wrong and task.initial_code is not None):
        return verdict
    held: Held
    if given:
        reason, held = (
            GIVEN_IS_WRONG.format(tests=" and passes the tests" if verdict.tests_passed else " without an error"),
            "given",
        )
    elif code is not None and same_program(code, task.initial_code):
        reason, held = UNCHANGED, "unchanged"
    else:
        return verdict
    return replace(verdict, passed=False, reasons=[reason], held=held)


def observes_given(verdict: Verdict) -> bool:
    """Whether to record what the given program shows on its checks (a second run): only
    when it passed them though the task says it is wrong — then a candidate that shows the
    same is held (:func:`hold_same_behaviour`)."""
    return verdict.held == "given"


def given_shows(seen: Observation | None) -> Observation | None:
    """What candidates are compared with, of what the given program showed on its second
    run (:func:`observes_given`): None when it showed nothing, or did not run cleanly
    again (then there is nothing to compare, and no candidate is held)."""
    return None if seen is None or seen.empty else seen


def compares_behaviour(verdict: Verdict, given_seen: Observation | None) -> bool:
    """Whether a candidate's pass needs the second run that compares what it shows with
    what the given program showed (``given_seen``, see :func:`observes_given`)."""
    return verdict.passed and given_seen is not None


def hold_same_behaviour(verdict: Verdict, seen: Observation | None, given_seen: Observation | None) -> Verdict:
    """A pass is no success when the task says the given program is wrong and this
    candidate shows exactly what that program showed (:mod:`selfheal_jupyter.spec.behaviour`):
    nothing its checks can see was fixed. ``seen`` None: its own second run did not run
    cleanly, which shows no other behaviour either (a program can tell its runs apart:
    a crash there is no evidence of a fix)."""
    if not verdict.passed or given_seen is None or (seen is not None and seen != given_seen):
        return verdict
    said = UNSTEADY if seen is None else SAME_BEHAVIOUR
    return replace(verdict, passed=False, held="same_behaviour", reasons=[said.format(seen=given_seen.summary())])


def hold_data_checks(verdict: Verdict, checks: list[TestOutcome]) -> Verdict:
    """A pass is no success when its output contradicts a check derived from the
    notebook's own data (:mod:`~selfheal_jupyter.agents.data_checks`): the answer a group
    should show is computed from the user's values, so a program that prints row numbers,
    ids or a table of its own for it answered another question. Unlike QA's generated
    checks (written from the task's words, soft), these are never waved through."""
    derived, _ = split_checks(checks)
    failed = [c for c in derived if not c.passed]
    if not verdict.passed or not failed:
        return verdict
    return replace(
        verdict,
        passed=False,
        held="data_checks",
        reasons=[DATA_CHECKS_FAILED.format(failed=len(failed), total=len(derived))],
    )


def runs_generated_checks(generated: GeneratedChecks | None, result: ExecutionResult) -> bool:
    """QA's generated checks run (a sandbox run of their own) only on a program that ran
    cleanly to its end: on one that failed they could only fail too."""
    return generated is not None and bool(generated.statements) and result.status == "ok" and result.error is None


def reads_data_checks(task: Task, result: ExecutionResult) -> bool:
    """The checks from the notebook's data read a program's output only when it ran
    cleanly (on the host, from what it printed)."""
    return bool(task.data_checks) and result.clean


# ------------------------------------------------------------------------ 3. soft rounds

SOFT_PASS_STANDS = ("budget_exhausted", "failed", "error")
"""Outcomes that a soft round cannot turn into a failure: the pass before it stands."""


def checks_passed(checks: list[TestOutcome]) -> int:
    return sum(1 for t in checks if t.passed)


def opens_soft_round(
    verdict: Verdict, failing_checks: list[str], *, index: int, max_iterations: int, soft_pass: Iteration | None
) -> bool:
    """A pass with failing generated checks gets one more round (once per run, never
    after the last round): the developer fixes the program or says why a check is wrong."""
    return bool(failing_checks) and verdict.passed and soft_pass is None and index < max_iterations


def soft_round_result(soft_pass: Iteration, latest: Iteration) -> int:
    """The round after a soft pass ends the run with success; the index of the pass that
    stands: the new one only when it passes and passes more of the generated checks
    (otherwise — no code, an explanation, a worse program — the earlier pass)."""
    better = latest.verdict.passed and checks_passed(latest.checks) > checks_passed(soft_pass.checks)
    return latest.index if better else soft_pass.index


def soft_pass_stands(soft_pass: Iteration | None, outcome: str | None) -> bool:
    """A run that ended without success during the round after a soft pass (the budget,
    a failure, an error) is a success: a candidate had passed the user's tests."""
    return soft_pass is not None and outcome in SOFT_PASS_STANDS


# ------------------------------------------------------------------------ 4. verified by


def checked_by(verdict: Verdict, checks: list[TestOutcome], task: Task) -> list[str]:
    """What checked a passing program's output, beyond its running without an error:
    "your tests" (``--tests``: they ran and all passed), "your stated expectation"
    (``%%heal the total should be 42``, read into a check: it ran and passed), "your
    asserts" (the asserts of the user's own code, kept by the spec guard, in a program
    that ran to its end), "checks from your data" (derived from the notebook's data for a
    question about it, :mod:`~selfheal_jupyter.agents.data_checks`: all passed),
    "generated checks" (QA's checks from the task, all passed). Empty when nothing did:
    the program only runs."""
    found = []
    cell_asserts = bool(task.initial_code) and has_assert(task.initial_code or "")
    stated = {statement.strip() for statement in task.stated}
    given_tests = [ln for ln in (task.tests or "").splitlines() if ln.strip() and ln.strip() not in stated]
    if verdict.tests_passed and not verdict.tests_failed:
        # The cell's own asserts, checked outside the candidate, are reported among the
        # tests too: they are "your asserts"; "your tests" are --tests.
        if given_tests or (not cell_asserts and verdict.tests_passed > len(task.stated)):
            found.append("your tests")
        if task.stated:
            found.append("your stated expectation")
    if verdict.spec_kept and cell_asserts:
        found.append("your asserts")
    derived, generated = split_checks(checks)
    if checks and all(check.passed for check in checks):
        if derived:
            found.append("checks from your data")
        if generated:
            found.append("generated checks")
    return found


USERS_CHECKS = ("your tests", "your stated expectation", "your asserts")
"""The kinds of :func:`checked_by` the user wrote: a given program held for passing its
checks (:func:`hold_known_wrong`) passed every one of them."""


@dataclass(frozen=True)
class WrongPassed:
    """What the program the task says is wrong passed anyway (round 0, held "given"):
    checks that cannot tell a fix from it."""

    generated: frozenset[str] = frozenset()
    """The generated checks (their source) it passed too."""
    compared: bool = False
    """What it showed on its checks was recorded (:func:`given_shows`), so a candidate that
    passes showed something else (:func:`hold_same_behaviour`)."""


def wrong_passed(given: Verdict, checks: list[TestOutcome], seen: Observation | None) -> WrongPassed | None:
    """What round 0's program passed though the task says it is wrong (``given``: its
    verdict; ``checks``: its generated checks' outcomes; ``seen``: what candidates are
    compared with); None when its pass was not held for that."""
    if given.held != "given":
        return None
    return WrongPassed(frozenset(c.source for c in checks if c.passed), compared=seen is not None)


def blind_to_the_fix(found: list[str], checks: list[TestOutcome], wrong: WrongPassed) -> list[str]:
    """Of what checked a pass (``found``, :func:`checked_by`), what the program the task
    says is wrong passes too: every check the user wrote, and the generated checks when
    it passed each of them."""
    _, generated = split_checks(checks)
    sources = {check.source for check in generated}
    return [
        kind for kind in found if kind in USERS_CHECKS or (kind == "generated checks" and sources <= wrong.generated)
    ]


def with_verified_by(
    verdict: Verdict, checks: list[TestOutcome], task: Task, wrong: WrongPassed | None = None
) -> Verdict:
    """The verdict with what checked the program's output (:func:`checked_by`, given the
    outcomes of the generated ``checks``) when it passed; a verdict that did not pass was
    verified by nothing. ``wrong``: what the given program passed too, when the task says
    it is wrong (:func:`wrong_passed`): those checks verify nothing and are named in
    ``blind_checks`` instead, beside whether the pass showed other behaviour."""
    if not verdict.passed:
        return replace(verdict, verified_by=[])
    found = checked_by(verdict, checks, task)
    if wrong is None:
        return replace(verdict, verified_by=found)
    blind = blind_to_the_fix(found, checks, wrong)
    return replace(
        verdict,
        verified_by=[kind for kind in found if kind not in blind],
        blind_checks=blind,
        changed_behaviour=wrong.compared,
    )
