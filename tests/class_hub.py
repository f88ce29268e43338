"""A real JupyterHub class for the service tests: Unix students, their venv, the hub.

Students are Unix users (``useradd``, not in group docker) who run a venv made from
Debian's ``/usr/bin/python3`` with the package installed without ``[local]`` (made once,
again only when the package's sources changed). The hub runs with the block that
``selfheal service --hub-config`` prints, its own ports, its proxy stopped by its pid
file. A student's notebook runs in the student's own process (``su``), with their hub
token and ``SELFHEAL_SERVICE_URL`` only.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import requests

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("SELFHEAL_STUDENT_VENV") or "/opt/selfheal-test/student-venv")
"""The students' venv (``$SELFHEAL_STUDENT_VENV``: one per checkout when several test at once)."""
STUDENTS = ("selfheal-s1", "selfheal-s2")
INSTRUCTOR = "selfheal-teacher"
COURSE = "cs101"
MODEL_KEY = "sk-class-key-" + "7f3a9c"
"""The service's model key: the scripted endpoint demands it; no student may see it."""
STUDENT_RUNNER = """
import sys, nbformat
from nbclient import NotebookClient

# As JupyterLab sends it: each execute request names its cell (``cellId`` in its metadata;
# a cell's ``lab_cell_id`` plays the same cell edited and run again).
current = {"id": ""}


def named(cell, cell_index):
    current["id"] = cell.metadata.get("lab_cell_id") or cell.get("id", "")


def started(notebook):
    kc = client.kc

    def execute(code, silent=False, store_history=True, user_expressions=None, allow_stdin=None, stop_on_error=True):
        content = dict(code=code, silent=silent, store_history=store_history, user_expressions=user_expressions or {},
                       allow_stdin=bool(allow_stdin), stop_on_error=stop_on_error)
        msg = kc.session.msg("execute_request", content, metadata={"cellId": current["id"]})
        kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    kc.execute = execute


nb = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(nb, kernel_name="python3", allow_errors=True, store_widget_state=True, timeout=900,
                        on_notebook_start=started, on_cell_start=named)
client.execute()
nbformat.write(nb, sys.argv[2])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check: Any, what: str, timeout: float = 120.0) -> Any:
    """Poll ``check`` until it returns something true (an event we cannot be told of)."""
    end = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


# ---------------------------------------------------------------- the students' machine
def _run(*cmd: str, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def ensure_user(name: str) -> Path:
    try:
        _run("id", name)
    except subprocess.CalledProcessError:
        _run("useradd", "-m", "-s", "/bin/bash", name)
    groups = _run("id", "-nG", name).stdout.split()
    assert "docker" not in groups, f"{name} must not be in group docker"
    return Path(f"/home/{name}")


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([*ROOT.joinpath("selfheal_jupyter").rglob("*.py"), ROOT / "pyproject.toml"]):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_student_venv() -> Path:
    """Debian's python3 venv with the package (no [local]) and nbclient; idempotent."""
    stamp = VENV / ".selfheal-sources"
    wanted = _sources_hash()
    if stamp.exists() and stamp.read_text() == wanted:
        return VENV
    if not (VENV / "bin" / "python").exists():
        VENV.parent.mkdir(parents=True, exist_ok=True)
        _run("/usr/bin/python3", "-m", "venv", str(VENV))
        _run(str(VENV / "bin" / "pip"), "install", "-q", "nbclient>=0.10", "ipykernel>=6")
    build = VENV.with_name(VENV.name + "-src")
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(
        ROOT, build, ignore=shutil.ignore_patterns(".git", "tests", "bench", "docs", "*.pyc", "__pycache__")
    )
    _run(str(VENV / "bin" / "pip"), "install", "-q", "--force-reinstall", "--no-deps", str(build))
    _run(str(VENV / "bin" / "pip"), "install", "-q", str(build))  # its dependencies, once
    os.chmod(VENV.parent, 0o755)
    stamp.write_text(wanted)
    return VENV


# ---------------------------------------------------------------- the hub
@dataclass
class Hub:
    folder: Path
    port: int
    admin_token: str
    proc: subprocess.Popen | None = None
    log: Path = field(init=False)
    service_port: int = 0
    """Where the service listens (students on the hub's machine can reach it directly)."""
    nofile: int | None = None
    """The hub's (and so its service's) limit of open files; None: this process's."""

    def __post_init__(self) -> None:
        self.log = self.folder / "hub.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service_url(self) -> str:
        return f"{self.url}/services/selfheal/"

    def api(self, method: str, path: str, token: str | None = None, **kw: Any) -> requests.Response:
        headers = {"Authorization": f"token {token or self.admin_token}"}
        return requests.request(method, f"{self.url}/hub/api/{path}", headers=headers, timeout=30, **kw)

    def token(self, user: str, **body: Any) -> str:
        response = self.api("POST", f"users/{user}/tokens", json={"note": "class test", **body})
        assert response.status_code in (200, 201), response.text
        return response.json()["token"]

    def start(self) -> None:
        env = {**os.environ, "OPENAI_API_KEY": MODEL_KEY}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(self.folder / "jupyterhub_config.py")],
                cwd=self.folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self._limit if self.nofile else None,
            )
        wait_until(self._up, "the hub to answer")
        wait_until(self.service_up, "the selfheal service to answer through the proxy")

    def _limit(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the hub exited: {self.log.read_text()[-3000:]}")
        try:
            return requests.get(f"{self.url}/hub/api/", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def service_up(self) -> bool:
        try:
            return requests.get(self.service_url + "api/health", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def service_pid(self) -> int | None:
        """The service's process (a child of the hub, running `selfheal service`)."""
        out = subprocess.run(["pgrep", "-f", "selfheal_jupyter.cli service"], capture_output=True, text=True).stdout
        for pid in map(int, out.split()):
            try:
                if str(self.folder) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    return pid
            except OSError:
                continue
        return None

    def stop_hub_only(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)

    def stop(self) -> None:
        """Stop the hub (it stops its service), its proxy by the pid file; then no
        container of the service may be left."""
        service = self.service_pid()
        self.stop_hub_only()
        pid_file = self.folder / "jupyterhub-proxy.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
        pid = self.service_pid()
        if pid is not None:  # the hub stops its services; a leftover would hold containers
            os.kill(pid, signal.SIGTERM)
        if service is not None:
            from tests.conftest import pid_gone, wait_no_containers

            wait_until(lambda: pid_gone(service), "the service to exit", 60)
            import docker

            client = docker.from_env(timeout=30)
            left = wait_no_containers(client, service, timeout=30)
            for c in left:
                client.api.remove_container(c["Id"], force=True)
            assert not left, f"the service left containers behind: {[c['Id'][:12] for c in left]}"


def hub_block(policy: Path, base_url: str, log: Path, *extra: str, listen: int) -> str:
    out = _run(
        sys.executable,
        "-m",
        "selfheal_jupyter.cli",
        "service",
        "--hub-config",
        "--policy",
        str(policy),
        "--listen",
        f"127.0.0.1:{listen}",
        f"--SelfHeal.base_url={base_url}",
        "--SelfHeal.model=scripted-model",
        f"--SelfHeal.service_log={log}",
        *extra,
    )
    return out.stdout


@contextmanager
def class_hub(
    folder: Path,
    policy: dict[str, Any],
    base_url: str,
    *extra: str,
    more_config: str = "",
    nofile: int | None = None,
    students: tuple[str, ...] = STUDENTS,
) -> Iterator[Hub]:
    """A hub with the students, the instructor, the course group and the selfheal block
    (``more_config``: lines for ``jupyterhub_config.py`` before the block; ``nofile``: the
    hub's, so the service's, open-file limit; ``students``: the course group)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    (folder / "policy.json").write_text(json.dumps(policy))
    hub = Hub(folder, free_port(), secrets.token_hex(16), service_port=free_port(), nofile=nofile)
    users = [*students, INSTRUCTOR]
    config = f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {hub.port}
c.JupyterHub.hub_port = {free_port()}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.JupyterHub.db_url = "sqlite:///{folder}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "{secrets.token_hex(8)}"
c.Authenticator.allowed_users = {set(users)!r}
c.Authenticator.admin_users = {{{INSTRUCTOR!r}}}
c.JupyterHub.load_groups = {{{COURSE!r}: {{"users": {list(students)!r}}}}}
c.JupyterHub.services = [{{"name": "class-test", "api_token": {hub.admin_token!r}}}]
c.JupyterHub.load_roles = [
    {{"name": "class-test", "scopes": ["admin:users", "tokens", "read:roles"], "services": ["class-test"]}}
]
"""
    config += more_config + hub_block(
        folder / "policy.json", base_url, folder / "service-log.jsonl", *extra, listen=hub.service_port
    )
    (folder / "jupyterhub_config.py").write_text(config)
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()


# ---------------------------------------------------------------- a student's process
def notebook(*cells: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def student_env(user: str, hub: Hub, token: str, notebook_path: str) -> dict[str, str]:
    return {
        "HOME": f"/home/{user}",
        "USER": user,
        "PATH": f"{VENV}/bin:/usr/bin:/bin",
        "SELFHEAL_SERVICE_URL": hub.service_url,
        "JUPYTERHUB_API_TOKEN": token,
        "JPY_SESSION_NAME": notebook_path,
    }


def start_student(
    user: str, nb: nbformat.NotebookNode, env: dict[str, str], name: str
) -> tuple[subprocess.Popen, Path]:
    """Run ``nb`` with nbclient in ``user``'s own process (``su``); returns the process
    and where the executed notebook will be."""
    home = Path(f"/home/{user}")
    work = home / "class-test"
    work.mkdir(exist_ok=True)
    shutil.chown(work, user, user)
    (work / "runner.py").write_text(STUDENT_RUNNER)
    source, done = work / f"{name}.ipynb", work / f"{name}.out.ipynb"
    done.unlink(missing_ok=True)
    nbformat.write(nb, source)
    for path in (work / "runner.py", source):
        shutil.chown(path, user, user)
    assignments = " ".join(f"{k}={_quote(v)}" for k, v in env.items())
    command = f"cd {work} && exec env -i {assignments} {VENV}/bin/python runner.py {source.name} {done.name}"
    proc = subprocess.Popen(
        ["su", user, "-s", "/bin/bash", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, done


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def run_student(user: str, nb: nbformat.NotebookNode, env: dict[str, str], name: str) -> nbformat.NotebookNode:
    proc, done = start_student(user, nb, env, name)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output.decode(errors="replace")[-4000:]
    return nbformat.read(done, as_version=4)


def cell_text(nb: nbformat.NotebookNode, index: int) -> str:
    """Everything a cell showed, as text (streams, errors, every mime type of displays)."""
    parts = []
    for out in nb.cells[index].get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
        else:
            parts.extend(str(v) for v in out.get("data", {}).values())
    return "\n".join(parts)


def last_json(nb: nbformat.NotebookNode, index: int) -> dict[str, Any]:
    lines = [ln for ln in cell_text(nb, index).splitlines() if ln.startswith("{")]
    assert lines, cell_text(nb, index)
    return json.loads(lines[-1])


def _cut(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Relay:
    """A TCP relay between a student's process and the hub's proxy (or a client and any
    local port) that keeps every byte sent back: what the process received, whatever it
    kept of it. :meth:`close` cuts every connection through it. ``links``: how many
    connections it relays; later ones are left waiting, never answered."""

    def __init__(self, target_port: int, links: int | None = None) -> None:
        import threading

        self.target_port = target_port
        self.links = links
        self.received = bytearray()
        self._lock = threading.Lock()
        self._links: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="relay").start()

    def _accept(self) -> None:
        import threading

        accepted = 0
        while self.links is None or accepted < self.links:
            accepted += 1
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._links += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, keep: bool) -> None:
        try:
            while data := source.recv(65536):
                if keep:
                    with self._lock:
                        self.received += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _cut(source, sink)

    def url(self, hub: Hub) -> str:
        return hub.service_url.replace(f":{hub.port}/", f":{self.port}/")

    def close(self) -> None:
        _cut(self._server)  # wakes the accept() under way (close alone leaves it listening)
        self._server.close()
        with self._lock:
            _cut(*self._links)
