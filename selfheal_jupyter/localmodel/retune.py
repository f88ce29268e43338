"""A shared server's threads follow the machine while it lives.

Why: llama.cpp fixes its thread counts when it loads the model, and the shared server
lives for hours. Started a minute after a busy job (the 1-minute load average still
counting that job) it chose 1 thread and kept it on an idle 2-core machine: every heal
ran at half speed until someone restarted it. So the shared server is a small
supervisor (:func:`selfheal_jupyter.localmodel.child.supervise`): it owns the port clients know, forwards their
connections to a model process (a *backend*), and every ``retune_s`` seconds decides
the threads again from the machine's load — minus the load its own backend puts on
it, which it measures from that process's CPU time. When the decision has held for a
few checks and the backend is between requests, it starts a backend with the new
counts, sends new connections there, lets the old one finish what it serves and
stops it. Clients keep their URL; none of their requests is cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .apikey import authorized
from .threads import ThreadCounts, auto_threads

OWN_WINDOW_S = 60.0
"""How far back the backend's CPU time is read (the span of the 1-minute load average)."""
AGREEING_CHECKS = 3
"""Checks in a row that must want the same new counts before the server switches."""
MIN_SWITCH_INTERVAL_S = 60.0
BACKEND_READY_S = 180.0
DRAIN_S = 120.0
"""How long the old backend may take to finish the requests it serves after a switch."""


# ----------------------------------------------------------------------------- deciding
@dataclass
class OwnLoad:
    """The CPU the server's own backend used over the last :data:`OWN_WINDOW_S` seconds,
    in cores: the part of the load average that is its own generation."""

    samples: deque = field(default_factory=deque)

    def sample(self, cpu_seconds: float, now: float) -> None:
        self.samples.append((now, cpu_seconds))
        while len(self.samples) > 2 and now - self.samples[1][0] >= OWN_WINDOW_S:
            self.samples.popleft()

    def cores(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, c0), (t1, c1) = self.samples[0], self.samples[-1]
        return max(0.0, (c1 - c0) / (t1 - t0)) if t1 > t0 else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its threads (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


@dataclass
class Retuner:
    """Decides when the counts change: the same new counts in :data:`AGREEING_CHECKS`
    checks in a row, at least :data:`MIN_SWITCH_INTERVAL_S` after the last switch."""

    cores: int
    current: ThreadCounts
    last_switch: float = -1e18
    pending: ThreadCounts | None = None
    agreeing: int = 0

    def observe(self, load: float, own: float, now: float) -> ThreadCounts | None:
        """The counts to switch to now, or None. ``load``: the 1-minute load average;
        ``own``: the cores the server's own backend used (not counted as load)."""
        want = auto_threads(self.cores, max(0.0, load - own))
        if want == self.current:
            self.pending, self.agreeing = None, 0
            return None
        self.agreeing = self.agreeing + 1 if want == self.pending else 1
        self.pending = want
        if self.agreeing >= AGREEING_CHECKS and now - self.last_switch >= MIN_SWITCH_INTERVAL_S:
            return want
        return None

    def switched(self, counts: ThreadCounts, now: float) -> None:
        self.current, self.last_switch = counts, now
        self.pending, self.agreeing = None, 0


# ----------------------------------------------------------------------------- forwarding
def _copy(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class Proxy:
    """Forwards each client connection, byte for byte, to the backend of the moment."""

    def __init__(self, listener: socket.socket, target: tuple[str, int]) -> None:
        self.listener = listener
        self.target = target
        self._lock = threading.Lock()
        self._pipes: dict[tuple[str, int], set[socket.socket]] = {}

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        target = self.target
        try:
            upstream = socket.create_connection(target, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        with self._lock:
            self._pipes.setdefault(target, set()).update((client, upstream))
        back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
        back.start()
        _copy(client, upstream)
        back.join()
        with self._lock:
            self._pipes.get(target, set()).difference_update((client, upstream))
        client.close()
        upstream.close()

    def close_to(self, target: tuple[str, int]) -> None:
        """Close the (idle) connections still open to ``target``: a client's next request
        on one reconnects, to the new backend."""
        with self._lock:
            pipes = self._pipes.pop(target, set())
        for sock in pipes:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# ----------------------------------------------------------------------------- backends
@dataclass
class Backend:
    """A model process (``child`` without ``--idle-s``) that lives as long as we do."""

    process: subprocess.Popen[bytes]
    url: str
    counts: ThreadCounts

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.split("//", 1)[1].rsplit(":", 1)
        return host, int(port)

    def busy(self) -> bool:
        """A request is being served (or the backend cannot say)."""
        try:
            with urllib.request.urlopen(authorized(self.url + "/metrics"), timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return True
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if not line.startswith("#") and name.endswith(("requests_processing", "requests_deferred")):
                try:
                    if float(value) > 0:
                        return True
                except ValueError:
                    return True
        return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_backend(model_args: list[str], counts: ThreadCounts, log: Callable[[str], None]) -> Backend:
    """Start a backend with ``counts`` and return once it reported its URL."""
    read_end, write_end = os.pipe()
    cmd = [
        sys.executable,
        "-m",
        "selfheal_jupyter.localmodel.child",
        *model_args,
        "--threads",
        str(counts.generation),
        "--batch-threads",
        str(counts.batch),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--parent",
        str(os.getpid()),
        "--pdeathsig",
        "--ready-fd",
        str(write_end),
    ]
    process = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr, pass_fds=(write_end,)
    )
    os.close(write_end)
    buf = b""
    deadline = time.monotonic() + BACKEND_READY_S
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(read_end, selectors.EVENT_READ)
            while b"\n" not in buf and time.monotonic() < deadline and process.poll() is None:
                if sel.select(0.5):
                    data = os.read(read_end, 4096)
                    if not data:
                        break
                    buf += data
    finally:
        os.close(read_end)
    if b"\n" not in buf:
        if process.poll() is None:
            process.kill()
        process.wait()
        raise RuntimeError(f"a backend with {counts} did not start")
    url = str(json.loads(buf.split(b"\n", 1)[0])["url"])
    log(f"backend {process.pid} with {counts.generation}/{counts.batch} threads on {url}")
    return Backend(process, url, counts)


def switch(proxy: Proxy, old: Backend, new: Backend, log: Callable[[str], None]) -> None:
    """New connections go to ``new``; ``old`` finishes what it serves, then stops."""
    proxy.target = new.address
    deadline = time.monotonic() + DRAIN_S
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        quiet = quiet + 1 if not old.busy() else 0
        time.sleep(0.5)
    proxy.close_to(old.address)
    old.stop()
    log(f"now {new.counts.generation}/{new.counts.batch} threads (backend {new.process.pid})")


def load_reader(path: str) -> Callable[[], float]:
    """The 1-minute load average, or the number in ``path`` (benches and tests)."""
    if path:

        def from_file() -> float:
            try:
                return float(Path(path).read_text().strip())
            except (OSError, ValueError):
                return 0.0

        return from_file
    from .threads import machine_load

    return machine_load
