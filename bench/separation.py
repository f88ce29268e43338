"""What does keeping each run apart cost? The three options of issue 25, measured.

    python bench/separation.py [--runs 200] [--containers 10] [--runtimes runc,runsc]
    python bench/separation.py --warm-only   # the warm pool's paced print(1) and its CPU

1. **a uid per run** (what the runner does): the template forks the candidate, which
   becomes a fresh uid with no capability; ending the run is ``kill(-1)`` as that uid
   and a scan of ``/proc`` until none of its processes is left. Measured inside a
   container started as the sandbox starts it (root with CAP_SETUID and CAP_SETGID),
   with the runner's own ``principals`` module, against a plain fork + exit.
2. **a pid namespace per run**: fork, ``unshare(CLONE_NEWPID | CLONE_NEWNS)``, fork the
   namespace's init, mount a fresh ``/proc`` (else the container's shows every
   process), fork the candidate (it must not be PID 1: Python's signal semantics).
   Needs CAP_SYS_ADMIN in the container.
3. **a fresh container per candidate** (``pool_size=0``: create, start, preload, run
   print(1), remove). Its wall time can hide behind the model's writing; its CPU
   cannot: accounted process by process (this client, dockerd and containerd, the
   container's cgroup and its shim), since the machine is shared.

CPU per candidate is the figure that matters on 2 cores: every CPU-second the sandbox
spends is taken from the embedded model that writes the next candidate. The last table
is a throughput proxy for ``selfheal eval --workers 2``: two workers each running
candidates (a ~30 ms CPU task) one after another, with the warm pool (a uid per run)
and with a fresh container each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import threading
import time
from typing import Any

import docker

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.sandbox.docker import CONTAINER_ENV, ContainerSpec, DockerSandbox
from selfheal_jupyter.sandbox.engine import connect
from selfheal_jupyter.sandbox.image import ensure_image

CPU_TASK = "print(sum(i * i for i in range(300_000)))\n"

#: Run inside a container: per-iteration wall and CPU seconds of each way to start
#: and end one run's process.
MICRO = r"""
import ctypes, json, os, resource, sys, time
sys.path.insert(0, "/opt/selfheal")
N = int(sys.argv[1])
MODE = sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)

def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

def timed(fn):
    fn()
    w0, c0 = time.perf_counter(), cpu()
    for _ in range(N):
        fn()
    return {"wall_s": (time.perf_counter() - w0) / N, "cpu_s": (cpu() - c0) / N}

def plain():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

out = {}
if MODE == "uid":
    from selfheal_runner import principals
    assert principals.drop_to_server() == ""
    ids = principals.RunIds()
    def per_uid():
        uid, checker = ids.take(), ids.take()
        pid = os.fork()
        if pid == 0:
            principals.become(uid, uid, dumpable=True)
            os._exit(0)
        os.waitpid(pid, 0)
        assert principals.end_all([uid, checker], ids.reaper, {os.getpid()}, lambda s: None)
    out["fork + exit (as today, one uid)"] = timed(plain)
    out["fork + new uid + exit + kill(-1) and /proc scan"] = timed(per_uid)
else:
    CLONE_NEWNS, CLONE_NEWPID = 0x20000, 0x20000000
    MS_REC, MS_PRIVATE = 16384, 1 << 18
    def per_pidns():
        pid = os.fork()
        if pid == 0:
            if libc.unshare(CLONE_NEWPID | CLONE_NEWNS) != 0:
                os._exit(2)
            libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
            init = os.fork()
            if init == 0:
                if libc.mount(b"proc", b"/proc", b"proc", 0, None) != 0:
                    os._exit(3)
                cand = os.fork()
                if cand == 0:
                    os._exit(0)
                os.waitpid(cand, 0)
                os._exit(0)
            _, st = os.waitpid(init, 0)
            os._exit(os.waitstatus_to_exitcode(st))
        _, st = os.waitpid(pid, 0)
        if st:
            raise SystemExit(f"pid namespace failed: exit {os.waitstatus_to_exitcode(st)}")
    out["fork + exit (as today, one uid)"] = timed(plain)
    out["fork + unshare pid/mount ns + init + mount /proc + fork"] = timed(per_pidns)
print(json.dumps(out))
"""


def micro(client: docker.DockerClient, ref: str, runtime: str, mode: str, n: int) -> dict:
    """MICRO in a container hardened as the sandbox's (pid namespaces: plus SYS_ADMIN)."""
    from selfheal_jupyter.sandbox.docker import RUNNER_CAPABILITIES

    caps = list(RUNNER_CAPABILITIES) + (["SYS_ADMIN"] if mode == "pidns" else [])
    kw: dict[str, Any] = dict(
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,size=64m,mode=1777"},
        mem_limit="512m",
        cap_drop=["ALL"],
        cap_add=caps,
        user="0:0",
        security_opt=["no-new-privileges"],
        environment=dict(CONTAINER_ENV),
        runtime=runtime or None,
        labels={"selfheal": "bench"},
    )
    try:
        out = client.containers.run(ref, ["python3", "-c", MICRO, str(n), mode], remove=True, stderr=True, **kw)
        return json.loads(out.decode().strip().splitlines()[-1])
    except docker.errors.ContainerError as exc:
        return {"error": (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]}


def _stat_cpu(pid: int) -> float:
    """utime + stime of a process and of its reaped children, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _pids(match: Any) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if match(args):
            out.append(int(entry))
    return out


def engine_cpu() -> float:
    """CPU seconds of dockerd and containerd so far (with the children they reaped)."""
    names = (b"dockerd", b"containerd")
    return sum(_stat_cpu(pid) for pid in _pids(lambda a: os.path.basename(a[0]) in names))


def container_cpu(cid: str) -> float:
    """CPU seconds of a live container: its cgroup (gVisor's sentry and gofer included
    under runsc) and its containerd shim (with the runc calls it reaped)."""
    try:
        with open(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage") as f:
            inside = int(f.read()) / 1e9
    except OSError:
        inside = 0.0
    shim = sum(_stat_cpu(pid) for pid in _pids(lambda a: cid.encode() in a))
    return inside + shim


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def per_candidate(client: docker.DockerClient, runtime: str, n: int) -> dict:
    """(wall s, CPU s) per candidate, accounted process by process (the machine is
    shared: its total would count the neighbours): this process, the engine's daemons,
    the container's cgroup and shim."""
    out = {}
    with DockerSandbox.from_config(SelfHeal(pool_size=1, runtime=runtime), client=client) as sb:
        assert sb.execute("print(1)").ok
        (cid,) = [w.id for w in sb._all]
        runs = n * 10
        c0, t0 = own_cpu() + engine_cpu() + container_cpu(cid), time.perf_counter()
        for _ in range(runs):
            assert sb.execute("print(1)").ok
        wall = time.perf_counter() - t0
        cpu = own_cpu() + engine_cpu() + container_cpu(cid) - c0
        out["warm pool, a uid per run: print(1)"] = (wall / runs, cpu / runs)
    with DockerSandbox.from_config(SelfHeal(pool_size=0, runtime=runtime), client=client) as sb:
        spec = ContainerSpec.of(sb.limits)
        walls, cpus = [], []
        for _ in range(n):
            c0, t0 = own_cpu() + engine_cpu(), time.perf_counter()
            worker = sb._create(spec)  # started and preloaded: ready for its candidate
            inside = container_cpu(worker.id)
            sb._discard(worker)
            while True:  # removed (auto_remove) before the next one starts
                try:
                    client.api.inspect_container(worker.id)
                    time.sleep(0.05)
                except docker.errors.NotFound:
                    break
            walls.append(time.perf_counter() - t0)
            cpus.append(inside + own_cpu() + engine_cpu() - c0)
        out["a fresh container per candidate (start to removal)"] = (statistics.median(walls), statistics.median(cpus))
    return out


def warm_pool(client: docker.DockerClient, runtime: str, n: int) -> dict:
    """Paced print(1) in the warm pool, light and heavy template: p50 ms and CPU ms per
    run of the container (cgroup and shim). Works with any runner, to compare two."""
    out = {}
    with DockerSandbox.from_config(SelfHeal(pool_size=1, runtime=runtime), client=client) as sb:
        for kind, code in (("light", "print(1)"), ("heavy", "import numpy\nprint(1)")):
            for _ in range(3):
                assert sb.execute(code).ok
            (cid,) = [w.id for w in sb._all]
            c0, lat = container_cpu(cid), []
            for _ in range(n):
                time.sleep(0.05)
                t0 = time.perf_counter()
                assert sb.execute(code).ok
                lat.append(time.perf_counter() - t0)
            out[f"print(1), {kind} template, 50 ms apart"] = (statistics.median(lat), (container_cpu(cid) - c0) / n)
    return out


def two_workers(client: docker.DockerClient, runtime: str, n: int) -> dict:
    """Candidates per second with two workers running candidates back to back."""
    out = {}
    for label, pool in (("warm pool (2), a uid per run", 2), ("a fresh container each", 0)):
        with DockerSandbox.from_config(SelfHeal(pool_size=pool, runtime=runtime), client=client) as sb:
            assert sb.execute(CPU_TASK).ok
            count = n * 10 if pool else n

            def worker(count: int = count) -> None:
                for _ in range(count):
                    assert sb.execute(CPU_TASK).ok

            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out[label] = 2 * count / (time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="iterations of the micro rows")
    ap.add_argument(
        "--containers", type=int, default=10, help="fresh containers per row (the warm rows run 10x as many)"
    )
    ap.add_argument("--runtimes", default="runc,runsc")
    ap.add_argument(
        "--warm-only",
        action="store_true",
        help="only paced print(1) in the warm pool with its CPU per run (to "
        "compare this runner with another: check it out, rebuild, run again)",
    )
    args = ap.parse_args()
    client = connect()
    ref = ensure_image(client)
    offered = client.info().get("Runtimes") or {}
    runtimes = [r for r in args.runtimes.split(",") if r and r in offered]
    if args.warm_only:
        print(f"warm pool ({ref}): p50 ms / container CPU ms per run")
        for rt in runtimes:
            n = args.containers * 15 if rt == "runc" else args.containers * 4
            for name, (lat, cpu) in warm_pool(client, rt, n).items():
                print(f"  [{rt}] {name}: {lat * 1000:6.1f} / {cpu * 1000:6.2f}")
        load = os.getloadavg()
        print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return 0
    micro_rows: dict[str, dict[str, dict]] = {}
    cand_rows: dict[str, dict] = {}
    tput_rows: dict[str, dict] = {}
    for rt in runtimes:
        n = args.runs if rt == "runc" else max(args.runs // 10, 10)  # gVisor forks are slow
        micro_rows[rt] = {**micro(client, ref, rt, "uid", n), **micro(client, ref, rt, "pidns", n)}
        print(f"  [{rt}] micro: {micro_rows[rt]}", file=sys.stderr)
        cand_rows[rt] = per_candidate(client, rt, args.containers)
        print(f"  [{rt}] per candidate: {cand_rows[rt]}", file=sys.stderr)
        tput_rows[rt] = two_workers(client, rt, args.containers)
        print(f"  [{rt}] two workers: {tput_rows[rt]}", file=sys.stderr)

    print("\nstarting and ending one run's process, inside the container (ms per run)")
    names = list(dict.fromkeys(k for rows in micro_rows.values() for k in rows))
    w = max(len(k) for k in names)
    print(f"{'':<{w}}" + "".join(f"  {rt + ' wall':>11}  {rt + ' CPU':>10}" for rt in runtimes))
    for name in names:
        cells = []
        for rt in runtimes:
            row = micro_rows[rt].get(name, {})
            if "wall_s" in row:
                cells.append(f"  {row['wall_s'] * 1000:11.2f}  {row['cpu_s'] * 1000:10.2f}")
            else:
                cells.append(f"  {'n/a':>11}  {'n/a':>10}")
        print(f"{name:<{w}}" + "".join(cells))
    for rt in runtimes:
        for name, row in micro_rows[rt].items():
            if "error" in row:
                print(f"  [{rt}] {name}: {row['error']}")

    print("\nper candidate (wall ms / CPU ms: client, engine daemons, container and shim)")
    names = list(next(iter(cand_rows.values()))) if cand_rows else []
    w = max((len(k) for k in names), default=10)
    print(f"{'':<{w}}" + "".join(f"  {rt + ' wall':>11}  {rt + ' CPU':>10}" for rt in runtimes))
    for name in names:
        print(
            f"{name:<{w}}"
            + "".join(
                f"  {cand_rows[rt][name][0] * 1000:11.1f}  {cand_rows[rt][name][1] * 1000:10.1f}" for rt in runtimes
            )
        )

    print("\ntwo workers, candidates (~30 ms CPU each) back to back: candidates/s")
    names = list(next(iter(tput_rows.values()))) if tput_rows else []
    w = max((len(k) for k in names), default=10)
    print(f"{'':<{w}}" + "".join(f"  {rt:>8}" for rt in runtimes))
    for name in names:
        print(f"{name:<{w}}" + "".join(f"  {tput_rows[rt][name]:8.1f}" for rt in runtimes))
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
