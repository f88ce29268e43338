"""The offline image build without the engine: mirror discovery, versions, the runner's
sources. (Against the real engine and image: tests/sandbox/test_image.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from selfheal_jupyter.errors import EngineUnavailable, ImageBuildError
from selfheal_jupyter.sandbox import image, rootfs
from selfheal_jupyter.sandbox.engine import connect
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- apt sources

DEB822 = """\
Types: deb
# a comment line inside a stanza
URIs: http://security.example.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://disabled.example.invalid/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://src.example.invalid/debian
Suites: bookworm

Types: deb
URIs: cdrom:[Debian]/ http://main.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main contrib
"""

CLASSIC = """\
# deb http://commented.example.invalid/debian bookworm main
deb-src http://src.example.invalid/debian bookworm main
deb http://security.example.invalid/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://classic.example.invalid/debian bookworm main
"""


@pytest.fixture()
def no_override(monkeypatch):
    monkeypatch.delenv("SELFHEAL_APT_MIRROR", raising=False)


def test_mirror_from_deb822_picks_the_enabled_binary_stanza_of_the_suite(tmp_path, no_override):
    (tmp_path / "debian.sources").write_text(DEB822)
    mirror = rootfs.apt_mirror("bookworm", sources_dir=tmp_path, sources_list=tmp_path / "none")
    assert mirror == "http://main.example.invalid/debian"
    security = rootfs.apt_mirror("bookworm-security", sources_dir=tmp_path, sources_list=tmp_path / "none")
    assert security == "http://security.example.invalid/debian-security"


def test_mirror_falls_back_to_a_classic_sources_list(tmp_path, no_override):
    (tmp_path / "sources.list").write_text(CLASSIC)
    (tmp_path / "d").mkdir()
    mirror = rootfs.apt_mirror("bookworm", sources_dir=tmp_path / "d", sources_list=tmp_path / "sources.list")
    assert mirror == "http://classic.example.invalid/debian"


def test_mirror_prefers_deb822_over_classic_and_honours_the_override(tmp_path, no_override, monkeypatch):
    (tmp_path / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list").write_text(CLASSIC)
    kwargs = dict(sources_dir=tmp_path, sources_list=tmp_path / "sources.list")
    assert rootfs.apt_mirror("bookworm", **kwargs) == "http://main.example.invalid/debian"
    monkeypatch.setenv("SELFHEAL_APT_MIRROR", "http://override.example.invalid/debian")
    assert rootfs.apt_mirror("bookworm", **kwargs) == "http://override.example.invalid/debian"


def test_no_mirror_for_the_suite_says_what_to_do(tmp_path, no_override):
    (tmp_path / "debian.sources").write_text(DEB822)
    with pytest.raises(ImageBuildError, match="SELFHEAL_APT_MIRROR"):
        rootfs.apt_mirror("trixie", sources_dir=tmp_path, sources_list=tmp_path / "none")


def test_this_machine_has_a_suite_and_a_mirror(no_override):
    suite = rootfs.os_codename()
    assert suite, "/etc/os-release has no VERSION_CODENAME"
    assert rootfs.apt_mirror(suite).startswith(("http://", "https://", "file:/"))


def test_os_codename_reads_os_release(tmp_path):
    path = tmp_path / "os-release"
    path.write_text('NAME="Debian GNU/Linux"\nVERSION_CODENAME=trixie\nID=debian\n')
    assert rootfs.os_codename(path) == "trixie"
    path.write_text('NAME="Something"\n')
    assert rootfs.os_codename(path) is None
    assert rootfs.os_codename(tmp_path / "missing") is None


# --------------------------------------------------------------------------- versions


def test_version_covers_requirements_extras_and_runner_but_not_their_order():
    base = image.base_version()
    assert image.base_version(["scipy==1.17.1"]) != base
    assert image.base_version(["b==1", "a==2"]) == image.base_version(["a==2", "b==1", "a==2"])
    assert image.normalise_requirements(["# comment", "", "numpy==2.4.6  # pinned", " x>=1 "]) == [
        "numpy==2.4.6",
        "x>=1",
    ]
    runner = image.runner_files()
    assert runner is not None and "__main__.py" in runner and "server.py" in runner
    assert list(runner) == sorted(runner)
    assert image.image_version(runner=runner) == image.IMAGE_VERSION
    assert image.image_version(runner=dict(reversed(runner.items()))) == image.IMAGE_VERSION
    for name in runner:  # any byte of any file of the folder counts
        changed = {**runner, name: runner[name] + b"\n# changed\n"}
        assert image.image_version(runner=changed) != image.IMAGE_VERSION, name
    assert image.image_version(runner={**runner, "extra.py": b""}) != image.IMAGE_VERSION
    renamed = {("moved.py" if k == "server.py" else k): v for k, v in runner.items()}
    assert image.image_version(runner=renamed) != image.IMAGE_VERSION
    assert image.image_version(["scipy==1.17.1"], runner=runner) != image.IMAGE_VERSION
    assert len(image.IMAGE_VERSION) == 12


def test_runner_files_are_every_python_file_of_the_folder(tmp_path):
    (tmp_path / "__main__.py").write_bytes(b"main")
    (tmp_path / "b.py").write_bytes(b"b")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_bytes(b"a")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"cache")
    (tmp_path / "notes.txt").write_bytes(b"not shipped")
    assert image.runner_files(tmp_path) == {"__main__.py": b"main", "b.py": b"b", "sub/a.py": b"a"}
    (tmp_path / "__main__.py").unlink()
    assert image.runner_files(tmp_path) is None  # nothing could start it
    assert image.runner_files(tmp_path / "absent") is None


def test_image_ref_uses_the_version_unless_a_tag_is_given():
    assert image.image_ref() == f"selfheal-sandbox:{image.IMAGE_VERSION}"
    assert image.image_ref("other") == f"other:{image.IMAGE_VERSION}"
    assert image.image_ref("other:abc") == "other:abc"


def test_top_level_requirements_are_the_packaged_list():
    top = ROOT / "sandbox" / "requirements.txt"
    assert top.read_text() == image.REQUIREMENTS_FILE.read_text()
    pins = image.read_requirements()
    for name in ("numpy", "pandas", "matplotlib"):
        assert any(line.startswith(f"{name}==") for line in pins), name


# --------------------------------------------------------------------------- cleanup


def test_scratch_dir_is_removed_when_the_build_is_interrupted():
    with pytest.raises(KeyboardInterrupt), rootfs.scratch_dir() as work:
        (work / "rootfs" / "usr").mkdir(parents=True)
        (work / "rootfs" / "usr" / "file").write_bytes(b"x" * 1000)
        raise KeyboardInterrupt
    assert not work.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")
def test_remove_tree_unmounts_and_never_deletes_through_a_mount(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    tree = tmp_path / "build"
    proc = tree / "rootfs" / "proc"
    proc.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(outside), str(proc)], check=True)
    try:
        assert rootfs.mounts_under(tree) == [str(proc)]
        rootfs.remove_tree(tree)
    finally:
        subprocess.run(["umount", "-l", str(proc)], capture_output=True)
    assert not tree.exists()
    assert (outside / "precious").read_text() == "keep me"


def test_a_failing_step_names_itself_and_shows_the_log_tail():
    with pytest.raises(ImageBuildError) as err:
        rootfs.run(["sh", "-c", "echo something broke >&2; exit 3"], "demo step")
    assert "demo step" in str(err.value) and "exit 3" in str(err.value)
    assert "something broke" in str(err.value)


def test_an_interrupted_step_stops_its_process():
    """An interruption that lands while the step runs (sent once its process exists, the
    way Ctrl-C lands mid-build) stops that process before the exception goes on."""
    marker = f"{37 + uuid.uuid4().int % 1000}.{os.getpid()}"

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    def running() -> list[str]:
        return [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid) == ["sleep", marker]]

    def interrupt_once_running() -> None:
        wait_until(running, 60, "the step's process", interval=0.01)
        os.kill(os.getpid(), signal.SIGALRM)

    previous = signal.signal(signal.SIGALRM, stop)
    watcher = threading.Thread(target=interrupt_once_running, daemon=True)
    watcher.start()
    try:
        with pytest.raises(Stop):
            rootfs.run(["sleep", marker], "sleep")
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert running() == []


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


@pytest.mark.parametrize("host", ["unix:///nonexistent/selfheal.sock", "tcp://127.0.0.1:9"])
def test_unreachable_docker_host_is_named_in_the_error(monkeypatch, host):
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(EngineUnavailable) as err:
        connect(timeout=2)
    assert "DOCKER_HOST" in str(err.value) and host in str(err.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_a_socket_this_user_may_not_use_is_explained(monkeypatch):
    """A real unix socket only root may use, connected to from a child that dropped to
    user 65534."""
    import socket
    import tempfile

    folder = tempfile.mkdtemp(dir="/dev/shm")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "docker.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    os.chmod(path, 0o600)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                connect(timeout=2)
                message = "connected"
            except EngineUnavailable as exc:
                message = str(exc)
            os.write(write, message.encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            message = pipe.read().decode()
        os.waitpid(pid, 0)
    finally:
        server.close()
        os.unlink(path)
        os.rmdir(folder)
    assert "may not use it" in message and "docker' group" in message, message
