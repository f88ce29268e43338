"""Differential fidelity: a program behaves in the sandbox as under ``python3 NAME.py``.

Every file in ``tests/fidelity/`` is run twice:

* on the host, by the host's ``python3`` as ``python3 NAME.py`` with the working directory a
  fresh temporary directory holding a copy of the file, stdin ``/dev/null``, stdout and
  stderr pipes, and the sandbox's own environment (``CONTAINER_ENV``, with the host's
  ``PATH``, ``HOME`` the temporary directory and ``MPLCONFIGDIR`` a font cache warmed once,
  so matplotlib says nothing about building one: the sandbox's runner does the same);
* in the session's warm sandbox, by ``DockerSandbox.execute(code, filename=NAME.py)``.

Both must agree on stdout, stderr, exit status and exception type, after a normalisation
that removes only what differs between two installations of the same Python and never
what the program does (see :func:`normalise`):

* the program's own path (``/tmp/xyz/NAME.py``, ``/tmp/run3/NAME.py``) becomes ``NAME.py``;
* the standard library and site-packages directories become ``<stdlib>`` and ``<site>``,
  and the line numbers of standard-library frames become ``N`` (the host's 3.11.x and the
  image's 3.11.y are different patch releases of the same library);
* object addresses (``0x7f...``) become ``0xADDR``.

Exit status: the host's ``returncode`` is the exit status, or ``-N`` for a death by signal
``N``; the sandbox reports a death by signal ``N`` as ``exit_code == 128 + N`` (the shell's
convention), so ``-N`` is compared as ``128 + N``. ``status`` must be ``ok`` exactly when the
exit status is 0, else ``error``.

Exception type: on the host, the type named by the last traceback on stderr (its last
dotted component: ``json.decoder.JSONDecodeError`` is ``JSONDecodeError``), taken only when
the exit status is not 0 (a thread's or an atexit handler's traceback does not fail the
program); in the sandbox, ``error.type``. When the host printed no traceback the sandbox
may describe the exit without one: ``SystemExit`` (or nothing) for a non-zero exit status,
the signal's name (or nothing) for a death by signal.

Programs that cannot agree by design (no network, read-only root, limits, line-buffered
stdout, preloaded libraries) are listed in ``INTENDED_DIFFERENCES`` with the reason, which
the README shows too; for them the fields that differ are asserted against the sandbox's
own expected value, and every other field must still equal python3's.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from selfheal_jupyter.model import ExecutionResult
from selfheal_jupyter.sandbox.docker import CONTAINER_ENV

CORPUS = Path(__file__).parent / "fidelity"
PROGRAMS = sorted(p.name for p in CORPUS.glob("*.py"))
README = Path(__file__).parents[1] / "README.md"
REQUIREMENTS = Path(__file__).parents[1] / "selfheal_jupyter" / "sandbox" / "requirements.txt"
HOST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Intended:
    """A difference that is there on purpose, and what the sandbox gives instead.

    ``expect`` maps a compared field (status, exit_code, error, stdout, stderr; after
    normalisation) to the sandbox's value: a string or number to be equal, a compiled
    pattern to match in full. Every field not in ``expect`` must still equal python3's.
    """

    reason: str
    expect: dict[str, Any]


_LINE_BUFFERED = (
    "stdout is line-buffered (python3 block-buffers a pipe), so what a program printed "
    "before a timeout, a crash, a signal or os._exit is kept for the feedback."
)

RECURSION_REASON = (
    "The runner's own frames below the program count toward Python's recursion limit; "
    "the limit is raised by their number, so a program recurses exactly as deep as under "
    "python3, but sys.getrecursionlimit() shows the raised value (about 1012)."
)

INTENDED_DIFFERENCES: dict[str, Intended] = {
    "recursion_900.py": Intended(RECURSION_REASON, {"stdout": re.compile(r"10[0-9][0-9] 900\n")}),
    "sys_flags.py": Intended(
        RECURSION_REASON, {"stdout": re.compile(r"0 1 0 0 0\n0 0 False False 0 1\nTrue False 10[0-9][0-9]\n")}
    ),
    "limit_no_network.py": Intended(
        "The sandbox has no network: its only interface is the loopback.", {"stdout": "['lo']\n"}
    ),
    "limit_readonly_root.py": Intended(
        "The root filesystem is read-only and the user is not root: only the working directory (a tmpfs) is writable.",
        {"stdout": "False False True\n"},
    ),
    "limit_nonroot_user.py": Intended(
        "The program runs as an unprivileged uid (and gid) of its own, which no other "
        "process in its container has had; not root, and not the runner's 65534.",
        {"stdout": re.compile(r"(?!65534 )([1-9][0-9]{3,9}) \1 False\n")},
    ),
    "limit_memory.py": Intended(
        "Memory is limited (512 MB by default): a larger allocation raises MemoryError and the run's status is oom.",
        {
            "status": "oom",
            "exit_code": 1,
            "error": "MemoryError",
            "stdout": "",
            "stderr": "Traceback (most recent call last):\n"
            '  File "limit_memory.py", line 2, in <module>\n'
            "    block = bytes(600 * 2**20)\n"
            "            ^^^^^^^^^^^^^^^^^^\n"
            "MemoryError\n",
        },
    ),
    "limit_pids.py": Intended(
        "Processes are limited (64 per container by default): fork fails with EAGAIN.",
        {"stdout": "fork failed: BlockingIOError\n"},
    ),
    "limit_output.py": Intended(
        "Output is capped (1 MiB per stream by default): the program is killed there and "
        "the run's status is output_limit.",
        {
            "status": "output_limit",
            "exit_code": 128 + signal.SIGKILL,
            "stdout": re.compile(
                r"(?:y{1023}\n){1024}\n"
                r"\[selfheal: stdout truncated after 1048576 bytes\]"
            ),
        },
    ),
    "os_exit_5.py": Intended(_LINE_BUFFERED, {"stdout": "buffered, lost\n"}),
    "signal_sigterm_self.py": Intended(_LINE_BUFFERED, {"stdout": "buffered, lost\n"}),
    "stdout_os_write_order.py": Intended(
        _LINE_BUFFERED, {"stdout": "printed first\nwritten second, arrives first\nprinted third\n"}
    ),
    "stdio_state.py": Intended(
        _LINE_BUFFERED, {"stdout": "False False False\nTrue True\nutf-8 surrogateescape backslashreplace\nTrue 1 2 0\n"}
    ),
    "preloaded_with_a_library.py": Intended(
        "A program that imports anything beyond the standard library starts from a process "
        "with numpy, pandas and matplotlib already imported (a fork server's speed: "
        "`import pandas` costs nothing), and `sys.modules` shows them. A program that "
        "imports only the standard library starts from one that imported none of them.",
        {"stdout": "[0.0, 0.0] ['pandas', 'matplotlib.pyplot']\n"},
    ),
    "gc_state.py": Intended(
        "The preloaded objects sit in the garbage collector's permanent generation "
        "(gc.freeze(), so forks do not copy their pages): gc.get_freeze_count() is not 0.",
        {"stdout": re.compile(r"True \(700, 10, 10\) [1-9][0-9]*\n")},
    ),
}


# --------------------------------------------------------------------------- helpers
def requirements(name: str) -> list[str]:
    """The libraries a program says it needs (``# requires: a, b`` in its first lines)."""
    for line in (CORPUS / name).read_text(encoding="utf-8").splitlines()[:5]:
        if line.startswith("# requires:"):
            return [r.strip() for r in line.split(":", 1)[1].split(",") if r.strip()]
    return []


def pinned_versions() -> dict[str, str]:
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = version.split()[0]
    return pins


_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def normalise(text: str, name: str, dirs: dict[str, str]) -> str:
    """Remove what differs between two installations, never what the program did.

    ``dirs`` maps directories (longest first wins) to placeholders such as ``<stdlib>``.
    """
    # The program's own file, wherever it was: /tmp/tmpab12/NAME.py, /tmp/run3/NAME.py.
    text = re.sub(r"(?<![\w.\-])/(?:[^\s\"':/]+/)*" + re.escape(name) + r"(?![\w.])", name, text)
    for directory in sorted(dirs, key=len, reverse=True):
        text = text.replace(directory.rstrip("/") + "/", dirs[directory] + "/")
    # Line numbers inside the standard library (a different patch release of it).
    text = re.sub(r'(File "<stdlib>/[^"]+", line )\d+', r"\1N", text)
    return _ADDRESS.sub("0xADDR", text)


def exception_type(stderr: str) -> str | None:
    """The type named by the last traceback on ``stderr`` (last dotted component)."""
    lines = stderr.splitlines()
    start, prefix = None, ""
    for i, line in enumerate(lines):
        if line == "Traceback (most recent call last):":
            start, prefix = i, ""
        elif line == "  + Exception Group Traceback (most recent call last):":
            start, prefix = i, "  | "
    if start is None:  # a SyntaxError is reported without the header
        start = next((i - 1 for i, ln in enumerate(lines) if ln.startswith('  File "')), None)
        if start is None:
            return None
    for line in lines[start + 1 :]:
        if not line.startswith(prefix):
            continue
        body = line[len(prefix) :]
        if body and not body[0].isspace():
            match = re.match(r"([A-Za-z_][\w.]*)(?::|$)", body)
            return match.group(1).rsplit(".", 1)[-1] if match else None
    return None


@dataclass
class HostRun:
    stdout: str
    stderr: str
    returncode: int


class Host:
    """The host's ``python3``, run as ``python3 NAME.py`` in a directory of its own."""

    def __init__(self, executable: str, env: dict[str, str]) -> None:
        self.executable = executable
        self.env = env

    def run(self, name: str) -> HostRun:
        with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
            shutil.copy(CORPUS / name, Path(tmp) / name)
            env = dict(self.env, HOME=tmp)
            proc = subprocess.run(
                [self.executable, name],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=HOST_TIMEOUT_S,
            )
        return HostRun(
            proc.stdout.decode("utf-8", errors="replace"),
            proc.stderr.decode("utf-8", errors="replace"),
            proc.returncode,
        )


def _paths_probe() -> str:
    return (
        "import json, site, sysconfig\n"
        "p = sysconfig.get_paths()\n"
        "print(json.dumps({'stdlib': [p['stdlib'], p['platstdlib']],\n"
        "                  'site': [p['purelib'], p['platlib'], *site.getsitepackages()],\n"
        "                  'version': __import__('sys').version_info[:2]}))\n"
    )


def _placeholders(info: dict[str, Any]) -> dict[str, str]:
    dirs = {d: "<stdlib>" for d in info["stdlib"]}
    dirs.update({d: "<site>" for d in info["site"]})
    return dirs


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sandbox_dirs(sandbox) -> dict[str, Any]:
    result = sandbox.execute(_paths_probe(), filename="paths_probe.py")
    assert result.status == "ok", f"the sandbox could not run a trivial probe: {result}"
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def host(sandbox_dirs, tmp_path_factory) -> Host:
    """The host's python3, checked to be the sandbox's Python and libraries."""
    python3 = shutil.which("python3")
    if python3 is None:
        pytest.fail("The fidelity tests need a `python3` on PATH (the host's Python 3.11).", pytrace=False)
    # Resolve the real interpreter (pyenv and the like put a shim script on PATH).
    probe = subprocess.run(
        [python3, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=True
    )
    executable = probe.stdout.strip()
    mpl_dir = tmp_path_factory.mktemp("mplconfig")
    env = dict(CONTAINER_ENV, PATH=f"{Path(executable).parent}:{os.defpath}", MPLCONFIGDIR=str(mpl_dir))
    info = json.loads(
        subprocess.run([executable, "-c", _paths_probe()], env=env, capture_output=True, text=True, check=True).stdout
    )
    if info["version"] != sandbox_dirs["version"]:
        pytest.fail(
            f"The host's python3 is {info['version']}, the sandbox's "
            f"{sandbox_dirs['version']}: tracebacks differ between versions, so the "
            "comparison needs a host python3 of the sandbox's major.minor.",
            pytrace=False,
        )
    # The libraries programs may need, at the versions the image pins; warm the font cache.
    pins = pinned_versions()
    needed = sorted({lib for name in PROGRAMS for lib in requirements(name)})
    check = subprocess.run(
        [
            executable,
            "-c",
            "import importlib, json, sys\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = importlib.import_module(n).__version__\n"
            "    except ImportError: out[n] = None\n"
            "import matplotlib.pyplot\n"
            "print(json.dumps(out))\n",
            *needed,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    versions = json.loads(check.stdout) if check.returncode == 0 else {}
    wrong = {n: versions.get(n) for n in needed if versions.get(n) != pins.get(n)}
    if check.returncode != 0 or wrong:
        pytest.fail(
            f"The host's python3 ({executable}) must have the sandbox's libraries at the "
            f"pinned versions to run the fidelity corpus fairly; found {wrong or check.stderr}. "
            f"Install them: python3 -m pip install " + " ".join(f"{n}=={pins.get(n)}" for n in needed),
            pytrace=False,
        )
    return Host(executable, env)


@pytest.fixture(scope="module")
def host_dirs(host) -> dict[str, str]:
    info = json.loads(
        subprocess.run(
            [host.executable, "-c", _paths_probe()], env=host.env, capture_output=True, text=True, check=True
        ).stdout
    )
    return _placeholders(info)


# --------------------------------------------------------------------------- comparison
def expected_from_host(run: HostRun, name: str, dirs: dict[str, str]) -> dict[str, Any]:
    rc = run.returncode
    exit_code = 128 - rc if rc < 0 else rc
    return {
        "status": "ok" if rc == 0 else "error",
        "exit_code": exit_code,
        "error": exception_type(run.stderr) if rc != 0 else None,
        "stdout": normalise(run.stdout, name, dirs),
        "stderr": normalise(run.stderr, name, dirs),
    }


def got_from_sandbox(
    result: ExecutionResult, name: str, dirs: dict[str, str], expected: dict[str, Any], host_rc: int
) -> dict[str, Any]:
    error = result.error.type if result.error else None
    if expected["error"] is None and host_rc != 0:
        # No traceback on the host: the sandbox may name the cause of the exit.
        allowed = {None, signal.Signals(-host_rc).name} if host_rc < 0 else {None, "SystemExit"}
        if error in allowed:
            error = None
    return {
        "status": result.status,
        "exit_code": result.exit_code,
        "error": error,
        "stdout": normalise(result.stdout, name, dirs),
        "stderr": normalise(result.stderr, name, dirs),
    }


def describe(expected: dict[str, Any], got: dict[str, Any]) -> str:
    """Each differing field: python3's value, then the sandbox's (a diff for long text)."""
    parts = []
    for key in expected:
        want, have = expected[key], got[key]
        if want == have:
            continue
        if isinstance(want, str) and isinstance(have, str) and "\n" in want + have:
            diff = difflib.unified_diff(
                want.splitlines(keepends=True), have.splitlines(keepends=True), "python3", "sandbox", n=1
            )
            parts.append(
                f"{key}:\n" + "".join(d if d.endswith("\n") else d + "\\ no newline\n" for d in list(diff)[:60])
            )
        else:
            parts.append(f"{key}: python3 {want!r}, sandbox {have!r}")
    return "the sandbox differs from python3:\n" + "\n".join(parts)


def run_in_sandbox(sandbox, name: str) -> ExecutionResult:
    return sandbox.execute((CORPUS / name).read_text(encoding="utf-8"), filename=name)


# --------------------------------------------------------------------------- the tests
def test_the_corpus_is_large_enough():
    assert len(PROGRAMS) >= 45
    assert set(INTENDED_DIFFERENCES) <= set(PROGRAMS)


@pytest.mark.parametrize("name", [p for p in PROGRAMS if p not in INTENDED_DIFFERENCES])
def test_same_as_python3(name, host, host_dirs, sandbox, sandbox_dirs):
    host_run = host.run(name)
    expected = expected_from_host(host_run, name, host_dirs)
    result = run_in_sandbox(sandbox, name)
    got = got_from_sandbox(result, name, _placeholders(sandbox_dirs), expected, host_run.returncode)
    assert got == expected, describe(expected, got)


@pytest.mark.parametrize("name", sorted(INTENDED_DIFFERENCES))
def test_intended_difference(name, host, host_dirs, sandbox, sandbox_dirs):
    host_run = host.run(name)
    expected = expected_from_host(host_run, name, host_dirs)
    result = run_in_sandbox(sandbox, name)
    got = got_from_sandbox(result, name, _placeholders(sandbox_dirs), expected, host_run.returncode)
    for key, want in INTENDED_DIFFERENCES[name].expect.items():
        if isinstance(want, re.Pattern):
            if want.fullmatch(got[key]):
                got[key] = f"<matches {want.pattern}>"
            expected[key] = f"<matches {want.pattern}>"
        else:
            expected[key] = want
    assert got == expected, describe(expected, got)


def test_readme_lists_every_intended_difference():
    text = README.read_text(encoding="utf-8")
    for name, intended in INTENDED_DIFFERENCES.items():
        row = f"| `{name}` | {intended.reason} |"
        assert row in text, f"README.md lacks the row: {row}"


# --------------------------------------------------------------------------- the helpers
def test_normalise_keeps_what_the_program_did():
    dirs = {"/usr/lib/python3.11": "<stdlib>", "/usr/local/lib/python3.11/dist-packages": "<site>"}
    text = (
        '  File "/tmp/run3/p.py", line 4, in <module>\n'
        '  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode\n'
        '  File "/usr/local/lib/python3.11/dist-packages/pandas/core/frame.py", line 9\n'
        "/tmp/x/p.py:3: UserWarning: w\n<function f at 0x7f12ab34cd56>\nline 4 of p.py.bak\n"
    )
    assert normalise(text, "p.py", dirs) == (
        '  File "p.py", line 4, in <module>\n'
        '  File "<stdlib>/json/decoder.py", line N, in decode\n'
        '  File "<site>/pandas/core/frame.py", line 9\n'
        "p.py:3: UserWarning: w\n<function f at 0xADDR>\nline 4 of p.py.bak\n"
    )


def test_exception_type_of_a_traceback():
    chained = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "a.py", line 3\n    f()\n'
        "json.decoder.JSONDecodeError: Expecting value\nnote: a note\n"
    )
    assert exception_type(chained) == "JSONDecodeError"
    assert (
        exception_type('Traceback (most recent call last):\n  File "a.py"\nKeyboardInterrupt\n') == "KeyboardInterrupt"
    )
    assert (
        exception_type("  File \"a.py\", line 2\n    x = [\n        ^\nSyntaxError: '[' was never closed\n")
        == "SyntaxError"
    )
    assert (
        exception_type(
            "  + Exception Group Traceback (most recent call last):\n"
            '  |   File "a.py", line 1\n  | ExceptionGroup: eg (1 sub-exception)\n'
            "  +-+---------------- 1 ----------------\n    | ValueError: v\n"
        )
        == "ExceptionGroup"
    )
    assert exception_type("fatal: configuration missing\n") is None
