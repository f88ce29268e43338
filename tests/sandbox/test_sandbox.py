"""The sandbox against the real engine and the real image: results and hardening.

Most tests share the session's warm ``sandbox``; only those that must lose a
container (a crashed runner, the host backstop, an interrupt) pay for a new one. The
contract (results, limits, hardening) holds on every backend: those tests run on the
Docker sandbox and on pods of the local Kubernetes (``kubernetes``-marked).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pandas as pd
import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import BadInput, SandboxError
from selfheal_jupyter.model import Limits
from selfheal_jupyter.sandbox.base import Sandbox
from selfheal_jupyter.sandbox.docker import LABEL, DockerSandbox, sweep_stale
from tests.conftest import own_containers, wait_no_containers
from tests.kubernetes_cluster import SANDBOX_BACKENDS
from tests.waiting import wait_until

#: A test of the Docker backend itself (its channels, containers, engine).
docker_only = pytest.mark.parametrize("sandbox", ["docker"], indirect=True)


@pytest.fixture(params=SANDBOX_BACKENDS)
def sandbox(request):
    """The session's warm sandbox of each backend."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture(autouse=True)
def no_stray_container_after_the_test(request, docker_sandbox, docker_client):
    """After each test, every container of this process belongs to the shared sandbox."""
    yield

    def stray() -> list[str]:
        own = own_containers(docker_client)
        return [c["Id"][:12] for c in own if c["Labels"].get("selfheal") != docker_sandbox.session]

    wait_until(lambda: not stray(), 10, lambda: f"the containers {request.node.name} left to go: {stray()}")


def make_limits(**options) -> Limits:
    """Limits from ``SelfHeal`` options (the one place of their defaults)."""
    return SelfHeal(**options).limits()


def make_sandbox(*, client=None, channel: str = "auto", **options) -> DockerSandbox:
    return DockerSandbox.from_config(SelfHeal(**options), client=client, channel=channel)


def run(sandbox, code: str, **kw):
    return sandbox.execute(textwrap.dedent(code), **kw)


# --------------------------------------------------------------------------- results
def test_is_a_sandbox(sandbox):
    assert isinstance(sandbox, Sandbox)


def test_correct_program(sandbox):
    r = run(sandbox, "x = 6 * 7\nprint('answer', x)\n")
    assert r.status == "ok" and r.exit_code == 0
    assert r.stdout == "answer 42\n"
    assert r.stderr == "" and r.error is None
    assert r.duration_s > 0  # how long: bench/sandbox.py


def test_name_error_line_and_frames(sandbox):
    r = run(sandbox, "a = 1\nb = 2\nprint(c)\n")
    assert r.status == "error" and r.exit_code == 1
    assert r.error.type == "NameError" and "'c'" in r.error.message
    assert r.error.line == 3
    assert [(f.line, f.source) for f in r.error.frames] == [(3, "print(c)")]
    assert r.error.locals == {"a": "1", "b": "2"}
    assert "NameError" in r.stderr and "line 3" in r.stderr


def test_zero_division_line(sandbox):
    r = run(sandbox, "values = [1, 2]\ntotal = sum(values)\nmean = total / 0\n")
    assert r.error.type == "ZeroDivisionError" and r.error.line == 3
    assert r.error.frames[-1].source == "mean = total / 0"


def test_key_error_inside_pandas_keeps_only_candidate_frames(sandbox):
    r = run(
        sandbox,
        """\
        import pandas as pd
        df = pd.DataFrame({"price": [1.0, 2.0]})
        def total(frame):
            return frame["prices"].sum()
        print(total(df))
        """,
    )
    assert r.error.type == "KeyError" and r.error.message == "'prices'"
    assert r.error.line == 4
    assert [(f.function, f.line) for f in r.error.frames] == [("<module>", 5), ("total", 4)]
    assert all(f.file == "candidate.py" for f in r.error.frames)
    assert r.error.locals["frame"].startswith("DataFrame shape=(2, 1)")
    # stderr is what `python3 FILE` prints (the library's chain included); the structured
    # frames above are the program's own
    assert r.stderr.rstrip().endswith("KeyError: 'prices'")


def test_syntax_error_line(sandbox):
    r = run(sandbox, "x = 1\nif x > 0\n    print(x)\n")
    assert r.status == "error" and r.error.type == "SyntaxError"
    assert r.error.line == 2
    assert r.error.frames[-1].source == "if x > 0"


def test_nested_function_frames_and_locals(sandbox):
    r = run(
        sandbox,
        """\
        def outer(n):
            return inner(n + 1)

        def inner(m):
            items = list(range(m))
            return items[m]

        outer(3)
        """,
    )
    assert r.error.type == "IndexError" and r.error.line == 6
    assert [(f.function, f.line, f.source) for f in r.error.frames] == [
        ("<module>", 8, "outer(3)"),
        ("outer", 2, "return inner(n + 1)"),
        ("inner", 6, "return items[m]"),
    ]
    assert r.error.locals == {"m": "4", "items": "[0, 1, 2, 3]"}


def test_long_locals_are_truncated(sandbox):
    r = run(sandbox, "big = 'x' * 100000\nnums = list(range(100000))\n1/0\n")
    assert len(r.error.locals["big"]) < 200 and len(r.error.locals["nums"]) < 200


def test_system_exit_codes(sandbox):
    r = run(sandbox, "import sys\nprint('bye')\nsys.exit(3)\n")
    assert r.status == "error" and r.exit_code == 3 and r.stdout == "bye\n"
    assert r.error.type == "SystemExit" and r.error.line == 3
    r = run(sandbox, "import sys\nsys.exit(0)\n")
    assert r.status == "ok" and r.exit_code == 0 and r.error is None


def test_memory_error_is_reported_as_oom_with_its_line(sandbox):
    r = run(sandbox, "n = 3 * 1024 ** 3\nblock = bytearray(n)\n")
    assert r.status == "oom" and r.error.type == "MemoryError" and r.error.line == 2
    assert "memory" in r.message
    assert run(sandbox, "print('still here')").stdout == "still here\n"


def test_kernel_oom_kill_is_reported_as_oom(sandbox):
    # Shared anonymous memory escapes the soft RLIMIT_DATA: the cgroup limit (512m)
    # is what stops it, through the kernel OOM killer.
    r = run(
        sandbox,
        """\
        import mmap
        m = mmap.mmap(-1, 1 << 30)
        for i in range(0, 1 << 30, 4096):
            m[i] = 1
        print("never")
        """,
    )
    assert r.status == "oom", r
    assert r.exit_code == 137 and "never" not in r.stdout
    assert run(sandbox, "print('recovered')").stdout == "recovered\n"


def test_timeout(sandbox):
    r = run(sandbox, "print('start')\nwhile True:\n    pass\n", limits=make_limits(timeout_s=1.0))
    assert r.status == "timeout" and "still running after 1 s" in r.message  # the run's own limit
    assert r.stdout == "start\n"
    assert run(sandbox, "print('next')").stdout == "next\n"


def test_output_flood_is_stopped_at_the_cap(sandbox):
    flood = "import sys\nwhile True:\n    sys.stdout.write('x' * 1_000_000)\n"
    r = run(sandbox, flood, limits=make_limits(timeout_s=60))
    assert r.status == "output_limit" and r.stdout_truncated  # the cap, not the time limit
    assert r.stdout.startswith("x" * 1000)
    assert (1 << 20) <= len(r.stdout) < (1 << 20) + 200
    assert r.stdout.endswith("truncated after 1048576 bytes]")


def test_stderr_capped_and_marked(sandbox):
    r = run(
        sandbox,
        "import sys\nfor _ in range(2000):\n    sys.stderr.write('e' * 1000)\n",
        limits=make_limits(output_limit_bytes=10_000),
    )
    assert r.status == "output_limit" and r.stderr_truncated and not r.stdout_truncated
    assert len(r.stderr) < 10_200 and "truncated" in r.stderr


def test_cancel_kills_a_running_program(sandbox):
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()  # whenever it lands, the run must end killed
    r = run(sandbox, "import time\ntime.sleep(60)\nprint('slept')", cancel=cancel, limits=make_limits(timeout_s=120))
    assert r.status == "killed" and "slept" not in r.stdout  # stopped, not waited out (how soon: bench/stop.py)
    assert run(sandbox, "print('after cancel')").stdout == "after cancel\n"


# --------------------------------------------------------------------------- inputs / outputs
def test_inputs_dataframe_and_dict(sandbox):
    df = pd.DataFrame({"city": ["a", "b", "a"], "sales": [1, 2, 3]})
    r = run(
        sandbox,
        """\
        print(type(df).__name__, df.shape)
        print(df.groupby("city")["sales"].sum().to_dict())
        print(cfg["threshold"], sorted(cfg))
        """,
        inputs={"df": df, "cfg": {"threshold": 0.5, "name": "x"}},
    )
    assert r.status == "ok", r.stderr
    assert r.stdout.splitlines() == ["DataFrame (3, 2)", "{'a': 4, 'b': 2}", "0.5 ['name', 'threshold']"]


def test_unpicklable_input_names_the_variable(sandbox):
    with pytest.raises(BadInput, match="'numbers'"):
        sandbox.execute("print(1)", inputs={"numbers": (i for i in range(3))})
    with pytest.raises(BadInput, match="lock"):
        sandbox.execute("print(1)", inputs={"lock": threading.Lock()})
    with pytest.raises(BadInput, match="valid Python variable"):
        sandbox.execute("print(1)", inputs={"not a name": 1})
    assert run(sandbox, "print('fine')").stdout == "fine\n"


def test_figure_is_returned_as_png(sandbox):
    r = run(
        sandbox,
        """\
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([1, 2, 3], [3, 1, 2])
        plt.show()
        """,
    )
    assert r.status == "ok" and r.stderr == "", r
    pngs = [o for o in r.outputs if o.mime == "image/png"]
    assert len(pngs) == 1
    assert base64.b64decode(pngs[0].data).startswith(b"\x89PNG\r\n\x1a\n")


def test_last_expression_dataframe_html(sandbox):
    r = run(sandbox, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\n")
    html = [o for o in r.outputs if o.mime == "text/html"]
    assert len(html) == 1 and "<table" in html[0].data and "<th>b</th>" in html[0].data
    plain = [o for o in r.outputs if o.mime == "text/plain"]
    assert plain and "a  b" in plain[0].data
    assert run(sandbox, "x = 1\nprint(x)").outputs == []  # print() returns None


def test_tests_block_per_statement(sandbox):
    code = "def add(a, b):\n    return a + b\n"
    tests = "assert add(1, 2) == 3\nassert add(2, 2) == 5\nassert add('a', 'b') == 'ab', 'strings'\n"
    r = run(sandbox, code, tests=tests)
    assert r.status == "ok"
    assert [(t.source, t.passed, t.line) for t in r.tests] == [
        ("assert add(1, 2) == 3", True, 1),
        ("assert add(2, 2) == 5", False, 2),
        ("assert add('a', 'b') == 'ab', 'strings'", True, 3),
    ]
    assert "left = 4, right = 5" in r.tests[1].message


def test_tests_not_run_when_the_program_fails(sandbox):
    r = run(sandbox, "raise ValueError('bad')\n", tests="assert True\n")
    assert r.status == "error" and len(r.tests) == 1
    assert not r.tests[0].passed and "not run" in r.tests[0].message


def test_candidates_are_isolated_from_each_other(sandbox):
    first = run(
        sandbox,
        """\
        import os, pandas
        pandas.SECRET = 1
        open("left.txt", "w").write("x")
        open("/tmp/other.txt", "w").write("x")
        leaked = 5
        """,
    )
    assert first.status == "ok", first.stderr
    r = run(
        sandbox,
        """\
        import os, pandas
        print(hasattr(pandas, "SECRET"), "leaked" in globals())
        print(sorted(p for p in os.listdir("/tmp") if not p.startswith(".")), os.listdir("."))
        """,
    )
    assert r.stdout.splitlines()[0] == "False False"
    assert "other.txt" not in r.stdout and "left.txt" not in r.stdout


# --------------------------------------------------------------------------- hardening
def test_fork_bomb_is_contained_by_the_pids_limit(sandbox):
    r = run(
        sandbox,
        """\
        import os, time
        n = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                n += 1
        except OSError as exc:
            print(n, exc.errno)
        """,
        limits=make_limits(timeout_s=10),
    )
    assert r.status == "ok", r
    forks, errno = map(int, r.stdout.split())
    assert 0 < forks < 64 and errno == 11  # EAGAIN: the pids cgroup said no
    bomb = run(
        sandbox,
        """\
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        limits=make_limits(timeout_s=2),
    )
    assert bomb.status == "timeout"
    assert run(sandbox, "print('alive')").stdout == "alive\n"  # the sweep killed them all


def test_network_is_refused(sandbox):
    r = run(
        sandbox,
        """\
        import os, socket
        print(sorted(os.listdir("/sys/class/net")))
        print("routes", open("/proc/net/route").read().splitlines()[1:])
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3)
            print("connected")
        except OSError as exc:
            print("refused", exc.errno)
        try:
            socket.getaddrinfo("pypi.org", 443)
            print("resolved")
        except OSError:
            print("no dns")
        """,
    )
    # A pod has an eth0 (the local cluster's leads nowhere; a real cluster's NetworkPolicy
    # denies egress): no route leaves either.
    interfaces = "['eth0', 'lo']" if sandbox.unit == "pod" else "['lo']"
    assert r.stdout.splitlines() == [interfaces, "routes []", "refused 101", "no dns"], r.stdout


def test_root_is_read_only_and_tmp_writable(sandbox):
    # /inputs is the read-only bind mount on the socket channel; on the attach channel it
    # is the tmpfs the runner receives inputs into (emptied after every run).
    r = run(
        sandbox,
        """\
        import os
        for path in ("/x", "/etc/passwd", "/opt/selfheal/selfheal_runner/__main__.py", "/inputs/x"):
            if path == "/inputs/x" and CHANNEL == "attach":
                print("refused (attach channel)")
                continue
            try:
                open(path, "a").write("x")
                print("wrote", path)
            except OSError as exc:
                print("refused", path, exc.errno)
        with open("/tmp/ok.txt", "w") as f:
            f.write("fine")
        print(open("/tmp/ok.txt").read())
        """,
        inputs={"CHANNEL": sandbox.channel},
    )
    lines = r.stdout.splitlines()
    assert all(line.startswith("refused") for line in lines[:4]), lines
    assert lines[4] == "fine"


@docker_only  # a pod's limits: tests/test_kubernetes.py
def test_unprivileged_user_no_capabilities_and_limits(sandbox):
    r = run(
        sandbox,
        """\
        import os
        print(os.getuid() == os.getgid() not in (0, 65534))  # a uid of its own, not the runner's
        status = dict(l.split(":", 1) for l in open("/proc/self/status"))
        print(status["CapEff"].strip(), status["CapPrm"].strip(), status["NoNewPrivs"].strip())
        print(open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip())
        print(open("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").read().strip())
        print(open("/sys/fs/cgroup/pids/pids.max").read().strip())
        print(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip(),
              open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read().strip())
        st = os.statvfs("/tmp")
        print(st.f_blocks * st.f_frsize)
        """,
    )
    assert r.stdout.splitlines() == [
        "True",
        "0000000000000000 0000000000000000 1",
        str(512 << 20),
        str(512 << 20),
        "64",
        "100000 100000",
        str(64 << 20),
    ], r.stdout


def test_host_environment_is_invisible(sandbox, monkeypatch):
    secret = "sk-test-selfheal-must-not-leak-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    # Other limits than the pool's give a container created now, with the key set.
    r = run(
        sandbox,
        """\
        import os
        print(sorted(os.environ))
        try:  # the runner (PID 1) is not dumpable: its environment is not readable
            print(open("/proc/1/environ", "rb").read().decode(errors="replace"))
        except PermissionError:
            print("PID 1 environ: permission denied")
        """,
        limits=make_limits(memory="384m"),
    )
    assert r.status == "ok", r
    assert secret not in r.stdout and "OPENAI_API_KEY" not in r.stdout
    assert "PATH" in r.stdout


# --------------------------------------------------------------------------- containers
def test_a_supervisor_that_dies_fails_the_run_and_the_pool_recovers(sandbox_image, docker_client):
    """The program cannot kill its template (another uid's); the host can, and stands in
    for whatever else might (the kernel's OOM killer): the run fails, the next is fresh."""
    with make_sandbox(pool_size=1, client=docker_client) as sb:
        first = sb.execute("import os\nprint(os.getppid())\n")
        assert first.ok, first
        (cid,) = [c["Id"] for c in docker_client.api.containers(filters={"label": f"{LABEL}={sb.session}"})]
        exe = docker_client.api.exec_create(
            cid, ["python3", "-c", f"import os; os.kill({first.stdout.strip()}, 9)"], user="65534"
        )
        docker_client.api.exec_start(exe)
        assert docker_client.api.exec_inspect(exe)["ExitCode"] == 0
        r = sb.execute("print('lost')")
        assert r.status == "error" and r.error.type == "SandboxError", r
        assert sb.execute("print('replaced')").stdout == "replaced\n"


def test_the_runner_refuses_the_program_s_signals(sandbox):
    r = sandbox.execute(
        "import os, signal\n"
        "for pid in (1, os.getppid()):\n"
        "    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):\n"
        "        try:\n"
        "            os.kill(pid, sig)\n"
        "        except PermissionError:\n"
        "            print('refused', end=' ')\n"
        "print('still here')\n"
    )
    assert r.status == "ok" and r.stdout == "refused " * 6 + "still here\n", r
    assert sandbox.execute("print('next')").stdout == "next\n"


def test_host_backstop_kills_a_stuck_container(sandbox_image, docker_client):
    """A runner that stopped answering (frozen here from outside: the program cannot
    stop it) is ended by the host once the run's timeout and the grace have passed."""
    with make_sandbox(pool_size=1, client=docker_client) as sb:
        sb.backstop_grace_s = 1.0
        assert sb.execute("print('warm')").ok
        for c in docker_client.api.containers(filters={"label": f"{LABEL}={sb.session}"}):
            docker_client.api.kill(c["Id"], signal="SIGSTOP")  # reaches PID 1 from outside
        r = sb.execute("print('never')", limits=make_limits(timeout_s=1))
        assert r.status == "timeout" and "container had to be stopped" in r.message, r
        assert sb.execute("print('fresh')").stdout == "fresh\n"


def test_close_removes_every_container(sandbox_image, docker_client):
    sb = make_sandbox(pool_size=1, client=docker_client)
    sb.start()
    assert sb.execute("print(1)").ok
    ours = docker_client.api.containers(all=True, filters={"label": f"selfheal={sb.session}"})
    assert ours
    sb.close()
    assert docker_client.api.containers(all=True, filters={"label": f"selfheal={sb.session}"}) == []


def test_keyboard_interrupt_mid_run_removes_the_container(sandbox_image, docker_client):
    sb = make_sandbox(pool_size=0, client=docker_client)
    main = threading.main_thread().ident
    threading.Timer(1.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sb.execute("import time\ntime.sleep(60)\n")
        label = {"label": f"selfheal={sb.session}"}
        assert docker_client.api.containers(all=True, filters=label) == []
    finally:
        sb.close()


def test_sigint_to_a_process_mid_run_leaves_no_container(sandbox_image, docker_client):
    script = textwrap.dedent("""\
        import sys
        from selfheal_jupyter.config import SelfHeal
        from selfheal_jupyter.sandbox.docker import DockerSandbox
        sb = DockerSandbox.from_config(SelfHeal(pool_size=1))
        sb.start()
        print("running", flush=True)
        sb.execute("import time\\ntime.sleep(60)\\n")
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "running"
        assert own_containers(docker_client, proc.pid)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert "KeyboardInterrupt" in err
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_no_containers(docker_client, proc.pid, timeout=5) == []


def test_container_of_a_process_that_died_abruptly_goes_away(sandbox_image, docker_client):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""\
        import os
        from selfheal_jupyter.config import SelfHeal
        from selfheal_jupyter.sandbox.docker import DockerSandbox
        sb = DockerSandbox.from_config(SelfHeal(pool_size=1))
        sb.start()
        print("up", flush=True)
        os._exit(0)  # no atexit, no close
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "up"
    proc.wait(timeout=30)
    # The attach socket closed with the process: the runner saw EOF and its container
    # (auto-remove) went away by itself.
    assert wait_no_containers(docker_client, proc.pid, timeout=10) == []


def test_stale_sweep_removes_containers_of_dead_owners(sandbox_image, docker_client):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    labels = {"selfheal": "stale-test", "selfheal.pid": str(dead.pid), "selfheal.host": socket.gethostname()}
    alive = dict(labels, **{"selfheal.pid": str(os.getpid())})
    stale = docker_client.containers.create(sandbox_image, ["sleep", "60"], labels=labels, network_mode="none")
    kept = docker_client.containers.create(sandbox_image, ["sleep", "60"], labels=alive, network_mode="none")
    try:
        removed = sweep_stale(docker_client)
        assert stale.id in removed and kept.id not in removed
        ids = [c["Id"] for c in docker_client.api.containers(all=True, filters={"label": "selfheal=stale-test"})]
        assert ids == [kept.id]
    finally:
        for c in (stale, kept):
            try:
                c.remove(force=True)
            except Exception:
                pass


# --------------------------------------------------------------------------- channels
@docker_only
def test_the_local_engine_uses_the_socket_channel(sandbox):
    assert sandbox.channel == "socket"


def test_attach_channel_runs_inputs_timeout_and_cancel(sandbox_image, docker_client):
    """Frames and inputs over the attach stream, as on an engine without shared files."""
    with make_sandbox(pool_size=1, client=docker_client, channel="attach") as sb:
        assert sb.channel == "attach"
        big = pd.DataFrame({"x": range(1_000_000)})  # 8 MB: several put frames
        r = run(
            sb,
            """\
            import os
            print(int(df["x"].sum()), cfg, len(os.listdir("/inputs")))
            """,
            inputs={"df": big, "cfg": {"k": 1}},
        )
        assert r.status == "ok", r
        assert r.stdout == f"{sum(range(1_000_000))} {{'k': 1}} 2\n"
        assert run(sb, "import os\nprint(os.listdir('/inputs'))").stdout == "[]\n"
        r = run(sb, "while True:\n    pass\n", limits=make_limits(timeout_s=1))
        assert r.status == "timeout"
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        assert run(sb, "import time\ntime.sleep(30)\n", cancel=cancel).status == "killed"
        assert run(sb, "print('after')").stdout == "after\n"
        with pytest.raises(SandboxError, match="do not fit this sandbox"):  # file + value
            sb.execute("print(1)", inputs={"blob": b"x" * (140 << 20)}, limits=make_limits(memory="256m"))


def test_runner_that_cannot_reach_the_socket_switches_to_the_attach_stream(sandbox_image, docker_client, monkeypatch):
    """The probe's second stage: the engine mounts the directory, the socket is unreachable."""
    from selfheal_jupyter.sandbox import docker as backend

    monkeypatch.setattr(backend, "_PROBED", {})  # forget what this process learned
    monkeypatch.setattr(backend, "CONTROL_SOCKET", "/inputs/nobody-listens-here.sock")
    with make_sandbox(pool_size=1, client=docker_client) as sb:
        assert sb.channel == "attach"
        r = run(sb, "print(sum(v))", inputs={"v": [1, 2, 3]})
        assert r.status == "ok" and r.stdout == "6\n", r
    with (
        pytest.raises(SandboxError, match=r"could not reach its control channel.*unix://"),
        make_sandbox(pool_size=1, client=docker_client, channel="socket"),
    ):
        pass


# --------------------------------------------------------------------------- CLI
def selfheal(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_cli_exec_json(tmp_path, sandbox_image, docker_client):
    program = tmp_path / "job.py"
    program.write_text("total = df['x'].sum()\nprint(total)\ndef f():\n    return 1 / 0\nf()\n")
    tests = tmp_path / "checks.py"
    tests.write_text("assert total == 6\n")
    data = tmp_path / "df.pkl"
    pd.DataFrame({"x": [1, 2, 3]}).to_pickle(data)
    proc = selfheal(
        "sandbox",
        "exec",
        str(program),
        "--input",
        f"df={data}",
        "--tests",
        str(tests),
        "--timeout",
        "10",
        "--memory",
        "256m",
        "--json",
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert {"status", "exit_code", "stdout", "stderr", "duration_s", "error", "outputs"} <= set(out)
    assert out["status"] == "error" and out["exit_code"] == 1 and out["stdout"] == "6\n"
    err = out["error"]
    assert set(err) == {"type", "message", "line", "frames", "locals"}
    assert err["type"] == "ZeroDivisionError" and err["line"] == 4
    assert [(f["file"], f["line"], f["function"]) for f in err["frames"]] == [
        ("job.py", 5, "<module>"),
        ("job.py", 4, "f"),
    ]
    assert out["tests"][0]["passed"] is False and "not run" in out["tests"][0]["message"]


def test_cli_exec_readable_summary_and_bad_input(tmp_path, sandbox_image):
    program = tmp_path / "ok.py"
    program.write_text("print('hello')\n")
    proc = selfheal("sandbox", "exec", str(program))
    assert proc.returncode == 0 and "status: ok" in proc.stdout and "hello" in proc.stdout
    proc = selfheal("sandbox", "exec", str(program), "--input", "df=/no/such.pkl")
    assert proc.returncode == 2 and "no file at /no/such.pkl" in proc.stderr


def test_cli_build_is_a_no_op_when_current(sandbox_image, tmp_path):
    proc = selfheal("sandbox", "build")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to do" in proc.stdout and "current" in proc.stdout
    proc = selfheal("sandbox", "build", "--requirements", str(tmp_path / "missing.txt"))
    assert proc.returncode == 2 and "missing.txt" in proc.stderr


def test_cli_doctor(sandbox_image):
    proc = selfheal("sandbox", "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("ok") for line in lines), proc.stdout
    proc = selfheal("sandbox", "doctor", "--image", "selfheal-no-such-image")
    assert proc.returncode == 1 and "selfheal sandbox build" in proc.stdout
