"""The paper's metrics, per run and over many runs.

Everything is derived from run records (:class:`~selfheal_jupyter.model.Run` or its
``to_dict()`` JSON), so a stored evaluation can be re-scored without re-running it.

Definitions (each also in the docstring of its field in :class:`Summary`):

- **ESR** — execution success rate: the fraction of runs whose outcome is
  ``success`` (a candidate ran cleanly and passed every user test).
- **ARI** — average iterations to success: over the successful runs only, the mean
  number of developer → QA rounds up to and including the passing one (1 = the
  first written program passed). A given program (``%%heal``, repair benchmarks) is
  round 0 and costs no model call: if it passes as is, the run counts 0 rounds.
- **IED** — initial error density: errors in the first attempt per line of code,
  pooled over runs (Σ errors / Σ lines). Errors of an attempt: 1 when it did not run
  cleanly (exception, static pre-check refusal, timeout, OOM, output limit; a reply
  without code counts 1), plus 1 per user test that ran and failed. Lines: the
  non-blank, non-comment lines of the first attempt (at least 1).
- **ERR** — error reduction ratio: (Σ first-attempt errors − Σ final-attempt
  errors) / Σ first-attempt errors, over the runs whose first attempt had errors.
  1.0 = every initial error was repaired; 0 = none; negative = worse at the end.
- **ESR_s** — success within resource limits: the fraction of runs that succeeded
  AND never hit a resource limit on the way (no iteration ended in timeout, OOM,
  output limit or a kill). (A successful run is within its token and wall-clock
  budgets by construction: the loop stops when one runs out.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .model import Run

RESOURCE_STATUSES = frozenset({"timeout", "oom", "output_limit", "killed"})


@dataclass
class RunMetrics:
    """The measurable facts of one run."""

    success: bool
    iterations: int
    """Developer → QA rounds that called the model (a given program's round 0 excluded)."""
    iterations_to_success: int | None
    first_errors: int
    first_lines: int
    final_errors: int
    within_limits: bool
    prompt_tokens: int
    completion_tokens: int
    duration_s: float


@dataclass
class Summary:
    runs: int
    esr: float
    """Execution success rate: successful runs / runs."""
    ari: float | None
    """Mean rounds to success over successful runs (None when none succeeded)."""
    ied: float | None
    """Σ first-attempt errors / Σ first-attempt lines of code."""
    err: float | None
    """(Σ first errors − Σ final errors) / Σ first errors, over runs with first errors."""
    esr_s: float
    """Runs that succeeded within every resource limit and budget / runs."""
    mean_prompt_tokens: float
    mean_completion_tokens: float
    mean_duration_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as_dict(run: Run | Mapping[str, Any]) -> Mapping[str, Any]:
    return run.to_dict() if isinstance(run, Run) else run


def code_lines(code: str) -> int:
    """Non-blank, non-comment lines (at least 1, so densities are defined)."""
    n = sum(1 for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#"))
    return max(1, n)


def attempt_errors(iteration: Mapping[str, Any]) -> int:
    """Errors of one attempt: 1 if it did not run cleanly, plus 1 per failed test that ran."""
    result = iteration.get("result")
    if result is None:
        return 1  # no program at all
    errors = 0
    if result.get("status") != "ok" or result.get("error"):
        errors += 1
    for test in result.get("tests") or []:
        if not test.get("passed") and not str(test.get("message", "")).startswith("not run"):
            errors += 1
    return errors


def run_metrics(run: Run | Mapping[str, Any]) -> RunMetrics:
    data = _as_dict(run)
    iterations = list(data.get("iterations") or [])
    success = data.get("outcome") == "success"
    modelled = [it for it in iterations if it.get("index", 1) != 0]
    to_success = None
    if success:
        to_success = 0
        for it in iterations:
            if it.get("index", 1) != 0:
                to_success += 1
            if (it.get("verdict") or {}).get("passed"):
                break
    first = iterations[0] if iterations else None
    last = iterations[-1] if iterations else None
    hit_limit = any((it.get("result") or {}).get("status") in RESOURCE_STATUSES for it in iterations)
    totals = data.get("totals") or {}
    return RunMetrics(
        success=success,
        iterations=len(modelled),
        iterations_to_success=to_success,
        first_errors=attempt_errors(first) if first else 0,
        first_lines=code_lines(first.get("code") or "") if first else 0,
        final_errors=attempt_errors(last) if last else 0,
        within_limits=success and not hit_limit,
        prompt_tokens=int(totals.get("prompt_tokens", 0)),
        completion_tokens=int(totals.get("completion_tokens", 0)),
        duration_s=float(totals.get("duration_s", 0.0)),
    )


def summarize(runs: Iterable[Run | Mapping[str, Any] | RunMetrics]) -> Summary:
    """The metrics over many runs (see the module docstring for each definition)."""
    ms = [r if isinstance(r, RunMetrics) else run_metrics(r) for r in runs]
    n = len(ms)
    if n == 0:
        return Summary(0, 0.0, None, None, None, 0.0, 0.0, 0.0, 0.0)
    wins = [m for m in ms if m.success]
    attempted = [m for m in ms if m.first_lines > 0]
    lines = sum(m.first_lines for m in attempted)
    with_errors = [m for m in ms if m.first_errors > 0]
    first_total = sum(m.first_errors for m in with_errors)
    return Summary(
        runs=n,
        esr=len(wins) / n,
        ari=(sum(m.iterations_to_success or 0 for m in wins) / len(wins)) if wins else None,
        ied=(sum(m.first_errors for m in attempted) / lines) if lines else None,
        err=((first_total - sum(m.final_errors for m in with_errors)) / first_total if first_total else None),
        esr_s=sum(1 for m in ms if m.within_limits) / n,
        mean_prompt_tokens=sum(m.prompt_tokens for m in ms) / n,
        mean_completion_tokens=sum(m.completion_tokens for m in ms) / n,
        mean_duration_s=sum(m.duration_s for m in ms) / n,
    )
