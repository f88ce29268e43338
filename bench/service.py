"""40 simulated students against one selfheal service: waits, run times, fairness, memory.

A real JupyterHub with the block ``selfheal service --hub-config`` prints (the service
hub-managed, the real sandbox), the scripted model; each student is a hub user with
their own token who sends one ``%%heal`` of a failing cell through the service client,
arriving spread over 30 s. Prints a table: wait (request → its run starts) and run time
(start → record), p50 / p95 / max; fairness (the slowest student's wait against the
median); the service's peak memory (VmHWM); and whether every student was served.

    flock /work/locks/bench.lock python bench/service.py [--students 40] [--within 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.loop.events import RunStarted
from selfheal_jupyter.model import Task
from selfheal_jupyter.runner.service import ServiceRunner
from selfheal_jupyter.service_client.client import ServiceClient
from tests.class_hub import MODEL_KEY, class_hub
from tests.scripted_server import Reply, ScriptedServer

CELL = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
FIX = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) == 3\n```"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--within", type=float, default=30.0)
    args = parser.parse_args()
    n = args.students
    folder = Path(tempfile.mkdtemp(prefix="selfheal-bench-service-"))
    with (
        ScriptedServer([Reply(FIX)] * n, api_key=MODEL_KEY) as model,
        class_hub(folder / "hub", {"mode": "full"}, model.base_url) as hub,
    ):
        names = [f"bench{i:02d}" for i in range(n)]
        response = hub.api("POST", "users", json={"usernames": names})
        assert response.status_code in (200, 201, 409), response.text
        tokens = {name: hub.token(name) for name in names}
        settings = SelfHeal(service_url=hub.service_url)
        results: dict[str, dict] = {}
        lock = threading.Lock()

        def student(name: str, delay: float) -> None:
            time.sleep(delay)  # arrivals spread over the window (a simulation's schedule)
            runner = ServiceRunner(settings, ServiceClient(hub.service_url, tokens[name]))
            asked = time.monotonic()
            started: list[float] = []

            def seen(event: object) -> None:
                if isinstance(event, RunStarted) and not started:
                    started.append(time.monotonic())

            try:
                run = runner.full(Task(prompt="", initial_code=CELL), "heal", seen, threading.Event())
                outcome = run.outcome
            except Exception as exc:  # counted as lost, said below
                outcome = f"error: {exc}"
            ended = time.monotonic()
            start = started[0] if started else ended
            with lock:
                results[name] = {"wait": start - asked, "run": ended - start, "outcome": outcome}

        threads = [threading.Thread(target=student, args=(name, i * args.within / n)) for i, name in enumerate(names)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = time.monotonic() - began
        pid = hub.service_pid()
        memory = peak_rss_mb(pid) if pid else float("nan")
    served = [r for r in results.values() if r["outcome"] == "success"]
    waits = [r["wait"] for r in results.values()]
    runs = [r["run"] for r in results.values()]
    load = os.getloadavg()
    print(f"selfheal service bench: {n} students arriving within {args.within:.0f} s; load {load[0]:.2f}")
    print("| measure | p50 | p95 | max |")
    print("| --- | --- | --- | --- |")
    print(f"| wait (s) | {pct(waits, 0.5):.1f} | {pct(waits, 0.95):.1f} | {max(waits):.1f} |")
    print(f"| run (s) | {pct(runs, 0.5):.1f} | {pct(runs, 0.95):.1f} | {max(runs):.1f} |")
    median = statistics.median(waits)
    print(f"fairness: slowest wait {max(waits):.1f} s against median {median:.1f} s")
    print(f"served: {len(served)} of {n} (lost: {n - len(results)}); all done in {total:.0f} s")
    print(f"service peak memory (VmHWM): {memory:.0f} MB")
    for name, r in sorted(results.items()):
        if r["outcome"] != "success":
            print(f"  {name}: {r['outcome']}")
    return 0 if len(served) == n else 1


if __name__ == "__main__":
    sys.exit(main())
