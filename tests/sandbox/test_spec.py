"""The user's spec through ``selfheal run --code``, a real process on the real sandbox: a
deleted assert, a lying value for a kept one, an honest repair, an assert that changes
a list. (The loop's spec guard on recorded runs: tests/unit/test_spec.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedServer
from tests.unit.test_loop import fenced
from tests.unit.test_spec import ASSERT, DELETED, USER, USER_TEST_FUNCTION

ROOT = Path(__file__).resolve().parent.parent


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
