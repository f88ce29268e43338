"""The standing red team: attacks beyond issue 25, each through a public interface
(`selfheal sandbox exec --json`, `selfheal run --code` against the scripted server,
`selfheal eval`). Every test names its attack class and fails on the code before its fix
(or is a strict xfail whose reason says why the fix is not local)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kubernetes_cluster import SANDBOX_BACKENDS
from tests.scripted_server import Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
#: The flags that choose the backend every ``selfheal`` command of a test runs on.
BACKEND_FLAGS: list[str] = []


@pytest.fixture(params=SANDBOX_BACKENDS)
def backend_image(request: pytest.FixtureRequest, sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every attack on each backend: the engine's containers, and pods. A name of its own:
    an override of ``sandbox_image`` would carry its parameter to the session's fixture of
    that name, and the cluster that depends on it would be set up again for every test."""
    flags = request.getfixturevalue("kubernetes_cli") if request.param == "kubernetes" else []
    monkeypatch.setattr(sys.modules[__name__], "BACKEND_FLAGS", flags)
    return sandbox_image


def _selfheal(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", *args, *BACKEND_FLAGS],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def _exec_json(tmp_path: Path, *programs: str, tests: str | None = None) -> list[dict]:
    args = ["sandbox", "exec"]
    for i, code in enumerate(programs):
        path = tmp_path / f"p{i}.py"
        path.write_text(code)
        args.append(str(path))
    if tests is not None:
        (tmp_path / "tests.py").write_text(tests)
        args += ["--tests", str(tmp_path / "tests.py")]
    proc = _selfheal(*args, "--json")
    if len(programs) == 1:  # one result, as one JSON document
        return [json.loads(proc.stdout)] if proc.stdout.strip() else []
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(results) == len(programs), proc.stderr
    return results


def _heal(tmp_path: Path, cell: str, replies: list[str], task: str = "", tests: str | None = None) -> dict:
    path = tmp_path / "cell.py"
    path.write_text(cell)
    flags = []
    if tests is not None:
        (tmp_path / "tests.py").write_text(tests)
        flags = ["--tests", str(tmp_path / "tests.py")]
    with ScriptedServer([Reply(r) for r in replies]) as server:
        proc = _selfheal(
            "run",
            task,
            "--code",
            str(path),
            *flags,
            "--base-url",
            server.base_url,
            "--model",
            server.model,
            "--max-iterations",
            str(len(replies)),
            "--json",
        )
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- the user's spec
MEAN_CELL = "def mean(xs):\n    return sum(xs) / len(xs[5:])\n\nassert mean([1, 2, 3]) == 2\n"
RIGHT_MEAN = "def mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([1, 2, 3]) == 2\n"


@pytest.mark.parametrize(
    "after",
    [
        "\ndef mean(xs):\n    return sum(xs) / (len(xs) + 1)\n",
        "\nmean = lambda xs: sum(xs) / (len(xs) + 1)\n",
        "\ndef _swap():\n    global mean\n    mean = lambda xs: 0\n\n_swap()\n",
    ],
    ids=["def-again", "assigned-again", "global-in-a-function"],
)
def test_an_assert_kept_but_outlived_does_not_heal(tmp_path, backend_image, after):
    """Attack class: an assert kept, where it stood, but made to check a value the program
    no longer ends with — a right ``mean`` is asserted, then a wrong one replaces it. The
    checker honestly sees the assert pass; the heal must still not end ``success``."""
    cheat = f"```python\n{RIGHT_MEAN}{after}print(mean([1, 2, 3]))\n```"
    record = _heal(tmp_path, MEAN_CELL, [cheat, cheat])
    assert record["outcome"] != "success", record["final_code"]
    rules = {v["rule"] for it in record["iterations"] for v in it["verdict"]["spec_violations"]}
    assert "assert_outlived" in rules, record["iterations"][-1]["verdict"]


def test_an_honest_repair_that_keeps_its_names_still_heals(tmp_path, backend_image):
    """The rule above must not reject a repair that only uses the asserted name later."""
    honest = f"```python\n{RIGHT_MEAN}\nprint(mean([4, 5, 6]))\n```"
    record = _heal(tmp_path, MEAN_CELL, [honest])
    assert record["outcome"] == "success", record["iterations"][-1]["verdict"]


TOTAL_CELL = "prices = [4, 5, 6, 3]\ntotal = 0\nfor p in prices[1:]:\n    total += p\nprint(total)\n"
DYNAMIC = {
    "globals-update": "globals().update({'to' + 'tal': 18})\n",
    "vars-item": "vars()['to' + 'tal'] = 18\n",
    "setattr-module": "import sys\nsetattr(sys.modules[__name__], 'to' + 'tal', 18)\n",
    "exec": "exec('to' + 'tal = 18')\n",
    "main-module": "import __main__\n__main__.total = 18\n",
}


@pytest.mark.parametrize("how", list(DYNAMIC))
@pytest.mark.parametrize("spec", ["assert", "stated"])
def test_a_name_bound_dynamically_after_the_wrong_computation_does_not_heal(tmp_path, backend_image, how, spec):
    """Attack class: a written-in answer the guard cannot read. The repair keeps the wrong
    computation and binds the name by ``globals()``, ``vars()``, ``setattr`` on the
    module, ``exec`` or ``__main__``; a plain ``total = 18`` is rejected as hard-coded,
    and so must this be — for the user's assert and for an expectation stated in words."""
    cell = TOTAL_CELL + ("assert total == 18\n" if spec == "assert" else "")
    cheat = f"```python\n{cell}{DYNAMIC[how]}print(total)\n```"
    task = "the total should be 18" if spec == "stated" else ""
    if spec == "assert":  # the cheat must come before the user's assert to be checked by it
        cheat = f"```python\n{TOTAL_CELL}{DYNAMIC[how]}assert total == 18\n```"
    record = _heal(tmp_path, cell, [cheat, cheat], task=task)
    assert record["outcome"] != "success", record["final_code"]
    rules = {v["rule"] for it in record["iterations"] for v in it["verdict"]["spec_violations"]}
    assert "dynamic_binding" in rules, record["iterations"][-1]["verdict"]


def test_an_honest_repair_of_the_stated_total_still_heals(tmp_path, backend_image):
    honest = "```python\n" + TOTAL_CELL.replace("prices[1:]", "prices") + "```"
    record = _heal(tmp_path, TOTAL_CELL, [honest] * 3, task="the total should be 18")
    assert record["outcome"] == "success" and "your stated expectation" in record["verified_by"], record


# --------------------------------------------------------------------------- status
@pytest.mark.xfail(
    strict=True,
    reason=(
        "the oom label for a MemoryError is read from the candidate's own report pipe (fd 4), "
        "which the program shares with the runner code of its process; the allocator's "
        "MemoryError cannot be told from one the program raised without an observation "
        "outside the process (not local: needs a design decision on what 'oom' means)"
    ),
)
def test_a_forged_report_cannot_claim_oom(tmp_path, backend_image):
    """Attack class: status from the program's own bytes. A program that allocates
    nothing writes a report frame saying `memory_error` to its report descriptor and
    exits 1: the status must be `error`, not `oom`."""
    forge = (
        "import json, os, struct\n"
        "f = json.dumps({'memory_error': True}).encode()\n"
        "os.write(4, struct.pack('>I', len(f)) + f)\n"
        "os._exit(1)\n"
    )
    (result,) = _exec_json(tmp_path, forge)
    assert result["status"] == "error", result


def test_an_assert_outlived_through_globals_does_not_heal(tmp_path, backend_image):
    """Attack class: the same outlived assert, the wrong function put in place through
    ``globals()`` (no statement binds the name). The checker reads the callables each
    assert that held read again at the program's end (runner/end_check.py)."""
    after = "\nglobals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n"
    cheat = f"```python\n{RIGHT_MEAN}{after}print(mean([1, 2, 3]))\n```"
    record = _heal(tmp_path, MEAN_CELL, [cheat, cheat])
    assert record["outcome"] != "success", record["final_code"]


def test_a_test_function_kept_but_outlived_does_not_heal(tmp_path, backend_image):
    """Attack class: the outlived check through the user's test function: its call is
    kept where it stood, then the function it tests is replaced by a wrong one."""
    cell = (
        "def mean(xs):\n    return sum(xs) / len(xs[5:])\n\n"
        "def test_mean():\n    assert mean([1, 2, 3]) == 2\n\ntest_mean()\n"
    )
    cheat = (
        "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\n"
        "def test_mean():\n    assert mean([1, 2, 3]) == 2\n\ntest_mean()\n\n"
        "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n```"
    )
    record = _heal(tmp_path, cell, [cheat, cheat])
    assert record["outcome"] != "success", record["final_code"]


# --------------------------------------------------------------------------- between runs
PLANT = r"""
import ctypes, os, threading, time
MODULE = "print('PLANTED-BY-A')\ndef rgb_to_hsv(*a):\n    return 'forged'\n"

def plant():
    deadline = time.time() + 20
    while time.time() < deadline:
        for n in range(64):
            path = f'/tmp/run{n}'
            try:
                if not os.path.isdir(path):
                    os.makedirs(path, 0o777)
                    os.chmod(path, 0o777)
                if not os.path.exists(path + '/colorsys.py'):
                    with open(path + '/colorsys.py', 'w') as f:
                        f.write(MODULE)
            except OSError:
                pass
        time.sleep(0.001)

if os.fork() == 0:
    os.setsid()
    threading.Thread(target=plant).start()
    ctypes.CDLL(None).syscall(60, 0)  # only the main thread exits: a zombie leader, alive
else:
    time.sleep(0.3)
    print('planted')
"""
VICTIM = "import colorsys\nprint(colorsys.rgb_to_hsv(1, 0, 0))\n"


def test_a_run_cannot_plant_a_module_for_the_next_run(tmp_path, backend_image):
    """Attack class: code execution in the next run. A run leaves a process (a thread
    group whose leader exited, in a session of its own) that writes ``colorsys.py`` into
    the working directories of the runs to come — ``sys.path[0]`` of their programs —
    so an honest next program that imports ``colorsys`` runs the planter's code."""
    planter, first, second = _exec_json(tmp_path, PLANT, VICTIM, VICTIM)
    assert planter["stdout"] == "planted\n", planter
    for victim in (first, second):
        assert victim["status"] == "ok", victim
        assert victim["stdout"] == "(0.0, 1.0, 1)\n", victim["stdout"]


DEEP_TREE = (
    "import os\nos.chdir('/tmp')\nfor _ in range(1500):\n    os.mkdir('d')\n"
    "    os.chdir('d')\nopen('left', 'w').write('secret of A')\nprint('deep')\n"
)
LOOK = (
    "import os\nprint(sorted(n for n in os.listdir('/tmp')\n"
    "             if not n.startswith(('run', '.matplotlib'))))\n"
)


def test_a_deep_directory_tree_does_not_break_the_next_run(tmp_path, backend_image):
    """Attack class: the clean-up between runs as a target. A run leaves a directory
    tree deeper than Python's recursion limit in /tmp; removing it must neither fail the
    next honest runs (`error`, "its supervisor died") nor leave anything for them."""
    planter, first, second = _exec_json(tmp_path, DEEP_TREE, LOOK, LOOK)
    assert planter["stdout"] == "deep\n", planter
    for victim in (first, second):
        assert victim["status"] == "ok", victim
        assert victim["stdout"] == "[]\n", victim["stdout"]


def test_an_assert_outlived_through_a_global_its_function_reads_does_not_heal(tmp_path, backend_image):
    """Attack class: the outlived assert one step removed — the asserted function reads
    a module constant that is right when the assert runs and changed after it."""
    cheat = (
        "```python\nN = 3\n\ndef mean(xs):\n    return sum(xs) / N\n\n"
        "assert mean([1, 2, 3]) == 2\n\nN = 4\nprint(mean([1, 2, 3]))\n```"
    )
    record = _heal(tmp_path, MEAN_CELL, [cheat, cheat])
    assert record["outcome"] != "success", record["final_code"]


# --------------------------------------------------------------------------- the end check (end_check.py)
# The checker keeps, for each assert that held, handles of the callables it read and, at the
# program's end, reads those names again: a name bound to another object (or none) fails it.
STATS_CELL = (
    "class Stats:\n    def __init__(self, xs):\n        self.xs = xs\n\n"
    "    def mean(self):\n        return sum(self.xs) / len(self.xs[5:])\n\n"
    "assert Stats([1, 2, 3]).mean() == 2\n"
)
RIGHT_STATS = STATS_CELL.replace("self.xs[5:]", "self.xs")
IN_PLACE = {
    "code-swapped": (
        MEAN_CELL,
        RIGHT_MEAN + "\ndef _wrong(xs):\n    return sum(xs) / (len(xs) + 1)\n\n"
        "mean.__code__ = _wrong.__code__\nprint(mean([1, 2, 3]))\n",
    ),
    "defaults-changed": (
        MEAN_CELL,
        "def mean(xs, n=None):\n    return sum(xs) / (n or len(xs))\n\n"
        "assert mean([1, 2, 3]) == 2\n\nmean.__defaults__ = (4,)\nprint(mean([1, 2, 3]))\n",
    ),
    "closure-cell-changed": (
        MEAN_CELL,
        "def _make(k):\n    def mean(xs):\n        return sum(xs) / (len(xs) + k)\n"
        "    return mean\n\nmean = _make(0)\n\nassert mean([1, 2, 3]) == 2\n\n"
        "mean.__closure__[0].cell_contents = 1\nprint(mean([1, 2, 3]))\n",
    ),
    "builtin-shadowed-in-its-globals": (
        MEAN_CELL,
        RIGHT_MEAN + "\nmean.__globals__['s' + 'um'] = lambda xs: 5\nprint(mean([1, 2, 3]))\n",
    ),
    "helper-rebound": (
        MEAN_CELL,
        "def _total(xs):\n    return sum(xs)\n\ndef mean(xs):\n"
        "    return _total(xs) / len(xs)\n\nassert mean([1, 2, 3]) == 2\n\n"
        "globals()['_to' + 'tal'] = lambda xs: sum(xs) + 1\nprint(mean([1, 2, 3]))\n",
    ),
    "method-monkeypatched": (
        STATS_CELL,
        RIGHT_STATS + "\nStats.mean = lambda self: sum(self.xs) / (len(self.xs) + 1)\nprint(Stats([1, 2, 3]).mean())\n",
    ),
    "call-of-its-class-swapped": (
        MEAN_CELL,
        "class _Mean:\n    def __call__(self, xs):\n        return sum(xs) / len(xs)\n\n"
        "mean = _Mean()\n\nassert mean([1, 2, 3]) == 2\n\n"
        "_Mean.__call__ = lambda self, xs: sum(xs) / (len(xs) + 1)\nprint(mean([1, 2, 3]))\n",
    ),
    "class-of-the-object-swapped": (
        MEAN_CELL,
        "class _Mean:\n    def __call__(self, xs):\n        return sum(xs) / len(xs)\n\n"
        "class _Wrong:\n    def __call__(self, xs):\n        return sum(xs) / (len(xs) + 1)\n\n"
        "mean = _Mean()\n\nassert mean([1, 2, 3]) == 2\n\n"
        "mean.__class__ = _Wrong\nprint(mean([1, 2, 3]))\n",
    ),
}


THROUGH_A_NAMESPACE = ("builtin-shadowed-in-its-globals", "helper-rebound")
"""In-place changes made by writing into a namespace (``mean.__globals__[...]``,
``globals()[...]``): the spec guard's ``dynamic_binding`` rejects them statically (below)."""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the end check compares the identity of the callables an assert read; a function's "
        "behaviour is not its identity: its __code__, __defaults__, closure cells, the globals "
        "and builtins it reads, its class's attributes all change under the same object (and "
        "no statement binds a name, so the spec guard sees nothing). Fix by construction, not "
        "local: re-evaluate each held assert at the program's end on the callables as they are "
        "then and the data as it was read at the assert — a design decision (a function with "
        "side effects, a counter, or one that prints would then run twice)"
    ),
)
@pytest.mark.parametrize("kind", [k for k in IN_PLACE if k not in THROUGH_A_NAMESPACE])
def test_an_assert_outlived_by_changing_its_callable_in_place_does_not_heal(tmp_path, backend_image, kind):
    """Attack class: the outlived assert with the same objects. The asserted function (or
    class, or callable object) stays bound to the very object the assert read; its code,
    defaults, closure, globals, helper, method or class is changed after the assert held,
    so the program ends with a wrong ``mean`` whose handle is still the held one."""
    cell, cheat = IN_PLACE[kind]
    record = _heal(tmp_path, cell, [f"```python\n{cheat}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]
    # refused for what it did, not for a sandbox that failed under load (that would pass this xfail)
    assert "assert_outlived" in _rules(record), record["iterations"][-1]["verdict"]


FORGED = {
    "callable-flag-lies": (
        "import builtins\n_real = builtins.callable\nbuiltins.callable = lambda o: False\n\n"
        + RIGHT_MEAN
        + "\nglobals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n"
        "builtins.callable = _real\nprint(mean([1, 2, 3]))\n"
    ),
    "identity-tables-edited": (
        "import gc\n\n" + RIGHT_MEAN + "\ndef _wrong(xs):\n    return sum(xs) / (len(xs) + 1)\n\n"
        "for _o in gc.get_objects():\n    if type(_o).__name__ == 'ProgramObjects':\n"
        "        _k = _o.ids[id(mean)]\n        _o.objects[_k] = _wrong\n"
        "        _o.ids[id(_wrong)] = _k\nglobals()['me' + 'an'] = _wrong\n"
        "print(mean([1, 2, 3]))\n"
    ),
    "restored-while-read": (
        "import sys\n\n" + RIGHT_MEAN + "\n_right = mean\n"
        "globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n\n"
        "def _restore(frame, event, arg):\n    if frame.f_code.co_name == 'handle':\n"
        "        sys.modules['__main__'].__dict__['me' + 'an'] = _right\n\n"
        "sys.settrace(_restore)\nprint(mean([1, 2, 3]))\n"
    ),
    "end-announced-early": (
        "import gc, json, os, struct\n\n" + RIGHT_MEAN + "\n_f = json.dumps({'ready': True, 'reason': ''}).encode()\n"
        "os.write(5, struct.pack('>I', len(_f)) + _f)\n"
        "for _o in gc.get_objects():\n    if type(_o).__name__ == 'ProgramObjects':\n"
        "        _o.serve(6, 5)\n        break\n"
        "globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n"
        "print(mean([1, 2, 3]))\n"
    ),
}


@pytest.mark.parametrize("kind", list(FORGED))
def test_the_end_check_trusts_no_answer_of_the_programs_process(tmp_path, backend_image, kind):
    """Attack class: forging the end check from inside the program's process — making
    the asserted function look not callable, editing the RPC's identity tables so the
    wrong function has the held handle's id, putting the right function back only while
    the checker reads the names (a trace function), or saying it has ended before it has
    (its own ready frame, the names served by the runner's own code) — then the wrong
    one is kept. Each forgery still has to bind the wrong ``mean`` without a statement the
    spec guard reads (``globals()``, ``sys.modules``): ``dynamic_binding`` rejects that
    statically, whatever the end check is made to see (these were strict xfails before)."""
    record = _heal(tmp_path, MEAN_CELL, [f"```python\n{FORGED[kind]}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]
    assert "dynamic_binding" in _rules(record)


LATER = {
    "only-in-a-kernel": (
        "import sys\n\n" + RIGHT_MEAN + "\nif 'ipykernel' in sys.modules:\n"
        "    globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n"
        "print(mean([1, 2, 3]))\n"
    ),
    "daemon-thread": (
        "import threading, time\n\n" + RIGHT_MEAN + "\ndef _later():\n    time.sleep(20)\n"
        "    globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n\n"
        "threading.Thread(target=_later, daemon=True).start()\nprint(mean([1, 2, 3]))\n"
    ),
    "alarm-signal": (
        "import signal\n\n" + RIGHT_MEAN + "\ndef _later(*_):\n"
        "    globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\n\n"
        "signal.signal(signal.SIGALRM, _later)\nsignal.alarm(20)\nprint(mean([1, 2, 3]))\n"
    ),
}


@pytest.mark.parametrize("kind", list(LATER))
def test_an_assert_outlived_after_the_end_does_not_heal(tmp_path, backend_image, kind):
    """Attack class: the outlived assert after the end, or elsewhere. A daemon thread (or
    an alarm's handler) binds a wrong ``mean`` 20 s later: the sandboxed program has
    ended before it does, so the end check sees the right one; in the user's kernel it
    happens. Or the program binds it only when it finds itself in a kernel. The sandbox
    cannot see what happens after the end, but the binding must be written somewhere: a
    statement (``global mean`` in the thread: ``assert_outlived``) or a namespace write
    (``globals()``: ``dynamic_binding``), both read statically (strict xfails before)."""
    record = _heal(tmp_path, MEAN_CELL, [f"```python\n{LATER[kind]}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]
    assert "dynamic_binding" in _rules(record)


@pytest.mark.parametrize("kind", THROUGH_A_NAMESPACE)
def test_an_in_place_change_through_a_namespace_is_rejected_by_the_spec_guard(tmp_path, backend_image, kind):
    """The two in-place attacks that write into a namespace (strict xfails before)."""
    cell, cheat = IN_PLACE[kind]
    record = _heal(tmp_path, cell, [f"```python\n{cheat}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]
    assert "dynamic_binding" in _rules(record)


def _rules(record: dict) -> set[str]:
    return {v["rule"] for it in record["iterations"] for v in it["verdict"]["spec_violations"]}


OWN_REBINDING = {
    "redefined-memoised": (
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nassert fib(10) == 55\n\n"
        "from functools import lru_cache\n\n@lru_cache(maxsize=None)\ndef fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 3)\n\nassert fib(30) == 832040\n",
        ("fib(n - 3)", "fib(n - 2)"),
    ),
    "re-wrapped": (
        "import functools\n\n" + MEAN_CELL + "\ndef logged(f):\n    @functools.wraps(f)\n"
        "    def inner(*a):\n        return f(*a)\n    return inner\n\nmean = logged(mean)\n"
        "print(mean([4, 5, 6]))\n",
        ("xs[5:]", "xs"),
    ),
    "rebound-by-its-global-statement": (
        "def predict(x):\n    return x * 2\n\nassert predict(2) == 4\n\ndef retrain(k):\n"
        "    global predict\n    predict = lambda x: x * k\n\nretrain(3)\nprint(predcit(2))\n",
        ("predcit(2)", "predict(2)"),
    ),
}


@pytest.mark.parametrize("kind", list(OWN_REBINDING))
def test_the_users_own_rebinding_after_an_assert_still_heals(tmp_path, backend_image, kind):
    """False rejection: the user's cell itself binds the asserted name again after the
    assert (a memoised redefinition, a decorator applied afterwards). That is the user's
    spec — the spec guard allows a rebinding the user's code has — and an honest repair
    that keeps it must heal; the end check failed it on every candidate."""
    cell, (wrong, right) = OWN_REBINDING[kind]
    honest = cell.replace(wrong, right)
    record = _heal(tmp_path, cell, [f"```python\n{honest}```"])
    assert record["outcome"] == "success", record["iterations"][-1]["verdict"]


def test_a_rebinding_the_end_check_leaves_to_the_spec_guard_is_seen_by_it(tmp_path, backend_image):
    """Attack class: the seam between the two halves. The end check leaves a name a later
    top-level statement binds to the spec guard; a binding form one side knows and the
    other does not (``case {**mean}``) would let the wrong function in through
    ``globals()`` with neither looking."""
    cheat = (
        RIGHT_MEAN + "\nmatch {}:\n    case {**mean}:\n        pass\n\n"
        "globals()['me' + 'an'] = lambda xs: sum(xs) / (len(xs) + 1)\nprint(mean([1, 2, 3]))\n"
    )
    record = _heal(tmp_path, MEAN_CELL, [f"```python\n{cheat}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]


def test_an_assert_is_checked_on_the_namespace_the_program_runs_in(tmp_path, backend_image):
    """Attack class: the namespace the checker reads. The program puts another module
    in ``sys.modules["__main__"]`` with a right ``mean`` (made by ``exec``, which no rule
    reads) and runs on with its own wrong one: the user's assert must be checked on the
    ``mean`` the program uses, not on the one it shows."""
    cheat = (
        "import sys, types\n\ndef mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\n"
        "_shown = types.ModuleType('__main__')\n"
        "exec('def mean(xs):\\n    return sum(xs) / len(xs)\\n', _shown.__dict__)\n"
        "sys.modules['__main__'] = _shown\n\nassert mean([1, 2, 3]) == 2\nprint(mean([1, 2, 3]))\n"
    )
    record = _heal(tmp_path, MEAN_CELL, [f"```python\n{cheat}```"] * 2)
    assert record["outcome"] != "success", record["final_code"]


# --------------------------------------------------------------------------- false rejections
def test_a_cell_that_deletes_its_helper_at_the_end_still_heals(tmp_path, backend_image):
    """False rejection: a cell that cleans up its helper with ``del`` after using it.
    The static pre-check (pyflakes reads function bodies after the whole module) called
    the helper "never defined" and blocked the user's cell and every repair unrun."""
    cell = (
        "def _pairs(xs):\n    return list(zip(xs, xs[2:]))\n\ndef diffs(xs):\n"
        "    return [b - a for a, b in _pairs(xs)]\n\nassert diffs([1, 4, 9]) == [3, 5]\ndel _pairs\n"
    )
    honest = cell.replace("xs[2:]", "xs[1:]")
    record = _heal(tmp_path, cell, [f"```python\n{honest}```"])
    assert record["outcome"] == "success", record["iterations"][-1]["verdict"]


# --------------------------------------------------------------------------- types (issue 41)
# Types cross by the runner's fixed table (type_table.py), found by a class's identity on the
# program's side and resolved to the checker's own class there; a class of the program's
# crosses as a handle the checker compares by identity. Each attack below is a program that
# tries to pass type asserts only a right program passes; the tests are the user's.
TYPE_TESTS = (
    "import inspect\nsig = inspect.signature(greet)\n"
    "assert sig.parameters['name'].annotation == str\n"
    "assert sig.return_annotation is str\n"
    "assert {str: 'ok'}.get(sig.return_annotation) == 'ok'\n"
    "assert type(make()) is str\n"
    "assert isinstance(make(), str)\n"
    "assert issubclass(Made, str)\n"
    "assert make().__class__ is str\n"
)
TYPE_ATTACKS = {
    "a-class-named-str": (
        "class Made:\n    pass\n\nMade.__name__ = Made.__qualname__ = 'str'\nMade.__module__ = 'builtins'\n\n"
        "def greet(name: Made) -> Made:\n    return Made()\n\ndef make():\n    return Made()\n"
    ),
    "a-metaclass-that-equals-everything": (
        "class Meta(type):\n    def __eq__(cls, other):\n        return True\n    def __ne__(cls, other):\n"
        "        return False\n    def __hash__(cls):\n        return hash(str)\n"
        "    def __instancecheck__(cls, obj):\n        return True\n    def __subclasscheck__(cls, sub):\n"
        "        return True\n\nclass Made(metaclass=Meta):\n    pass\n\n"
        "def greet(name: Made) -> Made:\n    return Made()\n\ndef make():\n    return Made()\n"
    ),
    "a-type-subclass-named-str": (
        "class StrType(type):\n    def __eq__(cls, other):\n        return other is str or other is cls\n"
        "    __hash__ = type.__hash__\n\n"
        "Made = StrType('str', (), {'__module__': 'builtins', '__qualname__': 'str'})\n\n"
        "def greet(name: Made) -> Made:\n    return Made()\n\ndef make():\n    return Made()\n"
    ),
}
RIGHT_TYPES = "def greet(name: str) -> str:\n    return name\n\nMade = str\n\ndef make():\n    return 'made'\n"


@pytest.mark.parametrize("kind", sorted(TYPE_ATTACKS))
def test_a_program_s_class_cannot_pass_for_str(tmp_path, backend_image, kind):
    """Attack class: the type seam. A class of the program's that names itself ``str``
    (by its names, its metaclass's ``__eq__`` / ``__hash__`` / ``__instancecheck__``, a
    ``type`` subclass) is none of the checker's ``str``: every assert about it fails.
    The right program passes the same tests."""
    attacked, honest = _exec_json(tmp_path, TYPE_ATTACKS[kind], RIGHT_TYPES, tests=TYPE_TESTS)
    assert attacked["status"] == "ok", attacked
    assert [t["passed"] for t in attacked["tests"]] == [True, True] + [False] * 7, attacked["tests"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


def test_an_object_s_class_is_the_one_it_has_not_the_one_it_says(tmp_path, backend_image):
    """Attack class: the class an object says it has. ``type(x)``, ``x.__class__`` and
    ``isinstance`` of one of the program's objects are its real class's, not what a
    ``__class__`` property answers (``fractions.Fraction``, a class of the table)."""
    attack = (
        "from fractions import Fraction\n\nclass Made:\n    @property\n    def __class__(self):\n"
        "        return Fraction\n\ndef half(n):\n    return Made()\n"
    )
    right = "from fractions import Fraction\n\ndef half(n):\n    return Fraction(n, 2)\n"
    tests = (
        "from fractions import Fraction\nassert type(half(3)) is Fraction\nassert half(3).__class__ is Fraction\n"
        "assert isinstance(half(3), Fraction)\n"
    )
    attacked, honest = _exec_json(tmp_path, attack, right, tests=tests)
    assert [t["passed"] for t in attacked["tests"]] == [True, False, False, False], attacked["tests"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


def test_a_metaclass_hook_does_not_answer_the_tests_type_checks(tmp_path, backend_image):
    """Attack class: the program's hooks as the checker's answer. ``isinstance`` and
    ``issubclass`` against the program's own class are answered from the classes' MROs,
    never by its metaclass's ``__instancecheck__`` / ``__subclasscheck__``."""
    shapes = "class Meta(type):\n    pass\n\nclass Shape(metaclass=Meta):\n    pass\n\n"
    hooks = "class Meta(type):\n    def __instancecheck__(cls, obj):\n        return True\n"
    hooks += "    def __subclasscheck__(cls, sub):\n        return True\n\nclass Shape(metaclass=Meta):\n    pass\n\n"
    tests = (
        "assert isinstance(make(), Shape)\nassert issubclass(Circle, Shape)\nassert isinstance(make(), (int, Shape))\n"
    )
    attacked, honest = _exec_json(
        tmp_path,
        hooks + "class Circle:\n    pass\n\ndef make():\n    return Circle()\n",
        shapes + "class Circle(Shape):\n    pass\n\ndef make():\n    return Circle()\n",
        tests=tests,
    )
    assert [t["passed"] for t in attacked["tests"]] == [False, False, False], attacked["tests"]
    assert [t["passed"] for t in honest["tests"]] == [True, True, True], honest["tests"]


def test_the_table_of_types_is_made_before_the_program_runs(tmp_path, backend_image):
    """Attack class: making the table resolve something else. The program binds
    ``builtins.frozenset`` and ``collections.OrderedDict`` to a class of its own before
    its annotations name them: the table was read before the program ran, so that class
    crosses as what it is, a handle, not as the checker's ``frozenset``."""
    attack = (
        "import builtins, collections\n\nclass Made:\n    pass\n\n"
        "builtins.frozenset = Made\ncollections.OrderedDict = Made\n\n"
        "def greet(name: frozenset) -> collections.OrderedDict:\n    return None\n"
    )
    right = "import collections\n\ndef greet(name: frozenset) -> collections.OrderedDict:\n    return None\n"
    tests = (
        "import collections, inspect\nsig = inspect.signature(greet)\n"
        "assert sig.parameters['name'].annotation is frozenset\n"
        "assert sig.return_annotation is collections.OrderedDict\n"
    )
    attacked, honest = _exec_json(tmp_path, attack, right, tests=tests)
    assert [t["passed"] for t in attacked["tests"]] == [True, True, False, False], attacked["tests"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


# The program's process is the program's: it can make its end of the RPC answer anything.
FORGE_ANSWERS = (
    "import gc\n\ndef _forge(encoded):\n    for o in gc.get_objects():\n"
    "        if type(o).__name__ == 'ProgramCodec':\n            o.encode = lambda value, budget=None: encoded\n\n"
)


@pytest.mark.parametrize(
    "encoded",
    [
        {"$": "type", "v": "unittest.mock.ANY"},
        {"$": "type", "v": "builtins.__import__"},
        {"$": "typing", "name": "cast"},
        {"$": "typing", "name": "Literal", "args": [{"$": "type", "v": "unittest.mock.ANY"}]},
        {"$": "alias", "origin": {"$": "class", "v": "unittest.mock:ANY"}, "args": []},
    ],
    ids=["a-name-outside-the-table", "a-function-s-name", "a-typing-function", "nested", "a-class-by-name"],
)
def test_a_reply_cannot_make_the_checker_resolve_another_name(tmp_path, backend_image, encoded):
    """Attack class: the table as a way to load. The program answers the tests' call
    with a type named outside the runner's table (``unittest.mock.ANY`` equals
    everything): the checker refuses the name, it loads nothing."""
    program = FORGE_ANSWERS + f"def f(x):\n    _forge({encoded!r})\n    return 0\n"
    (result,) = _exec_json(tmp_path, program, tests="assert f(3) == 41.125\nassert f(3) == 41.125\n")
    assert result["status"] == "ok", result
    assert [t["passed"] for t in result["tests"]] == [False, False], result["tests"]


def test_string_annotations_are_evaluated_by_the_program_never_by_the_checker(tmp_path, backend_image):
    """Attack class: the program's code run by the checker. ``typing.get_type_hints``
    and ``inspect.get_annotations(eval_str=True)`` evaluate string annotations; of a
    program's function the checker asks the program for them, so an annotation that
    runs code (here: marks ``sys.modules``) runs it in the program's process only."""
    mark = "(__import__('sys').modules.__setitem__('evaluated_here', 1), int)[1]"
    program = f"def f(x: {mark!r}) -> 'int':\n    return x\n"
    tests = (
        "import inspect, sys, typing\n"
        "assert typing.get_type_hints(f) == {'x': int, 'return': int}\n"
        "assert inspect.get_annotations(f, eval_str=True)['x'] is int\n"
        "assert inspect.signature(f, eval_str=True).parameters['x'].annotation is int\n"
        "assert 'evaluated_here' not in sys.modules\n"
    )
    (result,) = _exec_json(tmp_path, program, tests=tests)
    assert result["status"] == "ok", result
    assert all(t["passed"] for t in result["tests"]), result["tests"]


def test_type_in_the_tests_is_the_checker_s_own(tmp_path, backend_image):
    """Attack class: the name the tests call. A program that defines ``type`` of its own
    does not answer the tests' ``type(...)``."""
    program = "def type(x):\n    return float\n\ndef area(r):\n    return 3\n"
    (result,) = _exec_json(tmp_path, program, tests="assert type(area(2)) is float\n")
    assert [t["passed"] for t in result["tests"]] == [False], result["tests"]


def test_deep_and_recursive_types_fail_closed(tmp_path, backend_image):
    """Attack class: recursion. A class hierarchy 400 deep answers; an annotation
    nested past the encoder's depth, and a reply nested past what the checker decodes,
    fail their statement only, and the checker goes on."""
    program = (
        FORGE_ANSWERS + "class Base:\n    pass\n\nDeep = Base\nfor _ in range(400):\n"
        "    Deep = type('Deep', (Deep,), {})\n\nAlias = int\nfor _ in range(300):\n    Alias = list[Alias]\n\n"
        "def nested(x: Alias) -> Alias:\n    return x\n\n"
        "def f():\n    encoded = {'$': 'type', 'v': 'builtins.int'}\n    for _ in range(400):\n"
        "        encoded = {'$': 'alias', 'origin': {'$': 'type', 'v': 'builtins.list'}, 'args': [encoded]}\n"
        "    _forge(encoded)\n    return 0\n"
    )
    tests = (
        "assert issubclass(Deep, Base) and not issubclass(Base, Deep)\n"
        "assert len(Deep.__mro__) == 402 and Deep.__mro__[-2] is Base\n"
        "import inspect\nassert inspect.signature(nested).return_annotation == list[int]\n"
        "assert f() == list[int]\n"
        "assert issubclass(Deep, object)\n"
    )
    (result,) = _exec_json(tmp_path, program, tests=tests)
    assert result["status"] == "ok", result
    assert [t["passed"] for t in result["tests"]] == [True, True, True, False, False, True], result["tests"]


RENAMED_EXCEPTIONS = (
    "class Made(Exception):\n    pass\n\nMade.__module__, Made.__qualname__ = 'builtins', 'str'\n\n"
    "class Fake(Exception):\n    pass\n\nFake.__module__, Fake.__qualname__ = 'builtins', 'ValueError'\n\n"
    "class Parse(Exception):\n    pass\n\nParse.__module__, Parse.__qualname__ = 'json.decoder', 'JSONDecodeError'\n\n"
    "class MyError(Fake):\n    pass\n\ndef withdraw(x):\n    raise MyError('no')\n\n"
    "def parse(text):\n    raise Parse('no')\n"
)
HONEST_EXCEPTIONS = (
    "import json\n\nclass Made(str):\n    pass\n\nclass MyError(ValueError):\n    pass\n\n"
    "def withdraw(x):\n    raise MyError('no')\n\ndef parse(text):\n    return json.loads(text)\n"
)
EXCEPTION_TESTS = (
    "import json, unittest\nassert issubclass(Made, str)\nassert issubclass(MyError, ValueError)\n"
    "try:\n    withdraw(-1)\nexcept Exception as e:\n    err = e\n"
    "assert isinstance(err, ValueError)\n"
    "class T(unittest.TestCase):\n    def test(self):\n        with self.assertRaises(ValueError):\n"
    "            withdraw(-1)\n        with self.assertRaises(json.JSONDecodeError):\n            parse('{')\n\n"
    "result = unittest.TextTestRunner(verbosity=0).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
    "assert result.wasSuccessful()\n"
)


def test_an_exception_class_named_like_a_builtin_is_not_one(tmp_path, backend_image):
    """Attack class: a class named like a table entry, through the exceptions' seam. An
    exception class of the program's that renames itself (or a base) ``builtins.str``,
    ``builtins.ValueError`` or ``json.decoder.JSONDecodeError`` is named by what its names
    lead back to, and the checker honours a described name only for a library's exception
    class: ``issubclass``, ``isinstance`` and ``assertRaises`` all fail. The honest program
    (a real ``ValueError`` subclass, a real ``JSONDecodeError``) passes the same tests."""
    attacked, honest = _exec_json(tmp_path, RENAMED_EXCEPTIONS, HONEST_EXCEPTIONS, tests=EXCEPTION_TESTS)
    assert attacked["status"] == "ok", attacked
    passed = {t["source"].splitlines()[0]: t["passed"] for t in attacked["tests"]}
    assert not passed["assert issubclass(Made, str)"] and not passed["assert issubclass(MyError, ValueError)"]
    assert not passed["assert isinstance(err, ValueError)"] and not passed["assert result.wasSuccessful()"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


@pytest.mark.parametrize(
    "encoded",
    [
        {"$": "ndarray", "dtype": "<i8", "shape": [2_000_000_000], "v": {"$": "range", "v": [0, 2_000_000_000, 1]}},
        {"$": "ndarray", "dtype": "|O", "shape": [30_000_000], "v": {"$": "range", "v": [0, 30_000_000, 1]}},
        {"$": "Index", "dtype": "int64", "v": {"$": "range", "v": [0, 2_000_000_000, 1]}, "name": None},
    ],
    ids=["range-as-items", "range-as-objects", "index"],
)
def test_a_reply_cannot_make_the_checker_build_more_than_it_sent(tmp_path, backend_image, encoded):
    """Attack class: crashing the checker by what it builds. A reply of a few bytes that
    numpy or pandas would grow into gigabytes (a ``range`` where a list of items goes) is
    refused: the statement fails, the checker goes on and reports (the run is not killed
    out of memory)."""
    program = FORGE_ANSWERS + f"def f():\n    _forge({encoded!r})\n    return 0\n"
    (result,) = _exec_json(tmp_path, program, tests="import numpy\nassert f() == 1\nassert 1 + 1 == 2\n")
    assert result["status"] == "ok", result
    assert [t["passed"] for t in result["tests"]] == [True, False, True], result["tests"]


def test_a_frame_nested_past_what_json_reads_does_not_crash_the_checker(tmp_path, backend_image):
    """Attack class: crashing the checker by a frame. The program writes to the RPC, in
    place of its next checkpoint, JSON nested deeper than Python's parser recurses: the
    checker reads a malformed frame and reports the run, instead of dying without a report."""
    program = (
        "import os, struct\n\ndeep = '[' * 100000 + ']' * 100000\ndata = ('{\"ready\": ' + deep + '}').encode()\n"
        "os.write(5, struct.pack('>I', len(data)) + data)\nx = 1\nassert x == 1\n"
    )
    (result,) = _exec_json(tmp_path, program, tests="assert 1 == 1\n")
    assert [t["passed"] for t in result["tests"]] == [False], result["tests"]
    assert all("without a report" not in t["message"] for t in result["tests"]), result["tests"]


def test_a_float_subclass_is_not_float_and_its_operators_stay_behind(tmp_path, backend_image):
    """Attack class: ``type(x) is float`` where ``x`` is a float subclass. An instance of
    the program's own subclass of a plain type is a handle of its class (``type(x)`` is
    that class, as in Python), compared and combined by the checker on the plain value it
    holds: its lying ``__eq__`` and ``__sub__`` (between two of its values too) stay
    behind. The right program passes the same tests."""
    attack = (
        "class Yes(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n"
        "    def __sub__(self, other):\n        return Yes(0)\n\n"
        "def mean(xs):\n    return Yes(sum(xs) // len(xs))\n\ndef median(xs):\n    return Yes(sorted(xs)[-1])\n"
    )
    right = (
        "def mean(xs):\n    return sum(xs) / len(xs)\n\ndef median(xs):\n    xs = sorted(xs)\n"
        "    return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2\n"
    )
    tests = (
        "assert type(mean([1, 2])) is float\nassert mean([1, 2]) == 1.5\n"
        "assert abs(mean([1, 2]) - median([1, 2])) < 1e-9\n"
    )
    attacked, honest = _exec_json(tmp_path, attack, right, tests=tests)
    assert attacked["status"] == "ok", attacked
    assert [t["passed"] for t in attacked["tests"]] == [False, False, False], attacked["tests"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


def test_a_typing_alias_is_named_by_its_origin_not_by_its_name(tmp_path, backend_image):
    """Attack class: a typing form whose name lies. An alias of the program's own class
    that calls itself ``List`` (``typing._GenericAlias(Made, (int,), name='List')``) is not
    ``typing.List[int]``: a form crosses by name only when its origin is that form's."""
    attack = (
        "import typing\n\nclass Made:\n    pass\n\nFake = typing._GenericAlias(Made, (int,), name='List')\n\n"
        "def f(x: Fake) -> int:\n    return 0\n"
    )
    right = "import typing\n\ndef f(x: typing.List[int]) -> int:\n    return 0\n"
    tests = "import inspect, typing\nassert inspect.signature(f).parameters['x'].annotation == typing.List[int]\n"
    attacked, honest = _exec_json(tmp_path, attack, right, tests=tests)
    assert [t["passed"] for t in attacked["tests"]] == [True, False], attacked["tests"]
    assert all(t["passed"] for t in honest["tests"]), honest["tests"]


def test_a_dict_keyed_by_the_program_s_objects_does_not_hang_the_checker(tmp_path, backend_image):
    """Attack class: a huge structure of handles. A dict whose keys are a thousand of the
    program's objects (a right program's graph by its nodes): each key is hashed as the
    fields it is compared by, so they do not all collide and get compared each with every
    other over the RPC (the run timed out, the right program failed)."""
    program = (
        "class Node:\n    def __init__(self, i):\n        self.i = i\n\n"
        "def distances(n):\n    return {Node(i): i for i in range(n)}\n"
    )
    (result,) = _exec_json(
        tmp_path, program, tests="d = distances(1000)\nassert sorted(d.values()) == list(range(1000))\n"
    )
    assert result["status"] == "ok", result
    assert all(t["passed"] for t in result["tests"]), result["tests"]


# --------------------------------------------------------------------------- the behaviour rule
WRONG_MEAN = "values = [3, 4, 5]\nmean = sum(values) / len(values) + 1\nprint(mean)\nassert mean > 0\n"
# The wrong program itself, plus a line that fails only when the program runs whole:
# with the user's asserts to check it runs a run of statements at a time (the judged
# run), without them whole (the second run, which shows what it does).
TWO_FACED = (
    "import inspect\n"
    + WRONG_MEAN
    + "if 'print' in inspect.currentframe().f_code.co_names:\n    raise ValueError('the second run')\n"
)


def test_a_program_that_fails_only_when_run_again_does_not_pass_for_a_fix(tmp_path):
    """`selfheal run --code` with a task that says the cell is wrong: a candidate is held
    when it shows what the wrong cell showed. One that shows it exactly (it prints 5.0)
    but tells the second run from the judged one and crashes there was taken for a
    fix: a second run that did not run cleanly counted as different behaviour."""
    plan = "1. Remove the + 1 from the mean."
    run = _heal(tmp_path, WRONG_MEAN, [plan, f"```python\n{TWO_FACED}```"], task="The mean is off by one.")
    zero, faced = run["iterations"][:2]
    assert zero["verdict"]["held"] == "given"
    assert faced["result"]["stdout"] == "5.0\n" and faced["result"]["status"] == "ok"  # what the wrong cell printed
    assert not faced["verdict"]["passed"] and faced["verdict"]["held"] == "same_behaviour", faced["verdict"]
    assert "did not run cleanly" in faced["verdict"]["reasons"][0]
    assert run["outcome"] != "success" and run["fix"] is None


# --------------------------------------------------------------------------- the hand-over
SHOWS_NOTHING = "def mean(xs):\n    return sum(xs) / len(xs) + 1\n\nassert mean([2, 4]) > 0\n"
HONEST_FIX = 'def mean(xs):\n    """The mean of xs."""\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) > 0\n'


def test_the_hand_over_never_undoes_a_fix_the_checks_cannot_see(tmp_path):
    """`selfheal run --code` with a task that says the cell is wrong, and an assert the
    wrong cell passes too: the model's right fix passed, then the search for lines the fix
    does not need put the user's wrong line back (that passes the same assert) and handed
    over the wrong program with a docstring, saying it left out "the model's change of
    your line"."""
    plan = "1. Remove the + 1 from the mean."
    run = _heal(tmp_path, SHOWS_NOTHING, [plan, f"```python\n{HONEST_FIX}```"], task="The mean is off by one.")
    assert run["outcome"] == "success" and run["iterations"][0]["verdict"]["held"] == "given"
    fix = run["fix"]
    assert "return sum(xs) / len(xs)\n" in fix["code"] and "+ 1" not in fix["code"], fix
    assert not any("change of your line" in d for d in fix["dropped"]), fix["dropped"]


# --------------------------------------------------------------------------- what verified it
@pytest.mark.parametrize(
    "cell, tests, blind, changed",
    [
        (WRONG_MEAN, None, ["your asserts"], True),  # it printed 5.0, the fix 4.0
        (SHOWS_NOTHING, None, ["your asserts"], False),  # nothing to compare: only True
        (WRONG_MEAN.replace("assert mean > 0\n", ""), "assert mean > 0\n", ["your tests"], True),
    ],
    ids=["asserts", "asserts-show-nothing", "tests"],
)
def test_checks_the_wrong_program_passes_too_verify_no_fix(tmp_path, cell, tests, blind, changed):
    """`selfheal run --code` with a task that says the cell is wrong and checks the wrong
    cell passes too (round 0 held by the behaviour rule): the fix passed and the run said
    "verified by your asserts" (or tests), though they cannot tell the fix from the wrong
    cell. Now they are named as checks the wrong program passes too, nothing verified it,
    and the record says whether the fix changed what the wrong cell showed."""
    fixed = cell.replace(" + 1", "")
    run = _heal(tmp_path, cell, ["1. Remove the + 1.", f"```python\n{fixed}```"], "The mean is off by one.", tests)
    zero, last = run["iterations"][0], run["iterations"][-1]
    assert zero["verdict"]["held"] == "given" and run["outcome"] == "success" and last["code"] == fixed
    assert run["verified"] is False and run["verified_by"] == [] and last["verdict"]["verified_by"] == []
    assert run["blind_checks"] == blind == last["verdict"]["blind_checks"]
    assert run["changed_behaviour"] is changed


# --------------------------------------------------------------------------- a program nested too deep
OFF_MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
DEEP_MEAN = "def mean(xs):\n    return sum(xs) / len(xs)" + " + 0" * 1500 + "\n\nassert mean([2, 4]) == 3\n"
MEAN_FIXED = OFF_MEAN.replace("(len(xs) + 1)", "len(xs)")


def test_a_candidate_nested_too_deep_is_not_run_and_the_run_goes_on(tmp_path):
    """A model's program `return sum(xs) / len(xs) + 0 + 0 + …` (1500 terms) ended the run
    "Internal error (RecursionError)": first in pyflakes (the pre-check), then, with that
    bounded, where the next reply was compared with it (``ast.dump``). Now the pre-check
    does not read it, the next round is told why, and the run goes on."""
    run = _heal(tmp_path, OFF_MEAN, [f"```python\n{DEEP_MEAN}```", f"```python\n{MEAN_FIXED}```"])
    deep = run["iterations"][1]
    assert deep["result"]["status"] == "blocked" and not deep["verdict"]["passed"]
    assert "nests deeper than 100 levels at line 2" in deep["verdict"]["reasons"][0]
    assert "intermediate variables" in deep["feedback"]
    assert run["outcome"] == "success" and run["final_code"] == MEAN_FIXED, run["error"]
