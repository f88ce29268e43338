"""Hostile candidates against the real engine: each test is one attack class of issue 10.

A candidate may try to take over the runner, forge its own result, flip the outcome of
the user's tests, or leave something behind for the next candidate in the same warm
container. Every test here fails if the protection it names is removed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import ExecutionResult
from selfheal_jupyter.sandbox.docker import DockerSandbox

HOSTNAME = "import socket\nprint('host=' + socket.gethostname())\n"


@pytest.fixture(scope="module")
def one_container(sandbox_image: str, docker_client) -> Iterator[DockerSandbox]:
    """A pool of ONE warm container: consecutive runs share it (checked by hostname)."""
    sb = DockerSandbox.from_config(SelfHeal(pool_size=1), client=docker_client)
    sb.start()
    try:
        yield sb
    finally:
        sb.close()


def run(sb: DockerSandbox, code: str, **kw) -> ExecutionResult:
    return sb.execute(textwrap.dedent(code), **kw)


def with_host(body: str) -> str:
    return HOSTNAME + textwrap.dedent(body)


def host_of(result: ExecutionResult) -> str:
    return next(ln for ln in result.stdout.splitlines() if ln.startswith("host="))


# --------------------------------------------------------------------------- the runner
def test_runner_memory_and_tracing_are_out_of_reach(one_container):
    r = run(
        one_container,
        """\
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH = 16
        for pid in (1, os.getppid()):
            print("ptrace", pid, libc.ptrace(PTRACE_ATTACH, pid, 0, 0), ctypes.get_errno())
            try:
                open(f"/proc/{pid}/mem", "rb")
                print("mem", pid, "OPEN")
            except PermissionError:
                print("mem", pid, "denied")
        print("environ", os.access("/proc/1/environ", os.R_OK))
        """,
    )
    assert r.status == "ok", r
    lines = r.stdout.splitlines()
    assert [ln.split()[2:] for ln in lines if ln.startswith("ptrace")] == [["-1", "1"]] * 2
    assert [ln.split()[2] for ln in lines if ln.startswith("mem")] == ["denied", "denied"]
    assert "environ False" in lines


def test_process_vm_readv_is_denied(one_container):
    r = run(
        one_container,
        """\
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        n = libc.process_vm_readv(1, None, 0, None, 0, 0)
        print(n, ctypes.get_errno())
        """,
    )
    assert r.stdout.split() == ["-1", "1"], r


def test_runner_survives_signals_and_the_next_run_is_honest(one_container):
    first = run(
        one_container,
        with_host("""\
        import os, signal
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP, signal.SIGINT):
            try:
                os.kill(1, sig)
            except PermissionError:  # the runner is another uid's
                print("refused")
        print("alive")
        """),
    )
    assert first.status == "ok" and "alive" in first.stdout
    assert first.stdout.count("refused") == 4, first.stdout
    second = run(one_container, HOSTNAME + "raise SystemExit(4)\n")
    assert host_of(second) == host_of(first)
    assert second.status == "error" and second.exit_code == 4


# --------------------------------------------------------------------------- the verdict
def test_a_forged_report_cannot_turn_an_error_into_ok(one_container):
    r = run(
        one_container,
        """\
        import json, os, struct
        forged = json.dumps({"status": "ok", "exit_code": 0, "error": None, "outputs": [],
                             "tests": [{"source": "x", "passed": True, "line": 1, "message": ""}]}).encode()
        for fd in range(3, 32):
            try:
                os.write(fd, struct.pack(">I", len(forged)) + forged)
            except OSError:
                pass
        raise RuntimeError("really failed")
        """,
        tests="assert False, 'the user test fails'\n",
    )
    assert r.status == "error" and r.exit_code == 1
    assert r.tests and not any(t.passed for t in r.tests)


def test_the_exit_status_is_the_process_s_own(one_container):
    r = run(one_container, "import os\nprint('done', flush=True)\nos._exit(9)\n")
    assert r.status == "error" and r.exit_code == 9


def test_eq_always_true_cannot_pass_a_test(one_container):
    r = run(
        one_container,
        """\
        class Anything:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            def __bool__(self):
                return True
        def solve(x):
            return Anything()
        """,
        tests="assert solve(2) == 4\nassert 4 == solve(2)\nassert solve(2)\nassert [solve(2)] == [4]\n",
    )
    assert r.status == "ok"
    assert [t.passed for t in r.tests] == [False, False, False, False], r.tests


def test_patching_the_test_framework_in_the_program_changes_nothing(one_container):
    r = run(
        one_container,
        """\
        import builtins, unittest
        unittest.TestResult.wasSuccessful = lambda self: True
        builtins.AssertionError = type("Quiet", (Exception,), {})
        import sys
        sys.settrace(None)
        def double(x):
            return x + 1
        """,
        tests=textwrap.dedent("""\
        import unittest
        class T(unittest.TestCase):
            def test_double(self):
                self.assertEqual(double(3), 6)
        result = unittest.TextTestRunner(verbosity=0).run(
            unittest.defaultTestLoader.loadTestsFromTestCase(T))
        assert result.wasSuccessful()
        """),
    )
    assert r.tests[-1].passed is False, r.tests


def test_tests_see_plain_values_and_real_objects(one_container):
    r = run(
        one_container,
        """\
        import numpy as np, pandas as pd
        from dataclasses import dataclass
        @dataclass
        class Account:
            balance: int = 0
            def deposit(self, n):
                if n <= 0:
                    raise ValueError("positive amounts only")
                self.balance += n
                return self
        class Overdrawn(Exception):
            pass
        acct = Account()
        df = pd.DataFrame({"region": ["n", "s"], "sales": [1.5, 2.0]})
        arr = np.arange(3)
        def mean(xs):
            return sum(xs) / len(xs)
        """,
        tests=textwrap.dedent("""\
        acct.deposit(5)
        assert acct.balance == 5
        assert Account(2) == Account(2)
        try:
            acct.deposit(-1)
            raise AssertionError("no error")
        except ValueError as exc:
            assert "positive" in str(exc)
        assert issubclass(Overdrawn, Exception)
        assert df["sales"].sum() == 3.5 and list(df.columns) == ["region", "sales"]
        assert str(df["sales"].dtype) == "float64"
        assert (arr == [0, 1, 2]).all() and arr.dtype.kind == "i"
        assert abs(mean([1, 2, 4]) - 7 / 3) < 1e-9
        assert len([x for x in range(3)]) == 3
        """),
    )
    assert r.status == "ok", r
    assert all(t.passed for t in r.tests), [(t.source, t.message) for t in r.tests if not t.passed]


def test_tests_call_back_and_see_in_place_changes(one_container):
    r = run(
        one_container,
        """\
        import inspect
        def apply(f, xs):
            xs.append(f(len(xs)))
            return f.__name__, str(inspect.signature(f))
        """,
        tests=textwrap.dedent("""\
        def twice(n, k=2):
            return n * k
        items = [5]
        assert apply(twice, items) == ("twice", "(n, k=2)")
        assert items == [5, 2]
        assert apply(lambda n: -n, items)[0] == "<lambda>" and items[-1] == -2
        """),
    )
    assert r.status == "ok", r
    assert all(t.passed for t in r.tests), [(t.source, t.message) for t in r.tests if not t.passed]


def test_a_test_whose_exception_cannot_be_printed_is_reported(one_container):
    r = run(
        one_container,
        """\
        class Weird(Exception):
            def __str__(self):
                raise RuntimeError("no str for you")
        def f():
            raise Weird()
        """,
        tests="f()\n",
    )
    assert r.status == "ok"
    assert r.tests[0].passed is False and "Weird" in r.tests[0].message


def test_a_failed_program_runs_no_tests(one_container):
    r = run(one_container, "def f():\n    return 1\nraise KeyError('x')\n", tests="assert f() == 1\n")
    assert r.status == "error"
    assert r.tests and r.tests[0].passed is False and "not run" in r.tests[0].message


# --------------------------------------------------------------------------- the user's asserts
RIGHT_MEAN = "def mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([1, 2, 3]) == 2\n"
MEAN_ASSERT = [(4, 0, "assert mean([1, 2, 3]) == 2")]


@pytest.mark.parametrize(
    "after",
    [
        "globals()['me' + 'an'] = lambda xs: 0\n",
        "exec('mean = len')\n",
        "import sys\nsetattr(sys.modules[__name__], 'mean', lambda xs: 0)\n",
        "del globals()['mean']\n",
        "import os\nglobals()['mean'] = len\nos._exit(0)\n",
    ],
    ids=["globals", "exec", "module-object", "deleted", "exit-before-the-end"],
)
def test_an_assert_that_held_fails_when_its_function_is_replaced_after_it(one_container, after):
    """Attack class: an outlived assert the spec guard cannot see. The user's assert holds
    on a right ``mean``; then the program binds the name to another object by no statement
    (or ends without its end being seen). The checker reads the asserted callables again
    when the program ends: the assert fails, so the run is no success."""
    r = run(one_container, RIGHT_MEAN + after, asserts=MEAN_ASSERT)
    (check,) = r.tests
    said = "could not be read again at the program's end" if "_exit" in after else "after this assert held"
    assert check.passed is False and "`mean`" in check.message and said in check.message, r


def test_data_an_assert_read_may_change_after_it(one_container):
    """Plain values (and objects that are not callables) may change after an assert that
    read them; the asserted functions, kept, may be called again."""
    code = textwrap.dedent("""\
        class Counter:
            def __init__(self):
                self.n = 0
        def mean(xs):
            return sum(xs) / len(xs)
        x = 1
        items = [1, 2, 3]
        c = Counter()
        assert x == 1 and mean(items) == 2 and c.n == 0
        x += 1
        items.append(4)
        globals()['c'] = Counter()
        c.n = 5
        print(x, mean(items), c.n)
        """)
    r = run(one_container, code, asserts=[(9, 0, "assert x == 1 and mean(items) == 2 and c.n == 0")])
    assert r.status == "ok" and r.stdout == "2 2.5 5\n", r
    assert [t.passed for t in r.tests] == [True], r.tests


# --------------------------------------------------------------------------- nothing crosses
def test_files_ipc_and_memory_of_one_run_do_not_reach_the_next(one_container):
    first = run(
        one_container,
        with_host("""\
        import os, ctypes
        SECRET = "previous-run-secret-7f3a"
        os.makedirs("/tmp/locked/inner", exist_ok=True)
        with open("/tmp/locked/inner/big", "wb") as f:
            f.write(b"x" * (40 << 20))
        os.chmod("/tmp/locked/inner", 0)
        os.chmod("/tmp/locked", 0)
        with open("/dev/shm/left", "w") as f:
            f.write(SECRET)
        with open("/tmp/.hidden", "w") as f:
            f.write(SECRET)
        libc = ctypes.CDLL(None, use_errno=True)
        print("shmget", libc.shmget(0x5E1F, 4096, 0o1666), ctypes.get_errno())
        print("msgget", libc.msgget(0x5E1F, 0o1666), ctypes.get_errno())
        """),
    )
    assert first.status == "ok", first
    assert "shmget -1 1" in first.stdout and "msgget -1 1" in first.stdout
    second = run(
        one_container,
        with_host(
            """\
        import gc, os
        print("tmp", sorted(e for e in os.listdir("/tmp") if not e.startswith(("run", ".matplotlib"))))
        print("shm", os.listdir("/dev/shm"))
        seen = any(isinstance(o, str) and "previous-run-secret" in o and o != MARK
                   for o in gc.get_objects())
        print("gc", seen)
        with open("/tmp/fill", "wb") as f:  # the 40 MB of the previous run were freed
            f.write(b"y" * (40 << 20))
        print("space ok")
        """.replace("MARK", repr("previous-run-secret"))
        ),
    )
    assert host_of(second) == host_of(first), "the pool did not reuse its container"
    assert "tmp []" in second.stdout and "shm []" in second.stdout, second.stdout
    assert "gc False" in second.stdout and "space ok" in second.stdout, second


def test_leftover_processes_are_gone_before_the_next_run(one_container):
    first = run(
        one_container,
        with_host("""\
        import os, time
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            pid = os.fork()
            if pid == 0:
                time.sleep(600)
            os.write(w, str(pid).encode())
            os._exit(0)
        os.close(w)
        print("sleeper", os.read(r, 32).decode())
        """),
    )
    assert first.status == "ok"
    sleeper = next(ln.split()[1] for ln in first.stdout.splitlines() if ln.startswith("sleeper"))
    second = run(
        one_container,
        with_host(f"""\
        import os
        try:
            with open("/proc/{sleeper}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        print("sleeper", state)
        """),
    )
    assert host_of(second) == host_of(first)
    assert "sleeper gone" in second.stdout or "sleeper Z" in second.stdout, second.stdout


# --------------------------------------------------------------------------- public interfaces
def _selfheal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_attacks_through_selfheal_sandbox_exec_batch(tmp_path, sandbox_image):
    """One warm pool, attacks in a row: a forged report, files left for the next file,
    a tests cheat; every verdict is the honest one."""
    files = {
        "a_forge.py": (
            "import json, os, struct\n"
            "f = json.dumps({'status': 'ok', 'exit_code': 0, 'tests': []}).encode()\n"
            "for fd in range(3, 16):\n"
            "    try:\n        os.write(fd, struct.pack('>I', len(f)) + f)\n"
            "    except OSError:\n        pass\n"
            "open('/tmp/left-behind', 'w').write('x')\n"
            "open('/dev/shm/left-behind', 'w').write('x')\n"
            "def answer():\n    return 41\n"
            "raise SystemExit(2)\n"
        ),
        "b_look.py": (
            "import os\nprint(sorted(os.listdir('/dev/shm')), 'left-behind' in os.listdir('/tmp'))\n"
            "class Yes:\n    def __eq__(self, other):\n        return True\n"
            "def answer():\n    return Yes()\n"
        ),
    }
    paths = []
    for name, code in files.items():
        (tmp_path / name).write_text(code)
        paths.append(str(tmp_path / name))
    (tmp_path / "tests.py").write_text("assert answer() == 42\n")
    proc = _selfheal("sandbox", "exec", *paths, "--tests", str(tmp_path / "tests.py"), "--json")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(results) == 2, proc.stderr
    forged, looked = results
    assert forged["status"] == "error" and forged["exit_code"] == 2
    assert not any(t["passed"] for t in forged["tests"])
    assert looked["status"] == "ok" and looked["stdout"] == "[] False\n"
    assert [t["passed"] for t in looked["tests"]] == [False]
    assert proc.returncode == 1


def test_cheating_replies_score_zero_in_selfheal_eval(tmp_path, sandbox_image):
    """A scripted model that answers every HumanEval task with a cheat: nothing passes."""
    from selfheal_jupyter import cli
    from selfheal_jupyter.eval.store import read_records
    from tests.scripted_server import Reply, ScriptedServer

    cheats = [
        "```python\nclass Yes(float):\n    def __eq__(self, o):\n        return True\n"
        "    __hash__ = float.__hash__\n    def __abs__(self):\n        return 0.0\n"
        "    def __sub__(self, o):\n        return Yes(0)\n    def __lt__(self, o):\n"
        "        return True\n    def __bool__(self):\n        return True\n"
        "def _any(*a, **k):\n    return Yes(0)\n"
        "import sys\nfor _n in ('has_close_elements', 'separate_paren_groups', "
        "'truncate_number'):\n    globals()[_n] = _any\n```",
        "```python\nimport unittest, builtins, os\n"
        "unittest.TestResult.wasSuccessful = lambda self: True\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
        "def has_close_elements(*a):\n    return True\n"
        "def separate_paren_groups(*a):\n    return []\n"
        "def truncate_number(*a):\n    return 0.5\n```",
    ]
    script = [Reply(cheats[i % 2]) for i in range(40)]
    with ScriptedServer(script) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "humaneval",
                "--limit",
                "3",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "2",
                "--no-plan",
                "--conditions",
                "loop",
                "--out",
                str(tmp_path),
            ]
        )
    assert code == 0
    records = read_records(tmp_path / "humaneval.jsonl")
    assert len(records) == 3
    assert not any(r["passed"] for r in records), [(r["problem_id"], r["hidden_detail"]) for r in records]


# --------------------------------------------------------------------------- issue 25
def _exec_json(tmp_path, code: str, tests: str | None = None, name: str = "a.py") -> dict:
    (tmp_path / name).write_text(code)
    args = ["sandbox", "exec", str(tmp_path / name), "--json"]
    if tests is not None:
        (tmp_path / "tests.py").write_text(tests)
        args[3:3] = ["--tests", str(tmp_path / "tests.py")]
    proc = _selfheal(*args)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_a_class_named_memory_error_is_not_an_oom(tmp_path, sandbox_image):
    """Status comes from observation: the builtin MemoryError itself is ``oom``, a class of
    the program's that is only named so is an ordinary error."""
    named = _exec_json(
        tmp_path, "class MemoryError(Exception):\n    pass\n\nraise MemoryError('pretend the memory ran out')\n"
    )
    assert named["status"] == "error" and named["error"]["type"] == "MemoryError", named
    subclass = _exec_json(
        tmp_path,
        "import builtins\n\nclass MemoryError(builtins.MemoryError):\n    pass\n\nraise MemoryError('a subclass')\n",
    )
    assert subclass["status"] == "error", subclass
    real = _exec_json(tmp_path, "data = bytearray(10 ** 13)\n")
    assert real["status"] == "oom" and real["error"]["type"] == "MemoryError", real


# The checker trusts only data: each attack of issue 25 against `--tests`.
FUNCTION_TESTS = "assert f(3) == 41.125\nassert abs(f(3) - 41.125) < 1e-9\nassert not f(3) != 41.125\n"
# The program's process is the program's: it can make its end of the RPC answer anything,
# e.g. a reply that names a class or object for the checker to load (here mock.ANY).
FORGE_A_NAME = (
    "import gc\n\ndef _forge():\n    for o in gc.get_objects():\n"
    "        if type(o).__name__ == 'ProgramCodec':\n"
    "            o.encode = lambda value, budget=None: {'$': 'class', 'v': 'unittest.mock:ANY'}\n\n"
)


@pytest.mark.parametrize(
    "program",
    [
        FORGE_A_NAME + "def f(x):\n    _forge()\n    return 0\n",
        (
            "class Zero:\n    def __sub__(self, other):\n        return 0.0\n    __rsub__ = __sub__\n"
            "    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
            "        return False\n\ndef f(x):\n    return Zero()\n"
        ),
        "def abs(x):\n    return 0\n\ndef f(x):\n    return 7.0\n",
    ],
    ids=["a-reply-naming-mock-ANY", "operators-in-the-program", "program-abs"],
)
def test_a_program_s_value_is_compared_as_data_by_the_checker(tmp_path, sandbox_image, program):
    """What crosses to the checker is data or an opaque handle; the checker computes every
    comparison and operator itself with its own builtins: a reply naming an object that
    equals everything, operators run by the program on the test's value, or a
    program-level ``abs`` pass none of these checks."""
    result = _exec_json(tmp_path, program, FUNCTION_TESTS)
    assert result["status"] == "ok", result
    assert [t["passed"] for t in result["tests"]] == [False, False, False], result["tests"]


def test_a_handle_without_a_value_fails_with_a_clear_message(tmp_path, sandbox_image):
    result = _exec_json(
        tmp_path, "from unittest.mock import ANY\n\ndef f(x):\n    return ANY\n", "assert abs(f(3) - 41.125) < 1e-9\n"
    )
    assert "the program returned a _ANY where a value was expected" in result["tests"][0]["message"]


def test_the_tests_library_names_are_the_checker_s_own(tmp_path, sandbox_image):
    """Tests that read `np` without importing it get the checker's numpy, not the module
    object of the program (which patched `allclose` in its own process)."""
    program = (
        "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
        "np.isclose = lambda *a, **k: True\n\ndef f():\n    return [0.0, 0.0]\n"
    )
    result = _exec_json(tmp_path, program, "assert np.allclose(f(), [1.0, 2.0])\n")
    assert [t["passed"] for t in result["tests"]] == [False], result["tests"]
    rebound = (
        "import numpy as np\n\nclass Anything:\n    def allclose(self, *a, **k):\n"
        "        return True\n\nnp = Anything()\n\ndef f():\n    return [0.0, 0.0]\n"
    )
    result = _exec_json(tmp_path, rebound, "assert np.allclose(f(), [1.0, 2.0])\n")
    assert [t["passed"] for t in result["tests"]] == [False], result["tests"]
    honest = _exec_json(
        tmp_path, "import numpy as np\n\ndef f():\n    return [1.0, 2.0]\n", "assert np.allclose(f(), [1.0, 2.0])\n"
    )
    assert [t["passed"] for t in honest["tests"]] == [True], honest["tests"]


RANDOM_TESTS = (
    "import random, string\nfor _ in range(20):\n"
    "    s = ''.join(random.choice(string.ascii_lowercase) for _ in range(random.randint(10, 20)))\n"
    "    assert decode(s) == s, s\n"
)


@pytest.mark.parametrize(
    "program",
    [
        (
            "import random\nrandom.choice = lambda seq: seq[0]\nrandom.randint = lambda a, b: a\n\n"
            "def decode(s):\n    return 'a' * 10\n"
        ),
        (
            "import random, string\n_r = random.Random()\n_r.setstate(random.getstate())\n_seq = []\n"
            "for _ in range(20):\n"
            "    _seq.append(''.join(_r.choice(string.ascii_lowercase) for _ in range(_r.randint(10, 20))))\n"
            "_it = iter(_seq)\n\ndef decode(s):\n    return next(_it)\n"
        ),
    ],
    ids=["pinned-in-the-program", "predicted-from-the-shared-start"],
)
def test_the_tests_random_draws_are_the_checker_s_own(tmp_path, sandbox_image, program):
    """The program can neither pin the generator the tests draw from nor predict it from
    the state both processes started from; a test's seed still seeds the program's."""
    result = _exec_json(tmp_path, program, RANDOM_TESTS)
    assert result["status"] == "ok" and [t["passed"] for t in result["tests"]] == [True, False]
    seeded = _exec_json(
        tmp_path,
        "import random\n\ndef draw():\n    return random.random()\n",
        "import random\nrandom.seed(42)\nexpected = random.random()\nrandom.seed(42)\nassert draw() == expected\n",
    )
    assert all(t["passed"] for t in seeded["tests"]), seeded["tests"]


def test_a_program_cannot_raise_the_test_framework_s_own_exceptions(tmp_path, sandbox_image):
    """An exception of the program reaches the tests as a builtin or a stand-in made by
    the checker: a class the program names `unittest.case.SkipTest` does not skip a test."""
    program = (
        "class SkipTest(Exception):\n    pass\n\nSkipTest.__module__ = 'unittest.case'\n\n"
        "def double(x):\n    raise SkipTest('nothing to see')\n"
    )
    tests = (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_double(self):\n"
        "        self.assertEqual(double(3), 6)\n\n"
        "result = unittest.TextTestRunner(verbosity=0).run(\n"
        "    unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
        "assert result.wasSuccessful()\n"
    )
    result = _exec_json(tmp_path, program, tests)
    assert result["tests"][-1]["passed"] is False, result["tests"]


def _defining(entry_points: list, body: str, prelude: str = "") -> str:
    """A program that defines every entry point with the same cheating body."""
    defs = "".join(f"def {name}(*args, **kwargs):\n    {body}\n\n" for name in entry_points)
    return f"```python\n{prelude}{defs}```"


EVAL_CHEATS = {
    "a-reply-naming-mock-ANY": (FORGE_A_NAME, "_forge()\n    return 0"),
    "operators-in-the-program": (
        "class Zero:\n    def __sub__(self, other):\n        return 0.0\n    __rsub__ = __sub__\n"
        "    def __eq__(self, other):\n        return True\n    def __lt__(self, other):\n"
        "        return True\n    def __abs__(self):\n        return 0.0\n"
        "    def __bool__(self):\n        return True\n\n",
        "return Zero()",
    ),
    "program-abs": ("def abs(x):\n    return 0\n\n", "return 0.0"),
}


@pytest.mark.parametrize("cheat", sorted(EVAL_CHEATS))
def test_each_issue_25_cheat_scores_zero_on_humaneval(tmp_path, sandbox_image, cheat):
    """`selfheal eval --benchmark humaneval --limit 20 --no-plan` against a scripted model
    that answers every problem with one cheat: the hidden graders pass none."""
    from selfheal_jupyter import cli
    from selfheal_jupyter.eval import humaneval
    from selfheal_jupyter.eval.store import read_records
    from tests.scripted_server import Reply, ScriptedServer

    entry_points = [p.entry_point for p in humaneval.load()[:20]]
    prelude, body = EVAL_CHEATS[cheat]
    reply = _defining(entry_points, body, prelude)
    with ScriptedServer([Reply(reply) for _ in range(60)]) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "humaneval",
                "--limit",
                "20",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "1",
                "--no-plan",
                "--conditions",
                "loop",
                "--out",
                str(tmp_path),
            ]
        )
    assert code == 0
    records = read_records(tmp_path / "humaneval.jsonl")
    assert len(records) == 20
    assert not any(r["passed"] for r in records), [
        (r["problem_id"], r["hidden_detail"]) for r in records if r["passed"]
    ]


@pytest.mark.parametrize(
    "program",
    [
        "import random\nrandom.choice = lambda seq: seq[0]\nrandom.randint = lambda a, b: a\n\n"
        "def decode_cyclic(s):\n    return 'a' * 10\n",
        "import random, string\n_r = random.Random()\n_r.setstate(random.getstate())\n"
        "_seq = [''.join(_r.choice(string.ascii_lowercase) for i in range(_r.randint(10, 20)))\n"
        "        for _ in range(100)]\n_it = iter(_seq)\n\n"
        "def decode_cyclic(s):\n    return next(_it)\n",
        "def encode_cyclic(s):\n    return s\n\n\ndef decode_cyclic(s):\n    return s\n",
    ],
    ids=["pinned-in-the-program", "predicted-from-the-shared-start", "identity-helper"],
)
def test_a_constant_decoder_fails_humaneval_38(tmp_path, sandbox_image, program):
    """HumanEval/38's grader draws random strings (the checker's own draws) and encodes
    them with the prompt's encode_cyclic (the grader's own copy, whatever the program
    defines under that name)."""
    from selfheal_jupyter import cli
    from selfheal_jupyter.eval.store import read_records
    from tests.scripted_server import Reply, ScriptedServer

    with ScriptedServer([Reply(f"```python\n{program}```") for _ in range(4)]) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "humaneval",
                "--offset",
                "38",
                "--limit",
                "1",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "1",
                "--no-plan",
                "--conditions",
                "loop",
                "--out",
                str(tmp_path),
            ]
        )
    assert code == 0
    (record,) = read_records(tmp_path / "humaneval.jsonl")
    assert record["problem_id"] == "HumanEval/38" and not record["passed"], record["hidden_detail"]
