"""One sandbox worker as the host sees it: the runner's frames, its log, its end.

The runner inside (``runner/``) speaks length-prefixed JSON frames, over a control
socket when the engine shares this machine's files, else over the worker's attach
stream. :class:`Link` hands out whole frames whatever carries them; :class:`Worker` is
a Docker container (its attach stream multiplexed with stderr, or the control socket),
``kubernetes.PodWorker`` a pod (its attach websocket). ``pool.PooledSandbox`` pools and
retires them.
"""

from __future__ import annotations

import base64
import json
import select
import shutil
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.utils import parse_bytes

from ..errors import SandboxError
from ..model import Limits

FRAME = struct.Struct(">I")
#: The largest result frame accepted (the runner caps a result at 64 MiB of JSON).
MAX_FRAME_BYTES = 160 << 20
STREAM_HEADER = struct.Struct(">BxxxI")
STDOUT = 1  # the attach stream's kind of a stdout chunk
#: Bytes of an input per ``put`` frame (base64 makes the frame a third bigger).
PUT_CHUNK_BYTES = 2 << 20


class SandboxCrashed(SandboxError):
    """A container stopped answering; used internally to replace it."""


def _received(sock: socket.socket, who: str) -> bytes:
    """What ``who`` (the container, the runner) sent on ``sock``; its end or a failed
    socket means the container is gone."""
    try:
        chunk = sock.recv(1 << 20)
    except OSError as exc:
        raise SandboxCrashed(f"{who}'s socket failed ({exc})") from exc
    if not chunk:
        raise SandboxCrashed(f"{who} stopped")
    return chunk


@dataclass(frozen=True)
class ContainerSpec:
    """The limits a container is created with (the rest of :class:`Limits` is per run)."""

    memory: str
    pids: int
    cpus: float
    tmpfs_size: str

    @classmethod
    def of(cls, limits: Limits) -> ContainerSpec:
        return cls(limits.memory, limits.pids, limits.cpus, limits.tmpfs_size)

    @property
    def memory_bytes(self) -> int:
        return int(parse_bytes(self.memory))


class Link:
    """One warm worker running the runner, as frames: what every backend shares.

    A backend's subclass says how bytes reach the runner (:meth:`_write`) and how they
    come back (:meth:`_receive`: frame bytes into ``frames``, the runner's stderr into
    ``log``), how it ends (:meth:`kill`) and what the engine says of it (:meth:`state`).
    """

    unit = "worker"

    def __init__(self, name: str, spec: ContainerSpec) -> None:
        self.name = name  # the container's id, the pod's name
        self.spec = spec
        self.frames = bytearray()  # frame bytes, as the runner wrote them
        self.log = bytearray()  # the runner's stderr, last few KB (for error messages)
        self.dead = False
        self.runs = 0
        self.hello: dict[str, Any] = {}  # the runner's ready frame (python, preloaded...)

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _receive(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for bytes and take them in; False when none came.
        Raises SandboxCrashed when the worker's stream ended."""
        raise NotImplementedError

    def _keep_log(self, data: bytes | bytearray) -> None:
        self.log = (self.log + data)[-4096:]

    def send(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode("utf-8")
        try:
            self._write(FRAME.pack(len(data)) + data)
        except (OSError, AttributeError) as exc:
            raise SandboxCrashed(f"the {self.unit} stopped accepting requests ({exc})") from exc

    def put(self, name: str, blob: bytes) -> None:
        """Send one input file as ``put`` frames (no shared files)."""
        for offset in range(0, max(len(blob), 1), PUT_CHUNK_BYTES):
            chunk = blob[offset : offset + PUT_CHUNK_BYTES]
            self.send(
                {
                    "op": "put",
                    "name": name,
                    "data": base64.b64encode(chunk).decode(),
                    "last": offset + PUT_CHUNK_BYTES >= len(blob),
                }
            )

    def _frame(self) -> dict[str, Any] | None:
        if len(self.frames) < FRAME.size:
            return None
        (size,) = FRAME.unpack_from(self.frames)
        if size > MAX_FRAME_BYTES:  # the runner never sends this much: it is not the runner
            raise SandboxCrashed(f"the {self.unit} sent a {size}-byte frame")
        if len(self.frames) < FRAME.size + size:
            return None
        data = bytes(self.frames[FRAME.size : FRAME.size + size])
        del self.frames[: FRAME.size + size]
        try:
            return json.loads(data)
        except ValueError as exc:  # not JSON, or not UTF-8: it is not the runner talking
            raise SandboxCrashed(f"the {self.unit} sent a frame that is not JSON ({exc})") from exc

    def poll(self, timeout: float) -> dict[str, Any] | None:
        """The next frame if one arrives within ``timeout`` s; raises SandboxCrashed on EOF."""
        frame = self._frame()
        if frame is not None:
            return frame
        end = time.monotonic() + timeout
        while True:
            got = self._receive(max(end - time.monotonic(), 0))
            if got:
                frame = self._frame()
                if frame is not None:
                    return frame
            if not got or time.monotonic() >= end:
                return None

    def runner_log(self) -> str:
        return self.log.decode("utf-8", errors="replace").strip()

    def alive(self) -> bool:
        """False when the worker went away while it was idle. Costs one look."""
        try:
            while self._receive(0):
                pass
        except (SandboxCrashed, OSError, ValueError):
            return False
        return True

    def state(self) -> dict[str, Any]:
        """How the worker ended, in Docker's words (``ExitCode``, ``OOMKilled``)."""
        return {}

    def kill(self) -> None:
        raise NotImplementedError


class Worker(Link):
    """One warm container and the sockets to talk to it.

    ``channel`` "socket": frames go over ``control``, a unix socket the runner connected
    to (host and runner talk directly, without dockerd and the shim in between: fewer
    wake-ups per run); the attach socket only carries the runner's stderr (kept for
    error messages) and tells us when the container stops. ``channel`` "attach": frames
    go over the attach socket itself (stdin; stdout demultiplexed from stderr). In both,
    closing the attach socket makes the container exit.
    """

    unit = "container"

    def __init__(
        self,
        client: docker.DockerClient,
        container_id: str,
        attach: Any,
        spec: ContainerSpec,
        input_dir: Path | None,
        channel: str | None,
    ) -> None:
        super().__init__(container_id, spec)
        self.client = client
        self.id = container_id
        self.attach = attach  # keeps docker-py's response object alive
        self.attach_raw: socket.socket = getattr(attach, "_sock", attach)
        self.control: socket.socket | None = None
        self.input_dir = input_dir  # the host directory bind-mounted at /inputs (socket)
        self.channel = channel  # None while the probe has not decided
        self.stream = bytearray()  # undemultiplexed bytes of the attach stream

    def _write(self, data: bytes) -> None:
        sink = self.control if self.channel == "socket" else self.attach_raw
        sink.sendall(data)  # type: ignore[union-attr]

    def _demux(self) -> None:
        while len(self.stream) >= STREAM_HEADER.size:
            kind, size = STREAM_HEADER.unpack_from(self.stream)
            if len(self.stream) < STREAM_HEADER.size + size:
                return
            payload = self.stream[STREAM_HEADER.size : STREAM_HEADER.size + size]
            del self.stream[: STREAM_HEADER.size + size]
            if kind == STDOUT and self.channel != "socket":
                self.frames += payload  # the runner's stdout carries only frames
            else:
                self._keep_log(payload)

    def _read_attach(self) -> None:
        self.stream += _received(self.attach_raw, "the container")
        self._demux()

    def connect(self, listener: socket.socket | None, timeout: float, closed: Callable[[], bool]) -> None:
        """Until the runner is reachable: it connects to ``listener`` (socket channel) or,
        when it cannot, writes its first frame on stdout (then the channel is "attach")."""
        end = time.monotonic() + timeout
        while self.channel is None:
            if closed():
                raise SandboxError("The sandbox was closed while a container was starting.")
            left = end - time.monotonic()
            if left <= 0:
                raise SandboxCrashed("the runner did not connect in time")
            watch = [self.attach_raw] + ([listener] if listener is not None else [])
            ready, _, _ = select.select(watch, [], [], min(left, 0.1))
            if self.attach_raw in ready:
                self._read_attach()
                if self.frames:
                    self.channel = "attach"
            if listener is not None and listener in ready and self.channel is None:
                self.control, _ = listener.accept()
                self.channel = "socket"

    def _receive(self, timeout: float) -> bool:
        watch = [self.attach_raw]
        if self.channel == "socket" and self.control is not None:  # set with the channel
            watch.append(self.control)
        ready, _, _ = select.select(watch, [], [], timeout)
        if self.attach_raw in ready:
            self._read_attach()
        if self.control is not None and self.control in ready:
            self.frames += _received(self.control, "the runner")
        return bool(ready)

    def state(self) -> dict[str, Any]:
        try:
            return self.client.api.inspect_container(self.id).get("State", {})
        except docker.errors.APIError:
            return {}

    def kill(self) -> None:
        """Close the sockets FIRST (a kill with the attach socket open can hang), remove."""
        self.dead = True
        for closer in (
            getattr(self.control, "close", None),
            getattr(self.attach, "close", None),
            self.attach_raw.close,
        ):
            try:
                if closer:
                    closer()
            except OSError:
                pass
        try:
            remove_container(self.client, self.id)
        except Exception:  # engine gone: the container exits by itself (its socket closed)
            pass
        if self.input_dir is not None:
            shutil.rmtree(self.input_dir, ignore_errors=True)


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    try:
        client.api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code not in (404, 409):  # 409: the engine is removing it already
            raise
