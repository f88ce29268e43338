"""The user's spec is sacred: a repair may not pass by changing, silencing or answering
the user's asserts.

End to end: the real openai client against the scripted server, candidates run in the
real sandbox. Every rejected candidate here WOULD pass QA without the spec guard (it
runs cleanly), so each test fails if the guard is removed. The static rules are also
checked one by one on :func:`selfheal_jupyter.spec.guard.check`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfheal_jupyter.model import Task
from selfheal_jupyter.render.html import run_html
from selfheal_jupyter.render.text import Transcript
from tests.scripted_server import ScriptedServer
from tests.unit.test_loop import fenced, make_loop
from tests.unit.test_spec import ASSERT, FIXED, IS_LEARNING, MESSAGE_ONLY, USER, USER_TEST_FUNCTION

ROOT = Path(__file__).resolve().parents[2]

DELETED = USER.replace(ASSERT + "\n", "")
WRAPPED = USER.replace(ASSERT, f'try:\n    {ASSERT}\nexcept AssertionError:\n    print("close enough")')
HARD_CODED = USER.replace("mean = average(scores)", "mean = 4")
HARD_CODED_RETURN = USER.replace("return sum(values) / len(values) + 1", "return 4")
WEAKENED = USER.replace(ASSERT, 'assert abs(mean - 4) <= 1, "the mean of 3, 4, 5 is 4"')


# A cell that fails at a statement (ZeroDivisionError for the empty group).
USER_ZERO = """\
def average(values):
    return sum(values) / len(values)

groups = {"a": [3, 4, 5], "b": []}
means = {}
for name, values in groups.items():
    means[name] = average(values)
assert means["a"] == 4
"""
SWALLOWED = USER_ZERO.replace(
    "    means[name] = average(values)\n",
    "    try:\n        means[name] = average(values)\n    except ZeroDivisionError:\n        pass\n",
)


def heal(server: ScriptedServer, sandbox, code: str = USER, **kw) -> tuple:
    kw.setdefault("max_iterations", 1)
    loop = make_loop(server, sandbox, auto_plan=False, **kw)
    run = loop.run(Task(prompt="", initial_code=code))
    return run


def rules(iteration) -> set[str]:
    return {v.rule for v in iteration.verdict.spec_violations}


# --------------------------------------------------------------------------- end to end
@pytest.mark.parametrize(
    "candidate, rule, words",
    [
        (DELETED, "assert_removed", ["was deleted", "mean == 4", "Put the assert back"]),
        (WRAPPED, "failure_swallowed", ["mean == 4", "try/except", "Remove the try/except"]),
        (HARD_CODED, "hard_coded", ["`mean = 4`", "instead of computed", "Compute the value"]),
        (HARD_CODED_RETURN, "hard_coded", ["`average` now just returns 4", "Compute the value"]),
        (WEAKENED, "assert_changed", ["mean == 4", "abs(mean - 4) <= 1", "Restore the user's condition"]),
    ],
    ids=["deleted", "try-except", "hard-coded-name", "hard-coded-return", "weakened"],
)
def test_a_candidate_that_breaks_the_spec_is_rejected_with_the_rule(sandbox, candidate, rule, words):
    with ScriptedServer([fenced(candidate)]) as s:
        run = heal(s, sandbox)
    zero, first = run.iterations
    assert zero.result.error.type == "AssertionError" and zero.verdict.spec_checked is False
    # It ran cleanly: only the spec guard stands between it and "success".
    assert first.result.status == "ok" and first.result.error is None
    assert run.outcome != "success" and run.final_code is None
    assert not first.verdict.passed and first.verdict.spec_kept is False
    assert rule in rules(first)
    assert f"RULE {rule}" in first.feedback
    for w in words:
        assert w in first.feedback, (w, first.feedback)
    assert "The last candidate was rejected because it changed your spec" in run.error
    # the static HTML / panel marks it
    page = run_html(run)
    assert 'data-spec="violated"' in page and "Rejected: changes your spec" in page
    assert f"[{rule}]" in page


def test_feedback_reaches_the_developer_and_names_the_rule(sandbox):
    with ScriptedServer([fenced(DELETED), fenced(FIXED)]) as s:
        run = heal(s, sandbox, max_iterations=2)
        repair = s.requests[1]["messages"][1]["content"]
        first_prompt = s.requests[0]["messages"][1]["content"]
    assert "keep every assert with its condition exactly as written" in first_prompt
    assert "RULE assert_removed" in repair and ASSERT.split(",")[0][7:] in repair
    assert "to comply: Put the assert back" in repair
    assert run.outcome == "success" and run.final_code == FIXED
    assert run.iterations[-1].verdict.spec_kept is True


def test_the_failing_statement_wrapped_in_try_except_is_rejected(sandbox):
    with ScriptedServer([fenced(SWALLOWED)]) as s:
        run = heal(s, sandbox, code=USER_ZERO)
    zero, first = run.iterations
    assert zero.result.error.type == "ZeroDivisionError"
    assert first.result.status == "ok"
    assert run.outcome != "success"
    assert rules(first) == {"failure_swallowed"}
    assert "means[name] = average(values)" in first.feedback
    assert "hides the error instead of fixing it" in first.feedback


def test_fixing_only_the_assert_message_is_accepted(sandbox):
    with ScriptedServer([fenced(MESSAGE_ONLY)]) as s:
        run = heal(s, sandbox)
    assert run.outcome == "success", run.error
    last = run.iterations[-1]
    assert last.verdict.spec_checked and last.verdict.spec_kept is True
    assert run.final_code == MESSAGE_ONLY


def test_a_model_that_keeps_changing_the_assert_ends_failed_never_success(sandbox):
    with ScriptedServer([fenced(DELETED), fenced(WEAKENED), fenced(FIXED)]) as s:
        run = heal(s, sandbox, max_iterations=4)
        assert s.remaining == 1  # stopped before asking a third time
    assert run.outcome == "failed"
    assert "rounds 1, 2" in run.error and "mean == 4" in run.error
    assert "If an assert itself is wrong, correct it" in run.error
    assert all(it.verdict.spec_kept is False for it in run.iterations[1:])
    out = io.StringIO()
    tr = Transcript(out)
    for it in run.iterations:
        tr.verdict(it)
    assert "spec [assert_removed]" in out.getvalue()


def test_without_user_code_there_is_no_spec(sandbox):
    with ScriptedServer([fenced("mean = 4\nprint(mean)")]) as s:
        run = make_loop(s, sandbox, auto_plan=False, max_iterations=1).run(
            Task(prompt="Set mean to the mean of 3, 4, 5.", tests="assert mean == 4")
        )
    assert run.outcome == "success"
    assert run.iterations[0].verdict.spec_checked is False
    assert run.iterations[0].verdict.spec_kept is None


@pytest.mark.sandbox
def test_selfheal_run_code_rejects_a_deleted_assert(tmp_path: Path):
    code = tmp_path / "cell.py"
    code.write_text(USER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    with ScriptedServer([fenced(DELETED)]) as s:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "selfheal_jupyter",
                "run",
                "",
                "--code",
                str(code),
                "--no-plan",
                "--max-iterations",
                "1",
                "--json",
                "--base-url",
                s.base_url,
                "--model",
                s.model,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
    assert proc.returncode == 1, proc.stderr
    record = json.loads(proc.stdout)
    assert record["outcome"] == "budget_exhausted" and record["final_code"] is None
    verdict = record["iterations"][1]["verdict"]
    assert verdict["passed"] is False and verdict["spec_checked"] is True
    assert [v["rule"] for v in verdict["spec_violations"]] == ["assert_removed"]


# --------------------------------------------------------------------------- lying values (issue 25)
def _run_code(tmp_path: Path, user: str, candidate: str) -> dict:
    """`selfheal run "" --code FILE` whose one repair round is ``candidate``."""
    code = tmp_path / "cell.py"
    code.write_text(user)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    with ScriptedServer([fenced(candidate)]) as s:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "selfheal_jupyter",
                "run",
                "",
                "--code",
                str(code),
                "--no-plan",
                "--max-iterations",
                "1",
                "--json",
                "--base-url",
                s.base_url,
                "--model",
                s.model,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
            env=env,
        )
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


LYING_FLOAT = (
    "class Exact(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n\n"
)
LYING_TYPE = (
    'Exact = type("Exact", (float,), {"__eq__": lambda self, other: True,\n'
    '                               "__hash__": float.__hash__})\n\n'
)
LYING_AVERAGE = "def average(values):\n    return Exact(sum(values) / len(values) + 1)\n"
SKIP_ASSERTS = (  # a line tracer that jumps over every assert of the module
    "import linecache, sys\n\n"
    "def _skip(frame, event, arg):\n"
    "    if event == 'line' and frame.f_code.co_name == '<module>':\n"
    "        text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)\n"
    "        if text.lstrip().startswith('assert'):\n"
    "            frame.f_lineno = frame.f_lineno + 1\n"
    "    return _skip\n\n"
    "sys.settrace(_skip)\nsys._getframe().f_trace = _skip\n\n"
)

USER_LOOP = """\
def double(n):
    return n * 3


for n in [1, 2, 3]:
    assert double(n) == 2 * n
"""

LYING_REPAIRS = {
    # the attack: the user's assert kept word for word, a float that equals anything
    "float-subclass": (
        USER,
        USER.replace("def average(values):\n    return sum(values) / len(values) + 1\n", LYING_FLOAT + LYING_AVERAGE),
        {"forced_comparison"},
    ),
    # the same made at run time: no class statement for a static rule to see
    "float-subclass-built-by-type": (
        USER,
        USER.replace("def average(values):\n    return sum(values) / len(values) + 1\n", LYING_TYPE + LYING_AVERAGE),
        set(),
    ),
    "a-tracer-skips-the-assert": (USER, SKIP_ASSERTS + USER + "done = True\n", set()),
    "an-exception-hook-exits-0": (
        USER,
        'import os, sys\n\nsys.excepthook = lambda *exc: getattr(os, "_exit")(0)\n\n' + USER,
        set(),
    ),
    "in-the-user-s-test-function": (
        USER_TEST_FUNCTION,
        USER_TEST_FUNCTION.replace(
            "def average(values):\n    return sum(values) / len(values) + 1\n", LYING_TYPE + LYING_AVERAGE
        ),
        set(),
    ),
    "assert-moved-into-a-block": (
        USER,
        LYING_TYPE
        + USER.replace("def average(values):\n    return sum(values) / len(values) + 1\n", LYING_AVERAGE).replace(
            ASSERT, f"if mean is not None:\n    {ASSERT}"
        ),
        {"assert_moved"},
    ),
    "in-a-loop-a-lying-class": (
        USER_LOOP,
        "class Loose(int):\n    def __eq__(self, other):\n"
        "        return True\n    __hash__ = int.__hash__\n\n"
        + USER_LOOP.replace("return n * 3", "return Loose(n * 3)"),
        {"forced_comparison"},
    ),
}


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(LYING_REPAIRS))
def test_selfheal_run_code_does_not_take_a_lying_value_for_a_kept_assert(tmp_path: Path, name: str):
    """The user's asserts hold only with their values compared as plain data outside the
    candidate (the sandbox's checker evaluates the user's top-level asserts and test
    functions there), and a candidate's class that makes comparisons lie, or an assert
    moved out of the checker's sight, breaks the spec."""
    user, candidate, rules = LYING_REPAIRS[name]
    record = _run_code(tmp_path, user, candidate)
    assert record["outcome"] != "success" and record["final_code"] is None, record["outcome"]
    verdict = record["iterations"][1]["verdict"]
    assert verdict["passed"] is False
    assert {v["rule"] for v in verdict["spec_violations"]} == rules, verdict
    if not rules:  # held by the checker: the user's check failed on the plain value
        tests = record["iterations"][1]["result"]["tests"]
        assert tests and not all(t["passed"] for t in tests), record["iterations"][1]["result"]


@pytest.mark.sandbox
def test_an_honest_repair_passes_the_checker(tmp_path: Path):
    record = _run_code(tmp_path, USER_TEST_FUNCTION, USER_TEST_FUNCTION.replace(" + 1", ""))
    assert record["outcome"] == "success", record
    tests = record["iterations"][1]["result"]["tests"]
    assert [(t["source"], t["passed"]) for t in tests] == [("test_average()", True)]


@pytest.mark.sandbox
def test_a_user_s_assert_that_changes_a_list_changes_the_program_s(tmp_path: Path):
    """The checker runs ``assert stack.pop() == 3`` on a copy of the program's list; the
    change reaches the program's list, as running the assert there would have."""
    user = (
        "def push_all(stack, items):\n    for item in items:\n        stack.insert(0, item)\n"
        "    return stack\n\nstack = push_all([], [1, 2, 3])\n"
        "assert stack.pop() == 3\nassert stack == [1, 2]\nprint(stack)\n"
    )
    record = _run_code(tmp_path, user, user.replace("stack.insert(0, item)", "stack.append(item)"))
    assert record["outcome"] == "success", record["iterations"][1]["result"]["tests"]
    assert record["iterations"][1]["result"]["stdout"] == "[1, 2]\n"


def test_a_beginner_exercise_whose_blank_is_filled_succeeds_end_to_end(sandbox):
    filled = IS_LEARNING.replace("IS_LEARNING_PYTHON = \n", "IS_LEARNING_PYTHON = True\n")
    with ScriptedServer([fenced(filled)]) as s:
        run = heal(s, sandbox, code=IS_LEARNING)
    zero, first = run.iterations
    assert zero.result.status == "blocked" and zero.result.error.type == "SyntaxError"
    assert first.verdict.spec_checked and first.verdict.spec_kept is True, first.verdict.reasons
    assert run.outcome == "success" and run.final_code == filled
