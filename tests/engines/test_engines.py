"""The sandbox on engines that do not share this machine's files.

``sandbox/second-engine.sh`` starts each engine in its own mount namespace with a
private ``/dev/shm`` and ``/tmp`` (so the client's directories do not exist there, as
on another machine), listening on TCP: a second ``dockerd``, and Podman's Docker API
(``podman system service``) when Podman is installed. For each, the image is built
there with ``selfheal sandbox build``, the sandbox tests below run against it, then
``selfheal sandbox doctor`` and one ``selfheal run`` with an input DataFrame; at the
end no container of this process may be left on it, and the engine is stopped.

The first engine start and image build cost ~1.5 min each on a fresh machine; the
engines keep their images under /var/lib/selfheal-engines, so later runs reuse them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import numpy as np
import pandas as pd
import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import SandboxError
from selfheal_jupyter.sandbox.docker import DockerSandbox
from selfheal_jupyter.sandbox.image import ensure_image
from tests.conftest import own_containers, wait_no_containers

# The same tests as on the local engine, collected here again with this module's fixtures:
# results, inputs, timeout, cancel, hardening, containers that go away.
from tests.sandbox.test_sandbox import (  # noqa: F401
    run,
    test_a_supervisor_that_dies_fails_the_run_and_the_pool_recovers,
    test_cancel_kills_a_running_program,
    test_candidates_are_isolated_from_each_other,
    test_close_removes_every_container,
    test_correct_program,
    test_figure_is_returned_as_png,
    test_fork_bomb_is_contained_by_the_pids_limit,
    test_host_backstop_kills_a_stuck_container,
    test_host_environment_is_invisible,
    test_inputs_dataframe_and_dict,
    test_kernel_oom_kill_is_reported_as_oom,
    test_key_error_inside_pandas_keeps_only_candidate_frames,
    test_keyboard_interrupt_mid_run_removes_the_container,
    test_memory_error_is_reported_as_oom_with_its_line,
    test_network_is_refused,
    test_output_flood_is_stopped_at_the_cap,
    test_root_is_read_only_and_tmp_writable,
    test_tests_block_per_statement,
    test_the_runner_refuses_the_program_s_signals,
    test_timeout,
    test_unpicklable_input_names_the_variable,
    test_unprivileged_user_no_capabilities_and_limits,
)
from tests.scripted_server import ScriptedServer
from tests.waiting import wait_until

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "sandbox" / "second-engine.sh"


def engine_script(action: str, kind: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), action, kind], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module", params=["docker", "podman"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """``DOCKER_HOST`` of a started engine with the current image; stopped afterwards."""
    kind = request.param
    if os.geteuid() != 0:
        pytest.fail(
            "The engine tests start engines in their own mount namespace and need "
            "root (deselect them with -m 'not engines').",
            pytrace=False,
        )
    if kind == "podman" and shutil.which("podman") is None:
        pytest.skip(
            "podman is not installed (SELFHEAL_WITH_PODMAN=1 sandbox/setup-engine.sh installs it; make test does)"
        )
    started = engine_script("start", kind)
    try:
        if started.returncode != 0:
            if kind == "podman":
                pytest.skip(f"the Podman service did not start: {started.stderr[-1500:]}")
            pytest.fail(f"the second dockerd did not start: {started.stderr[-1500:]}", pytrace=False)
        host = started.stdout.strip().rpartition("DOCKER_HOST=")[2]
        build = subprocess.run(
            [sys.executable, "-m", "selfheal_jupyter", "sandbox", "build"],
            capture_output=True,
            text=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, DOCKER_HOST=host),
        )
        assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
        yield host
    finally:
        stopped = engine_script("stop", kind)
        assert stopped.returncode == 0, stopped.stderr
        assert engine_script("status", kind).returncode == 1  # really gone


@pytest.fixture(scope="module")
def docker_client(engine: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=engine, timeout=60)
    try:
        yield client
        left = wait_no_containers(client)
        assert left == [], f"containers left on {engine}: {[c['Id'][:12] for c in left]}"
    finally:
        client.close()


@pytest.fixture(scope="module")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    return ensure_image(docker_client)


@pytest.fixture(scope="module")
def sandbox(sandbox_image: str, docker_client: docker.DockerClient) -> Iterator[DockerSandbox]:
    sb = DockerSandbox.from_config(SelfHeal(pool_size=2), client=docker_client)
    sb.start()
    try:
        yield sb
    finally:
        sb.close()


@pytest.fixture(autouse=True)
def no_stray_container_after_the_test(request, sandbox, docker_client):
    """After each test, every container of this process on the engine is the shared pool's."""
    yield

    def stray() -> list[str]:
        own = own_containers(docker_client)
        return [c["Id"][:12] for c in own if c["Labels"].get("selfheal") != sandbox.session]

    wait_until(lambda: not stray(), 10, lambda: f"the containers {request.node.name} left to go: {stray()}")


# --------------------------------------------------------------------------- the transport
def test_frames_and_inputs_take_the_attach_stream(sandbox, docker_client):
    assert sandbox.channel == "attach"
    with (
        pytest.raises(SandboxError, match="could not reach its control channel.*tcp://127"),
        DockerSandbox.from_config(SelfHeal(pool_size=1), client=docker_client, channel="socket"),
    ):
        pass


def test_a_large_input_arrives_whole_and_is_gone_after_its_run(sandbox):
    values = np.arange(3_000_000, dtype=np.int64).reshape(-1, 3)  # 24 MB: 12 put frames
    df = pd.DataFrame(values, columns=["a", "b", "c"])
    r = run(
        sandbox,
        """\
        import os
        print(int(df.to_numpy().sum()), df.shape, os.listdir("/inputs"))
        """,
        inputs={"df": df},
    )
    assert r.status == "ok", r
    assert r.stdout == f"{int(values.sum())} (1000000, 3) ['input0.pkl']\n"
    assert run(sandbox, "import os\nprint(os.listdir('/inputs'))").stdout == "[]\n"


def test_each_run_is_a_principal_of_its_own(sandbox):
    """The uid switch works on this engine too (its user namespace may map fewer ids):
    the other template's idle candidate and the runner are out of the program's reach."""
    r = run(
        sandbox,
        """\
        import os, signal
        parents = {}
        for e in filter(str.isdigit, os.listdir("/proc")):
            with open(f"/proc/{e}/stat") as f:
                parents[int(e)] = int(f.read().rsplit(")", 1)[1].split()[1])
        other = next(p for p, pp in parents.items() if pp == 1 and p != os.getppid())
        idle = next(p for p, pp in parents.items() if pp == other)
        for what, act in (("kill", lambda: os.kill(idle, signal.SIGKILL)),
                          ("stop", lambda: os.kill(other, signal.SIGSTOP)),
                          ("mem", lambda: open(f"/proc/{idle}/mem", "rb")),
                          ("fd", lambda: os.listdir(f"/proc/{idle}/fd"))):
            try:
                act()
                print(what, "DONE")
            except OSError as exc:
                print(what, exc.errno)
        print(os.getuid() not in (0, 65534))
        """,
    )
    assert r.status == "ok", r
    assert r.stdout.splitlines() == ["kill 1", "stop 1", "mem 13", "fd 13", "True"], r.stdout


# --------------------------------------------------------------------------- the commands
def cli(*args: str, host: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env.update(DOCKER_HOST=host, OPENAI_API_KEY="test-key")
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_an_oom_kill_writes_nothing_where_the_tests_run(sandbox):
    """Podman's conmon drops an empty file ``oom`` into its working directory when it sees
    an OOM kill: the engine works in its own state folder, never in its caller's (the
    repository's root, for a test run)."""
    stray = Path.cwd() / "oom"
    before = stray.stat().st_mtime_ns if stray.exists() else None
    r = run(sandbox, "import mmap\nm = mmap.mmap(-1, 1 << 30)\nfor i in range(0, 1 << 30, 4096):\n    m[i] = 1\n")
    assert r.status == "oom", r
    assert (stray.stat().st_mtime_ns if stray.exists() else None) == before


def test_doctor_is_green(engine):
    proc = cli("sandbox", "doctor", host=engine)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 4, proc.stdout + proc.stderr
    assert all(line.startswith("ok") for line in lines), proc.stdout
    assert "attach stream" in lines[2], lines[2]


def test_selfheal_run_with_an_input_dataframe(engine, tmp_path):
    df_path = tmp_path / "df.pkl"
    pd.DataFrame({"x": [1, 2, 3]}).to_pickle(df_path)
    tests = tmp_path / "tests.py"
    tests.write_text("assert total == 6\n")
    wrong = "```python\ntotal = df['x'].sum() + undefined_thing\n```"
    right = "```python\ntotal = int(df['x'].sum())\nprint('total is', total)\n```"
    with ScriptedServer([wrong, right]) as server:
        proc = cli(
            "run",
            "Sum column x of df into total",
            "--input",
            f"df={df_path}",
            "--tests",
            str(tests),
            "--base-url",
            server.base_url,
            "--model",
            server.model,
            "--max-iterations",
            "3",
            "--no-plan",
            "--json",
            host=engine,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    assert record["outcome"] == "success"
    first, second = record["iterations"]
    assert first["result"]["error"]["type"] == "NameError"
    assert "total is 6" in second["result"]["stdout"]
