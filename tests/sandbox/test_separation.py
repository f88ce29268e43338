"""No run can observe or affect another (issue 25, item 3): attacks through the public
interface, ``selfheal sandbox exec A.py B.py ... --json``, which runs the files in order
through one warm container, each in a fresh process as the loop's candidates are.

Inside the container the server and its templates, each run's candidate and the checker
are separate principals: a candidate cannot signal, trace or open the ``/proc`` files of
any other, and nothing of a run outlives it, in whatever state it hides (a thread group
whose leader exited, stopped, in a session or group of its own). Every test here failed
before the principals were separated (each run then had the same uid as everything else
in the container), except where its docstring says what held it already.

A file that imports nothing beyond the standard library runs from the light template,
one that imports numpy from the heavy one: so ``a_*.py`` (light) attacks the heavy
template's pre-forked idle candidate, and ``b_*.py`` (heavy) is the next run of that kind.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Processes of the container, by the parent each has: the templates are PID 1's
#: children, the other template's idle candidate is that template's child.
FIND = textwrap.dedent("""\
    import os
    def parents():
        out = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        out[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        return out
    PARENTS = parents()
    MINE = os.getppid()
    OTHER_TEMPLATE = next(p for p, pp in PARENTS.items() if pp == 1 and p != MINE)
    IDLE = next(p for p, pp in PARENTS.items() if pp == OTHER_TEMPLATE)
    SIBLINGS = [p for p, pp in PARENTS.items() if pp == MINE and p != os.getpid()]
    def outcome(action):
        try:
            done = action()
            return "DONE" if done is None else repr(done)
        except OSError as exc:
            return f"refused:{exc.errno}"
    """)

#: The syscall that ends one thread (Python's own exits end the whole group).
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine(), 60)

#: A process whose main thread exits while another thread runs ``BODY`` (its state then
#: reads ``Z`` though it lives), in a session of its own. Prints its pid.
LEADERLESS = textwrap.dedent(f"""\
    import ctypes, os, threading, time
    def leaderless(body):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            threading.Thread(target=body, args=(w,)).start()
            ctypes.CDLL(None).syscall({SYS_EXIT}, 0)
        os.close(w)
        said = os.read(r, 64).decode()  # the body says when it is in place
        return pid, said
    """)


@pytest.fixture(params=["runc", "runsc", pytest.param("kubernetes", marks=pytest.mark.kubernetes)])
def runtime(request: pytest.FixtureRequest, docker_client) -> list[str]:
    """Every attack under the engine's default runtime, under gVisor, and in pods: the
    flags of ``selfheal sandbox exec`` that choose it."""
    if request.param == "kubernetes":
        return request.getfixturevalue("kubernetes_cli")
    if request.param == "runsc":
        if shutil.which("runsc") is None:
            pytest.skip(
                "runsc (gVisor) is not installed here: `apt-get install -y runsc` "
                "(sandbox/setup-engine.sh does it as root)"
            )
        if "runsc" not in (docker_client.info().get("Runtimes") or {}):
            pytest.fail(
                "runsc is installed but the Docker engine does not offer it; run "
                "`bash sandbox/setup-engine.sh` as root",
                pytrace=False,
            )
        return ["--runtime", "runsc"]
    return []


def selfheal_exec(tmp_path: Path, runtime: list[str], files: dict[str, str], *args: str) -> list[dict]:
    paths = []
    for name, code in files.items():
        (tmp_path / name).write_text(code)
        paths.append(str(tmp_path / name))
    proc = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", "sandbox", "exec", *paths, *args, *runtime, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if len(files) == 1:  # one file: one indented JSON document
        return [json.loads(proc.stdout)]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(results) == len(files), proc.stderr
    return results


HONEST_HEAVY = "import numpy as np\nprint('honest', int(np.arange(4).sum()))\n"


# --------------------------------------------------------------------------- the idle candidate
def test_the_other_template_s_idle_candidate_s_descriptors_are_out_of_reach(tmp_path, runtime):
    """Written into, its pipes made the next run of that kind run other code (or none)."""
    attack = FIND + textwrap.dedent("""\
        def forge():
            opened = []
            for fd in os.listdir(f"/proc/{IDLE}/fd"):
                try:
                    if not os.readlink(f"/proc/{IDLE}/fd/{fd}").startswith(("pipe:", "socket:")):
                        continue  # its /dev/null
                except OSError:  # closed meanwhile (it may still be setting up)
                    continue
                try:
                    w = os.open(f"/proc/{IDLE}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                opened.append(fd)
                try:
                    os.write(w, b'\\x00\\x00\\x00\\x05{"x":')
                except OSError:
                    pass
                os.close(w)
            return opened
        print("fd", outcome(forge))
        print("environ", outcome(lambda: open(f"/proc/{IDLE}/environ", "rb").read() and None))
        """)
    first, second = selfheal_exec(tmp_path, runtime, {"a_fds.py": attack, "b_next.py": HONEST_HEAVY})
    assert first["status"] == "ok", first
    fds, environ = first["stdout"].splitlines()
    # runc refuses the listing itself; gVisor lists the descriptors but opens none
    assert fds in ("fd refused:13", "fd []"), first["stdout"]
    # gVisor (Debian's 2022 build) lets any process read another's environ: the
    # container's own environment, the same block in every process of the container
    assert environ == ("environ DONE" if "runsc" in runtime else "environ refused:13"), environ
    assert second["status"] == "ok" and second["stdout"] == "honest 6\n", second


def test_the_other_template_s_idle_candidate_s_memory_is_out_of_reach(tmp_path, runtime):
    """Its memory was writable through /proc/PID/mem (seccomp denies ptrace, not the file)."""
    attack = FIND + textwrap.dedent("""\
        def scribble():
            with open(f"/proc/{IDLE}/maps") as f:
                heaps = [ln.split()[0] for ln in f if ln.rstrip().endswith("[heap]")]
            with open(f"/proc/{IDLE}/mem", "r+b", buffering=0) as mem:
                for span in heaps:
                    lo, hi = (int(x, 16) for x in span.split("-"))
                    mem.seek(lo)
                    mem.write(b"\\xff" * (hi - lo))
        print("mem", outcome(scribble))
        """)
    first, second = selfheal_exec(tmp_path, runtime, {"a_mem.py": attack, "b_next.py": HONEST_HEAVY})
    assert first["stdout"] == "mem refused:13\n", first
    assert second["status"] == "ok" and second["stdout"] == "honest 6\n", second


def test_the_idle_candidate_cannot_be_killed(tmp_path, runtime):
    attack = FIND + "import signal\nprint('kill', outcome(lambda: os.kill(IDLE, signal.SIGKILL)))\n"
    first, second = selfheal_exec(tmp_path, runtime, {"a_kill.py": attack, "b_next.py": HONEST_HEAVY})
    assert first["stdout"] == "kill refused:1\n", first
    assert second["status"] == "ok" and second["stdout"] == "honest 6\n", second


def test_no_template_can_be_stopped_or_killed(tmp_path, runtime):
    """A stopped template left the next run of its kind to time out; a killed one, to fail."""
    attack = FIND + textwrap.dedent("""\
        import signal
        print("stop other", outcome(lambda: os.kill(OTHER_TEMPLATE, signal.SIGSTOP)))
        print("stop mine", outcome(lambda: os.kill(MINE, signal.SIGSTOP)))
        print("kill mine", outcome(lambda: os.kill(MINE, signal.SIGKILL)))
        """)
    first, second, third = selfheal_exec(
        tmp_path,
        runtime,
        {"a_stop.py": attack, "b_next.py": HONEST_HEAVY, "c_next.py": "print('light')\n"},
        "--timeout",
        "10",
    )
    assert first["status"] == "ok", first
    assert first["stdout"].splitlines() == ["stop other refused:1", "stop mine refused:1", "kill mine refused:1"], (
        first["stdout"]
    )
    assert second["status"] == "ok" and second["stdout"] == "honest 6\n", second
    assert third["status"] == "ok" and third["stdout"] == "light\n", third


def test_no_other_process_can_be_traced(tmp_path, runtime):
    """Held before too (seccomp denies ptrace to every process of the container); now the
    kernel's own access rule denies it as well, to another uid."""
    attack = FIND + textwrap.dedent("""\
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
        for name, pid in (("server", 1), ("template", MINE), ("other", OTHER_TEMPLATE),
                          ("idle", IDLE), ("checker", SIBLINGS[0])):
            got = [libc.ptrace(req, pid, 0, 0) for req in (PTRACE_ATTACH, PTRACE_SEIZE)]
            print(name, got, ctypes.get_errno())
        """)
    (result,) = selfheal_exec(
        tmp_path, runtime, {"a_trace.py": attack}, "--tests", str(_write(tmp_path, "t.py", "assert True\n"))
    )
    assert result["status"] == "ok", result
    assert [ln.split(" ", 1)[1] for ln in result["stdout"].splitlines()] == ["[-1, -1] 1"] * 5


# --------------------------------------------------------------------------- the checker and server
def test_the_candidate_can_neither_signal_nor_open_its_checker_or_the_server(tmp_path, runtime):
    """The /proc files of the server and the checker held before (they are not dumpable);
    a signal to the checker did not: a stopped checker left the program's tests unrun.
    Descriptor 3 is the pipe the tests arrive on, 6 the program's replies."""
    attack = FIND + textwrap.dedent("""\
        import signal
        CHECKER = SIBLINGS[0]
        for name, pid in (("server", 1), ("checker", CHECKER)):
            for what in ("mem", "fd/3", "fd/6", "environ"):
                print(name, what, outcome(lambda: open(f"/proc/{pid}/{what}", "rb").read(1) and None))
        print("stop checker", outcome(lambda: os.kill(CHECKER, signal.SIGSTOP)))
        def answer():
            return 42
        """)
    tests = _write(tmp_path, "t.py", "assert answer() == 42\n")
    (result,) = selfheal_exec(tmp_path, runtime, {"a_checker.py": attack}, "--tests", str(tests), "--timeout", "10")
    lines = result["stdout"].splitlines()
    refused = [ln for ln in lines[:8] if " refused:" in ln]
    if "runsc" in runtime:  # gVisor's environ: see the test above
        assert refused == [ln for ln in lines[:8] if "environ" not in ln], lines
    else:
        assert refused == lines[:8], lines
    assert lines[8] == "stop checker refused:1", lines
    assert result["status"] == "ok" and [t["passed"] for t in result["tests"]] == [True], result


# --------------------------------------------------------------------------- nothing outlives a run
def test_a_leaderless_survivor_can_neither_steal_the_next_program_nor_forge_its_output(tmp_path, runtime):
    """A process whose main thread exited reads ``Z`` but lives: it outlived the sweep,
    read the next run's program (with its secret) for a later run, and wrote into the
    next run's stdout."""
    spy = LEADERLESS + textwrap.dedent("""\
        import glob
        def spy(ready):
            seen, stolen = set(), ""
            os.write(ready, b"spying")
            while True:
                for path in glob.glob("/tmp/*/*.py") + glob.glob("/tmp/*.py"):
                    try:
                        text = open(path).read()
                    except OSError:
                        continue
                    if "SECRET-" in text:
                        stolen = text
                for entry in os.listdir("/proc"):
                    if entry.isdigit() and entry not in seen:
                        seen.add(entry)
                        try:
                            out = os.open(f"/proc/{entry}/fd/1", os.O_WRONLY | os.O_NONBLOCK)
                            os.write(out, b"FORGED\\n")
                            os.close(out)
                        except OSError:
                            pass
                for place in ("/tmp/stolen.txt", "/dev/shm/stolen.txt"):
                    if stolen:
                        try:
                            with open(place, "w") as f:
                                f.write(stolen)
                        except OSError:
                            pass
                time.sleep(0.001)
        print(*leaderless(spy))
        """)
    victim = (
        "SECRET = 'SECRET-7c1e'\n"
        "total = sum(i * i for i in range(3_000_000))  # a program that takes a while\n"
        "print('honest', total > 0)\n"
    )
    later = textwrap.dedent("""\
        import os, time
        found = ""
        for _ in range(300):  # the spy writes what it stole every millisecond
            for place in ("/tmp/stolen.txt", "/dev/shm/stolen.txt"):
                if os.path.exists(place):
                    found = open(place).read()
            if found:
                break
            time.sleep(0.01)
        print("found", "SECRET-7c1e" in found)
        """)
    first, second, third = selfheal_exec(
        tmp_path, runtime, {"a_spy.py": spy, "b_victim.py": victim, "c_later.py": later}
    )
    assert first["status"] == "ok" and first["stdout"].split()[1] == "spying", first
    assert second["status"] == "ok" and second["stdout"] == "honest True\n", second
    assert third["stdout"] == "found False\n", third


def test_a_leftover_cannot_fill_the_process_limit_for_the_next_run(tmp_path, runtime):
    filler = LEADERLESS + textwrap.dedent("""\
        def fill(ready):
            n = 0
            try:
                while True:
                    threading.Thread(target=time.sleep, args=(600,)).start()
                    n += 1
            except RuntimeError:
                pass
            os.write(ready, f"threads {n}".encode())
            time.sleep(600)
        print(*leaderless(fill))
        """)
    after = (
        "import subprocess\nprint(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout, end='')\n"
    )
    first, second = selfheal_exec(tmp_path, runtime, {"a_fill.py": filler, "b_after.py": after})
    assert first["status"] == "ok" and first["stdout"].split()[1] == "threads", first
    assert int(first["stdout"].split()[2]) > 30, first  # it did fill the pids limit
    assert second["status"] == "ok" and second["stdout"] == "child\n", second


def test_nothing_of_a_run_survives_it_in_any_state(tmp_path, runtime):
    """A session of its own, a group of its own, stopped, and leaderless (main thread
    exited): the next run finds none of these processes, not even as a zombie."""
    leave = LEADERLESS + textwrap.dedent("""\
        import signal
        pids = []
        def child(setup, stop=False):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                setup()
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.write(w, b"x")
                if stop:
                    os.kill(os.getpid(), signal.SIGSTOP)
                while True:
                    time.sleep(600)
            os.read(r, 1)
            pids.append(pid)
        child(os.setsid)
        child(lambda: os.setpgid(0, 0))
        child(lambda: os.setpgid(0, 0), stop=True)
        def sleeper(ready):
            os.write(ready, b"in place")
            time.sleep(600)
        pids.append(leaderless(sleeper)[0])
        def grandchild_keeper(ready):
            pid = os.fork()
            if pid == 0:
                os.setsid()
                time.sleep(600)
            os.write(ready, str(pid).encode())
            time.sleep(600)
        pids.append(int(leaderless(grandchild_keeper)[1]))
        print(*pids)
        """)
    # Besides PID 1, this run and its template: the other template and its idle candidate.
    look = (
        "import os\nrest = {int(e) for e in os.listdir('/proc') if e.isdigit()}\n"
        "print(*sorted(rest - {1, os.getpid(), os.getppid()}))\n"
    )
    first, second = selfheal_exec(tmp_path, runtime, {"a_leave.py": leave, "b_look.py": look})
    assert first["status"] == "ok" and len(first["stdout"].split()) == 5, first
    left = second["stdout"].split()
    assert second["status"] == "ok" and len(left) == 2, (first["stdout"], second)
    assert not set(left) & set(first["stdout"].split()), (first["stdout"], second)


def test_what_a_run_and_its_checker_wrote_is_gone_and_the_container_kept(tmp_path, runtime):
    """The program and its tests write into each other's directories, lock some; the
    runner removes all of it as their owners, and the next run (in the same container:
    nothing was left to make it dirty) finds none of it. (Held before too, when the wipe
    removed everything in /tmp whoever owned it: this guards the owners' wipe.)"""
    program = textwrap.dedent("""\
        import os, socket
        print(socket.gethostname())
        os.makedirs("shared/deep")
        os.chmod("shared", 0o777)
        with open("/tmp/program-left", "w") as f:
            f.write("secret")
        def answer():
            return 42
        """)
    tests = _write(
        tmp_path,
        "t.py",
        textwrap.dedent("""\
        import os
        os.makedirs("from-tests/inner")
        open("shared/by-tests", "w").write("x")
        open("/tmp/tests-left", "w").write("secret")
        os.makedirs("/dev/shm/tests-dir/x")
        os.chmod("/dev/shm/tests-dir", 0)
        assert answer() == 42
        """),
    )
    look = (
        "import os, socket\nprint(socket.gethostname())\n"
        "print(sorted(e for e in os.listdir('/tmp') if not e.startswith(('run', '.matplotlib'))),"
        " os.listdir('/dev/shm'))\n"
    )
    first, second = selfheal_exec(tmp_path, runtime, {"a_write.py": program, "b_look.py": look}, "--tests", str(tests))
    assert first["status"] == "ok" and [t["passed"] for t in first["tests"]] == [True] * 7, first
    assert second["stdout"].splitlines()[0] == first["stdout"].splitlines()[0], "replaced"
    assert second["stdout"].splitlines()[1] == "[] []", second


def test_a_message_queue_cannot_outlive_its_run(tmp_path, runtime):
    """mq_open is refused, but the engine's /dev/mqueue is a folder every uid may create
    in, and open() there makes a POSIX message queue that outlives the process, the run
    and the wipe of its folders: the next run (another user's, in a class) found it and
    could read what it held. The runner seals the folder before any program runs."""
    leave = textwrap.dedent("""\
        import os
        try:
            fd = os.open("/dev/mqueue/left", os.O_CREAT | os.O_RDWR, 0o666)
            os.fchmod(fd, 0o666)
            print("created")
        except OSError as exc:
            print("refused", exc.errno)
        """)
    look = "import os\nprint(os.path.exists('/dev/mqueue/left'))\n"
    first, second = selfheal_exec(tmp_path, runtime, {"a_leave.py": leave, "a_look.py": look})
    assert first["status"] == "ok" and first["stdout"].split()[0] == "refused", first
    assert second["status"] == "ok" and second["stdout"].strip() == "False", second


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
