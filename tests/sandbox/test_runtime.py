"""``SelfHeal.runtime``: every sandbox container is created with that Docker runtime.

Under gVisor (``runsc``) the candidate sees gVisor's own kernel (it reports release
4.4.0), not the host's; under the default it sees the host's. Skipped only when runsc
is not installed on this machine (``sandbox/setup-engine.sh`` installs and registers it).
"""

from __future__ import annotations

import os
import shutil

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import SandboxError
from selfheal_jupyter.sandbox.docker import LABEL, DockerSandbox

KERNEL = "import os\nprint(os.uname().release)\n"


@pytest.fixture(scope="module")
def runsc(docker_client) -> None:
    if shutil.which("runsc") is None:
        pytest.skip(
            "runsc (gVisor) is not installed here and could not be: "
            "`apt-get install -y runsc` (sandbox/setup-engine.sh does it as root)"
        )
    if "runsc" not in (docker_client.info().get("Runtimes") or {}):
        pytest.fail(
            "runsc is installed but the Docker engine does not offer it; run "
            "`bash sandbox/setup-engine.sh` as root (it registers it and reloads the "
            "engine)",
            pytrace=False,
        )


def runtimes_of(sb: DockerSandbox) -> set[str]:
    found = sb.client.api.containers(all=True, filters={"label": f"{LABEL}={sb.session}"})
    return {sb.client.api.inspect_container(c["Id"])["HostConfig"]["Runtime"] for c in found}


def test_candidates_run_under_runsc_when_the_trait_is_set(runsc, sandbox_image):
    with DockerSandbox.from_config(SelfHeal(runtime="runsc")) as sb:
        first = sb.execute(KERNEL)
        assert first.ok, first
        assert first.stdout == "4.4.0\n" != f"{os.uname().release}\n"  # gVisor's kernel
        assert runtimes_of(sb) == {"runsc"}
        second = sb.execute("def f(x):\n    return 1 / x\nf(0)\n")  # the same warm pool
        assert second.status == "error" and second.error is not None
        assert second.error.type == "ZeroDivisionError" and second.error.line == 2


FORKS = """\
import os, time
children = 0
try:
    for _ in range(300):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as exc:
    print("refused after", children, exc.errno)
"""


def test_the_process_limit_holds_under_runsc_and_the_pool_survives(runsc, sandbox_image):
    """gVisor's own threads do not count against the candidate: the limit is RLIMIT_NPROC
    of the run's uid inside the sandbox (a small one: each fork of the preloaded interpreter costs gVisor
    tens of MB, so a big fan-out meets the memory limit first)."""
    settings = SelfHeal(runtime="runsc", pids_limit=10)
    with DockerSandbox.from_config(settings) as sb:
        bomb = sb.execute(FORKS)
        assert bomb.ok, bomb
        words = bomb.stdout.split()
        assert words[:2] == ["refused", "after"] and words[3] == "11", bomb.stdout  # EAGAIN
        # The limit is the run's own uid's: the runner's processes no longer count, so
        # it may fork up to the limit (gVisor lets the uid's count reach it, not stop
        # one short as Linux does).
        assert 0 < int(words[2]) <= 10
        after = sb.execute("print('still here')")
        assert after.ok and after.stdout == "still here\n", after


def test_the_default_runtime_is_the_engines(sandbox_image):
    with DockerSandbox.from_config(SelfHeal()) as sb:
        result = sb.execute(KERNEL)
        assert result.ok and result.stdout == f"{os.uname().release}\n"
        assert runtimes_of(sb) == {"runc"}


def test_an_unknown_runtime_is_a_clear_error(sandbox_image):
    with pytest.raises(SandboxError, match="no runtime 'selfheal-no-such-runtime'.*setup-engine"):
        DockerSandbox.from_config(SelfHeal(runtime="selfheal-no-such-runtime")).start()
