"""Run a benchmark through the loop and the single-pass baseline, resumably, in parallel.

Conditions (same model, same prompts, same sandbox):

- ``loop``: the self-healing loop with ``max_iterations`` developer → QA rounds.
- ``baseline``: one round, no feedback (``max_iterations=1``). For repair tasks both
  conditions start from the buggy program, run as round 0 without a model call.
  With ``derive_baseline`` the baseline is not run: it is read off round 1 of the
  loop run (valid with greedy decoding, ``temperature=0``, where round 1 IS the
  single-pass answer; it halves the compute). The record says ``derived_from``.

The loop's QA gets ``Problem.visible_tests`` only. The hidden tests run afterwards,
in the same worker's sandbox, on the code the run ended with (the passing candidate,
else the last one), for the final score only.

Everything is wired by :func:`selfheal_jupyter.factory.build_loop`; each worker
thread has its own :class:`~selfheal_jupyter.sandbox.docker.DockerSandbox`.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import SelfHeal
from ..errors import BadInput
from ..model import Run, Verdict
from ..sandbox.base import Sandbox
from . import benchmarks
from .aggregate import run_spec_kept, stored_verdict
from .images import ensure_benchmark_image
from .problem import Problem
from .progress import Progress
from .scoring import HIDDEN_OPTIONS, Score, score
from .store import ResultStore
from .timing import EventClock

CONDITIONS = ("loop", "baseline")
RECORD_VERSION = 1


@dataclass
class EvalConfig:
    benchmark: str
    out_dir: Path = Path("eval-results")
    offset: int = 0
    limit: int | None = None
    workers: int = 1
    conditions: tuple[str, ...] = CONDITIONS
    derive_baseline: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    """``SelfHeal`` traits (model, base_url, max_iterations, auto_plan, temperature...)."""
    build_image: bool = True
    """Build the benchmark's image variant when it is missing (dataframe)."""

    def results_path(self) -> Path:
        return Path(self.out_dir) / f"{self.benchmark}.jsonl"


SandboxFactory = Callable[[SelfHeal], Sandbox]


def _docker_sandbox(settings: SelfHeal) -> Sandbox:
    from ..sandbox.docker import DockerSandbox

    box = DockerSandbox.from_config(settings, pool_size=1)
    box.start()
    return box


def _weights_sha256(key: str) -> str | None:
    """The SHA-256 of the embedded model's GGUF file (its exact version)."""
    try:
        from ..localmodel import get_spec

        return get_spec(key).sha256
    except Exception:
        return None


STRATEGY_OPTIONS = (
    "generated_checks",
    "intent_checks",
    "candidates",
    "runtime_values",
    "explain_first",
    "restart_after",
)
"""The ``SelfHeal`` options of the loop's strategies, recorded with every result."""


def condition_settings(base: dict[str, Any], condition: str) -> SelfHeal:
    traits = dict(base)
    if condition == "baseline":
        traits["max_iterations"] = 1
    return SelfHeal(**traits)


def _trim(run_dict: dict[str, Any]) -> dict[str, Any]:
    """The run record without figure/HTML payloads (kept small; metrics do not need them)."""
    for it in run_dict.get("iterations") or []:
        result = it.get("result") or {}
        outs = result.get("outputs") or []
        result["outputs"] = [{"mime": o.get("mime"), "data": f"<{len(o.get('data') or '')} chars>"} for o in outs]
    return run_dict


def derive_single_pass(run_dict: dict[str, Any]) -> dict[str, Any]:
    """The run as it would have ended with ``max_iterations=1``.

    Keeps round 0 (a given program) and round 1; outcome ``success`` if the last kept
    round passed QA, else ``budget_exhausted`` (or the loop's own outcome when it
    ended before round 1, e.g. a passing round 0 or an error).
    """
    its = run_dict.get("iterations") or []
    kept = [it for it in its if it.get("index", 1) <= 1]
    derived = copy.deepcopy(run_dict)
    derived["iterations"] = kept
    if len(kept) == len(its):
        return derived  # the loop never went past round 1: identical
    # A pass is kept even when a later kept round failed: that round was the one soft
    # round after a pass with failing generated checks, which never undoes the pass.
    passing = [it for it in kept if (it.get("verdict") or {}).get("passed")]
    chosen = [it for it in passing if it.get("index") == run_dict.get("final_index")]
    passing = passing[: passing.index(chosen[0]) + 1] if chosen else passing
    passed = bool(passing)
    derived["outcome"] = "success" if passed else "budget_exhausted"
    derived["error"] = "" if passed else "No candidate passed within max_iterations=1."
    derived["final_code"] = passing[-1].get("code") if passed else None
    verdict = stored_verdict(run_dict, passing[-1]) if passed else Verdict(False)
    derived["verified_by"] = verdict.verified_by
    derived["verified"] = bool(derived["verified_by"])
    derived["blind_checks"] = verdict.blind_checks
    derived["changed_behaviour"] = passed and bool((passing[-1].get("verdict") or {}).get("changed_behaviour"))
    derived["best_index"] = None  # one attempt: the last program is the best one
    totals = dict(run_dict.get("totals") or {})
    plan_usage = run_dict.get("planning_usage") or {}
    llm_all = sum((it.get("timings") or {}).get("llm_s", 0.0) for it in its)
    planning_llm_s = max(0.0, float(totals.get("llm_s", 0.0)) - llm_all)
    t = {"llm_s": planning_llm_s, "sandbox_s": 0.0, "overhead_s": 0.0}
    pt, ct = plan_usage.get("prompt_tokens", 0), plan_usage.get("completion_tokens", 0)
    for it in kept:
        for k in ("llm_s", "sandbox_s", "overhead_s"):
            t[k] += (it.get("timings") or {}).get(k, 0.0)
        pt += (it.get("usage") or {}).get("prompt_tokens", 0)
        ct += (it.get("usage") or {}).get("completion_tokens", 0)
    totals.update(
        t,
        iterations=len(kept),
        prompt_tokens=pt,
        completion_tokens=ct,
        duration_s=t["llm_s"] + t["sandbox_s"] + t["overhead_s"],
    )
    derived["totals"] = totals
    return derived


def code_of(run_dict: dict[str, Any]) -> str | None:
    """What the user ends up with: the passing candidate, else the run's best attempt
    (``Run.best_attempt``), else the last program."""
    if run_dict.get("final_code"):
        return run_dict["final_code"]
    its = [it for it in run_dict.get("iterations") or [] if it.get("code")]
    best = [it for it in its if it.get("index") == run_dict.get("best_index")]
    return (best or its or [{"code": None}])[-1]["code"]


def make_record(
    problem: Problem,
    condition: str,
    run_dict: dict[str, Any],
    hidden: Score,
    wall_s: float,
    *,
    max_iterations: int,
    meta: dict[str, Any],
    derived_from: str | None = None,
) -> dict[str, Any]:
    its = run_dict.get("iterations") or []
    totals = run_dict.get("totals") or {}
    last_index = its[-1].get("index", 0) if its else None
    return {
        "record_version": RECORD_VERSION,
        "benchmark": problem.benchmark,
        "problem_id": problem.id,
        "condition": condition,
        "derived_from": derived_from,
        "passed": hidden.passed,
        "spec_kept": run_spec_kept(run_dict),
        "false_success": run_dict.get("outcome") == "success" and not hidden.passed,
        "verified": bool(run_dict.get("verified")),
        "hidden_status": hidden.status,
        "hidden_detail": hidden.detail,
        "outcome": run_dict.get("outcome"),
        "error": run_dict.get("error", ""),
        "final_round": last_index,
        "llm_rounds": sum(1 for it in its if it.get("index", 1) != 0),
        "prompt_tokens": int(totals.get("prompt_tokens", 0)),
        "completion_tokens": int(totals.get("completion_tokens", 0)),
        "wall_s": round(wall_s, 3),
        "max_iterations": max_iterations,
        "feedback": problem.feedback,
        "finished_at": time.time(),
        **meta,
        "run": run_dict,
    }


def _error_record(problem: Problem, condition: str, exc: BaseException, meta: dict[str, Any]) -> dict[str, Any]:
    """A run the harness could not finish (sandbox died...): kept, and retried on rerun."""
    return {
        "record_version": RECORD_VERSION,
        "benchmark": problem.benchmark,
        "problem_id": problem.id,
        "condition": condition,
        "derived_from": None,
        "passed": False,
        "spec_kept": None,
        "false_success": False,
        "verified": False,
        "hidden_status": "not_run",
        "hidden_detail": "",
        "outcome": "error",
        "error": f"{type(exc).__name__}: {exc}",
        "final_round": None,
        "llm_rounds": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "wall_s": 0.0,
        "max_iterations": None,
        "feedback": problem.feedback,
        "finished_at": time.time(),
        **meta,
        "run": None,
    }


class _Workers:
    """One sandbox per worker thread, created on first use, all closed at the end."""

    def __init__(self, factory: SandboxFactory, settings: SelfHeal) -> None:
        self.factory = factory
        self.settings = settings
        self.local = threading.local()
        self.all: list[Sandbox] = []
        self.lock = threading.Lock()

    def sandbox(self) -> Sandbox:
        box = getattr(self.local, "box", None)
        if box is None:
            box = self.factory(self.settings)
            self.local.box = box
            with self.lock:
                self.all.append(box)
        return box

    def close(self) -> None:
        for box in self.all:
            with contextlib.suppress(Exception):
                box.close()


def run_eval(
    config: EvalConfig,
    *,
    sandbox_factory: SandboxFactory | None = None,
    progress_stream: Any = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Run what is not finished yet; returns the JSONL path. Raises the package's errors."""
    from ..factory import build_llm, build_loop, resolve_endpoint, tuned_settings

    unknown = set(config.conditions) - set(CONDITIONS)
    if unknown or not config.conditions:
        raise BadInput(
            f"--conditions takes a comma list of {', '.join(CONDITIONS)}; "
            f"got {','.join(config.conditions) or 'nothing'}."
        )
    if config.workers < 1:
        raise BadInput(f"--workers must be at least 1 (got {config.workers}).")
    problems = benchmarks.load(config.benchmark, offset=config.offset, limit=config.limit)
    store = ResultStore(config.results_path())
    finished = store.finished()
    derive = config.derive_baseline and "baseline" in config.conditions
    run_conditions = [c for c in config.conditions if not (derive and c == "baseline")]
    if derive and "loop" not in run_conditions:
        run_conditions.append("loop")
    jobs = [
        (p, c)
        for p in problems
        for c in run_conditions
        if (p.benchmark, p.id, c) not in finished
        or (derive and c == "loop" and (p.benchmark, p.id, "baseline") not in finished)
    ]
    skipped = len(problems) * len(config.conditions) - len(jobs) * (2 if derive else 1)
    log(
        f"{config.benchmark}: {len(problems)} problems, conditions {','.join(config.conditions)}"
        f"{' (baseline derived from loop round 1)' if derive else ''}; "
        f"{len(jobs)} runs to do, {max(0, skipped)} already finished in {store.path}"
    )
    if not jobs:
        return store.path

    base = dict(config.settings)
    image = ensure_benchmark_image(
        config.benchmark, base.get("image") or SelfHeal().image, build=config.build_image, log=log
    )
    base["image"] = image
    given = SelfHeal(**base)
    endpoint = resolve_endpoint(given)
    probe = tuned_settings(given, endpoint)  # what the loop will run with
    meta = {
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "local_model": probe.local_model if endpoint.local else None,
        "local_weights_sha256": _weights_sha256(probe.local_model) if endpoint.local else None,
        "temperature": probe.temperature,
        "auto_plan": probe.auto_plan,
        "strategies": {name: getattr(probe, name) for name in STRATEGY_OPTIONS},
        "image": image,
        "versions": benchmarks.versions(),
    }
    hidden_limits = probe.with_values(**HIDDEN_OPTIONS).limits()
    workers = _Workers(sandbox_factory or _docker_sandbox, probe)
    progress = Progress(len(jobs), config.benchmark, stream=progress_stream)
    progress.start()

    def one(problem: Problem, condition: str) -> list[dict[str, Any]]:
        settings = condition_settings(base, condition)
        sandbox = workers.sandbox()
        llm = build_llm(settings, endpoint)
        try:
            loop = build_loop(settings, sandbox=sandbox, llm=llm)
            t0 = time.monotonic()
            clock = EventClock()
            run: Run = loop.run(benchmarks.task(problem), on_event=clock)
            run_dict = _trim(run.to_dict())
            hidden = score(sandbox, problem, code_of(run_dict), limits=hidden_limits)
            wall = time.monotonic() - t0
            out = [
                make_record(
                    problem,
                    condition,
                    run_dict,
                    hidden,
                    wall,
                    max_iterations=settings.max_iterations,
                    meta={**meta, **clock.moments(run)},
                )
            ]
            if derive and condition == "loop":
                single = derive_single_pass(run_dict)
                same = len(single["iterations"]) == len(run_dict["iterations"])
                s_hidden = hidden if same else score(sandbox, problem, code_of(single), limits=hidden_limits)
                s_wall = single["totals"]["duration_s"] + s_hidden.duration_s
                out.append(
                    make_record(
                        problem,
                        "baseline",
                        single,
                        s_hidden,
                        wall if same else s_wall,
                        max_iterations=1,
                        meta=meta,
                        derived_from="loop",
                    )
                )
            return out
        finally:
            llm.close()

    try:
        with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="eval") as pool:
            futures = {pool.submit(one, p, c): (p, c) for p, c in jobs}
            for fut in as_completed(futures):
                problem, condition = futures[fut]
                try:
                    records = fut.result()
                except Exception as exc:
                    records = [_error_record(problem, condition, exc, meta)]
                for rec in records:
                    store.append(rec)
                main = records[0]
                progress.advance(
                    passed=main["passed"],
                    note=f"{problem.id} {condition}: {'PASS' if main['passed'] else 'fail'}"
                    f" ({main['outcome']}, {main['llm_rounds']} rounds)",
                )
    finally:
        progress.finish()
        workers.close()
    return store.path
