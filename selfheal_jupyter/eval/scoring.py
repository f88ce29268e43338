"""Score one candidate with the benchmark's hidden tests, in the sandbox.

Why here and only here: the hidden tests decide the final score and nothing else.
They never reach the loop (its QA gets ``Problem.visible_tests`` only) and never run
on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import ExecutionResult, Limits
from ..sandbox.base import Sandbox
from .benchmarks import grade, hidden_run
from .problem import Problem

HIDDEN_OPTIONS = {"timeout_s": 60.0, "memory": "1g"}
"""``SelfHeal`` options of the hidden run (the rest are the run's own). Hidden suites (dataframe's unittest, HumanEval's larger checks) need more than the
default; the grader's own process shares the container's memory with the program."""


@dataclass
class Score:
    passed: bool
    status: str
    """The sandbox status of the hidden run (ok, error, timeout, oom, ...)."""
    detail: str = ""
    """Why it failed, in one line (exception, gate, timeout), or the grader's metrics."""
    duration_s: float = 0.0


def _detail(result: ExecutionResult) -> str:
    failed = [t for t in result.tests if not t.passed]
    if result.status == "ok" and failed:
        return failed[0].message[:300]
    if result.error is not None:
        return f"{result.error.type}: {result.error.message}"[:300]
    if result.message:
        return result.message[:300]
    tail = (result.stdout or result.stderr).strip().splitlines()
    return tail[-1][:300] if tail else ""


def score(sandbox: Sandbox, problem: Problem, code: str | None, *, limits: Limits) -> Score:
    """Run ``code`` against ``problem``'s hidden tests; no code scores as a failure."""
    if not code or not code.strip():
        return Score(False, "no_code", "the run produced no program")
    hidden = hidden_run(problem)
    result = sandbox.execute(
        code,
        prelude=hidden.prelude or None,
        tests=hidden.tests or None,
        inputs=problem.hidden_inputs or None,
        limits=limits,
    )
    lines = result.stdout.splitlines()
    own = grade(problem, result, code)
    if own is not None:
        return Score(own[0], result.status, own[1], result.duration_s)
    passed = result.status == "ok" and bool(result.tests) and all(t.passed for t in result.tests)
    detail = "" if passed else _detail(result)
    if passed:
        metrics = [ln for ln in lines if ln.startswith("metrics:")]
        detail = metrics[-1] if metrics else ""
    return Score(passed, result.status, detail, result.duration_s)
