"""The loop's strategies beyond write → run → repair, the parts that need no sandbox run.
(End to end: tests/sandbox/test_strategies.py.)"""

from __future__ import annotations

import pytest

from selfheal_jupyter.agents import explain_first
from selfheal_jupyter.agents.checks import build_messages, outline, parse_checks
from selfheal_jupyter.agents.developer import RepairContext
from selfheal_jupyter.model import ErrorInfo, ExecutionResult, Frame
from selfheal_jupyter.model import TestOutcome as Outcome  # not collected as a test class
from selfheal_jupyter.spec.probes import describe_difference, differences, plan_probes


def test_parse_checks_keeps_only_new_top_level_asserts():
    text = (
        "```python\nimport os\nassert f(1) == 2\ndef g():\n    assert False\n"
        "assert f(1) == 2\nassert user()\nprint(3)\nassert f(2) == 3\nassert f(3) == 4\n```"
    )
    assert parse_checks(text, count=2, user_tests="assert user()") == ["assert f(1) == 2", "assert f(2) == 3"]
    assert parse_checks("no code here", count=3) == []


def test_outline_drops_bodies():
    code = 'def f(x):\n    """Doubles x."""\n    y = x * 3  # triple?\n    return y\n'
    text = outline(code)
    assert "def f(x):" in text and "Doubles x." in text and "# triple?" in text
    assert "return y" not in text and "x * 3" not in text
    assert "x * 3" not in build_messages("t", [], initial_code=code)[1]["content"]


def test_plan_probes_runs_the_program_up_to_the_failing_statement():
    code = "x = [1, 2]\ny = 0\nprint(x[y + 5], len(x))\nprint('after')\n"
    result = ExecutionResult(
        status="error",
        exit_code=1,
        error=ErrorInfo(
            "IndexError",
            "list index out of range",
            3,
            [Frame("candidate.py", 3, "<module>", "print(x[y + 5], len(x))")],
            locals={"x": "[1, 2]", "y": "0"},
        ),
    )
    prefix, probes = plan_probes(code, result)
    assert prefix == "x = [1, 2]\ny = 0\n"
    # print's own value (None) is not probed; names the locals already show are not either
    assert [_expr(p) for p in probes] == ["x[y + 5]", "len(x)", "y + 5"]
    assert plan_probes(code, ExecutionResult(status="ok", exit_code=0)) is None


def test_a_slice_is_no_probe_of_its_own():
    """`values[5:]`: the sliced list is probed, never `5:` (not an expression: a probe of
    it would make every probe of the run unparsable)."""
    code = "values = [1, 2, 3]\nprint(sum(values) / len(values[5:]))\n"
    result = ExecutionResult(
        status="error",
        exit_code=1,
        error=ErrorInfo(
            "ZeroDivisionError",
            "division by zero",
            2,
            [Frame("candidate.py", 2, "<module>", "print(sum(values) / len(values[5:]))")],
            locals={"values": "[1, 2, 3]"},
        ),
    )
    _, probes = plan_probes(code, result)
    shown = [_expr(p) for p in probes]
    assert "values[5:]" in shown and "len(values[5:])" in shown and "5:" not in shown
    compile("\n".join(probes), "probes", "exec")


def _expr(probe: str) -> str:
    return probe.split("repr(", 1)[1].rsplit(")[:", 1)[0]


def test_a_diagnosis_is_asked_only_for_a_repair_of_a_program_that_failed():
    failed = RepairContext(code="x = 1 / 0\n", feedback="ZeroDivisionError")
    assert explain_first.wanted(failed, restarted=False, soft_round=False)
    assert not explain_first.wanted(failed, restarted=True, soft_round=False)
    assert not explain_first.wanted(failed, restarted=False, soft_round=True)
    assert not explain_first.wanted(RepairContext(code=None, feedback="f"), restarted=False, soft_round=False)
    assert not explain_first.wanted(
        RepairContext(code="x\n", feedback="f", no_code=True), restarted=False, soft_round=False
    )
    assert not explain_first.wanted(None, restarted=False, soft_round=False)


def _failed_at(line: int, source: str, **locals_: str) -> ExecutionResult:
    return ExecutionResult(
        status="error",
        exit_code=1,
        error=ErrorInfo(
            "AssertionError", "", line, [Frame("candidate.py", line, "<module>", source)], locals=dict(locals_)
        ),
    )


def test_a_failing_equality_says_what_differs():
    code = "items = {'pen': [1.5, 15], 'book': [12.0, 0]}\nassert items == {'pen': [1.5, 15]}\n"
    said = differences(
        code, _failed_at(2, "assert items == {'pen': [1.5, 15]}", items="{'pen': [1.5, 15], 'book': [12.0, 0]}"), []
    )
    assert said == ["`items == {'pen': [1.5, 15]}` is False: items should not have the key 'book' (it has [12.0, 0])"]
    # a literal on the left is the expected side
    said = differences("n = 3\nassert 4 == n\n", _failed_at(2, "assert 4 == n", n="3"), [])
    assert said == ["`4 == n` is False: n should be 4, not 3 (off by -1)"]
    # the literal side is its own value: it is not probed
    _, probes = plan_probes("x = 1\nassert f(x) == {'a': 1}\n", _failed_at(2, "assert f(x) == {'a': 1}", x="1"))
    assert [_expr(p) for p in probes] == ["f(x)"]


@pytest.mark.parametrize(
    "actual, expected, said",
    [
        ([1, 2, 3], [1, 5, 3], "got[1] should be 5, not 2"),
        ([1, 2], [1, 2, 3], "got should have 3 items, not 2 (first missing: 3)"),
        (("the", 4), ("the", 3), "got[1] should be 3, not 4"),
        ({1, 2}, {2, 3}, "got should not contain [1]; got should also contain [3]"),
        ("Hi. Bye", "Hi, Bye", "got differs from position 2: it should go on ', Bye', not '. Bye'"),
        (54.6, 54.7, "got should be 54.7, not 54.6 (off by"),
        ({"a": 1}, {"a": 2, "b": 3}, "got should have the key 'b' = 3; got['a'] should be 2, not 1"),
        ([1], (1,), "got should be a tuple ((1,)), not a list ([1])"),
    ],
)
def test_differences_say_how_the_value_must_change(actual, expected, said):
    assert said in "; ".join(describe_difference(actual, expected, "got"))


def test_sides_that_are_no_plain_values_are_not_compared():
    code = "import pandas as pd\ndf = pd.DataFrame()\nassert df == 3\n"
    assert differences(code, _failed_at(3, "assert df == 3", df="Empty DataFrame"), []) == []
    clipped = "[" + "1, " * 100  # a repr cut at REPR_CHARS is not the whole value
    values = [Outcome("f()", True, clipped[:200])]
    assert differences("assert f() == [1]\n", _failed_at(1, "assert f() == [1]"), values) == []
