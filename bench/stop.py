"""How soon does each way of stopping take hold? Every row measured in the same run.

    python bench/stop.py [--runs 5] [--json OUT]

The tests check that each of these stops the work rather than waiting it out (the
scripted server saw the client hang up, the run's status says ``killed``); how long it
took is a figure, measured here, never asserted there. Seconds from the stop (a cancel
set, a limit reached, a signal sent) until the caller has its answer back, through
the real ``openai`` client, the scripted server (``tests/scripted_server.py``) and the
real Docker sandbox:

  sandbox cancel          a program sleeping 60 s, cancelled once it runs
  sandbox timeout 1 s     an endless loop under a 1 s limit: the whole run (limit included)
  sandbox backstop        a frozen runner (SIGSTOP from outside), limit 1 s + grace 1 s:
                          the whole run
  llm cancel, no token    a server that hangs, cancelled once asked
  llm cancel, streaming   a reply streaming 5 chunks a second, cancelled at its first token
  llm timeout 0.5 s       a server that hangs, llm_timeout_s 0.5: the whole call
  loop cancel, streaming  the loop's developer reply streaming, cancelled
  loop cancel, sandbox    the loop's program sleeping 60 s in the sandbox, cancelled
  loop time budget 1 s    a reply streaming for 30 s, time_budget_s 1: the whole run
  cli Ctrl-C              ``selfheal run`` mid-reply, SIGINT until the process exits
  cli build no-op         ``selfheal sandbox build`` with the image current

Run from the repository root (``tests`` must be importable); the load is printed with
the table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import Cancelled, LLMTimeout
from selfheal_jupyter.factory import build_llm, build_loop
from selfheal_jupyter.llm import Endpoint, LLMClient
from selfheal_jupyter.loop.events import TokensStreamed
from selfheal_jupyter.model import Limits, Task
from selfheal_jupyter.sandbox.docker import LABEL, DockerSandbox
from selfheal_jupyter.sandbox.engine import connect
from tests.scripted_server import Fault, Reply, ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
MSG = [{"role": "user", "content": "Write the program."}]
RIGHT = "```python\ntotal = int(df['x'].sum())\nprint(total)\n```"
SLEEPING = "```python\nimport time\ntime.sleep(60)\ntotal = 6\n```"
Measure = Callable[[], float]


def limits(**options: float) -> Limits:
    return SelfHeal(**options).limits()


def llm(server: ScriptedServer, **options: object) -> LLMClient:
    return build_llm(SelfHeal(llm_max_retries=0, **options), Endpoint(server.base_url, "bench", server.model))  # type: ignore[arg-type]


def task() -> Task:
    return Task(
        "Sum column x of df into total.", inputs={"df": pd.DataFrame({"x": [1, 2, 3]})}, tests="assert total == 6"
    )


def settings_for(server: ScriptedServer, **options: object) -> SelfHeal:
    return SelfHeal(base_url=server.base_url, model=server.model, llm_max_retries=0, **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- sandbox
def sandbox_cancel(sb: DockerSandbox) -> Measure:
    def once() -> float:
        cancel = threading.Event()
        stopped: list[float] = []

        def stop_when_running() -> None:
            time.sleep(0.5)  # the program is asleep by then; the figure starts at the cancel
            stopped.append(time.monotonic())
            cancel.set()

        threading.Thread(target=stop_when_running, daemon=True).start()
        r = sb.execute("import time\ntime.sleep(60)\n", cancel=cancel, limits=limits(timeout_s=120))
        assert r.status == "killed", r
        return time.monotonic() - stopped[0]

    return once


def sandbox_timeout(sb: DockerSandbox) -> Measure:
    def once() -> float:
        t0 = time.monotonic()
        r = sb.execute("while True:\n    pass\n", limits=limits(timeout_s=1.0))
        assert r.status == "timeout", r
        return time.monotonic() - t0

    return once


def sandbox_backstop(client) -> Measure:
    def once() -> float:
        with DockerSandbox.from_config(SelfHeal(pool_size=1), client=client) as sb:
            sb.backstop_grace_s = 1.0
            assert sb.execute("print('warm')").ok
            for c in client.api.containers(filters={"label": f"{LABEL}={sb.session}"}):
                client.api.kill(c["Id"], signal="SIGSTOP")
            t0 = time.monotonic()
            r = sb.execute("print('never')", limits=limits(timeout_s=1.0))
            assert r.status == "timeout", r
            return time.monotonic() - t0

    return once


# --------------------------------------------------------------------------- llm
def llm_cancel_before_first_token() -> float:
    with ScriptedServer([Fault("hang", seconds=60)]) as s:
        cancel = threading.Event()
        stopped: list[float] = []

        def once_asked() -> None:
            s.asked.wait(30)
            stopped.append(time.monotonic())
            cancel.set()

        threading.Thread(target=once_asked, daemon=True).start()
        client = llm(s, llm_timeout_s=120)
        try:
            client.chat(MSG, cancel=cancel)
        except Cancelled:
            return time.monotonic() - stopped[0]
        finally:
            client.close()
        raise AssertionError("not cancelled")


def llm_cancel_streaming() -> float:
    slow = Reply("```python\n" + "x = 1\n" * 200 + "```", chunk_delay_s=0.2)
    with ScriptedServer([slow], chunk_size=4) as s:
        cancel = threading.Event()
        stopped: list[float] = []

        def on_token(_: str) -> None:
            if not cancel.is_set():
                stopped.append(time.monotonic())
                cancel.set()

        client = llm(s)
        try:
            client.chat(MSG, on_token=on_token, cancel=cancel)
        except Cancelled:
            return time.monotonic() - stopped[0]
        finally:
            client.close()
        raise AssertionError("not cancelled")


def llm_timeout() -> float:
    with ScriptedServer([Fault("hang", seconds=120)]) as s:
        client = llm(s, llm_timeout_s=0.5)
        t0 = time.monotonic()
        try:
            client.chat(MSG)
        except LLMTimeout:
            return time.monotonic() - t0
        finally:
            client.close()
        raise AssertionError("no timeout")


# --------------------------------------------------------------------------- loop
def loop_cancel_streaming(sb: DockerSandbox) -> Measure:
    def once() -> float:
        slow = Reply(RIGHT, chunk_delay_s=1.0)
        with ScriptedServer([slow], chunk_size=1) as s:
            loop = build_loop(settings_for(s, auto_plan=False), sandbox=sb)
            cancel, seen, done = threading.Event(), threading.Event(), threading.Event()
            result: dict = {}

            def on_event(e: object) -> None:
                if isinstance(e, TokensStreamed) and e.stage == "developer":
                    seen.set()

            def work() -> None:
                result["run"] = loop.run(task(), on_event=on_event, cancel=cancel)
                done.set()

            threading.Thread(target=work, daemon=True).start()
            assert seen.wait(60)
            t0 = time.monotonic()
            cancel.set()
            assert done.wait(120)
            assert result["run"].outcome == "cancelled"
            return time.monotonic() - t0

    return once


def loop_cancel_sandbox(sb: DockerSandbox) -> Measure:
    class Entered:
        def __init__(self) -> None:
            self.entered = threading.Event()

        def execute(self, code: str, **kw: object):
            self.entered.set()
            return sb.execute(code, **kw)  # type: ignore[arg-type]

        def __getattr__(self, name: str) -> object:
            return getattr(sb, name)

    def once() -> float:
        box = Entered()
        with ScriptedServer([SLEEPING]) as s:
            loop = build_loop(settings_for(s, auto_plan=False), sandbox=box)  # type: ignore[arg-type]
            cancel, done = threading.Event(), threading.Event()
            result: dict = {}

            def work() -> None:
                result["run"] = loop.run(task(), cancel=cancel)
                done.set()

            threading.Thread(target=work, daemon=True).start()
            assert box.entered.wait(60)
            time.sleep(0.5)  # the program is asleep by then; the figure starts at the cancel
            t0 = time.monotonic()
            cancel.set()
            assert done.wait(120)
            assert result["run"].iterations[0].result.status == "killed"
            return time.monotonic() - t0

    return once


def loop_time_budget(sb: DockerSandbox) -> Measure:
    def once() -> float:
        slow = Reply(RIGHT, chunk_delay_s=1.0)
        with ScriptedServer([slow], chunk_size=2) as s:
            loop = build_loop(settings_for(s, auto_plan=False, time_budget_s=1), sandbox=sb)
            t0 = time.monotonic()
            run = loop.run(task())
            assert run.outcome == "budget_exhausted", run.error
            return time.monotonic() - t0

    return once


# --------------------------------------------------------------------------- cli
def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "k"
    return env


def cli_ctrl_c() -> float:
    slow = Reply(SLEEPING, chunk_delay_s=0.2)
    with ScriptedServer([slow], chunk_size=1) as s:
        proc = subprocess.Popen(
            [sys.executable, "-m", "selfheal_jupyter", "run", "sum x", "--no-plan", "--json"]
            + ["--base-url", s.base_url, "--model", s.model],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=cli_env(),
        )
        try:
            assert s.asked.wait(60)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
            elapsed = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
    assert json.loads(out)["outcome"] == "cancelled"
    return elapsed


def cli_build_no_op() -> float:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "sandbox", "build"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0 and "nothing to do" in proc.stdout, proc.stdout + proc.stderr
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)

    client = connect()
    rows: dict[str, list[float]] = {}
    with DockerSandbox.from_config(SelfHeal(pool_size=1), client=client) as sb:
        sb.execute("import pandas")  # warm
        measures: dict[str, Measure] = {
            "sandbox cancel": sandbox_cancel(sb),
            "sandbox timeout 1 s": sandbox_timeout(sb),
            "sandbox backstop": sandbox_backstop(client),
            "llm cancel, no token": llm_cancel_before_first_token,
            "llm cancel, streaming": llm_cancel_streaming,
            "llm timeout 0.5 s": llm_timeout,
            "loop cancel, streaming": loop_cancel_streaming(sb),
            "loop cancel, sandbox": loop_cancel_sandbox(sb),
            "loop time budget 1 s": loop_time_budget(sb),
            "cli Ctrl-C": cli_ctrl_c,
            "cli build no-op": cli_build_no_op,
        }
        for name, measure in measures.items():
            rows[name] = [measure() for _ in range(args.runs)]

    load = os.getloadavg()
    print(f"Seconds until a stop takes hold ({args.runs} runs each; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    print(f"{'what':<24} {'median s':>9} {'max s':>7}")
    for name, values in rows.items():
        print(f"{name:<24} {statistics.median(values):>9.2f} {max(values):>7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "seconds": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
