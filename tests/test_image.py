"""The offline image build: mirror discovery, versions, status, staleness, cleanup.

Against the real Docker engine and the real image (CI builds it before the tests with
`selfheal sandbox build`). No debootstrap runs here: the staleness tests rebuild only
the runner layer, on the real base.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import docker
import pytest

from selfheal_jupyter.errors import EngineUnavailable, ImageBuildError, ImageMissing
from selfheal_jupyter.sandbox import image, rootfs
from selfheal_jupyter.sandbox.engine import connect
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
TEST_REPO = "selfheal-sandbox-imgtest"


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


def _working_in(dirs: set[Path]) -> list[str]:
    """Pids of processes whose command line names one of ``dirs`` (debootstrap, chroot...)."""
    return [
        pid for pid in os.listdir("/proc") if pid.isdigit() and any(str(d) in " ".join(_cmdline(pid)) for d in dirs)
    ]


# --------------------------------------------------------------------------- engine


@pytest.mark.sandbox
def test_connect_reaches_the_engine():
    client = connect()
    try:
        assert client.ping()
        assert client.api.timeout >= 30  # the short timeout is only for the check
    finally:
        client.close()


@pytest.mark.parametrize("host", ["unix:///nonexistent/selfheal.sock", "tcp://127.0.0.1:9"])
def test_unreachable_docker_host_is_named_in_the_error(monkeypatch, host):
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(EngineUnavailable) as err:
        connect(timeout=2)
    assert "DOCKER_HOST" in str(err.value) and host in str(err.value)


# --------------------------------------------------------------------------- the real image


@pytest.fixture(scope="module")
def client(docker_client):
    client = docker_client
    yield client
    for img in client.images.list(name=TEST_REPO):
        for tag in img.tags:
            if not tag.startswith(f"{TEST_REPO}:"):
                continue  # the build cache may give the real image the same id
            try:
                client.images.remove(tag)
            except docker.errors.APIError:
                pass


def test_only_latest_left_is_still_current_and_build_restores_the_version_tag(client):
    ref = image.ensure_image(client)
    image_id = client.images.get(ref).id
    client.images.remove(ref)  # untag only: `latest` still names the image
    try:
        status = image.image_status(client)
        assert status.current and status.ref == f"{image.DEFAULT_IMAGE}:latest"
        assert image.build_image(client, log=lambda _: None).ref == ref
    finally:
        client.api.tag(image_id, image.DEFAULT_IMAGE, image.IMAGE_VERSION)
    assert client.images.get(ref).id == image_id


def test_the_built_image_is_present_and_current(client):
    ref = image.ensure_image(client)  # raises "run selfheal sandbox build" if not
    status = image.image_status(client)
    assert status.present and status.current
    assert status.ref == ref == image.image_ref()
    assert status.version == image.IMAGE_VERSION
    assert 100 < (status.size_mb or 0) < 600
    labels = client.images.get(ref).labels
    assert labels[image.LABEL_VERSION] == image.IMAGE_VERSION
    assert json.loads(labels[image.LABEL_EXTRAS]) == []
    assert client.images.get(f"{image.DEFAULT_IMAGE}:latest").id == client.images.get(ref).id


def test_build_is_a_fast_no_op_when_current(client):
    lines: list[str] = []
    before = client.images.get(f"{image.DEFAULT_IMAGE}:latest").id
    status = image.build_image(client, log=lines.append)
    assert status.current and "nothing to do" in lines[-1]
    assert client.images.get(f"{image.DEFAULT_IMAGE}:latest").id == before


def test_image_runs_hardened_as_nobody_with_pinned_libraries(client):
    ref = image.ensure_image(client)
    probe = """
import hashlib, importlib.util, json, os, sys
import numpy, pandas, matplotlib, matplotlib.pyplot as plt
fig = plt.figure(); plt.plot([1, 2, 3])
import io; buf = io.BytesIO(); fig.savefig(buf, format="png")
print(json.dumps({
    "uid": os.getuid(), "cwd": os.getcwd(), "env": dict(os.environ),
    "versions": {m.__name__: m.__version__ for m in (numpy, pandas, matplotlib)},
    "backend": matplotlib.get_backend(), "png": buf.getvalue()[:4].hex(),
    "pyc": os.path.exists(importlib.util.cache_from_source(pandas.core.frame.__file__)),
    "runner": {name: hashlib.sha256(open(os.path.join(sys.argv[1], name), "rb").read()).hexdigest()
               for name in os.listdir(sys.argv[1])},
    "fontcache": os.listdir(sys.argv[2]),
}))
"""
    container = client.containers.create(
        ref,
        ["python3", "-c", probe, image.RUNNER_DIR, image.MPL_CACHE_DIR],
        labels={"selfheal": "test-image"},
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,size=64m"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="512m",
        memswap_limit="512m",
        pids_limit=64,
        environment={},
    )
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0, container.logs().decode()
        report = json.loads(container.logs(stderr=False).decode())
    finally:
        container.remove(force=True)
    assert report["uid"] == 65534 and report["cwd"] == "/tmp"
    assert set(report["env"]) <= set(image.IMAGE_ENV) | {"HOSTNAME"}, report["env"]
    assert report["env"]["MPLBACKEND"] == "Agg" and report["backend"].lower() == "agg"
    assert report["png"] == "89504e47"
    pins = dict(line.split("==", 1) for line in image.read_requirements() if "==" in line)
    assert report["versions"] == {k: pins[k] for k in ("numpy", "pandas", "matplotlib")}
    assert report["pyc"], "library bytecode was not compiled at build time"
    shipped = image.runner_files()
    assert shipped is not None
    assert report["runner"] == {name: hashlib.sha256(data).hexdigest() for name, data in shipped.items()}
    assert any(name.startswith("fontlist") for name in report["fontcache"])


def test_missing_image_says_to_build(client):
    with pytest.raises(ImageMissing, match="selfheal sandbox build"):
        image.ensure_image(client, f"{TEST_REPO}-absent")
    status = image.image_status(client, f"{TEST_REPO}-absent")
    assert not status.present and not status.current and status.version is None


def test_build_refuses_a_tagged_name(client):
    with pytest.raises(ImageBuildError, match="without a tag"):
        image.build_image(client, f"{TEST_REPO}:v1")


def test_stale_runner_is_detected_and_only_the_runner_layer_is_rebuilt(client, monkeypatch):
    monkeypatch.setattr(image, "STALE_AFTER_S", 0.0)  # prune stale images of any age
    base_ref = f"{image.BASE_REPO}:{image.base_version()}"
    assert client.images.get(base_ref)  # built by `selfheal sandbox build`
    lines: list[str] = []
    image._build_runner_layer(
        client, base_ref, f"{TEST_REPO}:old", {"__main__.py": b"# an older runner\n"}, [], lines.append
    )
    client.api.tag(f"{TEST_REPO}:old", TEST_REPO, "latest", force=True)

    status = image.image_status(client, TEST_REPO)
    assert status.present and not status.current and status.version == "old"
    with pytest.raises(ImageMissing, match="out of date"):
        image.ensure_image(client, TEST_REPO)

    base_id = client.images.get(base_ref).id
    status = image.build_image(client, TEST_REPO, log=lines.append)
    assert status.current and status.ref == f"{TEST_REPO}:{image.IMAGE_VERSION}"
    assert any("reusing the base image" in line for line in lines)
    assert client.images.get(base_ref).id == base_id  # the base was not rebuilt
    assert image.ensure_image(client, TEST_REPO) == status.ref
    tags = {tag for img in client.images.list(name=TEST_REPO) for tag in img.tags}
    assert f"{TEST_REPO}:old" not in tags  # the stale image was pruned
    assert client.images.get(base_ref)  # the shared base was kept
    # the build cache gives the test image the real image's id: its tags must survive
    assert image.image_status(client).current
    assert client.images.get(image.image_ref())


def test_an_image_whose_runner_cannot_start_says_to_rebuild(client, monkeypatch):
    """A runner that dies at start-up with a traceback in its own files blames the image."""
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.errors import SandboxError
    from selfheal_jupyter.sandbox.docker import DockerSandbox

    shipped = image.runner_files()
    assert shipped is not None
    broken = {**shipped, "server.py": b"raise ImportError('a runner that cannot start')\n"}
    monkeypatch.setattr(image, "runner_files", lambda *_: broken)  # the image is "current"
    ref = f"{TEST_REPO}:{image.image_version()}"
    base_ref = f"{image.BASE_REPO}:{image.base_version()}"
    image._build_runner_layer(client, base_ref, ref, broken, [], lambda _: None)
    sandbox = DockerSandbox.from_config(SelfHeal(image=ref), pool_size=1, client=client)
    try:
        with pytest.raises(SandboxError, match="cannot run its runner") as info:
            sandbox.start()
    finally:
        sandbox.close()
    assert "selfheal sandbox build --rebuild" in str(info.value)
    assert "a runner that cannot start" in str(info.value)


def test_a_young_stale_image_is_kept_for_another_installed_version(client):
    """Two versions of the package on one machine must not untag each other's image."""
    base_ref = f"{image.BASE_REPO}:{image.base_version()}"
    image._build_runner_layer(
        client,
        base_ref,
        f"{TEST_REPO}:other",
        {"__main__.py": b"# another version's runner\n"},
        [],
        lambda _: None,
    )
    image._prune(client, TEST_REPO, keep=f"{TEST_REPO}:none", log=lambda _: None)
    tags = {tag for img in client.images.list(name=TEST_REPO) for tag in img.tags}
    assert f"{TEST_REPO}:other" in tags
    client.images.remove(f"{TEST_REPO}:other")


def test_an_explicit_ref_is_judged_by_the_extras_in_its_labels(client):
    base_ref = f"{image.BASE_REPO}:{image.base_version()}"
    extras = ["example-extra==1.0"]
    runner = image.runner_files()
    assert runner is not None
    version = image.image_version(extras, runner=runner)
    image._build_runner_layer(client, base_ref, f"{TEST_REPO}:{version}", runner, extras, lambda _: None)
    status = image.image_status(client, f"{TEST_REPO}:{version}")
    assert status.present and status.current and status.version == version
    assert image.ensure_image(client, TEST_REPO, extra_requirements=extras) == (f"{TEST_REPO}:{version}")
    assert version != image.IMAGE_VERSION  # not what the default inputs need


def test_a_build_stopped_by_sigterm_leaves_no_scratch_dir_nor_process(client):
    """A real base build (debootstrap from the apt mirror), stopped mid-way."""
    before = set(Path("/dev/shm").glob("selfheal-build-*")) | set(Path("/tmp").glob("selfheal-build-*"))
    build = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from selfheal_jupyter.sandbox import engine, image\n"
            f"image.build_image(engine.connect(), {TEST_REPO!r}, rebuild=True)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def new_scratch() -> set[Path]:
        assert build.poll() is None, "the build ended before it started debootstrap"
        return {
            p
            for p in set(Path("/dev/shm").glob("selfheal-build-*")) | set(Path("/tmp").glob("selfheal-build-*"))
            if p not in before and (p / "rootfs" / "debootstrap").exists()
        }

    # another build may hold the lock first
    scratch = wait_until(new_scratch, 120, "the build to start debootstrap")
    # mid-debootstrap: a process working in the scratch dir is running
    wait_until(lambda: _working_in(scratch) or build.poll() is not None, 120, "a process in the scratch dir")
    assert _working_in(scratch), "no process ever worked in the scratch dir"
    build.send_signal(signal.SIGTERM)
    out, _ = build.communicate(timeout=30)
    assert build.returncode != 0
    assert not any(p.exists() for p in scratch), out
    assert _working_in(scratch) == [], out
    assert image.image_status(client).current  # the real image was not touched


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
