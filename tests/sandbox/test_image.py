"""The offline image build: mirror discovery, versions, status, staleness, cleanup.

Against the real Docker engine and the real image (CI builds it before the tests with
`selfheal sandbox build`). No debootstrap runs here: the staleness tests rebuild only
the runner layer, on the real base.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from selfheal_jupyter.errors import ImageBuildError, ImageMissing
from selfheal_jupyter.sandbox import image
from selfheal_jupyter.sandbox.engine import connect
from tests.unit.test_image import _cmdline
from tests.waiting import wait_until

TEST_REPO = "selfheal-sandbox-imgtest"


def _working_in(dirs: set[Path]) -> list[str]:
    """Pids of processes whose command line names one of ``dirs`` (debootstrap, chroot...)."""
    return [
        pid for pid in os.listdir("/proc") if pid.isdigit() and any(str(d) in " ".join(_cmdline(pid)) for d in dirs)
    ]


#: One worker for the module when the suite runs in parallel: its tests build, tag and
#: prune the same test repository.
pytestmark = pytest.mark.xdist_group("image")

# --------------------------------------------------------------------------- engine


@pytest.mark.sandbox
def test_connect_reaches_the_engine():
    client = connect()
    try:
        assert client.ping()
        assert client.api.timeout >= 30  # the short timeout is only for the check
    finally:
        client.close()


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
    """The real image under ``latest`` alone (no version tag) is current, and a build puts
    the version tag back without building. In a repository of its own: the real image's
    tags stay for the tests that run containers of it meanwhile."""
    image_id = client.images.get(image.ensure_image(client)).id
    client.api.tag(image_id, TEST_REPO, "latest")
    try:
        status = image.image_status(client, TEST_REPO)
        assert status.current and status.ref == f"{TEST_REPO}:latest"
        restored = image.build_image(client, TEST_REPO, log=lambda _: None).ref
        assert restored == f"{TEST_REPO}:{image.IMAGE_VERSION}"
        assert client.images.get(restored).id == image_id
    finally:  # the next tests start from a test repository without them
        for tag in ("latest", image.IMAGE_VERSION):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(f"{TEST_REPO}:{tag}")


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
