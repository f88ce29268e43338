"""Metrics per benchmark and condition, from stored records.

The paper's run metrics (ESR, ARI, IED, ERR, ESR_s) come from
:mod:`selfheal_jupyter.metrics` applied to the stored run records; this module adds
what only the evaluation knows: pass@1 (the hidden tests), ``spec_kept`` (the share of
successes from user code whose final program kept every original assert/test),
``false_success`` (the loop said success, the hidden tests say no), the distribution
of rounds, the pass rate per round, tokens per solved problem and wall time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from .. import metrics
from ..loop.verdict import with_verified_by, wrong_passed
from ..model import CANDIDATE_FILE, Task, TestOutcome, Verdict
from ..spec import guard as spec_mod
from .store import latest

ORDER = ("loop", "baseline")


def _group(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in latest(records):
        groups.setdefault((rec["benchmark"], rec["condition"]), []).append(rec)
    return groups


def _failing_lines(iteration: dict[str, Any] | None) -> list[int]:
    error = ((iteration or {}).get("result") or {}).get("error") or {}
    lines = [f.get("line") for f in error.get("frames") or [] if f.get("file") == CANDIDATE_FILE]
    return sorted({ln for ln in [*lines, error.get("line")] if ln})


def run_spec_kept(run_dict: dict[str, Any] | None) -> bool | None:
    """Did a successful run's final program keep every assert/test of the user's code?

    None when the run did not succeed or did not start from user code. Decided here
    from the stored record by :func:`selfheal_jupyter.spec.guard.check`, independently of
    what the loop's QA said, so it also measures runs made without the guard.
    """
    if not run_dict or run_dict.get("outcome") != "success" or not run_dict.get("final_code"):
        return None
    detail = run_dict.get("task_detail") or {}
    original = detail.get("initial_code")
    if not original or not original.strip():
        return None
    its = run_dict.get("iterations") or []
    zero = next((it for it in its if it.get("index") == 0), None)
    spec = spec_mod.extract(original, detail.get("tests"), _failing_lines(zero))
    return not spec_mod.check(spec, run_dict["final_code"])


def record_spec_kept(record: dict[str, Any]) -> bool | None:
    """The record's ``spec_kept`` (computed from its run for records written before it existed)."""
    if "spec_kept" in record:
        return record["spec_kept"]
    return run_spec_kept(record.get("run"))


def record_verified(record: dict[str, Any]) -> bool:
    """Did something check the run's passing program (``Run.verified``)? Read off the run
    for records written before the record had it; judged again (:func:`stored_verdict`)
    for a record written before checks the wrong program passes too were set apart
    (``blind_checks``), when its round 0 passed them."""
    run = record.get("run") or {}
    its = run.get("iterations") or []
    zero = next((it for it in its if it.get("index") == 0), None)
    final = next((it for it in its if it.get("index") == run.get("final_index")), None)
    held = zero is not None and (zero.get("verdict") or {}).get("held") == "given"
    if "blind_checks" not in run and held and final is not None:
        return bool(stored_verdict(run, final).verified_by)
    if "verified" in record:
        return bool(record["verified"])
    return bool(run.get("verified"))


def stored_verdict(run_dict: dict[str, Any], iteration: dict[str, Any]) -> Verdict:
    """The verdict of a stored run's passing ``iteration`` with what verified it, as
    ``Run.verified_by`` reads it: never a check its round 0, the program the task says is
    wrong, passed too (a record written before that rule counted them)."""
    detail = run_dict.get("task_detail") or {}
    task = Task(prompt="", initial_code=detail.get("initial_code"), stated=list(detail.get("stated") or []))
    v = iteration.get("verdict") or {}
    verdict = Verdict(
        bool(v.get("passed")),
        tests_passed=int(v.get("tests_passed") or 0),
        tests_failed=int(v.get("tests_failed") or 0),
        spec_checked=bool(v.get("spec_checked")),
        spec_violations=list(v.get("spec_violations") or []),
    )
    given = next((it for it in run_dict.get("iterations") or [] if it.get("index") == 0), None)
    wrong = None
    if given is not None:
        wrong = wrong_passed(Verdict(False, held=(given.get("verdict") or {}).get("held") or ""), _checks(given), None)
    return with_verified_by(verdict, _checks(iteration), task, wrong)


def _checks(iteration: dict[str, Any]) -> list[TestOutcome]:
    return [TestOutcome(str(c.get("source", "")), bool(c.get("passed"))) for c in iteration.get("checks") or []]


def is_false_success(record: dict[str, Any]) -> bool:
    """The loop said success, the hidden tests say no."""
    return record.get("outcome") == "success" and not record.get("passed")


def pass_by_round(records: list[dict[str, Any]], max_round: int) -> list[float]:
    """Fraction of problems solved (hidden tests) by a run that ended at round <= k.

    k = 0 .. max_round. A solved run counts from the round it stopped at (its final
    program's round) onwards, so the curve shows what stopping earlier would give.
    """
    n = len(records)
    if not n:
        return []
    out = []
    for k in range(max_round + 1):
        solved = sum(1 for r in records if r["passed"] and (r.get("final_round") or 0) <= k)
        out.append(solved / n)
    return out


def condition_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    runs = [r["run"] for r in records if r.get("run")]
    summary = metrics.summarize(runs)
    n = len(records)
    solved = [r for r in records if r["passed"]]
    tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in records)
    max_it = max((r.get("max_iterations") or 1 for r in records), default=1)
    rounds = Counter(r["llm_rounds"] for r in records)
    to_success = Counter(m.iterations_to_success for m in (metrics.run_metrics(x) for x in runs) if m.success)
    kept = [k for k in (record_spec_kept(r) for r in records) if k is not None]
    return {
        "problems": n,
        "solved": len(solved),
        "pass@1": len(solved) / n if n else 0.0,
        "spec_kept": sum(kept) / len(kept) if kept else None,
        "spec_checked": len(kept),
        "false_success": sum(1 for r in records if is_false_success(r)),
        "verified": sum(1 for r in records if r.get("outcome") == "success" and record_verified(r)),
        "unverified_success": sum(1 for r in records if r.get("outcome") == "success" and not record_verified(r)),
        "esr": summary.esr,
        "ari": summary.ari,
        "ied": summary.ied,
        "err": summary.err,
        "esr_s": summary.esr_s,
        "rounds_distribution": {str(k): v for k, v in sorted(rounds.items())},
        "rounds_to_qa_success": {str(k): v for k, v in sorted(to_success.items())},
        "pass_by_round": pass_by_round(records, max_it),
        "tokens_total": tokens,
        "tokens_per_solved": tokens / len(solved) if solved else None,
        "wall_s_per_problem": sum(r["wall_s"] for r in records) / n if n else 0.0,
        "wall_s_total": sum(r["wall_s"] for r in records),
        "infra_errors": sum(1 for r in records if r.get("outcome") == "error"),
        "derived": sorted({r["derived_from"] for r in records if r.get("derived_from")}),
        "max_iterations": max_it,
        "feedback": dict(Counter(r.get("feedback", "") for r in records)),
    }


def summarize_records(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{benchmark: {condition: summary}}`` plus ``{benchmark: {"_meta": ...}}``."""
    out: dict[str, dict[str, Any]] = {}
    records = list(records)
    for (bench, cond), recs in sorted(
        _group(records).items(),
        key=lambda kv: (kv[0][0], ORDER.index(kv[0][1]) if kv[0][1] in ORDER else 9),
    ):
        out.setdefault(bench, {})[cond] = condition_summary(recs)
    for bench in out:
        metas = [r for r in records if r["benchmark"] == bench]
        last = metas[-1] if metas else {}
        out[bench]["_meta"] = {
            k: last.get(k)
            for k in (
                "model",
                "base_url",
                "local_model",
                "local_weights_sha256",
                "temperature",
                "auto_plan",
                "image",
                "versions",
            )
        }
    return out
