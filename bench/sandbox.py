"""How much does running one candidate cost? Every row measured in the same run.

    python bench/sandbox.py [--runs 15] [--json FILE] [--backend kubernetes]

Rows (medians and p90 over ``--runs`` runs, after one warm-up each):
  host python -c         the floor: a fresh interpreter on the host
  cold docker run        a new hardened container of the same image per run
  exec into container    ``docker exec python3 -c`` in a warm hardened container
  sandbox print(1)       DockerSandbox.execute, warm pool, back to back (pool of 1 and of 2)
  sandbox print(1) paced the same with 50 ms between runs (as in the loop, where an
                         LLM call separates two runs)
  pandas groupby         100k rows, host python -c vs the sandbox
  50 MB input            a 50 MB DataFrame passed as an input, read inside
  8 parallel vs 1        wall time of 8 candidates on a pool of 8, vs 8 one after another

Then a side-by-side table of engines (``--engines``, default all four; ``--engines-only``
skips the rows above): print(1) back to back and the 50 MB DataFrame input on
  local            this machine's engine, socket channel (the fast path)
  local attach     the same engine, frames and inputs over the attach stream
  second dockerd   a dockerd in its own mount namespace on TCP (sandbox/second-engine.sh):
                   no shared files, so the attach channel, as on a remote engine
  podman           Podman's Docker API, started the same way (skipped if not installed)
The engines this script starts are stopped at the end; their images are built there
first (a no-op when current).
With ``--backend kubernetes``, only Docker and Kubernetes side by side (p50 and p95): a
worker's start until its runner is ready (a container; a pod: scheduled, started,
attached), print(1) back to back and 50 ms apart, the pandas groupby, fork + wait.
Then the runtimes side by side (``--runtimes runc,runsc``; runsc = gVisor, skipped with a
note when the engine does not offer it): a container's start until its runner is ready,
print(1) back to back and 50 ms apart, the pandas groupby, each on a pool of 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import numpy as np
import pandas as pd

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import Limits
from selfheal_jupyter.sandbox.docker import CONTAINER_ENV, ContainerSpec, DockerSandbox
from selfheal_jupyter.sandbox.engine import connect
from selfheal_jupyter.sandbox.image import ensure_image

GROUPBY = (
    "import numpy as np, pandas as pd\n"
    "df = pd.DataFrame({'k': np.arange(100_000) % 100, 'v': np.arange(100_000)})\n"
    "print(df.groupby('k')['v'].sum().iloc[3])\n"
)
CPU_TASK = "print(sum(i * i for i in range(300_000)))\n"
FORK_WAIT = (
    "import os, time\nt0 = time.perf_counter()\npid = os.fork()\nif pid == 0:\n"
    "    os._exit(0)\nos.waitpid(pid, 0)\nprint(time.perf_counter() - t0)\n"
)


def hardened(limits: Limits) -> dict:
    """The same flags the sandbox uses (docker-py high-level keywords)."""
    return dict(
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmpfs_size},mode=1777"},
        mem_limit=limits.memory,
        memswap_limit=limits.memory,
        pids_limit=limits.pids,
        nano_cpus=int(limits.cpus * 1e9),
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        user="65534:65534",
        init=True,
        environment=dict(CONTAINER_ENV),
        labels={"selfheal": "bench", "selfheal.pid": str(os.getpid()), "selfheal.host": os.uname().nodename},
    )


def measure(fn: Callable[[], object], runs: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def wait_pool(sb: DockerSandbox, n: int) -> None:
    deadline = time.monotonic() + 120
    while sum(len(v) for v in sb._idle.values()) < n and time.monotonic() < deadline:
        time.sleep(0.2)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINE_SCRIPT = os.path.join(ROOT, "sandbox", "second-engine.sh")
ENGINES = ("local", "local attach", "second dockerd", "podman")


def start_engine(kind: str) -> str:
    """Start a namespaced engine and build the image there; its DOCKER_HOST."""
    proc = subprocess.run(
        ["bash", ENGINE_SCRIPT, "start", kind],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-800:])
    host = proc.stdout.strip().rpartition("DOCKER_HOST=")[2]
    subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "sandbox", "build"],
        check=True,
        env=dict(os.environ, DOCKER_HOST=host),
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )
    return host


def engine_samples(client, channel: str, runs: int, big: pd.DataFrame) -> dict[str, list[float]]:
    """print(1) back to back and the 50 MB input on one engine (pool of 1)."""
    with DockerSandbox.from_config(SelfHeal(pool_size=1), client=client, channel=channel) as sb:

        def once() -> None:
            r = sb.execute("print(1)")
            assert r.ok and r.stdout == "1\n", r

        def transfer() -> None:
            r = sb.execute("print(df.shape, float(df[0].sum()) > 0)", inputs={"df": big})
            assert r.ok, r

        out = {"print(1)": measure(once, max(runs, 30), warmup=3), "50 MB DataFrame input": measure(transfer, runs)}
        out["channel"] = sb.channel  # type: ignore[assignment]
        return out


def compare_engines(names: list[str], runs: int) -> None:
    """The side-by-side table of :data:`ENGINES`."""
    big = pd.DataFrame(np.random.default_rng(0).random((50 * 1024 * 1024 // 8 // 4, 4)))
    results: dict[str, dict] = {}
    started: list[str] = []
    try:
        for name in names:
            if name in ("local", "local attach"):
                client = connect()
                channel = "attach" if name == "local attach" else "auto"
            else:
                kind = "docker" if name == "second dockerd" else "podman"
                if kind == "podman" and shutil.which("podman") is None:
                    print(f"  {name}: skipped (podman is not installed)", file=sys.stderr)
                    continue
                try:
                    started.append(kind)
                    host = start_engine(kind)
                except (RuntimeError, subprocess.SubprocessError) as exc:
                    print(f"  {name}: skipped (did not start: {exc})", file=sys.stderr)
                    continue
                client = docker.DockerClient(base_url=host, timeout=60)
                channel = "auto"
            results[name] = engine_samples(client, channel, runs, big)
            print(f"  measured {name} ({results[name]['channel']})", file=sys.stderr)
    finally:
        for kind in started:
            subprocess.run(
                ["bash", ENGINE_SCRIPT, "stop", kind],
                capture_output=True,
                timeout=120,
                check=False,
                stdin=subprocess.DEVNULL,
            )
    if not results:
        return
    cols = list(results)
    print()
    print(f"{'p50 / p90 ms':<24}" + "".join(f"  {c:>22}" for c in cols))
    print(f"{'channel':<24}" + "".join(f"  {results[c]['channel']:>22}" for c in cols))
    for row_name in ("print(1)", "50 MB DataFrame input"):
        cells = []
        for c in cols:
            samples = results[c][row_name]
            cells.append(f"{statistics.median(samples) * 1000:.1f} / {p(samples, 0.9) * 1000:.1f}")
        print(f"{row_name:<24}" + "".join(f"  {cell:>22}" for cell in cells))
    print(
        f"(n = {len(results[cols[0]]['print(1)'])} print(1), "
        f"{len(results[cols[0]]['50 MB DataFrame input'])} inputs per engine; pool of 1; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def per_runtime(client: Any, runtime: str, runs: int) -> dict[str, list[float]]:
    """The same warm-pool rows under one Docker runtime (pool of 1)."""
    return per_sandbox(
        lambda pool: DockerSandbox.from_config(SelfHeal(pool_size=pool, runtime=runtime), client=client),
        runtime or "default",
        runs,
    )


def per_sandbox(make: Callable[[int], Any], label: str, runs: int) -> dict[str, list[float]]:
    """A worker's start until its runner is ready, then the warm-pool rows (pool of 1) of
    the sandboxes ``make(pool_size)`` builds."""
    out: dict[str, list[float]] = {}
    starts = []
    with make(0) as sb:
        spec = ContainerSpec.of(sb.limits)
        for _ in range(5):  # a container's (a pod's) start until its runner says ready
            t0 = time.perf_counter()
            worker = sb._create(spec)
            starts.append(time.perf_counter() - t0)
            sb._discard(worker)
    out["start until ready"] = starts
    with make(1) as sb:

        def once(code: str = "print(1)") -> None:
            r = sb.execute(code)
            assert r.ok, r

        out["print(1), back to back"] = measure(once, max(runs, 30), warmup=3)
        paced = []
        for _ in range(max(runs, 30)):
            time.sleep(0.05)
            t0 = time.perf_counter()
            once()
            paced.append(time.perf_counter() - t0)
        out["print(1), 50 ms apart"] = paced
        out["pandas groupby 100k"] = measure(lambda: once(GROUPBY), runs)
        forks = []
        for _ in range(runs):  # timed by the candidate itself: the runtime's fork cost
            r = sb.execute(FORK_WAIT)
            assert r.ok, r
            forks.append(float(r.stdout))
        out["fork + wait, inside the candidate"] = forks
    for name, samples in out.items():
        print(f"  measured [{label}] {name}: p50 {statistics.median(samples) * 1000:.1f} ms", file=sys.stderr)
    return out


def compare_backends(kubeconfig: str, runs: int) -> None:
    """Docker and Kubernetes side by side: a worker's start, a candidate in a warm one."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sandbox", "setup-kubernetes.sh")
    started = False
    if not kubeconfig:
        status = subprocess.run(["bash", script, "status"], capture_output=True, text=True)
        if status.returncode != 0:
            t0 = time.perf_counter()
            status = subprocess.run(["bash", script, "start"], capture_output=True, text=True)
            if status.returncode != 0:
                sys.exit(f"the local Kubernetes did not start: {status.stderr[-2000:]}")
            print(f"  local Kubernetes started in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            started = True
        kubeconfig = status.stdout.strip().splitlines()[-1].partition("=")[2]
    try:
        client = connect()
        ref = ensure_image(client)
        subprocess.run(["bash", script, "image", ref], check=True, capture_output=True)
        from selfheal_jupyter.factory import new_sandbox

        compared = {
            "docker": per_sandbox(
                lambda pool: DockerSandbox.from_config(SelfHeal(pool_size=pool), client=client), "docker", runs
            ),
            "kubernetes": per_sandbox(
                lambda pool: new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=kubeconfig, pool_size=pool)),
                "kubernetes",
                runs,
            ),
        }
    finally:
        if started:
            subprocess.run(["bash", script, "stop"], capture_output=True)
    names = list(compared["docker"])
    w = max(len(n) for n in names)
    head = "".join(f"  {b + ' p50':>15}  {b + ' p95':>15}" for b in compared)
    print(f"{'backend comparison (ms)':<{w}}{head}")
    for name in names:
        cells = "".join(
            f"  {statistics.median(c[name]) * 1000:15.1f}  {p(c[name], 0.95) * 1000:15.1f}" for c in compared.values()
        )
        print(f"{name:<{w}}{cells}")
    load = os.getloadavg()
    print(f"load average during the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help=f"engines for the side-by-side table, comma-separated from {', '.join(ENGINES)} (empty: none)",
    )
    ap.add_argument("--engines-only", action="store_true", help="only the side-by-side table of engines")
    ap.add_argument(
        "--backend",
        choices=["docker", "kubernetes"],
        default="docker",
        help="kubernetes: only Docker and Kubernetes side by side (a pod's start, a candidate in a warm "
        "pod); the local cluster of sandbox/setup-kubernetes.sh is started (and stopped) if needed",
    )
    ap.add_argument("--kubeconfig", default="", help="a running cluster instead of the local one")
    ap.add_argument(
        "--runtimes", default="runc,runsc", help="Docker runtimes to compare side by side (default: %(default)s)"
    )
    args = ap.parse_args()
    runs = max(15, args.runs)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        ap.error(f"unknown engines {sorted(unknown)}; choose from {', '.join(ENGINES)}")
    if args.engines_only:
        compare_engines(engines, runs)
        return 0
    if args.backend == "kubernetes":
        compare_backends(args.kubeconfig, runs)
        return 0
    client = connect()
    ref = ensure_image(client)
    limits = SelfHeal().limits()
    rows: list[tuple[str, list[float], str]] = []

    def row(name: str, samples: list[float], note: str = "") -> None:
        rows.append((name, samples, note))
        print(f"  measured {name}: p50 {statistics.median(samples) * 1000:.1f} ms", file=sys.stderr)

    # -- the floor ---------------------------------------------------------------------
    row(
        "host python -c print(1)",
        measure(lambda: subprocess.run([sys.executable, "-c", "print(1)"], check=True, capture_output=True), runs),
        "fresh interpreter, no isolation",
    )

    # -- cold docker run ---------------------------------------------------------------
    def cold() -> None:
        c = client.containers.run(ref, ["python3", "-c", "print(1)"], detach=True, **hardened(limits))
        try:
            c.wait(timeout=60)
            assert c.logs() == b"1\n"
        finally:
            c.remove(force=True)

    row("cold docker run (hardened)", measure(cold, runs), "create + start + wait + remove")

    # -- exec into a warm container ------------------------------------------------------
    warm = client.containers.run(ref, ["sleep", "infinity"], detach=True, **hardened(limits))
    try:

        def exec_once() -> None:
            code, out = warm.exec_run(["python3", "-c", "print(1)"], user="65534:65534")
            assert code == 0 and out == b"1\n"

        row("exec into warm container", measure(exec_once, runs), "docker exec python3 -c")
    finally:
        warm.remove(force=True)

    # -- this sandbox ------------------------------------------------------------------
    with DockerSandbox.from_config(SelfHeal(pool_size=1), client=client) as sb:

        def sandbox_print() -> None:
            r = sb.execute("print(1)")
            assert r.ok and r.stdout == "1\n", r

        row(
            "sandbox print(1), back to back",
            measure(sandbox_print, max(runs, 30), warmup=3),
            "pool of 1: waits for the fork after the last run",
        )

        def paced() -> None:
            sandbox_print()

        samples = []
        for _ in range(max(runs, 30)):
            time.sleep(0.05)
            t0 = time.perf_counter()
            paced()
            samples.append(time.perf_counter() - t0)
        row("sandbox print(1), 50 ms apart", samples, "as in the loop (LLM between runs)")

        row(
            "host python -c pandas groupby 100k",
            measure(lambda: subprocess.run([sys.executable, "-c", GROUPBY], check=True, capture_output=True), runs),
            "import pandas each time",
        )

        def groupby() -> None:
            r = sb.execute(GROUPBY)
            assert r.ok, r

        row("sandbox pandas groupby 100k", measure(groupby, runs), "pandas preloaded")

        big = pd.DataFrame(np.random.default_rng(0).random((50 * 1024 * 1024 // 8 // 4, 4)))
        mb = big.memory_usage(index=False).sum() / 1e6

        def transfer() -> None:
            r = sb.execute("print(df.shape, float(df[0].sum()) > 0)", inputs={"df": big})
            assert r.ok, r

        row(
            f"sandbox {mb:.0f} MB DataFrame input",
            measure(transfer, runs),
            "pickle -> /dev/shm -> read-only bind -> unpickle",
        )

    with DockerSandbox.from_config(SelfHeal(pool_size=2), client=client) as sb:
        wait_pool(sb, 2)

        def sandbox_print2() -> None:
            r = sb.execute("print(1)")
            assert r.ok and r.stdout == "1\n", r

        row(
            "sandbox print(1), back to back, pool 2",
            measure(sandbox_print2, max(runs, 30), warmup=3),
            "runs alternate between 2 warm containers",
        )

    with DockerSandbox.from_config(SelfHeal(pool_size=8), client=client) as sb:
        wait_pool(sb, 8)

        def one() -> None:
            assert sb.execute(CPU_TASK).ok

        row("1 candidate (CPU ~30 ms)", measure(one, runs), "")

        def sequential() -> None:
            for _ in range(8):
                one()

        row("8 candidates one after another", measure(sequential, runs), "wall time")
        pool = ThreadPoolExecutor(max_workers=8)

        def parallel() -> None:
            list(pool.map(lambda _: one(), range(8)))

        row("8 candidates in parallel (pool 8)", measure(parallel, runs), f"wall time, {os.cpu_count()} cores")
        pool.shutdown()

    # -- runtimes side by side --------------------------------------------------------------
    offered = client.info().get("Runtimes") or {}
    compared: dict[str, dict[str, list[float]]] = {}
    for runtime in [r.strip() for r in args.runtimes.split(",") if r.strip()]:
        if runtime not in offered:
            print(
                f"  runtime {runtime}: not offered by this engine (sandbox/setup-engine.sh registers runsc); skipped",
                file=sys.stderr,
            )
            continue
        compared[runtime] = per_runtime(client, runtime, runs)
        for name, samples in compared[runtime].items():
            rows.append((f"[{runtime}] {name}", samples, ""))

    # -- the table ---------------------------------------------------------------------
    width = max(len(name) for name, _, _ in rows)
    print(f"{'measurement':<{width}}  {'n':>3}  {'p50 ms':>8}  {'p90 ms':>8}  note")
    for name, samples, note in rows:
        print(
            f"{name:<{width}}  {len(samples):>3}  {statistics.median(samples) * 1000:8.1f}  "
            f"{p(samples, 0.9) * 1000:8.1f}  {note}"
        )
    med = {name: statistics.median(s) for name, s, _ in rows}
    ours = med["sandbox print(1), back to back, pool 2"]
    paced_p50 = med["sandbox print(1), 50 ms apart"]
    exec_p50 = med["exec into warm container"]
    print()
    print(
        f"sandbox print(1) p50: {ours * 1000:.1f} ms back to back (pool 2), {paced_p50 * 1000:.1f} ms "
        f"paced (target <= 10 ms); host python -c floor {med['host python -c print(1)'] * 1000:.1f} ms"
    )
    print(
        f"exec into container / sandbox: {exec_p50 / ours:.1f}x back to back, "
        f"{exec_p50 / paced_p50:.1f}x paced (target >= 8x)"
    )
    print(
        f"8 in parallel vs 8 sequential: "
        f"{med['8 candidates one after another'] / med['8 candidates in parallel (pool 8)']:.2f}x"
    )
    if compared:
        print()
        names = list(next(iter(compared.values())))
        head = "".join(f"  {rt + ' p50':>11}  {rt + ' p90':>11}" for rt in compared)
        w = max(len(n) for n in names)
        print(f"{'runtime comparison (ms)':<{w}}{head}")
        for name in names:
            cells = "".join(
                f"  {statistics.median(c[name]) * 1000:11.1f}  {p(c[name], 0.9) * 1000:11.1f}"
                for c in compared.values()
            )
            print(f"{name:<{w}}{cells}")
    try:
        load = os.getloadavg()
        print(f"load average during the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    except OSError:
        pass
    if engines:
        compare_engines(engines, runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"name": n, "samples_s": s, "note": note} for n, s, note in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
