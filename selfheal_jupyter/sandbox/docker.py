"""The Docker backend of :class:`~selfheal_jupyter.sandbox.base.Sandbox`.

Each container is hardened (no network, read-only root, a small tmpfs, memory =
memory+swap, pids, CPUs, no-new-privileges, no logging, an environment that owns
nothing of the host's; the runner gets CAP_SETUID and CAP_SETGID only, to run each
candidate as a fresh unprivileged uid with no capability) and runs the
fork server of the runner package (``runner/``). A warm pool keeps containers ready,
so a candidate costs a fork, not a container start. Nothing that comes out is unpickled.

Two channels carry the runner's length-prefixed JSON frames, chosen by a probe when
the first container starts (:data:`CHANNELS`):

``socket`` (the fast path, when the engine sees this machine's files): a unix socket
the runner connects to once; it sits in the read-only bind mount of a host
``/dev/shm`` directory and is unlinked as soon as the runner is connected. Inputs
are pickles in that same mount. The attach socket only carries the runner's stderr
and ties the container's life to ours.

``attach`` (any Docker-API engine: a remote ``DOCKER_HOST``, Podman, an engine in
another mount namespace): frames go over the container's attach stream (stdin in;
stdout out, multiplexed with stderr), and inputs travel as chunked ``put`` frames
into a tmpfs at ``/inputs``. The probe: the engine refuses the bind mount of a
directory it cannot see, or the runner cannot reach the socket and says so in its
ready frame (``"channel": "stdio"``).

Every container is labelled ``selfheal=<session>`` (plus the owner's pid and host)
and removed on :meth:`DockerSandbox.close`, at interpreter exit, on interrupt, and —
should this process die — by the next sandbox's stale sweep (and by the container
itself: it exits when its attach socket closes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors

from ..errors import EngineLost, SandboxError
from ..model import ErrorInfo, ExecutionResult, Limits
from . import serialize
from .engine import address, describe, gone, lost
from .image import RUNNER_COMMAND, RUNNER_DIR
from .pool import INPUTS_MOUNT, PooledSandbox
from .worker import ContainerSpec, Link, SandboxCrashed, Worker, remove_container

LABEL = "selfheal"
LABEL_PID = "selfheal.pid"
LABEL_HOST = "selfheal.host"
CONTROL_NAME = "control.sock"
#: The frame protocol of the runner (``runner/``) that this host side speaks.
RUNNER_PROTOCOL = 2


def ready_hello(hello: dict[str, Any] | None) -> dict[str, Any]:
    """A new runner's first frame, if it says ready in this package's protocol (any backend)."""
    if not hello or not hello.get("ready"):
        raise SandboxCrashed("the runner did not report ready in time")
    if hello.get("protocol") != RUNNER_PROTOCOL:
        raise SandboxCrashed(
            f"the image's runner speaks protocol {hello.get('protocol')}, this package "
            f"{RUNNER_PROTOCOL} (the image is stale)"
        )
    return hello


#: Where the runner finds the control socket inside the container.
CONTROL_SOCKET = f"{INPUTS_MOUNT}/{CONTROL_NAME}"
#: How frames reach the runner: "auto" probes at pool start, or one of :data:`CHANNELS`.
CHANNELS = ("socket", "attach")
#: Seconds a new container may take to import its libraries and say it is ready.
READY_TIMEOUT_S = 60.0
#: All the runner holds: to give each run's processes a uid of their own (runner/principals).
RUNNER_CAPABILITIES = ("SETUID", "SETGID")
#: The whole environment of a container. Nothing is taken from the host.
CONTAINER_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


log = logging.getLogger(__name__)


class _NoSharedFiles(Exception):
    """The engine cannot see this machine's files (found while starting a container)."""


#: The channel each engine (by address) was found to need, so that one probe per
#: engine and process is enough.
_PROBED: dict[str, str] = {}


class DockerSandbox(PooledSandbox):
    """Run candidates in hardened, pre-warmed Docker containers."""

    unit = "container"

    def __init__(
        self,
        image: str,
        *,
        limits: Limits,
        pool_size: int,
        runtime: str,
        client: docker.DockerClient | None = None,
        session: str | None = None,
        channel: str = "auto",
    ) -> None:
        """``runtime``: Docker's --runtime ("" = the engine's default); ``client``: an
        engine other than the environment's; ``channel``: "auto" probes, else forced."""
        if channel != "auto" and channel not in CHANNELS:
            raise SandboxError(f"Unknown sandbox channel {channel!r}: use auto, " + " or ".join(CHANNELS) + ".")
        super().__init__(limits=limits, pool_size=pool_size, session=session)
        self._forced = None if channel == "auto" else channel
        self._channel: str | None = self._forced
        self.image = image
        self.runtime = runtime
        self._client = client
        self._ref: str | None = None
        self._host = socket.gethostname()

    @classmethod
    def from_config(cls, config: Any, **given: Any) -> DockerSandbox:
        """Build from a :class:`~selfheal_jupyter.config.SelfHeal`; ``given`` replaces or
        adds constructor arguments (``client``, ``channel``, a fixed ``pool_size``)."""
        return cls(
            config.image,
            **{"limits": config.limits(), "pool_size": config.pool_size, "runtime": config.runtime, **given},
        )

    # -- lifecycle -------------------------------------------------------------
    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            from .engine import connect

            self._client = connect()
        return self._client

    @property
    def ref(self) -> str:
        """The image actually run (``name:<version>``)."""
        if self._ref is None:
            from .image import ensure_image

            self._ref = ensure_image(self.client, self.image)
        return self._ref

    # -- the backend -------------------------------------------------------------
    def _prepare(self) -> None:
        _ = self.ref  # raises EngineUnavailable / ImageMissing with the fix
        sweep_stale(self.client)

    def _lost(self, exc: BaseException) -> EngineLost | None:
        return lost(self.client, exc) if gone(exc) else None

    def _remove_leftovers(self) -> None:
        if self._client is not None:
            for cid in list(self._created):  # anything created but never handed over
                with contextlib.suppress(Exception):
                    remove_container(self._client, cid)
            self._created.clear()
            self._wait_gone()

    def _deliver(
        self, worker: Link, blobs: Mapping[str, bytes], spec: ContainerSpec
    ) -> tuple[dict[str, str], str | None]:
        input_dir = worker.input_dir  # type: ignore[attr-defined]
        if input_dir is None:  # attach channel: the files travel as put frames
            files, _ = super()._deliver(worker, blobs, spec)
            return files, None
        return self._write_inputs(input_dir, blobs), INPUTS_MOUNT

    def _after_run(self, worker: Link) -> None:
        if worker.input_dir is not None:  # type: ignore[attr-defined]
            serialize.clear(worker.input_dir)  # type: ignore[attr-defined]

    def _wait_gone(self, timeout: float = 10.0) -> None:
        """Auto-removal is asynchronous; return once the engine lists none of ours."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                left = self._client.api.containers(  # type: ignore[union-attr]
                    all=True, filters={"label": f"{LABEL}={self.session}"}, quiet=True
                )
            except Exception:  # the engine went away: nothing more to wait for
                return
            if not left:
                return
            for item in left:
                try:
                    remove_container(self._client, item["Id"])  # type: ignore[arg-type]
                except docker.errors.APIError:
                    pass
            time.sleep(0.05)

    # -- containers ------------------------------------------------------------
    @property
    def channel(self) -> str | None:
        """How frames travel: "socket" or "attach" (None until the first container decided)."""
        return self._channel

    def _create(self, spec: ContainerSpec) -> Worker:
        """Start one hardened container and wait until its runner is ready.

        While the channel is unknown, this container is the probe: it is started for the
        socket channel, and when the engine cannot see the bind-mounted directory (it
        refuses the mount, or the runner cannot reach the socket) the engine is marked
        "attach" (for this process) and an attach-channel container is started instead.
        """
        engine = address(self.client)
        channel = self._channel or _PROBED.get(engine)
        if channel is not None:
            self._channel = channel
            return self._start_container(spec, channel)
        try:
            worker = self._start_container(spec, "socket")
        except _NoSharedFiles as exc:
            log.info("%s does not share this machine's files (%s): frames go over the attach stream", engine, exc)
            self._channel = _PROBED[engine] = "attach"
            return self._start_container(spec, "attach")
        self._channel = _PROBED[engine] = "socket"
        return worker

    def _start_container(self, spec: ContainerSpec, channel: str) -> Worker:
        """One container whose runner talks over ``channel``; raises :class:`_NoSharedFiles`
        when the socket channel cannot work on this engine (and the channel was not forced)."""
        config, input_dir = self._container_config(spec, channel)
        cid = self._create_container(config, input_dir)
        self._created.add(cid)
        return self._connect_runner(cid, spec, channel, input_dir)

    def _container_config(self, spec: ContainerSpec, channel: str) -> tuple[dict[str, Any], Path | None]:
        """The hardened container's configuration, and the host directory bind-mounted for
        the socket channel (None for the attach channel)."""
        api = self.client.api
        command = [*RUNNER_COMMAND, "--memory-bytes", str(spec.memory_bytes)]
        tmpfs = {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_size},mode=1777"}
        mounts = []
        input_dir: Path | None = None
        if channel == "socket":
            input_dir = Path(tempfile.mkdtemp(prefix=f"selfheal-{os.getpid()}-{self.session}-", dir=_shm_dir()))
            os.chmod(input_dir, 0o711)  # the container user may read files it knows the name of
            # A "bind" mount (not the legacy Binds, which an engine creates when missing):
            # an engine that cannot see this directory refuses it — the first probe.
            mounts.append(docker.types.Mount(INPUTS_MOUNT, str(input_dir), type="bind", read_only=True))
            command += ["--control", CONTROL_SOCKET]
        else:
            # Inputs arrive as put frames; like the candidate's data they count against
            # the container's memory, so the memory limit is their cap too.
            tmpfs[INPUTS_MOUNT] = f"rw,nosuid,nodev,noexec,size={spec.memory},mode=1777"
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs=tmpfs,
            mem_limit=spec.memory,
            memswap_limit=spec.memory,
            **_pids_limits(spec.pids, self.runtime),
            nano_cpus=int(spec.cpus * 1e9),
            # The runner starts as root with these two only, keeps them as an
            # unprivileged uid, and runs each candidate as a fresh uid with none.
            cap_drop=["ALL"],
            cap_add=list(RUNNER_CAPABILITIES),
            security_opt=["no-new-privileges"],
            init=False,  # the runner is PID 1: no process of the candidate can signal it
            log_config=docker.types.LogConfig(type="none"),
            mounts=mounts,
            auto_remove=True,
            ipc_mode="private",
            runtime=self.runtime or None,
        )
        config = api.create_container_config(
            self.ref,
            command,
            user="0:0",
            working_dir="/tmp",
            stdin_open=True,
            tty=False,
            environment=dict(CONTAINER_ENV),
            labels={
                LABEL: self.session,
                LABEL_PID: str(os.getpid()),
                LABEL_HOST: self._host,
            },
            host_config=host_config,
        )
        config["StdinOnce"] = True  # our socket closing ends the runner, and the container
        return config, input_dir

    def _create_container(self, config: dict[str, Any], input_dir: Path | None) -> str:
        """Create the container; the engine's refusals become messages that say what to do."""
        api = self.client.api
        try:
            cid = api.create_container_from_config(config)["Id"]
        except docker.errors.ImageNotFound as exc:
            if input_dir is not None:
                shutil.rmtree(input_dir, ignore_errors=True)
            from ..errors import ImageMissing

            raise ImageMissing(
                f"The sandbox image {self.ref} disappeared from {describe(self.client)}. "
                "Run `selfheal sandbox build`, then try again."
            ) from exc
        except docker.errors.APIError as exc:
            explanation = str(exc.explanation or exc)
            if input_dir is not None:
                shutil.rmtree(input_dir, ignore_errors=True)
                if str(input_dir) in explanation:  # the engine cannot see our directory
                    self._no_shared_files(explanation)
            if self.runtime and "runtime" in explanation.lower():
                raise SandboxError(
                    f"{describe(self.client)} has no runtime {self.runtime!r} ({explanation}). "
                    "Register it with the engine (for runsc, as root: bash "
                    "sandbox/setup-engine.sh), or set SelfHeal.runtime = '' to use the "
                    "engine's default."
                ) from exc
            raise SandboxError(
                f"{describe(self.client)} refused to create a sandbox container: "
                f"{explanation}. Check `selfheal sandbox doctor`."
            ) from exc
        return cid

    def _connect_runner(self, cid: str, spec: ContainerSpec, channel: str, input_dir: Path | None) -> Worker:
        """Start the container and wait until its runner says it is ready on ``channel``;
        on any failure the container is removed and the reason said."""
        api = self.client.api
        worker: Worker | None = None
        listener: socket.socket | None = None
        try:
            if input_dir is not None:
                control_path = input_dir / CONTROL_NAME
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(str(control_path))
                os.chmod(control_path, 0o666)  # the container user must be able to connect
                listener.listen(1)
            sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            worker = Worker(self.client, cid, sock, spec, input_dir, None if channel == "socket" else "attach")
            api.start(cid)
            worker.connect(listener, READY_TIMEOUT_S, lambda: self._closed)
            if listener is not None:
                listener.close()
                (input_dir / CONTROL_NAME).unlink()  # type: ignore[operator]  # one connection
            if channel == "socket" and worker.channel != "socket":
                # The runner could not reach the socket and speaks over stdio instead.
                log_lines = worker.runner_log().splitlines()
                self._no_shared_files(log_lines[-1] if log_lines else "the runner did not connect")
            hello = worker.poll(READY_TIMEOUT_S)
            worker.hello = ready_hello(hello)
        except BaseException as exc:
            if listener is not None:
                listener.close()
            if worker is not None:
                said = worker.runner_log()
                worker.kill()
            else:
                said = ""
                if input_dir is not None:
                    shutil.rmtree(input_dir, ignore_errors=True)
                try:
                    remove_container(self.client, cid)
                except Exception:  # the engine is gone: the error that matters is exc
                    pass
            self._created.discard(cid)
            if isinstance(exc, SandboxCrashed):
                self.client.ping()  # a container that stopped while starting: is it the engine?
            if isinstance(exc, (SandboxCrashed, docker.errors.APIError)):
                raise SandboxError(self._start_failure(exc, said)) from exc
            raise
        with self._lock:
            if self._closed:
                worker.kill()
                self._created.discard(cid)
                raise SandboxError("The sandbox was closed while a container was starting.")
            self._all.add(worker)
        return worker

    def _no_shared_files(self, why: str) -> None:
        """The socket channel cannot work on this engine: probe result, or an honest error."""
        if self._forced != "socket":
            raise _NoSharedFiles(why)
        raise SandboxError(
            f"The sandbox runner could not reach its control channel (a unix socket in a "
            f"directory of this machine, bind-mounted at {INPUTS_MOUNT}) on "
            f"{describe(self.client)}: {why}. That engine does not see this machine's "
            "files; use channel 'auto' or 'attach' so that frames and inputs travel over "
            "the container's attach stream."
        )

    def _start_failure(self, exc: BaseException, said: str) -> str:
        """Why a container did not become ready, blaming the image only when it is the image."""
        engine = describe(self.client)
        told = f" Its runner said: {said[-600:]}" if said else ""
        text = f"{exc} {said}"
        if (
            RUNNER_DIR in said
            and "Traceback" in said
            or any(
                sign in text
                for sign in ("executable file not found", "exec format error", "can't open file", "python3: not found")
            )
        ):
            return (
                f"A sandbox container from {self.ref} started on {engine}, but the image "
                f"cannot run its runner: {exc}.{told} Rebuild the image with "
                "`selfheal sandbox build --rebuild`."
            )
        if isinstance(exc, SandboxCrashed) and "in time" in str(exc):
            return (
                f"A sandbox container from {self.ref} on {engine} did not report ready "
                f"within {READY_TIMEOUT_S:g} s ({exc}).{told} The engine may be "
                "overloaded; check `selfheal sandbox doctor`."
            )
        return (
            f"A sandbox container from {self.ref} did not start on {engine}: {exc}.{told} "
            "Check `selfheal sandbox doctor`."
        )

    @staticmethod
    def _write_inputs(directory: Path, blobs: Mapping[str, bytes]) -> dict[str, str]:
        """Socket channel: the pickles go into the container's read-only bind mount."""
        serialize.clear(directory)
        try:
            return serialize.write_blobs(blobs, directory)
        except OSError as exc:
            size_mb = sum(len(b) for b in blobs.values()) / 1e6
            raise SandboxError(
                f"The inputs ({size_mb:.0f} MB pickled) could not be written to "
                f"{directory.parent} ({exc.strerror or exc}). Free space there "
                "(it is memory-backed /dev/shm when available) or pass smaller inputs."
            ) from exc

    def _crashed(self, worker: Link, exc: SandboxCrashed, limits: Limits) -> ExecutionResult:
        """The container died under the candidate: OOM-killed, or the runner crashed."""
        state = worker.state()
        if state.get("ExitCode") == 137 and not state.get("OOMKilled"):
            # A SIGKILL of the runner (PID 1, which nothing inside can signal) that was
            # not the memory limit: the engine or a docker command stopped it.
            raise lost(self.client)
        if state.get("OOMKilled"):
            return ExecutionResult(
                status="oom",
                exit_code=137,
                message=(
                    f"The program used more than the memory limit ({limits.memory}) and the "
                    "kernel stopped its container. Use less memory or raise the limit."
                ),
            )
        log = worker.runner_log()
        return ExecutionResult(
            status="error",
            exit_code=state.get("ExitCode"),
            stderr=log[-2000:],
            error=ErrorInfo(type="SandboxCrash", message=str(exc)),
            message=(
                "The sandbox process running the program died unexpectedly; its container "
                "was replaced. The program may have killed it."
            ),
        )


#: Host threads gVisor's own sentry and gofer need beside the candidate's processes.
GVISOR_THREADS = 512


def _pids_limits(pids: int, runtime: str) -> dict[str, Any]:
    """The process limit as the runtime enforces it.

    runc: the container's pids cgroup counts the candidate's processes. gVisor
    (``runsc``): candidates' processes live inside its user-space kernel, while the
    cgroup counts the host threads of gVisor itself (its file proxy dies past ~22 of
    64), so the candidate is held by RLIMIT_NPROC, which gVisor counts per sandbox, and
    the cgroup only bounds gVisor's threads.
    """
    if runtime.startswith("runsc"):
        return {
            "pids_limit": pids + GVISOR_THREADS,
            "ulimits": [docker.types.Ulimit(name="nproc", soft=pids, hard=pids)],
        }
    return {"pids_limit": pids}


def _shm_dir() -> str | None:
    """/dev/shm when it is there (inputs then never touch a disk)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def pid_alive(pid: int) -> bool:
    """Whether a process of this host's is still there (an owner of containers or pods)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(client: docker.DockerClient) -> list[str]:
    """Remove ``selfheal`` containers whose owning process (on this host) is gone."""
    host = socket.gethostname()
    removed: list[str] = []
    try:
        found = client.api.containers(all=True, filters={"label": LABEL})
    except docker.errors.APIError:
        return removed
    for item in found:
        labels = item.get("Labels") or {}
        try:
            pid = int(labels.get(LABEL_PID, ""))
        except ValueError:
            continue
        if labels.get(LABEL_HOST) != host or pid_alive(pid):
            continue
        try:
            remove_container(client, item["Id"])
            removed.append(item["Id"])
        except docker.errors.APIError:
            pass
    for stale in Path(_shm_dir() or tempfile.gettempdir()).glob("selfheal-*-*"):
        owner = stale.name.split("-")[1]
        if owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(stale, ignore_errors=True)  # inputs of a process that died
    return removed
