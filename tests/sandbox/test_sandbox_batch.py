"""``selfheal sandbox exec A.py B.py ... [--tests FILE] --json``: the files run in order
through one warm pool and give one JSON result per line; one file keeps its old output
(one indented JSON document) and exit codes. Through the real CLI and engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HOSTNAME = "import socket\nprint('host', socket.gethostname())\n"


def selfheal(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", *args], capture_output=True, text=True, timeout=300
    )


def write(tmp_path: Path, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(code)
    return str(path)


def test_batch_runs_in_order_through_one_warm_pool_one_json_line_each(tmp_path, sandbox_image):
    files = [
        write(tmp_path, "a.py", HOSTNAME + "def answer():\n    return 42\n"),
        write(tmp_path, "b.py", HOSTNAME + "def answer():\n    return 1 / 0\nanswer()\n"),
        write(tmp_path, "c.py", HOSTNAME + "answer = lambda: 41\n"),
        write(tmp_path, "d.py", HOSTNAME + "print('answer' in globals())\n"),
    ]
    tests = write(tmp_path, "tests.py", "assert answer() == 42\n")
    proc = selfheal("sandbox", "exec", *files, "--tests", tests, "--json")
    assert proc.returncode == 1, proc.stderr  # b, c and d did not all pass
    lines = proc.stdout.splitlines()
    assert len(lines) == 4, proc.stdout
    results = [json.loads(line) for line in lines]
    assert [r["file"] for r in results] == files
    assert [r["status"] for r in results] == ["ok", "error", "ok", "ok"]
    assert [r["exit_code"] for r in results] == [0, 1, 0, 0]
    assert results[1]["error"]["type"] == "ZeroDivisionError" and results[1]["error"]["line"] == 4
    assert [[t["passed"] for t in r["tests"]] for r in results] == [[True], [False], [False], [False]]
    assert "not run" in results[1]["tests"][0]["message"]
    # d sees nothing of c: each file starts afresh, in the same warm container
    assert results[3]["stdout"].endswith("False\n")
    hosts = {r["stdout"].splitlines()[0] for r in results}
    assert len(hosts) == 1, f"the files ran in {len(hosts)} containers: {hosts}"


def test_batch_exit_code_is_0_only_when_every_file_ran_and_text_mode_names_each(tmp_path, sandbox_image):
    files = [write(tmp_path, "one.py", "print('first')\n"), write(tmp_path, "two.py", "print('second')\n")]
    proc = selfheal("sandbox", "exec", *files)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.index(f"=== {files[0]}")
        < proc.stdout.index("first")
        < proc.stdout.index(f"=== {files[1]}")
        < proc.stdout.index("second")
    )
    assert proc.stdout.count("status: ok") == 2


def test_a_missing_file_stops_the_batch_before_anything_runs(tmp_path, sandbox_image):
    first = write(tmp_path, "first.py", "print('ran')\n")
    proc = selfheal("sandbox", "exec", first, str(tmp_path / "missing.py"), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "missing.py" in proc.stderr


def test_one_file_keeps_its_single_document_and_exit_codes(tmp_path, sandbox_image):
    ok = selfheal("sandbox", "exec", write(tmp_path, "ok.py", "print(1)\n"), "--json")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("{\n  ") and "file" not in json.loads(ok.stdout)
    failed = selfheal("sandbox", "exec", write(tmp_path, "bad.py", "raise SystemExit(3)\n"), "--json")
    assert failed.returncode == 1 and json.loads(failed.stdout)["exit_code"] == 3


def test_exec_takes_selfheal_options_and_refuses_a_bad_value(tmp_path, sandbox_image):
    """`--SelfHeal.<name>=<value>` reaches `sandbox exec` too, validated by SelfHeal."""
    loop = write(tmp_path, "loop.py", "while True:\n    pass\n")
    proc = selfheal("sandbox", "exec", loop, "--json", "--SelfHeal.timeout_s=1")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "timeout" and "after 1 s" in result["message"]  # not the 30 s default
    bad = selfheal("sandbox", "exec", loop, "--memory", "1x")
    assert bad.returncode == 2
    assert "SelfHeal.memory '1x': write a size such as 512m" in bad.stderr
    assert "Traceback" not in bad.stderr
