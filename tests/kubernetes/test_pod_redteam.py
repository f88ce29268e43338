"""The red team on the pod backend: attacks that tests/sandbox/test_redteam.py and
test_separation.py (run on pods too) do not try; each one succeeded on pods before the
change its docstring names. Through the sandbox's own interface on the local cluster.

What a pod lacks beside a Docker container is what these go after: a pod's spec has no
pids limit (the runner's RLIMIT_NPROC stands in for it), a pod holds its memory reserved
in the cluster for as long as it is kept warm, and a pod nobody attached to has no stdin
that could close to end it.
"""

from __future__ import annotations

import textwrap

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import new_sandbox
from tests import kubernetes_cluster as cluster

#: Tests that start threads until the kernel refuses one (each thread counts against
#: RLIMIT_NPROC like a process), then stop them.
THREADS = textwrap.dedent("""\
    import threading
    stop = threading.Event()
    started = 0
    try:
        for _ in range(200):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    stop.set()
    print("threads", started)
    assert answer() == 42
    """)


def test_a_cells_tests_are_held_to_the_pids_limit_as_its_program_is(kubernetes_sandbox):
    """The tests (a student's, a cell's asserts) run in the checker, a process of a uid of
    its own: on a pod, whose spec has no pids limit, only RLIMIT_NPROC holds them. Before,
    the runner set it for the program alone, so the tests started 200 threads where the
    program may start 64 (on a node without ``podPidsLimit``, a fork bomb of the node)."""
    r = kubernetes_sandbox.execute("def answer():\n    return 42\n", tests=THREADS)
    assert r.status == "ok" and r.tests and all(t.passed for t in r.tests), r
    started = int(r.stdout.split("threads", 1)[1].split()[0])
    assert started < SelfHeal().pids_limit, r.stdout


def test_limits_a_request_lowers_keep_one_pod_not_one_per_size(kubernetes_cluster):
    """A request may lower its limits (through the class service, a student's ``%%heal
    --memory``): each size is a pod of its own, and one was kept warm per size asked, so
    one student could hold any number of pods, each with its memory reserved in the
    cluster, until the service ends. Of sizes other than the pool's own, one is kept."""
    sandbox = new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=kubernetes_cluster, pool_size=0))
    try:
        for memory in ("300m", "301m"):
            r = sandbox.execute("print(1)", limits=SelfHeal(memory=memory).limits())
            assert r.status == "ok", r
        mine = f"app=selfheal,selfheal.session={sandbox.session}"
        pods = cluster.core_api(kubernetes_cluster).list_namespaced_pod(sandbox.namespace, label_selector=mine).items
        kept = [p for p in pods if p.metadata.deletion_timestamp is None]
        assert [p.spec.containers[0].resources.limits["memory"] for p in kept] == [str(301 << 20)], kept
    finally:
        sandbox.close()
