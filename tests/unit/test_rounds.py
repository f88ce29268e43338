"""What follows a round (:func:`selfheal_jupyter.loop.rounds.next_step`): plain data in, the
next step and what the next round is told out — no sandbox, no model."""

from __future__ import annotations

from dataclasses import replace

from selfheal_jupyter.loop import rounds
from selfheal_jupyter.loop.rounds import Another, Progress, RoundEnd, Rules, Stop, Stopped, Success, next_step
from selfheal_jupyter.model import (
    DATA_CHECK_PREFIX,
    Candidate,
    DataCheck,
    ErrorInfo,
    ExecutionResult,
    Explanation,
    Iteration,
    LineEdit,
    SpecViolation,
    Verdict,
)
from selfheal_jupyter.model import TestOutcome as Outcome

RULES = Rules(max_iterations=4)
ERROR = ExecutionResult(status="error", exit_code=1, error=ErrorInfo("ZeroDivisionError", "division by zero", line=2))


def end(
    index: int,
    *,
    passed: bool = False,
    code: str | None = "x = 1 / 0\n",
    result: ExecutionResult | None = ERROR,
    feedback: str = "ZeroDivisionError at line 2",
    restarted: bool = False,
    edit_failure: str = "",
    violations: tuple[SpecViolation, ...] = (),
    checks: tuple[bool, ...] = (),
    **more: object,
) -> RoundEnd:
    iteration = Iteration(
        index,
        Candidate(code or "", index),
        result if code is not None else None,
        Verdict(passed, [], spec_violations=list(violations)),
        feedback=feedback,
        checks=[Outcome(f"assert c{i}", ok) for i, ok in enumerate(checks)],
        restarted=restarted,
        edit_failure=edit_failure,
    )
    return RoundEnd(iteration, code, **more)  # type: ignore[arg-type]


def changed_assert() -> SpecViolation:
    return SpecViolation("assert_changed", "the condition changed", "keep it", original="total == 6")


def test_a_pass_ends_the_run_with_success():
    step, _ = next_step(Progress(), end(1, passed=True, result=ExecutionResult(status="ok")), RULES)
    assert step == Success()


def test_a_failure_is_what_the_next_round_is_told():
    step, progress = next_step(Progress(), end(1, repaired=False, finish_reason="length"), RULES)
    assert step == Another()
    told = progress.repair
    assert told is not None and told.code == "x = 1 / 0\n" and told.feedback == "ZeroDivisionError at line 2"
    assert told.truncated and not told.same_failure and progress.last_code == "x = 1 / 0\n"
    _, again = next_step(progress, end(2), RULES)
    assert again.repair is not None and again.repair.same_failure


def test_round_zero_is_where_a_start_over_begins():
    _, progress = next_step(Progress(), end(0, code="x = 1 / 0  # the user's\n"), RULES)
    assert progress.origin is progress.repair and progress.origin is not None
    assert progress.origin.code == "x = 1 / 0  # the user's\n" and progress.failed_repairs == 0
    _, later = next_step(progress, end(1, code="y = 2 / 0\n", repaired=True), RULES)
    assert later.origin is progress.origin and later.failed_repairs == 1


def test_a_reply_without_a_program_keeps_the_program_and_its_feedback_and_twice_in_a_row_stops():
    _, progress = next_step(Progress(), end(1), RULES)
    step, progress = next_step(progress, end(2, code=None, feedback="no program"), RULES)
    assert step == Another() and progress.no_code_in_a_row == 1
    told = progress.repair
    assert told is not None and told.no_code and told.code == "x = 1 / 0\n"
    assert told.feedback == "ZeroDivisionError at line 2"
    step, progress = next_step(progress, end(3, code=None), RULES)
    assert isinstance(step, Stop) and step.outcome == "failed" and "2 times in a row without a program" in step.message


def test_edits_that_did_not_apply_ask_for_the_whole_program_and_are_no_reply_without_code():
    _, progress = next_step(Progress(no_code_in_a_row=1), end(2, code=None, edit_failure="block 1 not found"), RULES)
    told = progress.repair
    assert progress.no_code_in_a_row == 0 and told is not None
    assert told.edit_failure == "block 1 not found" and not told.no_code


def test_the_last_round_without_a_pass_exhausts_the_budget_and_names_a_broken_spec():
    step, _ = next_step(Progress(), end(4, violations=(changed_assert(),)), RULES)
    assert isinstance(step, Stop) and step.outcome == "budget_exhausted"
    assert "max_iterations=4" in step.message and "changed your spec (assert_changed)" in step.message
    step, _ = next_step(Progress(no_code_in_a_row=1), end(4, code=None), RULES)
    assert isinstance(step, Stop) and step.outcome == "budget_exhausted"


def test_a_model_that_changes_the_users_assert_twice_ends_the_run_failed():
    step, progress = next_step(Progress(), end(1, violations=(changed_assert(),)), RULES)
    assert step == Another() and progress.assert_changes == ((1, "total == 6"),)
    step, _ = next_step(progress, end(2, violations=(changed_assert(),)), RULES)
    assert isinstance(step, Stop) and step.outcome == "failed"
    assert "in rounds 1, 2 the model changed your assert(s) `total == 6`" in step.message


def test_a_run_the_stop_killed_is_stopped_not_judged():
    killed = ExecutionResult(status="killed")
    step, _ = next_step(Progress(), end(1, result=killed), RULES, stopping=True)
    assert step == Stopped("Stopped during the sandbox run.")
    step, _ = next_step(Progress(), end(1, result=killed), RULES, stopping=False)
    assert step == Another()


def test_a_soft_pass_gets_one_more_round_and_the_round_after_it_ends_the_run():
    ok = ExecutionResult(status="ok")
    soft = end(1, passed=True, result=ok, failing_checks=("GENERATED",), checks=(True, False), feedback="GENERATED")
    step, progress = next_step(Progress(), soft, RULES)
    assert step == Another() and progress.soft_pass is soft.iteration
    told = progress.repair
    assert told is not None and told.soft_checks and told.feedback == "GENERATED" and not told.same_failure
    step, _ = next_step(progress, end(2, passed=True, result=ok, checks=(True, True)), RULES)
    assert step == Success(final_index=2)
    step, _ = next_step(progress, end(2, code=None), RULES)
    assert step == Success(final_index=1)


def test_restart_after_n_failed_repairs_and_a_restarted_round_counts_from_zero():
    rules = replace(RULES, restart_after=2)
    _, progress = next_step(Progress(), end(0), rules)
    _, progress = next_step(progress, end(1, repaired=True), rules)
    assert not progress.restart and progress.failed_repairs == 1
    step, progress = next_step(progress, end(2, repaired=True), rules)
    assert step == Another() and progress.restart
    _, progress = next_step(progress, end(3, restarted=True), rules)
    assert progress.failed_repairs == 0 and not progress.restart
    _, never = next_step(Progress(failed_repairs=5), end(1, repaired=True), RULES)
    assert not never.restart


def test_the_messages_say_what_to_do():
    assert "Raise `%config SelfHeal.max_iterations`" in rounds.out_of_rounds_message(3, None)
    assert "correct it and run again" in rounds.assert_change_message(((1, "x > 0"),))


# ------------------------------------------------ repeats, the same failure, quick fixes
def repeat(index: int, of: int) -> RoundEnd:
    """A round whose program was round ``of``'s again (not run: no program, no result)."""
    e = end(index, code=None, feedback=rounds.repeat_feedback(of, None))
    return replace(e, iteration=replace(e.iteration, repeat_of=of))


def test_an_identical_program_is_a_repeat_of_the_latest_round_that_ran_it():
    earlier = [(2, "y = 2\n"), (1, "x = 1  # first\n"), (0, "x = 1\n")]
    assert rounds.repeat_of("x = 1\n\n# again\n", earlier) == 1
    assert rounds.repeat_of("x = 2\n", earlier) is None and rounds.repeat_of(None, earlier) is None


def test_a_repeat_is_told_so_and_a_second_one_ends_the_run():
    _, progress = next_step(Progress(), end(1), RULES)
    step, progress = next_step(
        progress,
        repeat(2, of=1),
        RULES,
    )
    told = progress.repair
    assert step == Another() and progress.repeats == 1 and progress.no_code_in_a_row == 0
    assert told is not None and told.code == "x = 1 / 0\n" and told.same_failure and not told.no_code
    assert told.feedback.startswith("Your reply was the program of round 1 again")
    step, _ = next_step(progress, repeat(3, of=1), RULES)
    assert isinstance(step, Stop) and step.outcome == "failed" and "already written (2 times)" in step.message


def test_three_rounds_failing_the_same_way_end_the_run_with_the_advice():
    rules = Rules(max_iterations=6)
    _, progress = next_step(Progress(), end(0), rules)
    for index in (1, 2):
        step, progress = next_step(progress, end(index), rules)
        assert step == Another()
    step, progress = next_step(progress, end(3, advice="Next step: divide by len(values)."), rules)
    assert isinstance(step, Stop) and step.outcome == "failed" and progress.same_failures == 3
    assert "3 rounds in a row failed the same way (ZeroDivisionError: division by zero)" in step.message
    assert step.message.endswith("Next step: divide by len(values).")


def test_the_tools_own_edit_is_tried_after_the_models_last_round_too():
    code = "total = add_up(numbers)\n"
    explanation = Explanation(
        "NameError: name 'add_up' is not defined",
        line=1,
        source=code.strip(),
        diagnosis=["x"],
        edits=[LineEdit(1, "add_up", "fix_add_up")],
    )
    fix = rounds.quick_fix(code, explanation, [(2, code)])
    rules = Rules(max_iterations=2, quick_fixes=True)
    step, progress = next_step(Progress(), end(2, code=code, quick_fix=fix), rules)  # the last model round
    assert step == Another() and progress.quick_fix == fix and rules.last_round(progress) == 3
    mended = end(3, code=fix[0], passed=True, result=ExecutionResult(status="ok"), quick_fix=None)
    mended = replace(mended, iteration=replace(mended.iteration, quick_fix=True))
    assert next_step(progress, mended, rules)[0] == Success()
    failed = replace(mended, iteration=replace(mended.iteration, verdict=Verdict(False, ["x"])))
    step, progress = next_step(progress, failed, rules)
    assert isinstance(step, Stop) and step.outcome == "budget_exhausted" and rules.last_round(progress) == 3


def test_clean_runs_held_for_their_output_fail_the_same_way_only_with_the_same_output():
    # each round ran cleanly and was held by a check of what it printed (the user's data)
    def held(index: int, printed: str) -> RoundEnd:
        ran = ExecutionResult(status="ok", stdout=printed)
        made = end(index, result=ran)
        said = ["its output does not show what your data says"]
        it = replace(made.iteration, verdict=Verdict(False, said, held="data_checks"))
        return replace(made, iteration=it)

    rules = Rules(max_iterations=6)
    _, progress = next_step(Progress(), end(0), rules)
    for index, printed in enumerate(["north\n", "0\n4\n8\n", "jan north\n"], start=1):
        step, progress = next_step(progress, held(index, printed), rules)
        assert step == Another(), index  # another output is another attempt
    for index in (4, 5):
        step, progress = next_step(progress, held(index, "jan north\n"), rules)
    assert isinstance(step, Stop) and progress.same_failures == 3
    assert "(the same output: its output does not show what your data says)" in step.message


def test_clean_runs_rejected_for_one_spec_rule_fail_the_same_way_whatever_they_print():
    # red team: a model that writes in the asserted answer (hard_coded) and prints another
    # line each round (a counter, a time) was never "the same failure": only the budget ended it
    def written_in(index: int) -> RoundEnd:
        made = end(index, result=ExecutionResult(status="ok", stdout=f"attempt {index}\n"))
        violation = SpecViolation("hard_coded", "`total = 10` writes in the answer", "compute it")
        it = replace(made.iteration, verdict=Verdict(False, ["hard-coded"], spec_violations=[violation]))
        return replace(made, iteration=it)

    rules = Rules(max_iterations=6)
    _, progress = next_step(Progress(), end(0), rules)
    for index in (1, 2):
        step, progress = next_step(progress, written_in(index), rules)
        assert step == Another()
    step, progress = next_step(progress, written_in(3), rules)
    assert isinstance(step, Stop) and step.outcome == "failed" and progress.same_failures == 3
    assert "failed the same way (hard_coded: `total = 10` writes in the answer)" in step.message


def test_a_failure_with_one_precise_edit_runs_that_edit_next_and_it_counts_only_if_it_passes():
    code = "print(df['Region'])\n"
    explanation = Explanation(
        "KeyError: 'Region'", line=1, source=code.strip(), diagnosis=["x"], edits=[LineEdit(1, "'Region'", "'region'")]
    )
    fix = rounds.quick_fix(code, explanation, [(1, code)])
    assert fix == ("print(df['region'])\n", "line 1: `'Region'` → `'region'`")
    assert rounds.quick_fix(code, explanation, [(1, fix[0])]) is None  # already ran
    rules = Rules(max_iterations=2, quick_fixes=True)
    step, progress = next_step(Progress(), end(1, code=code, quick_fix=fix), rules)
    assert step == Another() and progress.quick_fix == fix and progress.quick_fixes_tried == 1
    assert next_step(Progress(), end(1, code=code, quick_fix=fix), Rules(max_iterations=2))[1].quick_fix is None
    ran = end(2, code=fix[0])
    step, progress = next_step(progress, replace(ran, iteration=replace(ran.iteration, quick_fix=True)), rules)
    assert step == Another() and progress.quick_fix is None and rules.last_round(progress) == 3
    step, _ = next_step(progress, end(3, code="z = 0\n"), rules)
    assert isinstance(step, Stop) and step.outcome == "budget_exhausted"
    capped = Progress(quick_fixes_tried=rounds.MAX_QUICK_FIXES)
    assert next_step(capped, end(1, code=code, quick_fix=fix), rules)[1].quick_fix is None


def test_the_tools_program_for_a_question_is_offered_once_where_a_check_has_one():
    check = DataCheck(
        source=f"{DATA_CHECK_PREFIX}each `month` of `df` with the `region` of highest `sales`; print one line per `month`",
        program="print('the answer')\n",
    )
    assert rounds.data_answer([check], []) == (
        check.program,
        "each `month` of `df` with the `region` of highest `sales`",
    )
    assert rounds.data_answer([check], [(2, check.program)]) is None  # already ran
    assert rounds.data_answer([DataCheck(source=check.source)], []) is None  # no program for it
    assert rounds.data_answer([], []) is None  # a heal, or a question without a check


def test_a_soft_round_is_opened_by_next_step_once_and_never_after_the_last_round():
    ok = ExecutionResult(status="ok")
    failing = ("GENERATED check failed: assert c1",)
    last = end(4, passed=True, result=ok, failing_checks=failing, checks=(True, False))
    assert next_step(Progress(), last, RULES) == (Success(), Progress())  # no round after it
    step, progress = next_step(Progress(), end(1, passed=True, result=ok, failing_checks=failing), RULES)
    assert step == Another() and progress.soft_pass is not None
    again = end(2, passed=True, result=ok, failing_checks=failing, checks=(True, False))
    step, later = next_step(progress, again, RULES)
    assert isinstance(step, Success) and later.soft_pass is progress.soft_pass  # once per run


def test_the_record_says_what_the_next_round_is_told_only_when_it_is_told_something():
    verdict_ok, failing = Verdict(True, []), ["GENERATED check failed: assert c1"]
    told = rounds.feedback_sent(Progress(), verdict_ok, "ran cleanly", failing, 1, RULES)
    assert told == "GENERATED check failed: assert c1"  # the soft round is told the checks
    assert rounds.feedback_sent(Progress(), verdict_ok, "ran cleanly", failing, 4, RULES) == ""  # the run ends
    assert rounds.feedback_sent(Progress(), verdict_ok, "ran cleanly", [], 1, RULES) == ""
    failed = Verdict(False, ["raised ZeroDivisionError"])
    assert rounds.feedback_sent(Progress(), failed, "ZeroDivisionError at line 2", failing, 1, RULES) == (
        "ZeroDivisionError at line 2"
    )


def test_a_run_that_ends_otherwise_during_the_soft_round_keeps_its_pass():
    ok = ExecutionResult(status="ok")
    _, progress = next_step(Progress(), end(1, passed=True, result=ok, failing_checks=("c",)), RULES)
    assert rounds.soft_pass_stands(progress, "budget_exhausted") and rounds.soft_pass_stands(progress, "error")
    assert not rounds.soft_pass_stands(progress, "cancelled") and not rounds.soft_pass_stands(Progress(), "failed")


def test_the_tools_own_program_is_worked_out_only_when_quick_fixes_are_on_and_the_round_failed():
    code = "print(df['Region'])\n"
    explanation = Explanation(
        "KeyError: 'Region'", line=1, source=code.strip(), diagnosis=["x"], edits=[LineEdit(1, "'Region'", "'region'")]
    )
    on, off = Rules(max_iterations=2, quick_fixes=True), Rules(max_iterations=2)
    failed, passed = Verdict(False, ["x"]), Verdict(True, [])
    assert rounds.tool_program(on, failed, [], code, explanation, [(1, code)]) == rounds.quick_fix(
        code, explanation, [(1, code)]
    )
    assert rounds.tool_program(off, failed, [], code, explanation, [(1, code)]) is None
    assert rounds.tool_program(on, passed, [], code, explanation, [(1, code)]) is None
    check = DataCheck(source=f"{DATA_CHECK_PREFIX}each `month`; one line", program="print('the answer')\n")
    assert rounds.tool_program(on, failed, [check], code, explanation, [])[0] == check.program  # type: ignore[index]
    assert rounds.tool_program(off, failed, [check], code, explanation, []) is None


def test_a_question_whose_check_has_a_program_opens_with_it_before_the_model():
    check = DataCheck(source=f"{DATA_CHECK_PREFIX}the total `sales` of `df`; print it", program="print(1)\n")
    opened = rounds.opening([check], Rules(max_iterations=2, quick_fixes=True))
    assert opened.quick_fix == (check.program, "the total `sales` of `df`") and opened.quick_fixes_tried == 1
    assert Rules(max_iterations=2, quick_fixes=True).last_round(opened) == 3  # the model keeps its 2 rounds
    assert rounds.opening([check], Rules(max_iterations=2)).quick_fix is None  # quick_fixes off
    assert rounds.opening([DataCheck(source=check.source)], Rules(max_iterations=2, quick_fixes=True)) == Progress()
