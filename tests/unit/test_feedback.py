"""Feedback text from QA results: built from the data model, and from real sandbox runs."""

from __future__ import annotations

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.feedback import failure_signature, format_feedback, tail
from selfheal_jupyter.loop.verdict import judge
from selfheal_jupyter.model import ErrorInfo, ExecutionResult, Frame, Verdict
from selfheal_jupyter.model import TestOutcome as Outcome


def error_result(**kw) -> ExecutionResult:
    base = dict(
        status="error",
        exit_code=1,
        stdout="loading\nrows: 3\n",
        stderr="Traceback (most recent call last):\n  File \"candidate.py\", line 7\nKeyError: 'prise'\n",
        error=ErrorInfo(
            type="KeyError",
            message="'prise'",
            line=7,
            frames=[
                Frame("candidate.py", 9, "<module>", "print(mean_price(df))"),
                Frame("candidate.py", 7, "mean_price", "return frame['prise'].mean()"),
            ],
            locals={"frame": "DataFrame shape=(3, 2) columns=['price', 'qty']"},
        ),
    )
    base.update(kw)
    return ExecutionResult(**base)


def test_exception_line_frames_locals_and_streams():
    text = format_feedback(error_result(), judge(error_result(), None))
    assert text.splitlines()[0] == "The program raised KeyError: 'prise'"
    assert "Failing line 7: return frame['prise'].mean()" in text
    assert "line 9, in <module>: print(mean_price(df))" in text
    assert "frame = DataFrame shape=(3, 2) columns=['price', 'qty']" in text
    assert "rows: 3" in text
    # the traceback is given structured, not again as stderr text
    assert "Traceback" not in text and "End of stderr" not in text


def test_a_secret_among_the_failing_frames_locals_is_redacted():
    """Issue 35: ``headers = {'Authorization': 'Bearer sk-…'}`` went to the model."""
    locals_ = {
        "headers": "{'Authorization': 'Bearer sk-proj-abcdefgh12345678'}",
        "api_key": "'not-obviously-a-key'",
        "db_password": "'hunter2'",
        "url": "'postgres://admin:pw123@db/prod'",
        "rows": "3",
    }
    result = error_result(error=ErrorInfo("KeyError", "'x'", 7, [Frame("candidate.py", 7, "f", "x")], locals_))
    text = format_feedback(result, judge(result, None))
    for secret in ("sk-proj", "not-obviously", "hunter2", "pw123"):
        assert secret not in text, text
    assert "headers = <redacted>" in text and "api_key = <redacted>" in text and "rows = 3" in text


def test_warnings_before_the_traceback_are_kept():
    r = error_result(stderr="UserWarning: careful\nTraceback (most recent call last):\n  x\nKeyError\n")
    text = format_feedback(r)
    assert "UserWarning: careful" in text and "Traceback" not in text


def test_failed_tests_are_listed_with_why():
    r = ExecutionResult(
        status="ok",
        exit_code=0,
        tests=[
            Outcome("assert total == 6", False, "AssertionError (left = 5, right = 6)", 1),
            Outcome("assert isinstance(total, int)", True, "", 2),
        ],
    )
    v = judge(r, "assert total == 6\nassert isinstance(total, int)")
    assert not v.passed and v.reasons == ["1 of 2 tests failed"]
    text = format_feedback(r, v)
    assert "1 of the user's 2 tests failed" in text
    assert "FAILED line 1: assert total == 6" in text
    assert "left = 5, right = 6" in text
    assert "isinstance" not in text


def test_tests_not_run_because_the_program_failed_are_one_line():
    r = error_result(tests=[Outcome("assert a", False, "not run: the program raised KeyError", 1)])
    text = format_feedback(r)
    assert "were not run because the program failed" in text
    assert "FAILED" not in text


def test_tests_the_program_never_reached_are_not_counted_as_failed():
    """The first assert failed and stopped the program: the model is told one test
    failed and which lines never ran, not that all of them failed (a round's prompt
    listed three "FAILED ... not run" entries for one failure)."""
    r = error_result(
        tests=[
            Outcome("assert letter(90) == 'A'", False, "AssertionError (left = 'B', right = 'A')", 31),
            Outcome("assert letter(80) == 'B'", False, "not run: the program raised AssertionError", 32),
            Outcome("assert letter(59) == 'F'", False, "not run: the program raised AssertionError", 33),
            Outcome("assert letter(1) == 'F'", True, "", 34),
        ]
    )
    text = format_feedback(r)
    assert "1 of the user's 4 tests failed" in text
    assert "FAILED line 31: assert letter(90) == 'A'" in text
    assert "2 not run (lines 32, 33): the program raised AssertionError" in text
    assert "FAILED line 32" not in text and "letter(80)" not in text


def test_tests_that_only_did_not_run_are_said_so():
    r = error_result(
        tests=[Outcome("assert a", True, "", 3), Outcome("assert b", False, "not run: the program raised KeyError", 4)]
    )
    text = format_feedback(r)
    assert "1 of the user's 2 tests did not run" in text and "failed (" not in text
    assert "1 not run (line 4): the program raised KeyError" in text


def test_resource_statuses_are_explained():
    limits = SelfHeal(timeout_s=2, memory="256m").limits()
    timeout = format_feedback(ExecutionResult(status="timeout"), limits=limits)
    assert "time limit of 2 s" in timeout and "infinite loop" in timeout
    oom = format_feedback(ExecutionResult(status="oom", exit_code=137), limits=limits)
    assert "out of memory (256m)" in oom
    out = format_feedback(ExecutionResult(status="output_limit", stdout="x\n" * 10, stdout_truncated=True))
    assert "more output than allowed" in out and "truncated by the output limit" in out


def test_blocked_reads_like_the_runtime_error():
    r = ExecutionResult(
        status="blocked",
        error=ErrorInfo(
            "NameError", "name 'totl' is not defined", 2, [Frame("candidate.py", 2, "<module>", "print(totl)")]
        ),
    )
    text = format_feedback(r, judge(r, None))
    assert text.startswith("The program was NOT run: the static pre-check found NameError")
    assert "Failing line 2: print(totl)" in text


def test_passed_gives_no_feedback_and_output_is_capped():
    assert format_feedback(ExecutionResult(status="ok"), Verdict(True, ["ok"])) == ""
    long = "\n".join(f"line {i}" for i in range(1000))
    text = format_feedback(error_result(stdout=long))
    assert "line 999" in text and "line 900" not in text
    assert len(text) < 2500
    assert tail("a\nb\nc", lines=2) == "b\nc"


def test_no_program():
    assert "no program" in format_feedback(None, Verdict(False, ["no program"]))


def test_failure_signature_ignores_output_but_not_the_error():
    a = error_result(stdout="one")
    b = error_result(stdout="two")
    c = error_result(error=ErrorInfo("ValueError", "bad", 3))
    assert failure_signature(a) == failure_signature(b) != failure_signature(c)


def test_a_failure_inside_the_notebooks_function_is_located_once():
    """Issue 46: the location line and the explanation's first sentence said the same
    thing to the model; every repeated line is read again at ~30 tokens/s."""
    from selfheal_jupyter.diagnosis import explain
    from selfheal_jupyter.model import NOTEBOOK_FILE

    frames = [
        Frame("candidate.py", 4, "<module>", "acct.deposit(entry[1:])"),
        Frame(NOTEBOOK_FILE, 7, "deposit", "self.balance += amount"),
    ]
    error = ErrorInfo("TypeError", "unsupported operand type(s) for +=: 'int' and 'str'", 4, frames, {"amount": "'50'"})
    result = error_result(error=error, stdout="")
    code = 'for entry in ledger:\n    if entry.startswith("+"):\n        acct.deposit(entry[1:])\n'
    explanation = explain(result, code, None)
    assert explanation is not None and any("self.balance += amount" in s for s in explanation.diagnosis)
    text = format_feedback(result, judge(result, None), explanation=explanation)
    assert text.count("self.balance += amount") == 2, text  # the location line and the frames
    assert "It failed inside deposit(), defined in the user's notebook" in text


def test_a_key_the_candidate_made_huge_reaches_the_model_clipped():
    """``df["A" * 200_000]``: the KeyError's message is the key, and the tool's explanation
    quotes it (`... is not a column of `df``); every token of the prompt is read."""
    from selfheal_jupyter.diagnosis import explain

    key = "A" * 200_000
    code = 'import pandas as pd\ndf = pd.DataFrame({"a": [1]})\nprint(df["A" * 200_000])\n'
    error = ErrorInfo("KeyError", repr(key), 3, [], {"df": "DataFrame shape=(1, 1) columns=['a']"})
    result = error_result(error=error, stdout="", stderr="")
    explanation = explain(result, code, None)
    assert explanation is not None and any("is not a column of `df`" in s for s in explanation.diagnosis)
    assert len(format_feedback(result, judge(result, None), explanation=explanation)) < 2_000


def told_with_differences(code: str, result: ExecutionResult) -> str:
    """The feedback and what differs at the failing statement (no probe run: the locals)."""
    from selfheal_jupyter.feedback import runtime_value_lines
    from selfheal_jupyter.spec.probes import differences

    return "\n".join(
        [format_feedback(result, judge(result, None)), *runtime_value_lines([], differences(code, result, []))]
    )


@pytest.mark.parametrize(
    "name, shown, compared_with, secret",
    [
        # the locals showed `api_token = <redacted>`; "what differs" quoted the rest of its value
        ("api_token", "'sk-proj-abcdefgh12345678'", '"sk-proj-zzz"', "abcdefgh"),
        # a closing quote stood between the dict's key and its value
        ("config", "{'user': 'ann', 'password': 'hunter2-long'}", "{}", "hunter2"),
    ],
    ids=["a-secret-name", "a-secret-under-a-dicts-key"],
)
def test_a_secret_is_redacted_in_the_locals_and_never_said_by_what_differs(name, shown, compared_with, secret):
    code = f"{name} = load()\nassert {name} == {compared_with}\n"
    frame = Frame("candidate.py", 2, "<module>", f"assert {name} == {compared_with}")
    error = ErrorInfo("AssertionError", "", 2, [frame], {name: shown})
    result = error_result(error=error, stdout="", stderr="")
    text = told_with_differences(code, result)
    assert f"{name} = <redacted>" in text and secret not in text, text


def test_a_column_name_with_a_line_break_keeps_the_explanation_on_its_lines():
    """A CSV header may hold a line break: the explanation's sentence went on an unindented
    line, out of what a student's hints leave out (the fix, `Total\\nsales`, stayed in)."""
    from selfheal_jupyter.diagnosis import explain
    from selfheal_jupyter.feedback import without_explanation

    columns = ["Total\u2028sales", "units"]
    error = ErrorInfo("KeyError", "'Total_sales'", 1, [], {"df": f"DataFrame shape=(2, 2) columns={columns!r}"})
    result = error_result(error=error, stdout="", stderr="")
    explanation = explain(result, 'print(df["Total_sales"].sum())\n', None)
    assert explanation is not None and any("is not a column of `df`" in s for s in explanation.diagnosis)
    hints = without_explanation(format_feedback(result, judge(result, None), explanation=explanation))
    assert "sales`" not in hints and "is not a column" not in hints, hints
