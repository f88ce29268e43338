"""Metrics per benchmark and condition, from stored records.

The paper's run metrics (ESR, ARI, IED, ERR, ESR_s) come from
:mod:`selfheal_jupyter.metrics` applied to the stored run records; this module adds
what only the evaluation knows: pass@1 (the hidden tests), the distribution of
rounds, the pass rate per round, tokens per solved problem and wall time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from .. import metrics
from .store import latest

ORDER = ("loop", "baseline")


def _group(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in latest(records):
        groups.setdefault((rec["benchmark"], rec["condition"]), []).append(rec)
    return groups


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
    to_success = Counter(
        m.iterations_to_success for m in (metrics.run_metrics(x) for x in runs) if m.success
    )
    return {
        "problems": n,
        "solved": len(solved),
        "pass@1": len(solved) / n if n else 0.0,
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
            k: last.get(k) for k in ("model", "base_url", "local_model", "local_weights_sha256",
                                     "temperature", "auto_plan", "image", "versions")
        }
    return out
