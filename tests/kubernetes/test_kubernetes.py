"""KubernetesSandbox against a real control plane (sandbox/setup-kubernetes.sh): a pod's
own limits and hardening, and the faults a class on Kubernetes can meet — a pod deleted
or evicted mid-run, the API server gone, no room for a pod, an image the node lacks —
each ending in a clear message with no pod left behind.

The contract every backend keeps (results, limits, hardening) is tests/test_sandbox.py's,
run on pods too; the attacks are tests/test_redteam.py's and tests/test_separation.py's.
"""

from __future__ import annotations

import threading

import docker
import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import EngineLost, EngineUnavailable, ImageMissing, SandboxError
from selfheal_jupyter.factory import new_sandbox
from selfheal_jupyter.sandbox.kubernetes import PodLost
from tests import kubernetes_cluster as cluster
from tests.class_hub import Relay
from tests.conftest import own_containers
from tests.waiting import wait_until

pytestmark = [pytest.mark.kubernetes]


def pods_of(kubeconfig: str, sandbox) -> list[str]:
    return cluster.selfheal_pods(kubeconfig, f"app=selfheal,selfheal.session={sandbox.session}")


def pod_sandbox(kubeconfig: str, **options):
    return new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=kubeconfig, **options))


def busy_worker(sandbox):
    """The worker a run is using (none idle, one created): what the test deletes."""
    with sandbox._lock:
        busy = [w for w in sandbox._all if w.runs and not any(w in idle for idle in sandbox._idle.values())]
    return busy[0] if busy else None


def test_a_pod_is_hardened_and_held_to_the_limits(kubernetes_sandbox):
    r = kubernetes_sandbox.execute(
        """\
import os, resource
print(os.getuid() == os.getgid() not in (0, 65534))  # a uid of its own, not the runner's
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
print(status["CapEff"].strip(), status["CapPrm"].strip(), status["NoNewPrivs"].strip(), status["Seccomp"].strip())
print(resource.getrlimit(resource.RLIMIT_NPROC)[0])
print(open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip())
print(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip(), open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read().strip())
st = os.statvfs("/tmp")
print(st.f_blocks * st.f_frsize)
print(oct(os.stat("/tmp").st_mode & 0o7777))
print(os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount"))
for path in ("/dev/termination-log", "/etc/hosts"):
    try:
        open(path, "a").write("x" * 1000)
        print("wrote", path)
    except OSError as exc:
        print("refused", exc.errno)
""",
    )
    assert r.status == "ok", r
    assert r.stdout.splitlines() == [
        "True",
        "0000000000000000 0000000000000000 1 2",  # no capability, no_new_privs, seccomp filter
        "64",  # the pids limit, per program uid (a pod's spec has none of its own)
        str(512 << 20),
        "100000 100000",
        str(64 << 20),
        "0o1777",  # a memory-backed emptyDir is sticky: no run renames another's entries
        "False",  # no service-account token
        "refused 13",  # the kubelet's file on the node's disk: sealed by the runner
        "refused 13",
    ], r.stdout


def test_every_pod_carries_its_labels_and_the_template(kubernetes_cluster, kubernetes_sandbox):
    api = cluster.core_api(kubernetes_cluster)
    pods = api.list_namespaced_pod(
        kubernetes_sandbox.namespace, label_selector=f"selfheal.session={kubernetes_sandbox.session}"
    ).items
    assert pods, "the warm pool has pods"
    for pod in pods:
        assert pod.metadata.labels["app"] == "selfheal"
        spec = pod.spec
        assert spec.automount_service_account_token is False and spec.enable_service_links is False
        assert spec.restart_policy == "Never"
        container = spec.containers[0]
        sc = container.security_context
        assert sc.allow_privilege_escalation is False and sc.read_only_root_filesystem is True
        assert sc.capabilities.drop == ["ALL"] and sorted(sc.capabilities.add) == ["SETGID", "SETUID"]
        limits, requests = container.resources.limits, container.resources.requests
        assert limits["cpu"] == "1" and limits["memory"] == requests["memory"]  # a run's own size


def sleeping_run(sandbox) -> tuple[threading.Thread, dict]:
    """A run of a minute's sleep, under way in a thread; its result or error lands in the dict."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = sandbox.execute("import time\ntime.sleep(60)\n", limits=SelfHeal(timeout_s=90).limits())
        except SandboxError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_pod_deleted_mid_run_ends_the_run_with_a_clear_message_and_no_pod_left(kubernetes_cluster):
    sandbox = pod_sandbox(kubernetes_cluster, pool_size=1)
    sandbox.start()
    thread, outcome = sleeping_run(sandbox)
    try:
        worker = wait_until(lambda: busy_worker(sandbox), 60, "the run to start on a pod")
        deleted = cluster.kubectl(kubernetes_cluster, "delete", "pod", worker.name, "--wait=false")
        assert deleted.returncode == 0, deleted.stderr
        thread.join(60)
        assert not thread.is_alive(), "the run ended when its pod was deleted"
        error = outcome.get("error")
        assert isinstance(error, PodLost), outcome
        assert worker.name in str(error) and "was deleted during the run" in str(error)
        assert "Run again" in str(error)
    finally:
        sandbox.close()
        thread.join(60)
    wait_until(lambda: not pods_of(kubernetes_cluster, sandbox), 60, "the sandbox's pods to go")
    mine = f"app=selfheal,selfheal.session={sandbox.session}"
    listed = cluster.kubectl(kubernetes_cluster, "get", "pods", "-l", mine, "-A", "-o", "name")
    assert listed.stdout.strip() == "", listed.stdout


def test_the_api_server_gone_mid_run_is_said_and_the_pods_end(kubernetes_cluster, tmp_path):
    relay = Relay(cluster.api_port(kubernetes_cluster))  # the API server listens on 127.0.0.1
    sandbox = pod_sandbox(cluster.relayed_kubeconfig(kubernetes_cluster, relay.port, tmp_path), pool_size=1)
    sandbox.start()
    session = sandbox.session
    thread, outcome = sleeping_run(sandbox)
    try:
        wait_until(lambda: busy_worker(sandbox), 60, "the run to start on a pod")
        relay.close()
        thread.join(60)
        assert not thread.is_alive()
        error = outcome.get("error")
        assert isinstance(error, EngineLost), outcome
        assert "stopped answering" in str(error) and "kubectl cluster-info" in str(error)
    finally:
        sandbox.close()  # the API server cannot be told: the pod ends with its attach stream
        thread.join(60)

    def gone_or_ended() -> bool:
        api = cluster.core_api(kubernetes_cluster)
        pods = api.list_pod_for_all_namespaces(label_selector=f"selfheal.session={session}").items
        return all(p.status.phase in ("Succeeded", "Failed") for p in pods)

    wait_until(gone_or_ended, 60, "the runner to end with its attach stream")
    # The next sandbox's sweep removes what the lost one could not.
    with pod_sandbox(kubernetes_cluster, pool_size=0):
        pass
    assert not cluster.selfheal_pods(kubernetes_cluster, f"selfheal.session={session}")


def test_an_unreachable_api_server_is_said_before_any_run(kubernetes_cluster, tmp_path):
    relay = Relay(9)
    relay.close()  # nothing listens at its port any more
    sandbox = pod_sandbox(cluster.relayed_kubeconfig(kubernetes_cluster, relay.port, tmp_path), pool_size=1)
    with pytest.raises(EngineUnavailable, match="does not answer") as info:
        sandbox.start()
    assert "setup-kubernetes.sh start" in str(info.value)
    sandbox.close()


@pytest.mark.parametrize(
    ("options", "error", "said"),
    [
        # no node has room: said after the pending timeout, quoting the scheduler
        (
            {"memory": "512g", "kubernetes_pending_timeout_s": 3},
            SandboxError,
            ["no room for one", "Insufficient memory"],
        ),
        # an image no node can get: said at once (waited out, it would be "no room")
        (
            {"kubernetes_image": "selfheal-sandbox:not-on-any-node"},
            ImageMissing,
            ["cannot run the sandbox image", "kubernetes_image"],
        ),
    ],
    ids=["no-room", "no-image"],
)
def test_a_pod_that_cannot_start_ends_the_run_saying_why(kubernetes_cluster, options, error, said):
    sandbox = pod_sandbox(kubernetes_cluster, pool_size=0, **options)
    try:
        with pytest.raises(error) as info:
            sandbox.execute("print(1)")
        assert all(words in str(info.value) for words in said), info.value
    finally:
        sandbox.close()
    assert not pods_of(kubernetes_cluster, sandbox)


# --------------------------------------------------------------------------- the class service
MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
MEAN_FIX = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) == 3\n```"


@pytest.mark.hub
def test_heal_through_the_service_runs_its_candidates_in_pods(tmp_path, kubernetes_cluster):
    """`selfheal service` with SelfHeal.sandbox_backend = "kubernetes": a student's %%heal
    is verified in pods the service holds, none of which outlives the service."""
    from tests.class_hub import (
        MODEL_KEY,
        STUDENTS,
        class_hub,
        ensure_student_venv,
        ensure_user,
        last_json,
        notebook,
        run_student,
        student_env,
    )
    from tests.scripted_server import Reply, ScriptedServer

    student = STUDENTS[0]
    ensure_user(student)
    ensure_student_venv()
    backend = ("--SelfHeal.sandbox_backend=kubernetes", f"--SelfHeal.kubeconfig={kubernetes_cluster}")
    script = [Reply(MEAN_FIX, match="def mean(")]
    with (
        ScriptedServer(script, api_key=MODEL_KEY) as model,
        class_hub(tmp_path / "hub", {"mode": "full"}, model.base_url, *backend) as hub,
    ):
        service = wait_until(hub.service_pid, 120, "the service to start")
        theirs = f"app=selfheal,selfheal.pid={service}"
        wait_until(lambda: cluster.selfheal_pods(kubernetes_cluster, theirs), 120, "the service's warm pod")
        nb = notebook(
            "%load_ext selfheal_jupyter",
            "%%heal\n" + MEAN,
            "import json; print(json.dumps({'outcome': agent_result.outcome, 'fix': agent_result.fix.code}))",
        )
        done = run_student(student, nb, student_env(student, hub, hub.token(student), "lab.ipynb"), "kube")
        healed = last_json(done, 2)
        assert healed["outcome"] == "success" and "len(xs)\n" in healed["fix"], healed
        assert not own_containers(docker.from_env(), service), "the service ran its candidates on Docker"
    # The hub stopped its service: its pods went with it.
    wait_until(lambda: not cluster.selfheal_pods(kubernetes_cluster, theirs), 60, "the service's pods to go")
