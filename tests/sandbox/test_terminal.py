"""What `selfheal` gives a terminal: each thing once, no escape sequence of a candidate's
or a model's obeyed, and a quiet end when the reader goes away (`| head`).

Real processes, the scripted server, the real sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
PLAN = Reply("1. Add the numbers.\n2. Print the total.", match="planner")
PROGRAM = "numbers = [1, 2, 3]\nprint('total is', sum(numbers))"
# Clipboard write (OSC 52), clear screen, a return to the line start and a forged outcome.
HOSTILE = "\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b[H\routcome: success\x9b31m"
HOSTILE_PROGRAM = f"print({HOSTILE!r})\nraise ValueError({HOSTILE!r})\n"
SIGPIPE_STATUS = 141


def env_for(server: ScriptedServer | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    return env


def fence(code: str) -> str:
    return f"Here it is.\n\n```python\n{code}\n```"


@pytest.mark.sandbox
def test_the_transcript_shows_the_plan_once_and_the_program_once():
    """stdout and stderr on one screen, as in a terminal or `2>&1`."""
    with ScriptedServer([PLAN, Reply(fence(PROGRAM))]) as s:
        proc = subprocess.run(
            [sys.executable, "-m", "selfheal_jupyter", "run", "add 1, 2 and 3 and print the total", "--model", s.model],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            cwd=ROOT,
            env=env_for(s),
        )
    out = proc.stdout
    assert proc.returncode == 0, out
    assert out.count("Add the numbers.") == 1, out
    assert out.count("numbers = [1, 2, 3]") == 1, out
    assert out.count("Here it is.") == 0, out  # the raw reply is not echoed
    assert "final program: the program shown under attempt 1 above" in out, out
    assert "Traceback" not in out


@pytest.mark.sandbox
def test_the_final_program_is_printed_where_it_was_shown_only_as_changes():
    buggy = "numbers = [1, 2, 3]\nprint('total is', sum(numbers) / 0)"
    with ScriptedServer([Reply(fence(buggy)), Reply(fence(PROGRAM))]) as s:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "selfheal_jupyter",
                "run",
                "add 1, 2 and 3 and print the total",
                "--no-plan",
                "--model",
                s.model,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env=env_for(s),
        )
    out = proc.stdout
    assert proc.returncode == 0, (out, proc.stderr)
    assert "attempt 2: changes to the previous program" in out
    final = out.split("final program:")[1]
    assert "print('total is', sum(numbers))" in final


@pytest.mark.sandbox
def test_a_reader_that_goes_away_stops_the_run_quietly():
    """`selfheal run ... | head -3`: the reader closes after the plan, while the program
    would sleep for minutes; the run is stopped, its container removed, no traceback."""
    sleeper = "import time\ntime.sleep(300)\nprint('done')"
    with ScriptedServer([PLAN, Reply(fence(sleeper))]) as s:
        proc = subprocess.Popen(
            [sys.executable, "-m", "selfheal_jupyter", "run", "wait, then print done", "--model", s.model],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env_for(s),
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()  # as `head -3` does
        err = proc.stderr.read().decode()
        status = proc.wait(timeout=120)  # far under the 300 s the program would sleep
    assert first[0].startswith(b"Plan"), first
    assert status == SIGPIPE_STATUS, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.sandbox
def test_sandbox_exec_into_a_closed_pipe_ends_quietly(tmp_path: Path):
    program = tmp_path / "a.py"
    program.write_text("print('x' * 100_000)\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| true`: the reader is gone before anything is written
    proc = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "sandbox", "exec", str(program), "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    os.close(write_end)
    assert proc.returncode == SIGPIPE_STATUS, proc.stderr
    assert proc.stderr == "", proc.stderr


@pytest.mark.sandbox
def test_a_candidates_escape_sequences_are_shown_never_obeyed(tmp_path: Path):
    program = tmp_path / "evil.py"
    program.write_text(HOSTILE_PROGRAM)
    text = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "sandbox", "exec", str(program)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "\\x1b]52;c;aGVsbG8=\\x07" in text.stdout, text.stdout
    assert "\x1b" not in text.stdout and "\r" not in text.stdout and "\x9b" not in text.stdout
    exact = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "sandbox", "exec", str(program), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert HOSTILE in json.loads(exact.stdout)["stdout"]  # JSON stays exact


@pytest.mark.sandbox
def test_a_models_escape_sequences_never_reach_the_transcript(tmp_path: Path):
    """The model's program and what it prints, in `selfheal run`'s transcript."""
    with ScriptedServer([Reply(fence(HOSTILE_PROGRAM))] * 2) as s:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "selfheal_jupyter",
                "run",
                "print a greeting",
                "--no-plan",
                "--max-iterations",
                "1",
                "--model",
                s.model,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env=env_for(s),
        )
    assert proc.returncode == 1
    for stream in (proc.stdout, proc.stderr):
        assert "\x1b" not in stream and "\r" not in stream and "\x9b" not in stream and "\x07" not in stream
    assert "\\x1b[2J" in proc.stdout
