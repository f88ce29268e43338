"""Shared fixtures: the real Docker engine, the real sandbox image, one warm sandbox.

Nothing here is mocked. The image must exist (CI builds it before the tests); when it
does not, the tests FAIL and say how to build it: a silently skipped sandbox suite
would hide exactly the breakage it is there to catch.

The tests live in lanes, one folder for what they need (``make unit`` runs the first,
``make test`` all of them): ``unit/`` needs no engine, model, browser or network;
``sandbox/`` the Docker engine; ``notebook/`` the engine under an IPython shell, a
kernel or nbclient; ``engines/`` a second engine (root); ``hub/`` a JupyterHub with Unix
students (root); ``browser/`` Chromium; ``model/`` the embedded model's weights.

The marker ``sandbox`` says a test needs more than Python: every test outside ``unit/``
has it, and so has one that takes an engine fixture (below) or is marked ``slow``,
``browser``, ``engines`` or ``hub``; any other that reaches the engine (through
``selfheal``, a kernel, a notebook shell) says so itself. A ``sandbox`` test under
``unit/`` stops the collection, naming the folders it may go to.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import pytest
from IPython.core.interactiveshell import InteractiveShell

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import EngineUnavailable, ImageMissing
from selfheal_jupyter.sandbox.docker import LABEL, LABEL_PID, DockerSandbox
from tests.waiting import wait_until

#: The fixtures that reach the Docker engine (taken directly or through another fixture),
#: or start a browser.
ENGINE_FIXTURES = frozenset({"docker_client", "sandbox_image", "sandbox", "docker_sandbox", "chromium"})
#: The fixtures that run pods on the local Kubernetes (tests/kubernetes_cluster.py).
KUBERNETES_FIXTURES = frozenset({"kubernetes_cluster", "kubernetes_sandbox", "kubernetes_cli"})
#: Markers whose tests need the embedded model, a browser, a second engine or a hub.
NEEDS_MORE_THAN_PYTHON = ("slow", "browser", "engines", "hub")


#: The folder of the lane without engine, model or browser.
UNIT_LANE = Path(__file__).parent / "unit"
#: Lanes whose tests run one after another in one process when the suite runs in
#: parallel (``pytest -n 2 --dist loadgroup``): one hub at a time may hold the service's
#: port, the second engines have fixed addresses, two embedded models would share two
#: cores, and one session starts and stops the local Kubernetes (every test on pods, in
#: any folder, is of that group).
ONE_AT_A_TIME = ("hub", "engines", "model", "kubernetes")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-sandbox",
        action="store_true",
        help="run the unit lane's recorded_sandbox tests on the real engine and write their records again",
    )


@pytest.hookimpl(tryfirst=True)  # before -m selects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    parallel = config.pluginmanager.hasplugin("xdist")
    for item in items:
        names = getattr(item, "fixturenames", ())
        if KUBERNETES_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.kubernetes)
        pods = item.get_closest_marker("kubernetes") is not None
        lane = "kubernetes" if pods else item.path.parent.name
        if parallel and lane in ONE_AT_A_TIME:
            item.add_marker(pytest.mark.xdist_group(lane))
        uses_engine = ENGINE_FIXTURES.intersection(names)
        in_unit_lane = item.path.is_relative_to(UNIT_LANE)
        needs_more = uses_engine or pods or any(item.get_closest_marker(name) for name in NEEDS_MORE_THAN_PYTHON)
        if needs_more or not in_unit_lane:
            item.add_marker(pytest.mark.sandbox)
        if in_unit_lane and item.get_closest_marker("sandbox"):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            "These tests need an engine, a model, a browser or a hub, so they cannot be in "
            "tests/unit/ (the lane that runs without them): move each to tests/sandbox/, "
            "tests/notebook/, tests/engines/, tests/hub/, tests/browser/, tests/model/ or "
            "tests/kubernetes/ (tests/conftest.py says which holds what):\n  " + "\n  ".join(misplaced)
        )
    # Pods last: the cluster's binaries may still be building (make test starts that
    # first, in the background) while everything else runs.
    items.sort(key=lambda item: item.get_closest_marker("kubernetes") is not None)


# A suite started in the background by a shell without job control inherits SIGINT
# ignored, and every program it starts inherits that too: the Ctrl-C and interrupt tests
# would meet a process that cannot be interrupted. Python's own handler, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def own_containers(client: docker.DockerClient, pid: int | None = None) -> list[dict]:
    """``selfheal`` containers owned by process ``pid`` (default: this test process)."""
    return client.api.containers(all=True, filters={"label": [LABEL, f"{LABEL_PID}={pid or os.getpid()}"]})


def wait_no_containers(client: docker.DockerClient, pid: int | None = None, timeout: float = 10.0) -> list[dict]:
    """What is left after ``timeout`` s (removal by the engine is asynchronous): [] as
    soon as nothing is."""
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not own_containers(client, pid), timeout, "the containers to go")
    return own_containers(client, pid)


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    from selfheal_jupyter.sandbox.engine import connect

    try:
        return connect()
    except EngineUnavailable as exc:
        pytest.fail(f"The sandbox tests need the Docker engine. {exc}", pytrace=False)


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """The ref of the current sandbox image; fails (never skips) when it is not built."""
    from selfheal_jupyter.sandbox.image import ensure_image

    try:
        return ensure_image(docker_client)
    except ImageMissing as exc:
        pytest.fail(f"{exc} (from the repository: selfheal sandbox build)", pytrace=False)


@pytest.fixture(scope="session")
def docker_sandbox(sandbox_image: str, docker_client: docker.DockerClient) -> Iterator[DockerSandbox]:
    """One warm, hardened sandbox shared by the whole test session."""
    sb = DockerSandbox.from_config(SelfHeal(pool_size=2), client=docker_client)
    sb.start()
    try:
        yield sb
    finally:
        sb.close()


@pytest.fixture(scope="session")
def sandbox(docker_sandbox: DockerSandbox) -> DockerSandbox:
    """The session's warm sandbox (a module whose tests hold on every backend overrides
    this with one parametrized over ``SANDBOX_BACKENDS``)."""
    return docker_sandbox


@pytest.fixture(scope="session")
def kubernetes_cluster(sandbox_image: str) -> Iterator[str]:
    """The local Kubernetes (started if it is not running, and then stopped at the end),
    with the sandbox image on its node; its kubeconfig."""
    from tests import kubernetes_cluster as cluster

    kubeconfig = cluster.running()
    started = kubeconfig is None
    if kubeconfig is None:
        kubeconfig = cluster.start()
    try:
        cluster.load_image(sandbox_image)
        yield kubeconfig
    finally:
        left = cluster.selfheal_pods(kubeconfig)
        if started:
            cluster.stop()
        assert not left, f"selfheal pods were left behind by the tests: {left}"


@pytest.fixture(scope="session")
def kubernetes_sandbox(kubernetes_cluster: str) -> Iterator[Any]:
    """One warm sandbox of pods shared by the session's ``kubernetes`` tests."""
    from selfheal_jupyter.factory import new_sandbox

    sb = new_sandbox(SelfHeal(sandbox_backend="kubernetes", kubeconfig=kubernetes_cluster, pool_size=2))
    sb.start()
    try:
        yield sb
    finally:
        sb.close()


@pytest.fixture(scope="session")
def kubernetes_cli(kubernetes_cluster: str) -> list[str]:
    """The flags that put a ``selfheal`` command's sandbox on the local Kubernetes."""
    return ["--sandbox-backend", "kubernetes", "--kubeconfig", kubernetes_cluster]


@pytest.fixture(scope="session", autouse=True)
def no_container_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """At the end of the session, no container created by this test process may remain."""
    yield
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception:
        return  # no engine: the sandbox tests failed already and said why
    left = wait_no_containers(client)
    if left:
        names = ", ".join(c["Id"][:12] for c in left)
        for c in left:
            client.api.remove_container(c["Id"], force=True)
        pytest.fail(f"selfheal containers were left behind by the tests: {names}", pytrace=False)


CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium: Playwright only drives it; nothing downloads a browser."""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for a module's tests; each test opens a context of its own
    (``chromium.new_context()``: no cookies or storage of another test's)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture()
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``XDG_CACHE_HOME``: the test's model cache and run files, not the user's."""
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def pid_gone(pid: int) -> bool:
    """True when ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


# --------------------------------------------------------------------------- the notebook
@contextmanager
def selfheal_shell(*cells: str) -> Iterator[InteractiveShell]:
    """An IPython shell with the extension loaded and ``cells`` run (config lines, a
    notebook's earlier cells); unloaded, reset and its warm containers closed after, as
    the kernel does at exit."""
    from selfheal_jupyter.factory import close_shared_sandboxes

    ip = InteractiveShell.instance()
    config = copy.deepcopy(ip.config)  # %config lines of one test must not reach the next
    ip.run_cell("%load_ext selfheal_jupyter", store_history=False)
    for cell in cells:
        ip.run_cell(cell, store_history=not cell.startswith("%"))
    try:
        yield ip
    finally:
        ip.run_cell("%unload_ext selfheal_jupyter", store_history=False)
        ip.reset()
        ip.config = config
        close_shared_sandboxes()


@pytest.fixture()
def shell() -> Iterator[InteractiveShell]:
    """The shell a notebook test runs its cells in, talking to the scripted model."""
    with selfheal_shell("%config SelfHeal.model = 'scripted-model'") as ip:
        yield ip
