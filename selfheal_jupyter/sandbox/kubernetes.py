"""The Kubernetes backend of :class:`~selfheal_jupyter.sandbox.base.Sandbox`: each worker
is a pod, the runner spoken to over the pod's attach stream.

Where a class outgrows one machine (JupyterHub on Kubernetes), the service keeps its
loop, policy and queue and its candidates run in pods of one hardened template
(:func:`pod_manifest`): the runner as PID 1 of its container, started as root with
CAP_SETUID and CAP_SETGID only (it becomes uid 65534 at once and gives each run uids of
its own, as in a Docker container: ``runner/principals``), no privilege escalation, a
read-only root, memory-backed ``/tmp`` and ``/inputs``, the RuntimeDefault seccomp
profile, no service-account token, no service links, Guaranteed resources, and
``runtimeClassName`` when one is configured (gVisor where the cluster has it). Egress is
denied by the namespace's NetworkPolicy (README), where the cluster enforces them.

Frames travel over the attach websocket (stdin in, stdout out; stderr is the runner's
log), inputs as ``put`` frames: what :class:`~.pool.PooledSandbox` does with a Docker
container on the attach channel. The attach stream drops what was written before anyone
attached, so the runner says ready only after the host's first frame (``--await-host``).

Every pod is labelled ``app=selfheal`` (plus the session, host and pid of its owner) and
deleted when its run leaves it unfit, when the sandbox closes, at interpreter exit, and —
should the owner die — by the runner itself (its stdin closes with the attach stream, or
no hello came before ``--hello-within``: it exits, the pod ends) and the next sandbox's
stale sweep.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import ssl
import threading
import time
from typing import Any

from ..errors import EngineLost, EngineUnavailable, ImageMissing, SandboxError
from ..model import ErrorInfo, ExecutionResult, Limits
from .docker import CONTAINER_ENV, READY_TIMEOUT_S, RUNNER_CAPABILITIES, pid_alive, ready_hello
from .image import RUNNER_COMMAND
from .pool import INPUTS_MOUNT, PooledSandbox
from .worker import ContainerSpec, Link, SandboxCrashed

APP = "selfheal"
LABEL_SESSION = "selfheal.session"
LABEL_HOST = "selfheal.host"
LABEL_PID = "selfheal.pid"
#: The container's name in every sandbox pod.
CONTAINER = "runner"
#: A file the kubelet mounts writable for every uid, on the node's disk: the runner
#: makes it root's alone before any program runs.
TERMINATION_LOG = "/dev/termination-log"
#: The CPU a sandbox pod asks the scheduler for (its limit is SelfHeal.cpus).
CPU_REQUEST = "100m"
#: Attach streams tried per new pod: one joined just as the container started may never
#: reach its stdin (seen once in about twenty with Docker under the kubelet).
ATTACHES = 3
#: Seconds between two hellos while a new pod's runner has not said ready.
HELLO_AGAIN_S = 1.0
#: Seconds a pod's runner waits for its host's first hello before it exits: longer than
#: the host waits for the pod to run and its runner to answer. A host that died before it
#: attached closes no stdin; this ends the pod, and the next sandbox's sweep removes it.
HELLO_WITHIN_S = 2 * READY_TIMEOUT_S
#: The websocket channels of an attach stream.
STDOUT, STDERR, ERROR = 1, 2, 3
#: Why a container cannot start that no waiting mends.
HOPELESS = ("ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError")

log = logging.getLogger(__name__)


class PodLost(SandboxError):
    """The sandbox pod was deleted or evicted while a run was using it."""


def _host_label() -> str:
    """This machine's name as a label value (at most 63 characters of [-._a-zA-Z0-9])."""
    name = "".join(c if c.isalnum() or c in "-._" else "-" for c in socket.gethostname())
    return name.strip("-._")[:63] or "host"


def load_config(kubeconfig: str) -> Any:
    """The client's configuration: ``kubeconfig`` (a file), else inside a pod the
    in-cluster service account, else ``$KUBECONFIG`` or ``~/.kube/config``."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=kubeconfig or None, client_configuration=configuration)
    except (config.ConfigException, OSError, TypeError) as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise EngineUnavailable(
            f"No Kubernetes cluster is configured for the sandbox ({exc}). Set "
            "`SelfHeal.kubeconfig` to a kubeconfig file (here: "
            f"{where}), or run inside the cluster with a service account; "
            "sandbox/setup-kubernetes.sh starts a small local cluster and prints its KUBECONFIG."
        ) from exc
    return configuration


def default_namespace(kubeconfig: str) -> str:
    """The service account's namespace in a pod, else the kubeconfig context's, else default."""
    in_cluster = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(in_cluster):
        with open(in_cluster) as f:
            return f.read().strip() or "default"
    with contextlib.suppress(Exception):
        from kubernetes import config

        _, context = config.list_kube_config_contexts(config_file=kubeconfig or None)
        return str(context.get("context", {}).get("namespace") or "default")
    return "default"


def pod_manifest(
    image: str,
    spec: ContainerSpec,
    *,
    labels: dict[str, str],
    runtime_class: str = "",
    hello_within_s: float = HELLO_WITHIN_S,
) -> dict[str, Any]:
    """The one hardened template every sandbox pod is made from."""
    memory = str(spec.memory_bytes)
    limits = {"memory": memory, "cpu": f"{spec.cpus:g}"}
    command = [
        *RUNNER_COMMAND,
        "--memory-bytes",
        memory,
        # Kubernetes has no per-pod process limit in the pod's spec: each program's uid
        # (its own) is held to the pids limit by RLIMIT_NPROC instead.
        "--nproc",
        str(spec.pids),
        "--seal",
        TERMINATION_LOG,
        "--await-host",
        "--hello-within",
        f"{hello_within_s:g}",
    ]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": command,
                "workingDir": "/tmp",
                "stdin": True,
                "stdinOnce": True,  # the host's attach stream closing ends the runner
                "tty": False,
                "env": [{"name": k, "value": v} for k, v in CONTAINER_ENV.items()],
                # A warm pod idles until a run comes: it asks the scheduler for a tenth
                # of a CPU and all of its memory (the preloaded libraries hold some, a
                # run may take the rest); the limits cap what a run takes.
                "resources": {"limits": limits, "requests": {"memory": memory, "cpu": CPU_REQUEST}},
                "securityContext": {
                    # root with two capabilities only, for the runner to give each run
                    # uids of its own; it leaves root before it reads any request.
                    "runAsUser": 0,
                    "runAsGroup": 0,
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"], "add": list(RUNNER_CAPABILITIES)},
                },
                "volumeMounts": [
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "inputs", "mountPath": INPUTS_MOUNT},
                ],
                "terminationMessagePolicy": "File",
            }
        ],
        "volumes": [
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": str(_bytes(spec.tmpfs_size))}},
            # Inputs arrive as put frames; like the program's data they count against
            # the pod's memory, so the memory limit is their cap too.
            {"name": "inputs", "emptyDir": {"medium": "Memory", "sizeLimit": memory}},
        ],
    }
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "selfheal-", "labels": {"app": APP, **labels}},
        "spec": pod_spec,
    }


def _bytes(size: str) -> int:
    from docker.utils import parse_bytes

    return int(parse_bytes(size))


class PodWorker(Link):
    """One warm pod and its attach websocket (stdin: frames in; stdout: frames out;
    stderr: the runner's log; the error channel: how the container ended)."""

    unit = "pod"

    def __init__(self, sandbox: KubernetesSandbox, name: str, spec: ContainerSpec, ws: Any) -> None:
        super().__init__(name, spec)
        self.sandbox = sandbox
        self.ws = ws
        self.ended = b""  # what the error channel said when the stream ended

    def _write(self, data: bytes) -> None:
        if not self.ws.is_open():
            raise OSError("the attach stream is closed")
        self.ws.write_stdin(data)

    def _receive(self, timeout: float) -> bool:
        # One websocket frame at a time, straight from the socket: bytes TLS has already
        # decrypted wait in the SSL object, where select() cannot see them (the client's
        # own update() misses them before version 37).
        from websocket import ABNF

        sock = self.ws.sock
        raw = getattr(sock, "sock", None)
        if raw is None or not self.ws.is_open():
            raise SandboxCrashed(f"the pod's attach stream ended{self._why()}")
        buffered = isinstance(raw, ssl.SSLSocket) and raw.pending()
        if not buffered and not select.select([raw], [], [], timeout)[0]:
            return False
        try:
            opcode, frame = sock.recv_data_frame(True)
        except Exception as exc:  # the websocket broke (reset, closed under us)
            self.ws.close()
            raise SandboxCrashed(f"the pod's attach stream failed ({exc})") from exc
        if opcode == ABNF.OPCODE_CLOSE:
            self.ws.close()
            raise SandboxCrashed(f"the pod's attach stream ended{self._why()}")
        data = frame.data if opcode in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) else b""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if data:
            channel, payload = data[0], data[1:]
            if channel == STDOUT:
                self.frames += payload
            elif channel == STDERR:
                self._keep_log(payload)
            elif channel == ERROR:
                self.ended += payload
        return True

    def _why(self) -> str:
        """What the error channel said when the stream ended (the kubelet's words)."""
        said = self.ended.decode("utf-8", errors="replace").strip()
        return f" ({said[:300]})" if said else ""

    def state(self) -> dict[str, Any]:
        return self.sandbox._pod_end(self.name)

    def kill(self) -> None:
        """Close the stream (the runner exits on end of input), delete the pod."""
        self.dead = True
        with contextlib.suppress(Exception):
            self.ws.close()
        self.sandbox._delete(self.name)


class KubernetesSandbox(PooledSandbox):
    """Run candidates in hardened, pre-warmed pods of one namespace."""

    unit = "pod"

    def __init__(
        self,
        image: str,
        *,
        limits: Limits,
        pool_size: int,
        namespace: str = "",
        kubeconfig: str = "",
        runtime_class: str = "",
        pending_timeout_s: float = 120.0,
        session: str | None = None,
    ) -> None:
        """``image``: the ref pods run (the node must have it or pull it);
        ``namespace`` "": the kubeconfig's (or the service account's);
        ``pending_timeout_s``: how long a pod may wait for room in the cluster before
        the run that needs it ends, saying so."""
        super().__init__(limits=limits, pool_size=pool_size, session=session)
        self.image = image
        self.kubeconfig = kubeconfig
        self.namespace = namespace or default_namespace(kubeconfig)
        self.runtime_class = runtime_class
        self.pending_timeout_s = pending_timeout_s
        self._api: Any = None
        self._attach_api: Any = None
        self._attach_lock = threading.Lock()
        self._host = _host_label()
        self.server = ""
        self.hello_within_s = HELLO_WITHIN_S

    @property
    def channel(self) -> str:
        """How frames travel: always over the pod's attach stream."""
        return "attach"

    @classmethod
    def from_config(cls, config: Any, **given: Any) -> KubernetesSandbox:
        """Build from a :class:`~selfheal_jupyter.config.SelfHeal`; ``given`` replaces or
        adds constructor arguments."""
        from .image import image_ref

        return cls(
            config.kubernetes_image or image_ref(config.image),
            **{
                "limits": config.limits(),
                "pool_size": config.pool_size,
                "namespace": config.kubernetes_namespace,
                "kubeconfig": config.kubeconfig,
                "runtime_class": config.kubernetes_runtime_class,
                "pending_timeout_s": config.kubernetes_pending_timeout_s,
                **given,
            },
        )

    # -- the API ---------------------------------------------------------------
    @property
    def api(self) -> Any:
        if self._api is None:
            from kubernetes import client

            configuration = load_config(self.kubeconfig)
            configuration.retries = 0  # an unreachable API server is said at once
            self.server = configuration.host
            self._api = client.CoreV1Api(client.ApiClient(configuration))
            # attach swaps its client's request method while it connects: a client of its own
            self._attach_api = client.CoreV1Api(client.ApiClient(configuration))
        return self._api

    def _labels(self) -> dict[str, str]:
        return {LABEL_SESSION: self.session, LABEL_HOST: self._host, LABEL_PID: str(os.getpid())}

    def _lost(self, exc: BaseException) -> EngineLost | None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        if isinstance(exc, ApiException) and exc.status != 0:
            return None  # an answer (refused, not found...): not the server gone
        if not isinstance(exc, (HTTPError, ApiException, ConnectionError, TimeoutError)):
            return None
        return EngineLost(
            f"The Kubernetes API server at {self.server or 'the configured address'} stopped answering "
            f"({_short(exc)}). Check the cluster (kubectl cluster-info), then run again: new "
            "sandbox pods are started by themselves."
        )

    def _prepare(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            sweep_stale(self.api, self.namespace)
        except ApiException as exc:
            if exc.status == 0:
                raise self._unreachable(exc) from exc
            raise SandboxError(
                f"The Kubernetes API server refused to list the sandbox's pods in namespace "
                f"{self.namespace!r} ({exc.status} {exc.reason}). The sandbox needs a Role there "
                "allowing pods create/get/list/delete and pods/attach (README: the class service "
                "on Kubernetes)."
            ) from exc
        except Exception as exc:
            if self._lost(exc) is None:
                raise
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: BaseException) -> EngineUnavailable:
        return EngineUnavailable(
            f"The Kubernetes API server at {self.server} does not answer ({_short(exc)}). Check the "
            "cluster (kubectl cluster-info) and `SelfHeal.kubeconfig`; for the local test cluster: "
            "bash sandbox/setup-kubernetes.sh start."
        )

    # -- pods --------------------------------------------------------------------
    def _create(self, spec: ContainerSpec) -> Link:
        body = pod_manifest(
            self.image,
            spec,
            labels=self._labels(),
            runtime_class=self.runtime_class,
            hello_within_s=self.hello_within_s,
        )
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self.api.create_namespaced_pod(self.namespace, body)
        except ApiException as exc:
            if exc.status == 0:
                raise
            raise SandboxError(
                f"The Kubernetes API server refused to create a sandbox pod in namespace "
                f"{self.namespace!r}: {exc.status} {_reason(exc)}. Check the sandbox's Role "
                "(pods create/get/list/delete, pods/attach) and the namespace's quotas."
            ) from exc
        name = pod.metadata.name
        self._created.add(name)
        worker: PodWorker | None = None
        hello: dict[str, Any] | None = None
        try:
            self._wait_running(name)
            for _ in range(ATTACHES):
                if worker is not None:  # its stream never reached the runner: once more
                    with contextlib.suppress(Exception):
                        worker.ws.close()
                worker = PodWorker(self, name, spec, self._attach(name))
                hello = self._greet(worker, READY_TIMEOUT_S / ATTACHES)
                if hello is not None:
                    break
            if worker is None:
                raise SandboxCrashed("the runner did not report ready in time")
            worker.hello = ready_hello(hello)
        except BaseException as exc:
            said = worker.runner_log() if worker is not None else ""
            if worker is not None:
                worker.kill()
            else:
                self._delete(name)
            self._created.discard(name)
            if isinstance(exc, SandboxCrashed):
                raise SandboxError(
                    f"A sandbox pod ({name}, image {self.image}) did not become ready: {exc}."
                    + (f" Its runner said: {said[-600:]}" if said else "")
                ) from exc
            raise
        assert worker is not None  # ready, so attached
        with self._lock:
            if self._closed:
                worker.kill()
                self._created.discard(name)
                raise SandboxError("The sandbox was closed while a pod was starting.")
            self._all.add(worker)
        return worker

    @staticmethod
    def _greet(worker: PodWorker, timeout: float) -> dict[str, Any] | None:
        """Attached: now the runner may say ready. What it writes just as the attach
        stream joins its output can be lost, so the host says hello (numbered) until a
        ready frame comes, then reads the answers to the hellos still on their way: the
        runner answers each, in order."""
        end = time.monotonic() + timeout
        said = 0
        while time.monotonic() < end:
            said += 1
            worker.send({"op": "hello", "n": said})
            frame = worker.poll(min(HELLO_AGAIN_S, max(end - time.monotonic(), 0)))
            while frame is not None:
                if frame.get("n") == said:
                    return frame
                frame = worker.poll(max(end - time.monotonic(), 0))
        return None

    def _attach(self, name: str) -> Any:
        """The pod's attach websocket (stdin, stdout, stderr; no terminal)."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        try:
            with self._attach_lock:
                return stream(
                    self._attach_api.connect_get_namespaced_pod_attach,
                    name,
                    self.namespace,
                    container=CONTAINER,
                    stdin=True,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    _preload_content=False,
                    binary=True,
                )
        except Exception as exc:
            # The client turns a refused websocket into an AttributeError around the
            # ApiException that says why: find that one.
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, ApiException):
                cause = cause.__context__
            if cause is None:
                raise
            if "Handshake status" in str(cause.reason):
                raise SandboxCrashed(f"the API server refused to attach to it: {_short(cause)}") from exc
            raise cause from exc

    def _wait_running(self, name: str) -> None:
        """Until the pod's container runs; a clear error when it cannot (no room in the
        cluster for ``pending_timeout_s``, an image the node cannot get, a pod that ended)."""
        started = time.monotonic()
        said_waiting = False
        while True:
            if self._closed:
                raise SandboxError("The sandbox was closed while a pod was starting.")
            pod = self.api.read_namespaced_pod(name, self.namespace)
            status = pod.status
            container = (status.container_statuses or [None])[0]
            state = container.state if container is not None else None
            if status.phase == "Running" and state is not None and state.running is not None:
                return
            if status.phase in ("Succeeded", "Failed"):
                raise SandboxCrashed(f"the pod ended before it was ready ({status.reason or status.phase})")
            waiting = state.waiting if state is not None else None
            if waiting is not None and waiting.reason in HOPELESS:
                if waiting.reason == "ErrImageNeverPull" or "pull" in (waiting.reason or "").lower():
                    raise ImageMissing(
                        f"The cluster cannot run the sandbox image {self.image} ({waiting.reason}: "
                        f"{waiting.message}). Push it to a registry the nodes pull from and set "
                        "`SelfHeal.kubernetes_image` to that ref, or load it on the nodes "
                        "(the local test cluster: bash sandbox/setup-kubernetes.sh image REF)."
                    )
                raise SandboxError(f"The sandbox pod {name} cannot start: {waiting.reason}: {waiting.message}")
            unscheduled = _unscheduled(status)
            if unscheduled is not None:
                waited = time.monotonic() - started
                if not said_waiting:
                    log.info("waiting for a sandbox: pod %s is not scheduled yet (%s)", name, unscheduled)
                    said_waiting = True
                if waited > self.pending_timeout_s:
                    raise SandboxError(
                        f"No sandbox pod could start in namespace {self.namespace!r} within "
                        f"{self.pending_timeout_s:g} s: the cluster has no room for one "
                        f"({unscheduled}). Try again later, or ask the cluster's administrator "
                        "for capacity (or lower SelfHeal.memory / SelfHeal.cpus)."
                    )
            time.sleep(0.1)

    def _pod_end(self, name: str) -> dict[str, Any]:
        """How a pod's container ended, in Docker's words, plus ``Deleted`` (gone, or
        being deleted) and ``Evicted``."""
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self.api.read_namespaced_pod(name, self.namespace)
        except ApiException as exc:
            if exc.status == 0:
                raise  # no answer: the API server is gone (said by engine_calls)
            return {"Deleted": True} if exc.status == 404 else {}
        found: dict[str, Any] = {}
        if pod.metadata.deletion_timestamp is not None:
            found["Deleted"] = True
        if pod.status.reason == "Evicted":
            found["Evicted"] = pod.status.message or "evicted"
        container = (pod.status.container_statuses or [None])[0]
        terminated = container.state.terminated if container is not None and container.state else None
        if terminated is not None:
            found["ExitCode"] = terminated.exit_code
            found["OOMKilled"] = terminated.reason == "OOMKilled"
        return found

    def _delete(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status not in (0, 404):
                log.warning("could not delete sandbox pod %s: %s", name, _reason(exc))
        except Exception as exc:  # the API server is gone: the pod ends with its stream
            log.warning("could not delete sandbox pod %s: %s", name, _short(exc))

    def _remove_leftovers(self) -> None:
        if self._api is None:
            return
        for name in list(self._created):  # anything created but never handed over
            self._delete(name)
        self._created.clear()
        end = time.monotonic() + 10.0
        while time.monotonic() < end:
            try:
                left = self.api.list_namespaced_pod(
                    self.namespace, label_selector=f"app={APP},{LABEL_SESSION}={self.session}"
                ).items
            except Exception:  # the API server went away: nothing more to wait for
                return
            if not left:
                return
            for pod in left:
                self._delete(pod.metadata.name)
            time.sleep(0.1)

    def _crashed(self, worker: Link, exc: SandboxCrashed, limits: Limits) -> ExecutionResult:
        state = worker.state()
        if state.get("Deleted") or state.get("Evicted"):
            why = f"evicted ({state['Evicted']})" if state.get("Evicted") else "deleted"
            raise PodLost(
                f"The sandbox pod {worker.name} in namespace {self.namespace!r} was {why} during "
                "the run (by kubectl, a node drain or the cluster running short of resources). "
                "Run again: a new sandbox pod is started by itself."
            )
        if state.get("OOMKilled"):
            return ExecutionResult(
                status="oom",
                exit_code=137,
                message=(
                    f"The program used more than the memory limit ({limits.memory}) and the "
                    "kernel stopped its pod. Use less memory or raise the limit."
                ),
            )
        return ExecutionResult(
            status="error",
            exit_code=state.get("ExitCode"),
            stderr=worker.runner_log()[-2000:],
            error=ErrorInfo(type="SandboxCrash", message=str(exc)),
            message=(
                "The sandbox process running the program died unexpectedly; its pod was "
                "replaced. The program may have killed it."
            ),
        )


def _unscheduled(status: Any) -> str | None:
    """The scheduler's word when the pod waits for room (PodScheduled False), else None."""
    for condition in status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return str(condition.message or condition.reason or "not scheduled")
    return None


def _reason(exc: Any) -> str:
    import json

    with contextlib.suppress(Exception):
        return str(json.loads(exc.body).get("message") or exc.reason)
    return str(exc.reason)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", "") or exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def sweep_stale(api: Any, namespace: str) -> list[str]:
    """Delete the ``selfheal`` pods nobody uses: those that ended (their owner's attach
    stream closed, so the runner exited) and those of a dead process on this host."""
    host = _host_label()
    removed: list[str] = []
    for pod in api.list_namespaced_pod(namespace, label_selector=f"app={APP}").items:
        labels = pod.metadata.labels or {}
        ended = pod.status.phase in ("Succeeded", "Failed")
        try:
            pid = int(labels.get(LABEL_PID, ""))
        except ValueError:
            pid = 0
        orphan = labels.get(LABEL_HOST) == host and pid > 0 and not pid_alive(pid)
        if ended or orphan:
            with contextlib.suppress(Exception):
                api.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                removed.append(pod.metadata.name)
    return removed
