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
from tests.unit.test_fidelity import (
    CORPUS,
    INTENDED_DIFFERENCES,
    PROGRAMS,
    exception_type,
    normalise,
)

REQUIREMENTS = Path(__file__).parents[2] / "selfheal_jupyter" / "sandbox" / "requirements.txt"
HOST_TIMEOUT_S = 60.0


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
