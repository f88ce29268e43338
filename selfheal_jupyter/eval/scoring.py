"""Score one candidate with the benchmark's hidden tests, in the sandbox.

Why here and only here: the hidden tests decide the final score and nothing else.
They never reach the loop (its QA gets ``Problem.visible_tests`` only) and never run
on the host.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from ..model import ExecutionResult, Limits
from ..sandbox.base import Sandbox
from .benchmarks import hidden_program
from .problem import Problem

HIDDEN_LIMITS = Limits(timeout_s=60.0)
"""Hidden suites (dataframe's unittest, HumanEval's larger checks) need more than the default."""


@dataclass
class Score:
    passed: bool
    status: str
    """The sandbox status of the hidden run (ok, error, timeout, oom, ...)."""
    detail: str = ""
    """Why it failed, in one line (exception, gate, timeout), or the grader's metrics."""
    duration_s: float = 0.0


def _detail(result: ExecutionResult) -> str:
    if result.error is not None:
        return f"{result.error.type}: {result.error.message}"[:300]
    if result.message:
        return result.message[:300]
    tail = (result.stdout or result.stderr).strip().splitlines()
    return tail[-1][:300] if tail else ""


def score(
    sandbox: Sandbox, problem: Problem, code: str | None, *, limits: Limits | None = None
) -> Score:
    """Run ``code`` against ``problem``'s hidden tests; no code scores as a failure."""
    if not code or not code.strip():
        return Score(False, "no_code", "the run produced no program")
    nonce = f"SELFHEAL-HIDDEN-PASS-{secrets.token_hex(16)}"
    program = hidden_program(problem, code, nonce)
    result = sandbox.execute(program, inputs=problem.hidden_inputs or None,
                             limits=limits or HIDDEN_LIMITS)
    lines = result.stdout.splitlines()
    passed = result.status == "ok" and nonce in lines
    detail = "" if passed else _detail(result)
    if passed:
        metrics = [ln for ln in lines if ln.startswith("metrics:")]
        detail = metrics[-1] if metrics else ""
    return Score(passed, result.status, detail, result.duration_s)
