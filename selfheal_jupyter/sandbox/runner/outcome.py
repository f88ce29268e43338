"""A run's result from what the server observed: the wait status, the OOM counter,
the captured output, the checker's report. The program's own report is description."""

import json
import os
import signal

from .end_check import UNCONFIRMED
from .frames import HEADER
from .memory import oom_kills


class Capture:
    """Bytes read from one pipe, kept up to a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> bool:
        """Keep the chunk; True when the cap has been passed."""
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        return self.total > self.cap

    def text(self, label: str) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.total > self.cap:
            text += f"\n[selfheal: {label} truncated after {self.cap} bytes]"
        return text

    def frame(self) -> "dict | None":
        if len(self.data) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.data)
        if len(self.data) < HEADER.size + size:
            return None
        try:
            frame = json.loads(bytes(self.data[HEADER.size : HEADER.size + size]))
        except ValueError:
            return None
        return frame if isinstance(frame, dict) else None


def failed_result(message: str) -> dict:
    """The result of a run the sandbox could not carry out."""
    return {
        "status": "error",
        "exit_code": None,
        "stdout": "",
        "stderr": "",
        "error": {"type": "SandboxError", "message": message, "line": None, "frames": [], "locals": {}},
        "outputs": [],
        "tests": [],
        "message": f"The sandbox failed: {message}.",
        "run_s": 0.0,
        "dirty": True,
    }


def describe_result(
    wait_status: "int | None",
    reason: str,
    out: Capture,
    err: Capture,
    report: "dict | None",
    checked: "dict | None",
    tests: str,
    oom_before: int,
    duration: float,
    cap: int,
    timeout: float,
    memory_bytes: int,
    asserts: "list | None" = None,
) -> dict:
    """Status and exit code from the wait status and why the server stopped the run;
    the program's report adds details, never the verdict. ``oom`` comes from the
    kernel's OOM kill, or from the builtin MemoryError class itself (identity-checked
    in the candidate), never from the name of what the program raised."""
    result: dict = {
        "status": "ok",
        "exit_code": 0,
        "error": None,
        "outputs": [],
        "tests": [],
        "stdout_truncated": out.total > cap,
        "stderr_truncated": err.total > cap,
        "run_s": round(duration, 6),
        "message": "",
    }
    if report is not None:  # the program's own description: details, never the verdict
        error = report.get("error")
        result["error"] = error if isinstance(error, dict) else None
        outputs = report.get("outputs")
        result["outputs"] = outputs if isinstance(outputs, list) else []
    if tests or asserts:
        result["tests"] = test_outcomes(checked, tests, reason, asserts)
    signum = 0
    if wait_status is None:
        exit_code: int | None = None
    elif os.WIFSIGNALED(wait_status):
        signum = os.WTERMSIG(wait_status)
        exit_code = 128 + signum
    else:
        exit_code = os.WEXITSTATUS(wait_status)
    result["exit_code"] = exit_code
    limit_mb = memory_bytes >> 20
    error_type = (result["error"] or {}).get("type")
    memory_error = isinstance(report, dict) and report.get("memory_error") is True
    if reason == "timeout":
        result.update(
            status="timeout",
            error=None,
            message=(
                f"The program was still running after {timeout:g} s and was stopped. Look for "
                "an endless loop, a thread that never ends, or work too slow for the limit, "
                "or raise the timeout."
            ),
        )
    elif reason == "output_limit":
        result.update(
            status="output_limit",
            message=(
                f"The program wrote more than {cap} bytes of output and was stopped. Print "
                "less (a summary, .head(), a count)."
            ),
        )
    elif reason == "killed":
        result.update(status="killed", message="The run was cancelled and the program was stopped.")
    elif wait_status is None:
        result.update(
            status="error",
            error={
                "type": "SandboxError",
                "message": "the program's exit was not observed",
                "line": None,
                "frames": [],
                "locals": {},
            },
            message=(
                "The sandbox lost track of the program (its supervisor was killed); the container will be replaced."
            ),
        )
    elif signum == signal.SIGKILL and oom_kills() > oom_before:
        result.update(
            status="oom",
            message=(
                f"The program used more than the memory limit ({limit_mb} MB) and the kernel "
                "killed it. Use less memory (smaller data, chunks, dtypes) or raise the "
                "memory limit."
            ),
        )
    elif exit_code and memory_error:
        result.update(
            status="oom",
            message=(
                f"The program ran out of memory (limit {limit_mb} MB): an allocation raised "
                "MemoryError. Use less memory or raise the limit."
            ),
        )
    elif signum and not (signum == signal.SIGINT and error_type == "KeyboardInterrupt"):
        name = signal.Signals(signum).name
        result.update(
            status="error",
            error={
                "type": name,
                "message": f"the process was killed by {name}",
                "line": None,
                "frames": [],
                "locals": {},
            },
            message=f"The program died from signal {name}.",
        )
    elif exit_code:
        result["status"] = "error"
        if not result["error"]:
            result["message"] = f"The program ended with exit code {exit_code}."
    else:
        result["error"] = None  # exit status 0: whatever the program claimed, it passed
    settle_unconfirmed(result["tests"], result["status"] == "ok")
    result["stdout"] = out.text("stdout")
    result["stderr"] = err.text("stderr")
    return result


def settle_unconfirmed(outcomes: list, ok: bool) -> None:
    """An assert that held but whose callables the checker could not read again at the
    program's end (``outlived``) fails a run that is otherwise ``ok``: an exit status
    of 0 without the end seen confirms nothing. A run that failed anyway keeps it as it
    was checked (its feedback is the failure)."""
    for test in outcomes:
        why = test.pop(UNCONFIRMED, None) if isinstance(test, dict) else None
        if why and ok:
            test.update(passed=False, message=str(why))


def test_outcomes(checked: "dict | None", tests: str, reason: str, asserts: "list | None" = None) -> list:
    """The checker's outcomes; when it reported nothing usable, every check failed (each
    of the user's asserts, and the tests)."""
    outcomes = checked.get("tests") if isinstance(checked, dict) else None
    if isinstance(outcomes, list) and all(isinstance(t, dict) for t in outcomes):
        return outcomes
    why = {
        "timeout": "the run timed out",
        "killed": "the run was cancelled",
        "output_limit": "the output limit was reached",
    }.get(reason, "the test process ended without a report")
    failed = [
        {"source": str(text), "passed": False, "line": int(line), "message": f"not run: {why}"}
        for line, _col, text in asserts or []
    ]
    if tests:
        failed.append({"source": tests.strip(), "passed": False, "line": 1, "message": f"not run: {why}"})
    return failed
