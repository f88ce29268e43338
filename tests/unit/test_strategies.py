"""The loop's strategies beyond write → run → repair, end to end: the real openai client
against the scripted server, the programs' runs the real runner's results, recorded
(``recorded_sandbox``; ``make record`` writes them again).

- QA's generated checks (AgentCoder's test designer): soft feedback, never the user's tests;
- N candidates per round, chosen by execution (the user's tests, then CodeT dual agreement);
- runtime values at the failing statement (LDB-style);
- "explain the bug first, then fix";
- restarting after failed repairs.

Each end-to-end test is built so that the run goes differently without its mechanism."""

from __future__ import annotations

import json

import pytest
from traitlets import TraitError

from selfheal_jupyter.agents import explain_first
from selfheal_jupyter.agents.checks import build_messages, outline, parse_checks
from selfheal_jupyter.agents.developer import CHECKS_NOTE, RESTART_NOTE, RepairContext
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.loop.orchestrator import Loop, Strategies
from selfheal_jupyter.model import ErrorInfo, ExecutionResult, Frame, Task
from selfheal_jupyter.model import TestOutcome as Outcome  # not collected as a test class
from selfheal_jupyter.render.html import run_html
from selfheal_jupyter.spec.probes import describe_difference, differences, plan_probes
from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_loop import fenced, llm_for, make_loop

IS_EVEN_TASK = "Write is_even(n): True when the integer n is even, False otherwise."
USER_TESTS = "assert is_even(2)"
CHECKS = Reply("```python\nassert is_even(3) is False\nassert is_even(0) is True\n```", match="test designer")
ALWAYS_TRUE = "def is_even(n):\n    return True"
RIGHT = "def is_even(n):\n    return n % 2 == 0"


def loop(server: ScriptedServer, sandbox, **options) -> Loop:
    """Strategies off unless named: each test measures the one mechanism it names."""
    off = {"generated_checks": 0, "candidates": 1, "runtime_values": False, "explain_first": False, "restart_after": 0}
    return make_loop(server, sandbox, auto_plan=False, **{**off, **options})


def developer_prompts(server: ScriptedServer) -> list[str]:
    return [
        r["messages"][1]["content"]
        for r in server.chat_requests()
        if "expert Python developer" in r["messages"][0]["content"]
    ]


# --------------------------------------------------------------------------- generated checks
def test_a_failing_generated_check_is_soft_feedback_that_leads_to_a_fix(recorded_sandbox):
    with ScriptedServer([CHECKS, fenced(ALWAYS_TRUE), fenced(RIGHT)]) as s:
        run = loop(s, recorded_sandbox, generated_checks=2, max_iterations=3).run(
            Task(prompt=IS_EVEN_TASK, tests=USER_TESTS)
        )
        prompts = developer_prompts(s)
        designer = s.chat_requests()[0]["messages"]
    assert "test designer" in designer[0]["content"] and IS_EVEN_TASK in designer[1]["content"]
    assert run.checks.statements == ["assert is_even(3) is False", "assert is_even(0) is True"]
    first, second = run.iterations
    # the user's verdict passed; the generated checks are apart from the user's tests
    assert first.verdict.passed and first.verdict.tests_passed == 1
    assert [t.source for t in first.result.tests] == [USER_TESTS]
    assert [t.passed for t in first.checks] == [False, True]
    assert "GENERATED assert is_even(3) is False" in first.feedback
    assert "not by the user; they may be wrong" in first.feedback
    assert "GENERATED" in prompts[1] and CHECKS_NOTE in prompts[1]
    assert run.outcome == "success" and run.final_code.strip() == RIGHT
    assert all(t.passed for t in second.checks)
    page = run_html(run)
    assert 'data-soft="true"' in page and "soft, not your tests" in page
    assert run.to_dict()["generated_checks"] == run.checks.statements


def test_generated_checks_never_decide_the_verdict(recorded_sandbox):
    # The developer says the check is wrong (no program): the earlier pass stands.
    explanation = "The check is wrong: the task wants True for every number."
    with ScriptedServer([CHECKS, fenced(ALWAYS_TRUE), explanation]) as s:
        run = loop(s, recorded_sandbox, generated_checks=2, max_iterations=3).run(
            Task(prompt=IS_EVEN_TASK, tests=USER_TESTS)
        )
    assert run.outcome == "success" and run.final_code.strip() == ALWAYS_TRUE
    assert len(run.iterations) == 2 and run.iterations[1].candidate.code == ""
    # A new pass that fixes none of the failing checks does not replace the earlier one.
    also_true = "def is_even(n):\n    return n == n"
    with ScriptedServer([CHECKS, fenced(ALWAYS_TRUE), fenced(also_true)]) as s:
        run = loop(s, recorded_sandbox, generated_checks=2, max_iterations=3).run(
            Task(prompt=IS_EVEN_TASK, tests=USER_TESTS)
        )
    assert [it.verdict.passed for it in run.iterations] == [True, True]
    assert run.outcome == "success" and run.final_code.strip() == ALWAYS_TRUE
    assert run.final_index == 1
    # No round left: a pass with failing generated checks is a success at once.
    with ScriptedServer([CHECKS, fenced(ALWAYS_TRUE)]) as s:
        run = loop(s, recorded_sandbox, generated_checks=2, max_iterations=1).run(
            Task(prompt=IS_EVEN_TASK, tests=USER_TESTS)
        )
        assert s.remaining == 0
    assert run.outcome == "success" and len(run.iterations) == 1
    assert not all(t.passed for t in run.iterations[0].checks)


def test_intent_checks_are_written_for_a_heal_of_a_cell_without_asserts_only(recorded_sandbox):
    cell = (
        "# the three largest cities, biggest first\n"
        "sizes = {'lima': 10.9, 'tokyo': 37.2, 'delhi': 32.9, 'cairo': 22.2}\n"
        "top = sorted(sizes, key=sizes.get)[:3]\nprint(top)\n"
    )
    check = Reply("```python\nassert top[0] == 'tokyo'\n```", match="test designer")
    wrong_order = fenced(cell.replace("print(top)", "print(top, len(top))"))
    right = fenced(cell.replace("key=sizes.get)", "key=sizes.get, reverse=True)"))
    with ScriptedServer([check, Reply(wrong_order), Reply(right, match="GENERATED")]) as s:
        run = loop(s, recorded_sandbox, intent_checks=1, max_iterations=3).run(
            Task(prompt="Make this code run without errors.", initial_code=cell, given_is_wrong=True)
        )
        designer = s.chat_requests()[0]["messages"][1]["content"]
    assert "the three largest cities, biggest first" in designer
    assert run.checks is not None and run.checks.statements == ["assert top[0] == 'tokyo'"]
    first, second = run.iterations[1:]
    assert first.verdict.passed and not first.checks[0].passed  # soft: one more round
    assert second.checks[0].passed and "reverse=True" in run.final_code
    assert run.verified_by == ["generated checks"]
    # a cell with its own assert, or --tests, gets none: the user's checks say what is right
    with ScriptedServer([Reply(fenced(cell + "assert top\n"))]) as s:
        run = loop(s, recorded_sandbox, intent_checks=1, max_iterations=1).run(
            Task(prompt="", initial_code=cell + "assert top\n")
        )
        assert not any("test designer" in json.dumps(r) for r in s.chat_requests())
    assert run.checks is None


def test_a_repairs_checks_come_from_the_task_comments_and_docstrings_not_the_bodies(recorded_sandbox):
    user = (
        "def is_even(n):\n"
        '    """True when n is even."""\n'
        "    # the remainder of n divided by 2 tells\n"
        "    return n % 2 == 1\n\n"
        "print(is_even(4))\n"
    )
    with ScriptedServer([CHECKS, fenced(RIGHT + "\n\nprint(is_even(4))")]) as s:
        run = loop(s, recorded_sandbox, generated_checks=2, max_iterations=2).run(
            Task(prompt="Fix is_even.", initial_code=user)
        )
        designer = s.chat_requests()[0]["messages"][1]["content"]
    assert "True when n is even." in designer and "# the remainder of n divided by 2" in designer
    assert "def is_even(n):" in designer and "n % 2 == 1" not in designer
    # the user's code ran cleanly and printed False: only the generated check saw the bug
    zero, one = run.iterations
    assert zero.verdict.passed and not all(t.passed for t in zero.checks)
    assert run.outcome == "success" and run.final_code.startswith(RIGHT)


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


# --------------------------------------------------------------------------- N candidates
def test_n_candidates_the_one_passing_the_users_tests_is_chosen_and_ends_the_round(recorded_sandbox):
    replies = [fenced("total = 4"), fenced("total = 5"), fenced("total = 6"), fenced("total = 7")]
    with ScriptedServer(replies) as s:
        run = loop(s, recorded_sandbox, candidates=3, max_iterations=2).run(
            Task(prompt="Set total to six.", tests="assert total == 6")
        )
        temps = [r.get("temperature") for r in s.chat_requests()]
    assert run.outcome == "success" and run.final_code.strip() == "total = 6"
    first, second = run.iterations
    # the first program is one greedy reply; the repair round samples up to three and
    # stops at one that passed the user's tests with nothing left to agree on
    assert first.samples == [] and first.candidate.code.strip() == "total = 4"
    assert [x.chosen for x in second.samples] == [False, True]
    assert [x.passed for x in second.samples] == [False, True]
    assert len(temps) == 3 and temps[2] == 0.8 and 0.8 not in temps[:2]
    assert "2 programs tried in this attempt; the one marked ➜ was kept" in run_html(run)


def test_the_third_sample_of_a_round_starts_over_instead_of_copying_the_failing_program(recorded_sandbox):
    replies = [fenced("total = 4"), fenced("total = 5"), fenced("total = 7"), fenced("total = 6")]
    with ScriptedServer(replies) as s:
        run = loop(s, recorded_sandbox, candidates=3, max_iterations=2).run(
            Task(prompt="Set total to six.", tests="assert total == 6")
        )
        prompts = developer_prompts(s)
        temps = [r.get("temperature") for r in s.chat_requests()]
    # samples 1 and 2 repair round 1's program; sample 3 writes it again from the task
    assert all("total = 4" in p and RESTART_NOTE not in p for p in prompts[1:3])
    assert RESTART_NOTE in prompts[3] and "total = 4" not in prompts[3]
    assert "The current program" not in prompts[3] and temps[3] == 0.8
    second = run.iterations[1]
    assert [x.fresh for x in second.samples] == [False, False, True]
    assert second.samples[2].chosen and run.final_code.strip() == "total = 6"
    assert "program 3 (written afresh)" in run_html(run)


def test_a_heals_fresh_sample_starts_over_from_the_users_code(recorded_sandbox):
    worse = USER.replace("+ 1", "+ 2")
    replies = [fenced(worse), fenced(USER.replace("+ 1", "+ 3")), fenced(USER.replace("+ 1", "+ 4")), fenced(FIXED)]
    with ScriptedServer(replies) as s:
        run = loop(s, recorded_sandbox, candidates=3, max_iterations=2).run(Task(prompt="", initial_code=USER))
        prompts = developer_prompts(s)
    assert "len(values) + 2" in prompts[1] and "len(values) + 2" in prompts[2]
    assert RESTART_NOTE in prompts[3] and "len(values) + 1" in prompts[3]
    assert "len(values) + 2" not in prompts[3]
    assert run.outcome == "success" and run.iterations[-1].samples[2].fresh


def test_a_sample_that_keeps_the_users_asserts_is_chosen_over_one_that_runs_by_deleting_them(recorded_sandbox):
    deleted = "\n".join(line for line in USER.splitlines() if not line.startswith("assert"))
    replies = [fenced(USER.replace("+ 1", "+ 2")), fenced(deleted), fenced(deleted), fenced(USER.replace("+ 1", "+ 3"))]
    with ScriptedServer(replies) as s:
        run = loop(s, recorded_sandbox, candidates=3, max_iterations=2).run(Task(prompt="", initial_code=USER))
    it = run.iterations[-1]
    assert [x.status for x in it.samples] == ["ok", "none", "error"]  # deleting the assert runs; its copy is not run
    assert [x.chosen for x in it.samples] == [False, False, True]
    assert not it.verdict.spec_violations and "len(values) + 3" in it.candidate.code


def test_n_candidates_without_a_deciding_test_go_by_dual_agreement(recorded_sandbox):
    checks = Reply("```python\nassert square(2) == 4\nassert square(3) == 9\n```", match="test designer")
    unfinished = "def square(x):\n    raise NotImplementedError\n\nsquare(1)"
    doubled = "def square(x):\n    return x * 2"
    power = "def square(x):\n    return x ** 2"
    times = "def square(x):\n    return x * x"
    replies = [checks, fenced(unfinished), fenced(doubled), fenced(power), fenced(times)]
    with ScriptedServer(replies) as s:
        run = loop(s, recorded_sandbox, candidates=3, generated_checks=2, max_iterations=2).run(
            Task(prompt="Write square(x).")
        )
    _, it = run.iterations
    assert [x.passed for x in it.samples] == [True, True, True]  # no user tests: all pass
    assert [x.checks_passed for x in it.samples] == [1, 2, 2]
    assert [x.agreement for x in it.samples] == [1, 4, 4]
    assert run.final_code.strip() == power and run.outcome == "success"


# --------------------------------------------------------------------------- runtime values
AVERAGE = """\
def average(values):
    return sum(values) / (len(values) + 1)

scores = [3, 4, 5]
assert average(scores) == 4, "the mean of 3, 4, 5 is 4"
"""


def test_runtime_values_at_the_failing_statement_reach_the_developer(recorded_sandbox):
    fixed = AVERAGE.replace("(len(values) + 1)", "len(values)")
    with ScriptedServer([fenced(fixed)]) as s:
        run = loop(s, recorded_sandbox, runtime_values=True, max_iterations=1).run(
            Task(prompt="", initial_code=AVERAGE)
        )
        repair = developer_prompts(s)[0]
    zero = run.iterations[0]
    assert zero.result.error.type == "AssertionError"
    assert [(v.source, v.message) for v in zero.runtime_values] == [("average(scores)", "3.0")]
    assert "Values at the failing statement" in repair and "average(scores) = 3.0" in repair
    assert run.outcome == "success"
    assert "Values where it failed" in run_html(run)


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


def test_a_failure_inside_a_function_probes_the_callers_values(recorded_sandbox):
    code = (
        "def average(values):\n    return sum(values) / len(values)\n\n"
        'groups = {"a": [3, 4, 5], "b": []}\nprint("class B:", average(groups["b"]))\n'
    )
    fixed = code.replace("sum(values) / len(values)", "sum(values) / len(values) if values else 0.0")
    with ScriptedServer([fenced(fixed)]) as s:
        run = loop(s, recorded_sandbox, runtime_values=True, max_iterations=1).run(Task(prompt="", initial_code=code))
        repair = developer_prompts(s)[0]
    zero = run.iterations[0]
    assert zero.result.error.locals == {"values": "[]"}  # the failing frame: not the caller's
    shown = {v.source: (v.passed, v.message) for v in zero.runtime_values}
    assert shown["groups['b']"] == (True, "[]")
    assert shown["groups"] == (True, "{'a': [3, 4, 5], 'b': []}")
    assert shown["average(groups['b'])"][0] is False
    assert "ZeroDivisionError" in shown["average(groups['b'])"][1]
    assert "groups['b'] = []" in repair and run.outcome == "success"


def _expr(probe: str) -> str:
    return probe.split("repr(", 1)[1].rsplit(")[:", 1)[0]


# --------------------------------------------------------------------------- explain first
USER = AVERAGE.replace("(len(values) + 1)", "len(values) + 1")
FIXED = AVERAGE.replace("(len(values) + 1)", "len(values)")


def test_explain_first_puts_the_diagnosis_in_the_repair_prompt(recorded_sandbox):
    diagnosis = "average divides by one more than the number of values; divide by len(values)."
    with ScriptedServer([Reply(diagnosis, match="expert Python debugger"), fenced(FIXED)]) as s:
        run = loop(s, recorded_sandbox, explain_first=True, max_iterations=1).run(Task(prompt="", initial_code=USER))
        requests = s.chat_requests()
    assert "Explain why the program fails" in requests[0]["messages"][0]["content"]
    assert "AssertionError" in requests[0]["messages"][1]["content"]
    assert f"Diagnosis of the bug:\n{diagnosis}" in requests[1]["messages"][1]["content"]
    assert run.iterations[1].diagnosis == diagnosis
    assert run.outcome == "success"
    assert "Diagnosis (the model" in run_html(run)


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


# --------------------------------------------------------------------------- restart
def test_restart_after_two_failed_repairs_writes_the_program_again(recorded_sandbox):
    # three failed rounds, each its own way (three the same way would end the run)
    script = [fenced(code) for code in ("total = 1", "total = 2 + None", "total = int('3x')", "total = 6")]
    with ScriptedServer(script) as s:
        run = loop(s, recorded_sandbox, restart_after=2, max_iterations=4).run(
            Task(prompt="Set total to six.", tests="assert total == 6")
        )
        prompts = developer_prompts(s)
        temps = [r.get("temperature") for r in s.chat_requests()]
    assert [it.restarted for it in run.iterations] == [False, False, False, True]
    assert RESTART_NOTE not in "".join(prompts[:3])
    assert RESTART_NOTE in prompts[3] and "int('3x')" not in prompts[3]
    assert "The current program" not in prompts[3] and temps[3] == 0.8
    assert run.outcome == "success"


def test_restart_of_a_heal_starts_again_from_the_users_code(recorded_sandbox):
    worse = [USER.replace("+ 1", f"+ {n}") for n in (2, 3)]
    with ScriptedServer([fenced(worse[0]), fenced(worse[1]), fenced(FIXED)]) as s:
        run = loop(s, recorded_sandbox, restart_after=2, max_iterations=3).run(Task(prompt="", initial_code=USER))
        prompts = developer_prompts(s)
    assert RESTART_NOTE in prompts[2]
    assert "len(values) + 1" in prompts[2] and "len(values) + 3" not in prompts[2]
    assert run.iterations[-1].restarted and run.outcome == "success"


# --------------------------------------------------------------------------- configuration
def test_options_reach_the_loop_and_are_validated(recorded_sandbox):
    with ScriptedServer([]) as s:
        settings = SelfHeal(candidates=3, generated_checks=2, runtime_values=True, explain_first=True, restart_after=2)
        built = build_loop(settings, sandbox=recorded_sandbox, llm=llm_for(s))
        defaults = build_loop(SelfHeal(), sandbox=recorded_sandbox, llm=llm_for(s)).strategies
    assert built.strategies == Strategies(2, 3, True, True, 2, quick_fixes=True)
    # measured: runtime values on by default, the others off; quick fixes on (no model call)
    assert defaults == Strategies(
        generated_checks=0,
        candidates=1,
        runtime_values=True,
        explain_first=False,
        restart_after=0,
        intent_checks=0,
        quick_fixes=True,
    )
    for name, bad in (("candidates", 0), ("generated_checks", -1), ("restart_after", -2), ("intent_checks", -1)):
        with pytest.raises(TraitError, match=f"SelfHeal.{name} must be at least"):
            SelfHeal(**{name: bad})


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


INVENTORY = """\
items = {}
def add(name, price, quantity):
    items[name] = [price, quantity]
def remove(name, quantity):
    items[name][1] -= quantity  # should drop the item at 0
add("pen", 1.5, 15)
add("book", 12.0, 2)
remove("book", 2)
assert items == {"pen": [1.5, 15]}
"""


def test_what_differs_reaches_the_developer(recorded_sandbox):
    fixed = INVENTORY.replace("  # should drop the item at 0", "\n    if items[name][1] == 0:\n        del items[name]")
    with ScriptedServer([fenced(fixed)]) as s:
        run = loop(s, recorded_sandbox, runtime_values=True, max_iterations=1).run(
            Task(prompt="", initial_code=INVENTORY)
        )
        repair = developer_prompts(s)[0]
    assert "What differs" in repair
    assert "items should not have the key 'book' (it has [12.0, 0])" in repair
    assert run.outcome == "success"
