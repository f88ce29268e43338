"""Where success is decided (:mod:`selfheal_jupyter.loop.verdict`): one test per rule, plain
data in, verdict out — no sandbox, no model."""

from __future__ import annotations

from selfheal_jupyter.loop import verdict as v
from selfheal_jupyter.model import (
    DATA_CHECK_PREFIX,
    Candidate,
    ContextEntry,
    DataCheck,
    ErrorInfo,
    ExecutionResult,
    GeneratedChecks,
    Iteration,
    NotebookContext,
    Run,
    SpecViolation,
    Task,
    Verdict,
)
from selfheal_jupyter.model import (
    TestOutcome as Outcome,
)
from selfheal_jupyter.spec.behaviour import Observation

GIVEN = "total = sum(values)\nprint(total)\n"


def ran(*tests: bool, status: str = "ok", error: ErrorInfo | None = None, exit_code: int = 0) -> ExecutionResult:
    return ExecutionResult(
        status=status,  # type: ignore[arg-type]
        exit_code=exit_code,
        error=error,
        tests=[Outcome(f"assert t{i}", passed) for i, passed in enumerate(tests)],
    )


def violation() -> SpecViolation:
    return SpecViolation("assert_removed", "the assert `total == 6` was deleted", "keep it", original="total == 6")


# ----------------------------------------------------------------------------- judge


def test_a_clean_run_passes_when_every_test_passed_and_only_then():
    assert v.judge(ran(), None).reasons == ["ran cleanly (no tests given)"]
    assert v.judge(ran(True, True), "assert a\nassert b").reasons == ["ran cleanly; all 2 tests passed"]
    failed = v.judge(ran(True, False), "assert a\nassert b")
    assert not failed.passed and failed.reasons == ["1 of 2 tests failed"] and failed.tests_failed == 1


def test_tests_given_but_not_run_is_no_pass():
    assert v.judge(ran(), "assert total == 6").reasons == ["the tests were not run"]


def test_an_error_a_limit_or_an_exit_code_is_no_pass():
    assert v.judge(ran(status="error", error=ErrorInfo("ValueError", "bad")), None).reasons == [
        "raised ValueError: bad"
    ]
    assert v.judge(ran(status="timeout"), None).reasons == ["did not finish within the time limit"]
    assert v.judge(ran(exit_code=3), None).reasons == ["exited with code 3"]
    blocked = ExecutionResult(status="blocked", error=ErrorInfo("NameError", "name 'x' is not defined"))
    assert v.judge(blocked, None).reasons == ["static pre-check: NameError: name 'x' is not defined"]


def test_a_broken_spec_is_no_pass_and_no_spec_is_not_checked():
    broken = v.judge(ran(True), "assert a", [violation()])
    assert not broken.passed and broken.spec_kept is False
    assert v.judge(ran(True), "assert a", []).spec_kept is True
    assert v.judge(ran(True), "assert a").spec_kept is None


def test_a_reply_without_a_program_never_passes_and_says_why():
    assert v.no_program().reasons == ["the reply contained no program"]
    assert v.no_program("block 1 not found").reasons == [
        "the reply's SEARCH/REPLACE blocks did not apply: block 1 not found"
    ]
    assert not v.unfinished().passed and v.judge(None, None).reasons == ["the reply contained no program"]


# ------------------------------------------------------------------------ hold rules


def test_the_given_program_passing_is_held_when_the_task_says_it_is_wrong():
    wrong = Task(prompt="the total is off by one", initial_code=GIVEN, given_is_wrong=True)
    held = v.judge_given(ran(True), wrong)
    assert not held.passed and held.held == "given" and "the task says this program is wrong" in held.reasons[0]
    assert v.observes_given(held)
    trusted = v.judge_given(ran(True), Task(prompt="", initial_code=GIVEN))
    assert trusted.passed and not v.observes_given(trusted)


def test_a_candidate_that_left_the_wrong_program_unchanged_is_held():
    wrong = Task(prompt="the total is off by one", initial_code=GIVEN, given_is_wrong=True)
    relaid = "total = sum( values )  # the same\nprint(total)\n"
    held = v.judge_candidate(ran(True), wrong, relaid, [])
    assert not held.passed and held.held == "unchanged"
    assert v.judge_candidate(ran(True), wrong, "total = sum(values) + 1\nprint(total)\n", []).passed


def test_a_candidate_that_shows_what_the_wrong_program_showed_is_held():
    given_seen = Observation(stdout="5\n", outputs=(), values=(("total", "5"),))
    passed = Verdict(True, ["ran cleanly"])
    assert v.compares_behaviour(passed, given_seen) and not v.compares_behaviour(passed, None)
    held = v.hold_same_behaviour(passed, Observation("5\n", (), (("total", "5"),)), given_seen)
    assert not held.passed and held.held == "same_behaviour" and "total = 5" in held.reasons[0]
    assert v.hold_same_behaviour(passed, Observation("6\n", (), (("total", "6"),)), given_seen).passed
    assert v.hold_same_behaviour(passed, None, None).passed


def test_a_candidate_whose_second_run_fails_shows_no_other_behaviour():
    """A program can tell its judged run from the second one: a crash there is held, as
    showing nothing different; a second run that ran and shows nothing does differ."""
    given_seen = Observation(stdout="5\n", outputs=(), values=())
    passed = Verdict(True, ["ran cleanly"])
    held = v.hold_same_behaviour(passed, None, given_seen)
    assert not held.passed and held.held == "same_behaviour" and "did not run cleanly" in held.reasons[0]
    assert v.hold_same_behaviour(passed, Observation("", (), ()), given_seen).passed
    # the given program's own second run: nothing to compare when it shows nothing or failed
    assert v.given_shows(None) is None and v.given_shows(Observation("", (), ())) is None
    assert v.given_shows(given_seen) == given_seen


def test_a_repair_names_the_notebook_definitions_it_changes():
    helper = ContextEntry("scale", "function", source="def scale(x):\n    return x * 2\n")
    ctx = NotebookContext(entries=[helper])
    task = Task(prompt="", initial_code="print(scale(3))\n", context=ctx)
    changed = v.judge_candidate(ran(), task, "def scale(x):\n    return x * 3\n\nprint(scale(3))\n", [], ctx)
    assert changed.passed and changed.notebook_changes == ["scale"]
    written = v.judge_candidate(ran(), Task(prompt="write it"), "def scale(x):\n    return 1\n", None, ctx)
    assert written.notebook_changes == []


# ----------------------------------------------------------------------- soft rounds


def it(index: int, passed: bool, checks: tuple[bool, ...]) -> Iteration:
    return Iteration(
        index,
        Candidate("x = 1\n", index),
        ran(),
        Verdict(passed),
        checks=[Outcome(f"assert c{i}", ok) for i, ok in enumerate(checks)],
    )


def test_a_pass_with_failing_generated_checks_opens_one_soft_round_but_not_in_the_last_round():
    passed, failing = Verdict(True), ["GENERATED check failed: assert c0"]
    assert v.opens_soft_round(passed, failing, index=1, max_iterations=3, soft_pass=None)
    assert not v.opens_soft_round(passed, failing, index=3, max_iterations=3, soft_pass=None)
    assert not v.opens_soft_round(passed, failing, index=2, max_iterations=3, soft_pass=it(1, True, (False,)))
    assert not v.opens_soft_round(passed, [], index=1, max_iterations=3, soft_pass=None)
    assert not v.opens_soft_round(Verdict(False), failing, index=1, max_iterations=3, soft_pass=None)


def test_after_a_soft_round_the_later_pass_stands_only_when_it_passes_more_generated_checks():
    soft_pass = it(1, True, (True, False))
    assert v.soft_round_result(soft_pass, it(2, True, (True, True))) == 2
    assert v.soft_round_result(soft_pass, it(2, True, (True, False))) == 1
    assert v.soft_round_result(soft_pass, it(2, False, (True, True))) == 1


def test_a_run_that_ends_during_the_soft_round_is_still_a_success():
    soft_pass = it(1, True, (False,))
    for outcome in ("budget_exhausted", "failed", "error"):
        assert v.soft_pass_stands(soft_pass, outcome)
    assert not v.soft_pass_stands(soft_pass, "cancelled") and not v.soft_pass_stands(None, "failed")


# ----------------------------------------------------------------------- verified by


def test_verified_by_names_what_checked_the_output():
    tests = Task(prompt="", tests="assert total == 6")
    assert v.checked_by(Verdict(True, tests_passed=1), [], tests) == ["your tests"]
    stated = Task(prompt="", tests="assert total == 6", stated=["assert total == 6"], initial_code=GIVEN)
    assert v.checked_by(Verdict(True, tests_passed=1), [], stated) == ["your stated expectation"]
    asserts = Task(prompt="", initial_code="total = 6\nassert total == 6\n")
    kept = Verdict(True, tests_passed=1, spec_checked=True)
    assert v.checked_by(kept, [], asserts) == ["your asserts"]
    generated = [Outcome("assert total > 0", True)]
    assert v.checked_by(Verdict(True), generated, Task(prompt="")) == ["generated checks"]
    assert v.checked_by(Verdict(True), [Outcome("assert total > 0", False)], Task(prompt="")) == []
    assert v.checked_by(Verdict(True, tests_passed=1, tests_failed=1), [], tests) == []
    derived = Outcome(DATA_CHECK_PREFIX + "the best region per year", True)
    assert v.checked_by(Verdict(True), [derived], Task(prompt="")) == ["checks from your data"]
    both = v.checked_by(Verdict(True), [derived, *generated], Task(prompt=""))
    assert both == ["checks from your data", "generated checks"]


def test_an_output_that_contradicts_the_users_data_is_no_success():
    wrong = [Outcome(DATA_CHECK_PREFIX + "the best region per month", False, "3 of 3 expected lines are not printed")]
    held = v.hold_data_checks(Verdict(True, ["ran cleanly (no tests given)"]), wrong)
    assert not held.passed and held.held == "data_checks" and "1 of 1 checks from your data failed" in held.reasons[0]
    right = [Outcome(DATA_CHECK_PREFIX + "the best region per month", True)]
    assert v.hold_data_checks(Verdict(True), right) == Verdict(True)
    # QA's checks from the task's words stay soft: they never hold a pass
    assert v.hold_data_checks(Verdict(True), [Outcome("assert total > 0", False)]) == Verdict(True)
    failed = Verdict(False, ["raised KeyError"])
    assert v.hold_data_checks(failed, wrong) is failed


def test_only_a_pass_is_verified_and_a_run_reads_it_from_its_final_iteration():
    task = Task(prompt="", tests="assert total == 6")
    failed = v.with_verified_by(Verdict(False, tests_passed=1), [], task)
    assert failed.verified_by == []
    run = Run(task=task, iterations=[Iteration(1, Candidate("x = 1\n", 1), ran(True), failed)])
    assert run.verified_by == [] and not run.verified
    passed = v.with_verified_by(Verdict(True, tests_passed=1), [], task)
    run.iterations.append(Iteration(2, Candidate("x = 1\n", 2), ran(True), passed))
    assert passed.verified_by == run.verified_by == ["your tests"] and run.verified


def test_checks_the_wrong_program_passes_too_verify_no_pass():
    """The task says the given program is wrong, yet it passed the user's checks (round 0
    held): a pass of those checks cannot tell the fix from it, so they verify nothing
    and are named apart; a generated check it failed, or a check from the data, still
    verifies."""
    task = Task(prompt="The mean is off by one.", initial_code="m = 3\nassert m > 0\n", tests="assert m > 1")
    passed = Verdict(True, tests_passed=2, spec_checked=True)
    generated = [Outcome("assert m < 5", True), Outcome("assert m != 4", True)]
    shown = Observation("3.0\n", (), ())
    wrong = v.wrong_passed(Verdict(False, held="given"), [Outcome("assert m < 5", True)], shown)
    assert wrong is not None and wrong.compared
    fixed = v.with_verified_by(passed, generated, task, wrong)
    assert fixed.verified_by == ["generated checks"]  # the wrong program failed `m != 4`
    assert fixed.blind_checks == ["your tests", "your asserts"] and fixed.changed_behaviour
    blind = v.wrong_passed(Verdict(False, held="given"), generated, None)
    assert blind is not None and not blind.compared
    nothing = v.with_verified_by(passed, generated, task, blind)
    assert nothing.verified_by == [] and nothing.blind_checks == ["your tests", "your asserts", "generated checks"]
    derived = [Outcome(DATA_CHECK_PREFIX + "the mean of values", True)]
    assert v.with_verified_by(passed, derived, task, blind).verified_by == ["checks from your data"]
    # a given program that failed its checks (or passed them unheld) leaves them verifying
    assert v.wrong_passed(Verdict(False, held=""), generated, shown) is None
    assert v.with_verified_by(passed, [], task, None).verified_by == ["your tests", "your asserts"]
    run = Run(task=task, iterations=[Iteration(1, Candidate("m = 2\n", 1), ran(True), fixed)], final_index=1)
    assert run.verified and run.blind_checks == ["your tests", "your asserts"] and run.changed_behaviour
    assert run.to_dict()["blind_checks"] == ["your tests", "your asserts"] and run.to_dict()["changed_behaviour"]


# ----------------------------------------------------------------------- what a trial runs


def test_generated_checks_run_only_on_a_program_that_ran_cleanly_to_its_end():
    checks = GeneratedChecks(statements=["assert total > 0"])
    assert v.runs_generated_checks(checks, ran())
    assert not v.runs_generated_checks(checks, ran(status="error", error=ErrorInfo("E", "x")))
    assert not v.runs_generated_checks(checks, ran(status="timeout"))
    assert not v.runs_generated_checks(GeneratedChecks(statements=[]), ran())
    assert not v.runs_generated_checks(None, ran())


def test_checks_from_the_data_read_only_a_clean_run():
    question = Task(prompt="which region sells most?", data_checks=[DataCheck(source=f"{DATA_CHECK_PREFIX}x")])
    assert v.reads_data_checks(question, ran())
    assert not v.reads_data_checks(question, ran(exit_code=1))
    assert not v.reads_data_checks(Task(prompt="which region sells most?"), ran())
