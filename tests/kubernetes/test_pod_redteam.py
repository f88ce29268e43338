"""The red team on the pod backend: attacks that tests/sandbox/test_redteam.py and
test_separation.py (run on pods too) do not try; each one succeeded on pods before the
change its docstring names. Through the sandbox's own interface on the local cluster.

What a pod lacks beside a Docker container is what these go after: a pod's spec has no
pids limit (the runner's RLIMIT_NPROC stands in for it), a pod holds its memory reserved
in the cluster for as long as it is kept warm, and a pod nobody attached to has no stdin
that could close to end it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import new_sandbox
from tests import kubernetes_cluster as cluster
from tests.class_hub import Relay
from tests.waiting import wait_until

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


#: A host that starts a pod (its runner told to wait for a hello HELLO_WITHIN seconds,
#: not the minutes a cluster may need to run a pod).
HOST = textwrap.dedent("""\
    import sys
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.factory import new_sandbox
    sandbox = new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=sys.argv[1], pool_size=0))
    sandbox.hello_within_s = float(sys.argv[2])
    sandbox.execute("print(1)")
    """)
HELLO_WITHIN = 5


def test_a_pod_whose_host_died_before_attaching_ends_by_itself(kubernetes_cluster, tmp_path):
    """Killed between creating a pod and attaching to it, a host leaves a runner waiting
    for a hello on a stdin that never closes: the pod ran (its memory reserved) until
    somebody deleted it, and the next sandbox's sweep removes only pods of dead
    processes of its own machine (a hub restarted in a new pod is another machine). Its
    runner now gives up on a host that never said hello; the pod ends, and the sweep of
    any later sandbox removes ended pods.

    The host reaches the API server through a relay of one connection: its requests
    pass, its attach stream (a connection of its own) waits unanswered, so the host is
    killed with its pod running and never attached."""
    api = cluster.core_api(kubernetes_cluster)
    relay = Relay(cluster.api_port(kubernetes_cluster), links=1)
    kubeconfig = cluster.relayed_kubeconfig(kubernetes_cluster, relay.port, tmp_path)
    host = subprocess.Popen([sys.executable, "-c", HOST, kubeconfig, str(HELLO_WITHIN)])
    try:

        def running() -> list:
            pods = api.list_pod_for_all_namespaces(label_selector=f"app=selfheal,selfheal.pid={host.pid}").items
            return [p for p in pods if p.status.phase == "Running"]

        pod = wait_until(running, 120, "the host's pod to run")[0]
    finally:
        host.kill()
        host.wait()
        relay.close()
    name, namespace = pod.metadata.name, pod.metadata.namespace

    def ended() -> bool:
        return api.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed")

    wait_until(ended, HELLO_WITHIN + 60, "the pod nobody attached to to end by itself")
    with new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=kubernetes_cluster, pool_size=0)):
        pass  # its start sweeps what ended
    assert not cluster.selfheal_pods(kubernetes_cluster, f"app=selfheal,selfheal.pid={host.pid}")
