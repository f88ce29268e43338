"""``selfheal run`` as a user runs it: a real process, the scripted server, the real sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.scripted_server import Fault, Reply, ScriptedServer
from tests.unit.test_cli_run import RIGHT, ROOT, selfheal

PLAN = Reply("1. Sum x.\n2. Print it.", match="planner")
WRONG = "```python\ntotal = df['x'].sum() + undefined_thing\n```"


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    df_path = tmp_path / "df.pkl"
    pd.DataFrame({"x": [1, 2, 3]}).to_pickle(df_path)
    tests = tmp_path / "tests.py"
    tests.write_text("assert total == 6\n")
    return {"df": str(df_path), "tests": str(tests), "dir": str(tmp_path)}


@pytest.mark.sandbox
def test_json_run_record(files):
    with ScriptedServer([PLAN, WRONG, RIGHT]) as s:
        proc = selfheal(
            "Sum column x of df into total",
            "--input",
            f"df={files['df']}",
            "--tests",
            files["tests"],
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--max-iterations",
            "3",
            "--json",
        )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["outcome"] == "success"
    assert record["task"] == "Sum column x of df into total"
    assert record["plan"] == ["Sum x.", "Print it."]
    assert len(record["iterations"]) == 2
    first, second = record["iterations"]
    assert set(first) >= {"code", "diff", "result", "verdict", "usage"}
    assert first["result"]["status"] == "blocked"
    assert first["result"]["error"]["type"] == "NameError"
    assert first["verdict"]["passed"] is False and first["verdict"]["reasons"]
    assert second["verdict"] == {**second["verdict"], "passed": True}
    assert second["usage"]["prompt_tokens"] > 0 and second["usage"]["completion_tokens"] > 0
    assert second["diff"].startswith("--- previous.py")
    assert "total is 6" in second["result"]["stdout"]
    assert record["final_code"].startswith("total = int(df['x'].sum())")
    assert record["totals"]["iterations"] == 2
    assert record["verified"] is True and record["verified_by"] == ["your tests"]


@pytest.mark.sandbox
def test_a_heal_is_verified_by_the_users_asserts_and_a_run_without_checks_is_not(tmp_path):
    cell = tmp_path / "cell.py"
    cell.write_text("values = [1, 2, 3]\nmean = sum(values) / len(values[5:])\nassert mean == 2\n")
    fixed = "```python\nvalues = [1, 2, 3]\nmean = sum(values) / len(values)\nassert mean == 2\n```"
    with ScriptedServer([fixed]) as s:
        proc = selfheal("", "--code", str(cell), "--base-url", s.base_url, "--model", s.model, "--json")
    record = json.loads(proc.stdout)
    assert record["outcome"] == "success", proc.stderr
    assert record["verified_by"] == ["your asserts"]
    with ScriptedServer([PLAN, RIGHT.replace("total = int", "x = 1\ntotal = int")]) as s:
        proc = selfheal(
            "Sum column x of df into total",
            "--input",
            f"df={files_df(tmp_path)}",
            "--base-url",
            s.base_url,
            "--model",
            s.model,
        )
    assert proc.returncode == 0, proc.stderr
    assert "not verified: it runs, but nothing checked its output" in proc.stdout


@pytest.mark.sandbox
def test_a_steered_heal_from_the_terminal_says_what_the_fix_can_do(tmp_path):
    """``selfheal run --code`` works out the fix as a notebook does: in ``--json``,
    ``fix.code`` is the cell with the word changed and the probe line, and
    ``fix.capabilities`` flags the probe at its line; the transcript says it."""
    from tests.unit.test_minimal import STEERED_CELL, STEERED_FIX, STEERED_MODEL

    cell = tmp_path / "cell.py"
    cell.write_text(STEERED_CELL)
    reply = Reply(f"```python\n{STEERED_MODEL}```", match="NameError")
    model_fix = ("--SelfHeal.quick_fixes=False",)  # the model's fix is the subject, not the tool's edit
    with ScriptedServer([reply]) as s:
        proc = selfheal("", "--code", str(cell), "--base-url", s.base_url, "--model", s.model, "--json", *model_fix)
    record = json.loads(proc.stdout)
    assert record["outcome"] == "success", proc.stderr
    assert record["fix"]["code"] == STEERED_FIX
    assert {"kind": "probe", "line": 4, "evidence": "'/opt/selfheal'"} in record["fix"]["capabilities"]
    assert [a["kind"] for a in record["fix"]["tried"]] == ["network", "process"]
    with ScriptedServer([reply]) as s:
        proc = selfheal("", "--code", str(cell), "--base-url", s.base_url, "--model", s.model, *model_fix)
    said = " ".join(proc.stdout.split())  # the transcript wraps its lines
    assert "This fix adds: a probe of where it runs (line 4)." in said
    assert "The passing program tried to reach the network" in said


def files_df(tmp_path: Path) -> str:
    path = tmp_path / "df.pkl"
    pd.DataFrame({"x": [1, 2, 3]}).to_pickle(path)
    return str(path)


@pytest.mark.sandbox
def test_transcript_and_exit_code_1_when_it_never_passes(files):
    with ScriptedServer([WRONG, "```python\ntotal = 5\n```"]) as s:
        proc = selfheal(
            "Sum column x of df into total",
            "--input",
            f"df={files['df']}",
            "--tests",
            files["tests"],
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--max-iterations",
            "2",
            "--no-plan",
        )
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "attempt 1: program" in out and "attempt 2: changes to the previous program" in out
    assert "NameError" in out and "assert total == 6" in out
    assert "outcome: budget_exhausted after 2 attempt(s)" in out
    assert "max_iterations" in out
    assert "Traceback" not in proc.stderr


@pytest.mark.sandbox
def test_ctrl_c_cancels_and_still_prints_the_record(files):
    # streamed slowly, then sleeping in the sandbox: the signal always lands mid-run
    slow = Reply("```python\nimport time\ntime.sleep(60)\nprint(df)\n```", chunk_delay_s=0.2)
    with ScriptedServer([slow], chunk_size=1) as s:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
        env["OPENAI_API_KEY"] = "k"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "selfheal_jupyter",
                "run",
                "sum x",
                "--no-plan",
                "--json",
                "--input",
                f"df={files['df']}",
                "--base-url",
                s.base_url,
                "--model",
                s.model,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        try:
            assert s.asked.wait(60), "the developer was never asked"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 1, (out, err)
        record = json.loads(out)
        assert record["outcome"] == "cancelled"
        # stopped where it was, not waited out: the reply mid-stream, or the program mid-sleep
        results = [it["result"] for it in record["iterations"] if it.get("result")]
        if results:
            assert results[-1]["status"] == "killed", record
        else:
            assert s.hung_up.wait(60), record
    assert "Traceback" not in err


@pytest.mark.sandbox
def test_endpoint_failure_is_a_recorded_error(files):
    with ScriptedServer([]) as s:
        url = s.base_url
    proc = selfheal("do something", "--base-url", url, "--model", "m", "--json", "--llm-timeout", "3")
    assert proc.returncode == 1
    record = json.loads(proc.stdout)
    assert record["outcome"] == "error" and "Cannot connect" in record["error"]
    assert "Traceback" not in proc.stderr


@pytest.mark.sandbox
def test_a_hung_endpoint_names_this_command_s_flag(files):
    with ScriptedServer([Fault("hang", seconds=60)]) as s:
        proc = selfheal(
            "Sum column x of df into total",
            "--input",
            f"df={files['df']}",
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--no-plan",
            "--json",
            "--llm-timeout",
            "1",
            "--SelfHeal.llm_max_retries=0",
        )
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert "did not answer within 1 s" in error and "raise `--llm-timeout`" in error, error
    assert "--timeout" not in error.replace("--llm-timeout", "")
    assert "%config" not in error and "Traceback" not in proc.stderr
    with ScriptedServer([RIGHT]) as s:  # the next run works
        proc = selfheal(
            "Sum column x of df into total",
            "--input",
            f"df={files['df']}",
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--no-plan",
            "--json",
        )
    assert proc.returncode == 0 and json.loads(proc.stdout)["outcome"] == "success"


@pytest.mark.sandbox
def test_an_oversized_code_file_is_refused_before_the_model_is_asked(files):
    big = Path(files["dir"]) / "big.py"
    big.write_text("x = 1  # padding to make the program larger than a sane cell\n" * 5000)
    small = Path(files["dir"]) / "small.py"
    small.write_text("total = int(df['x'].sum()) + undefined_thing\n")
    with ScriptedServer([RIGHT]) as s:
        proc = selfheal(
            "",
            "--code",
            str(big),
            "--input",
            f"df={files['df']}",
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--no-plan",
        )
        assert s.requests == []
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("selfheal: The program to repair is 305 KB, more than a run takes (200 KB)"), (
        proc.stderr
    )
    assert "raise `--SelfHeal.max_code_bytes=VALUE`" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    with ScriptedServer([RIGHT]) as s:  # a program of a sane size is repaired
        proc = selfheal(
            "",
            "--code",
            str(small),
            "--input",
            f"df={files['df']}",
            "--tests",
            files["tests"],
            "--base-url",
            s.base_url,
            "--model",
            s.model,
            "--no-plan",
            "--json",
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "success"
