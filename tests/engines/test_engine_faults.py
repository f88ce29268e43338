"""A Docker engine that stops in the middle of a run: a clear message, the work so far
kept, and the next run, once the engine is back, needs nothing done by hand.

The engine is test-owned: a second ``dockerd`` started by ``sandbox/second-engine.sh``
on its own port and data root (the engine other tests and users rely on is never
touched). It is stopped with SIGTERM, as ``systemctl stop docker`` does, while a
program runs in its sandbox: the program renames itself (``/proc/self/comm``) and
sleeps, and the test waits until that process exists before it stops the engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from tests.conftest import pid_gone, selfheal_shell
from tests.scripted_server import ScriptedServer
from tests.waiting import wait_until

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "sandbox" / "second-engine.sh"
PORT = "2378"  # not test_engines.py's 2376: its engine and this one never meet
HOST = f"tcp://127.0.0.1:{PORT}"
PIDFILE = Path(f"/run/selfheal-docker-{PORT}/engine.pid")
RUNNING = "selfheal-t31"
LONG = f"open('/proc/self/comm', 'w').write({RUNNING!r})\nimport time\ntime.sleep(300)\n"
FAILS = "raise ValueError('first try')\n"
RIGHT = "print('total', 6)\n"
ENGINE_SAYS = "The Docker engine at " + HOST + " stopped"


def engine_script(action: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), action, "docker", PORT],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.fail(
            "The engine tests start an engine in its own mount namespace and need "
            "root (deselect them with -m 'not engines').",
            pytrace=False,
        )
    started = engine_script("start")
    try:
        assert started.returncode == 0, started.stderr[-1500:]
        build = subprocess.run(
            [sys.executable, "-m", "selfheal_jupyter", "sandbox", "build"],
            capture_output=True,
            text=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, DOCKER_HOST=HOST),
        )
        assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
        yield HOST
    finally:
        stopped = engine_script("stop")
        assert stopped.returncode == 0, stopped.stderr


@pytest.fixture(autouse=True)
def engine_running(engine: str) -> None:
    """Each test starts with the engine up, whatever the one before left."""
    start_engine_again()


def _program_runs() -> bool:
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == RUNNING:
                return True
        except OSError:
            continue
    return False


def wait_for_program(timeout: float = 120) -> None:
    """Until the candidate that renamed itself RUNNING runs (seen in this host's /proc)."""
    wait_until(_program_runs, timeout, "the long program to start in the sandbox", interval=0.05)


def stop_engine_when_the_program_runs() -> None:
    """SIGTERM to the engine once the long program runs; returns when the engine is gone."""
    wait_for_program()
    pid = int(PIDFILE.read_text())
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: pid_gone(pid), 120, "the engine to stop", interval=0.05)


def start_engine_again() -> None:
    started = engine_script("start")
    assert started.returncode == 0, started.stderr[-1500:]


def cli(*args: str, **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env.update(DOCKER_HOST=HOST, OPENAI_API_KEY="test-key")
    return subprocess.Popen(
        [sys.executable, "-m", "selfheal_jupyter", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        **popen,
    )


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def output_after_the_engine_stops(proc: subprocess.Popen) -> tuple[str, str]:
    """Stop the engine once ``proc``'s program runs; its stdout and stderr to its end."""
    try:
        stop_engine_when_the_program_runs()
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()


# --------------------------------------------------------------------------- the commands
def test_sandbox_exec_json_still_prints_one_result_per_file(engine, tmp_path):
    first, long, last = tmp_path / "first.py", tmp_path / "long.py", tmp_path / "last.py"
    first.write_text("print('first')\n")
    long.write_text(LONG)
    last.write_text("print('last')\n")
    proc = cli("sandbox", "exec", "--json", str(first), str(long), str(last))
    out, err = output_after_the_engine_stops(proc)
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["file"] for line in lines] == [str(first), str(long), str(last)], out
    assert lines[0]["status"] == "ok" and lines[0]["stdout"] == "first\n"
    assert lines[1]["status"] == "error" and lines[1]["message"].startswith(ENGINE_SAYS)
    assert lines[1]["error"]["type"] == "EngineLost"
    assert lines[2]["status"] == "error" and lines[2]["message"].startswith("Not run:")
    assert proc.returncode == 2
    assert err.startswith(f"selfheal: {ENGINE_SAYS}") and "Traceback" not in err, err

    start_engine_again()
    again = cli("sandbox", "exec", "--json", str(last))
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    assert json.loads(out)["stdout"] == "last\n"


def test_selfheal_run_json_keeps_the_rounds_done(engine):
    with ScriptedServer([fenced(FAILS), fenced(LONG)]) as s:
        proc = cli("run", "print the total", "--no-plan", "--json", "--base-url", s.base_url, "--model", s.model)
        out, err = output_after_the_engine_stops(proc)
    assert proc.returncode == 1, err
    record = json.loads(out)
    assert record["outcome"] == "error" and record["error"].startswith(ENGINE_SAYS), record["error"]
    assert "What was done before it (2 attempts) is kept in this record's iterations." in record["error"]
    done, cut = record["iterations"]
    assert done["result"]["error"]["type"] == "ValueError"
    assert cut["index"] == 2 and cut["code"] == LONG and cut["result"] is None
    assert "Traceback" not in err and "bug in selfheal" not in out

    start_engine_again()
    with ScriptedServer([fenced(RIGHT)]) as s:
        again = cli("run", "print the total", "--no-plan", "--json", "--base-url", s.base_url, "--model", s.model)
        out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    assert json.loads(out)["outcome"] == "success"


# --------------------------------------------------------------------------- the notebook
@pytest.fixture()
def shell(engine, monkeypatch) -> Iterator[InteractiveShell]:
    from selfheal_jupyter.factory import close_shared_sandboxes

    monkeypatch.setenv("DOCKER_HOST", engine)
    close_shared_sandboxes()  # the kernel's sandbox is on this engine from now on
    with selfheal_shell() as ip:
        yield ip


def test_a_cell_says_what_happened_and_the_next_cell_works(shell):
    with ScriptedServer([fenced(FAILS), fenced(LONG)]) as s:
        shell.run_cell(f"%config SelfHeal.base_url = '{s.base_url}'", store_history=False)
        shell.run_cell(f"%config SelfHeal.model = '{s.model}'", store_history=False)
        stopper = threading.Thread(target=stop_engine_when_the_program_runs, daemon=True)
        stopper.start()
        with capture_output() as cap:
            shell.run_cell("%%agent --no-plan\nprint the total", store_history=True)
        stopper.join(timeout=180)
    run = shell.user_ns["agent_result"]
    assert run.outcome == "error" and run.error.startswith(ENGINE_SAYS), run.error
    assert "What was done before it (2 attempts) is kept in agent_result." in run.error
    assert [it.index for it in run.iterations] == [1, 2]
    assert run.iterations[1].candidate.code == LONG and run.iterations[1].result is None
    shown = cap.stdout + cap.stderr + "".join(str(o.data) for o in cap.outputs)
    assert ENGINE_SAYS in shown  # the candidate's own ValueError is shown; no error of ours
    assert "bug in selfheal" not in shown and "ConnectionError" not in shown

    start_engine_again()  # the kernel's sandbox finds the engine again by itself
    with ScriptedServer([fenced(RIGHT)]) as s:
        shell.run_cell(f"%config SelfHeal.base_url = '{s.base_url}'", store_history=False)
        shell.run_cell("%%agent --no-plan\nprint the total", store_history=True)
    assert shell.user_ns["agent_result"].outcome == "success"
