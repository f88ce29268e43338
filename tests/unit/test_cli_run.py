"""``selfheal run`` as a user runs it, where no sandbox run is reached: a real process and
the scripted server. (Runs in the real sandbox: tests/sandbox/test_cli_run.py.)"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]

RIGHT = "```python\ntotal = int(df['x'].sum())\nprint('total is', total)\n```"


def selfheal(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    full_env["OPENAI_API_KEY"] = "test-key"
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=full_env,
    )


def test_messages_name_the_flag_of_the_command_they_are_shown_by():
    from selfheal_jupyter.commands import for_terminal
    from selfheal_jupyter.commands.run import RUN_FLAGS

    text = (
        "Raise `%config SelfHeal.llm_timeout_s`; set `%config SelfHeal.model = 'NAME'`; "
        "or raise `%config SelfHeal.token_budget` (0 = no limit)."
    )
    assert for_terminal(text, RUN_FLAGS) == (
        "Raise `--llm-timeout`; set `--model NAME`; or raise `--SelfHeal.token_budget=VALUE` (0 = no limit)."
    )


def test_sandbox_unavailable_is_a_recorded_error():
    with ScriptedServer([RIGHT]) as s:
        proc = selfheal(
            "print hi",
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--json",
            env={"DOCKER_HOST": "unix:///nonexistent.sock"},
        )
    assert proc.returncode == 1
    record = json.loads(proc.stdout)
    assert record["outcome"] == "error" and "DOCKER_HOST" in record["error"]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args, expect",
    [
        (["  "], "The task is empty"),
        (["t", "--tests", "{tests_bad}"], "The tests do not parse"),
        (["t", "--input", "df={not_pickle}"], "is not a readable pickle"),
        (["t", "--input", "df={missing}"], "cannot read"),
        (["t", "--input", "no-equals-sign"], "NAME=PATH.pkl"),
        (["t", "--max-iterations", "0"], "at least 1"),
        (["t", "--memory", "1x"], "write a size such as 512m or 1g"),
        (["t", "--timeout", "0"], "must be a positive number"),
    ],
    ids=[
        "empty-task",
        "tests-bad",
        "not-a-pickle",
        "missing-file",
        "bad-spec",
        "zero-iterations",
        "bad-memory",
        "zero-timeout",
    ],
)
def test_bad_input_exits_2_with_a_clear_message(tmp_path: Path, args, expect):
    bad_tests = tmp_path / "bad_tests.py"
    bad_tests.write_text("assert total ==\n")
    not_pickle = tmp_path / "data.pkl"
    not_pickle.write_text("just text")
    names = {"tests_bad": bad_tests, "not_pickle": not_pickle, "missing": tmp_path / "nope.pkl"}
    proc = selfheal(*[a.format(**names) for a in args], "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert expect in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_unpicklable_value_in_a_pickle_file_is_rejected(tmp_path: Path):
    # A pickle that loads on the host but holds a value that cannot be sent on
    # (a generator cannot be pickled, so store a class instance whose state breaks).
    path = tmp_path / "gen.pkl"
    path.write_bytes(pickle.dumps(_Unsendable()))
    proc = selfheal("t", "--input", f"g={path}", "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2
    assert "cannot be copied into the sandbox" in proc.stderr


class _Unsendable:
    """Pickles once (to write the file); refuses when pickled again inside the CLI."""

    def __reduce__(self):
        return (_make_unsendable, ())


def _make_unsendable():
    import threading

    return {"lock": threading.Lock()}


DEEP_SUM = "x = " + " + ".join(["1"] * 400) + "\nprint(x)\n"
"""A 1 KB cell that nests 400 levels: pyflakes in the pre-check met Python's recursion limit."""
DEEPEST = "x = " + "-" * 5000 + "1\nprint(x)\n"
"""Deeper than Python's own parser builds a tree: it raises RecursionError, not SyntaxError."""


@pytest.mark.parametrize(
    "flag, task, program, said",
    [
        ("--code", "Add them up.", DEEP_SUM, "Your code nests deeper than 100 levels at line 1"),
        (
            "--tests",
            "Add them up.",
            DEEP_SUM.replace("x = ", "assert 0 < "),
            "Your tests nest deeper than 100 levels at line 1",
        ),
        # the task states a value, so the cell's names are read before its depth is checked
        ("--code", "x should be 1", DEEPEST, "Your code nests deeper than 100 levels ("),
    ],
    ids=["code", "tests", "code-past-the-parser"],
)
def test_a_program_nested_too_deep_is_refused_before_anything_runs(tmp_path: Path, flag, task, program, said):
    """`selfheal run --code` with `x = 1 + 1 + …` (400 terms) ended "Internal error
    (RecursionError)"; deep --tests too, and a cell past the parser's own depth when the
    task states a value (the stated checks read its names). Now refused where the task is
    admitted, saying what to change, and the model is never asked."""
    path = tmp_path / "deep.py"
    path.write_text(program)
    with ScriptedServer([RIGHT]) as s:
        proc = selfheal(task, flag, str(path), "--base-url", s.base_url, "--model", s.model, "--json")
        asked = s.chat_requests()
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr[-2000:])
    assert said in proc.stderr and "Split the expression" in proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr and proc.stdout == ""
    assert asked == []
