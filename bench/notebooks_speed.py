"""Heals and questions on notebooks, two checkouts side by side: solved, false successes,
the time to the first useful feedback and the time to a verified fix.

Why side by side: on a shared 2-core machine the load moves by the minute; two checkouts
measured hours apart are not comparable. Each case runs in both checkouts at the same
time (one process each, ``bench/notebook_driver.py``, PYTHONPATH pointing at the
checkout), so both meet the same load and the same shared embedded model server (one
slot each). The grade is this checkout's (``selfheal_jupyter.eval.notebooks``: expected
lines for a heal; expected answers and the notebook's values unchanged for a question),
run in the sandbox on the code each run ends with.

    flock /work/locks/bench.lock python bench/notebooks_speed.py --before /work/wt/base \\
        --after . --out bench-results/speed.jsonl [--only q01,07_cheap_fruit] [--max-iterations 4]

Rerunning skips what ``--out`` holds; ``--table`` prints the table of what it holds.

"Solved": the grade passed. "False success": the run said success, the grade says no.
"First useful feedback": seconds to the first of: the tool's explanation of a failure
(with a diagnosis), the first program written for the task. "Verified fix": seconds to
the verdict of the passing round of a solved case; a case not solved never gets one and
counts as never (the median is over every case of the kind, so a slower checkout that
solves fewer cannot look faster). Percentiles are nearest-rank.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DRIVER = HERE / "notebook_driver.py"


def run_case(checkout: Path, case: Path, settings: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    for key in ("OPENAI_BASE_URL", "SELFHEAL_MODEL"):
        env.pop(key, None)  # the embedded model, as a fresh user has it
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(case), json.dumps(settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=str(checkout),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-2000:], "wall_s": time.monotonic() - started}
    return json.loads(lines[-1])


def grade(problem: Any, code: str | None, sandbox: Any, limits: Any) -> tuple[bool, str]:
    from selfheal_jupyter.eval.scoring import score

    result = score(sandbox, problem, code, limits=limits)
    return result.passed, result.detail


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; ``inf`` stands for "never"."""
    if not values:
        return math.inf
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q * len(ranked)) - 1)]


def seconds(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.0f} s"


def by_kind_and_side(records: list[dict[str, Any]]) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """The records of each kind of case and each checkout, in the tables' order."""
    for kind in ("heal", "question"):
        for side in ("before", "after"):
            mine = [r for r in records if r["kind"] == kind and r["side"] == side]
            if mine:
                yield kind, side, mine


def table(records: list[dict[str, Any]]) -> str:
    rows = [
        "| kind | checkout | cases | solved | false success | changed the data | first useful feedback "
        "(median / p90) | verified fix (median / p90) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, side, mine in by_kind_and_side(records):
        solved = sum(r["solved"] for r in mine)
        false = sum(r["outcome"] == "success" and not r["solved"] for r in mine)
        changed = sum("changes the notebook" in (r.get("detail") or "") for r in mine)
        first = [r["moments"].get("first_feedback_s", math.inf) for r in mine]
        fixed = [r["moments"].get("pass_s", math.inf) if r["solved"] else math.inf for r in mine]
        rows.append(
            f"| {kind} | {side} | {len(mine)} | {solved} | {false} | {changed} | "
            f"{seconds(percentile(first, 0.5))} / {seconds(percentile(first, 0.9))} | "
            f"{seconds(percentile(fixed, 0.5))} / {seconds(percentile(fixed, 0.9))} |"
        )
    return "\n".join(rows) + "\n\n" + tokens_table(records)


def tokens_table(records: list[dict[str, Any]]) -> str:
    """What the model was asked per round: a model round is one whose requests used tokens
    (the tool's own edit or program uses none); tokens as the server counted them sent."""
    rows = [
        "| kind | checkout | cases | model rounds | prompt tok per model round | completion tok per model round | "
        "solved with no model token | tok per verified fix (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, side, mine in by_kind_and_side(records):
        usages = [it.get("usage") or {} for r in mine for it in (r.get("run") or {}).get("iterations") or []]
        asked = [u for u in usages if u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)]
        n = max(1, len(asked))
        spent = [sum(((r.get("run") or {}).get("totals") or {}).get(k, 0) for k in ("prompt_tokens",
                 "completion_tokens")) for r in mine if r["solved"]]  # fmt: skip
        rows.append(
            f"| {kind} | {side} | {len(mine)} | {len(asked)} | "
            f"{sum(u.get('prompt_tokens', 0) for u in asked) / n:,.0f} | "
            f"{sum(u.get('completion_tokens', 0) for u in asked) / n:,.0f} | {sum(1 for t in spent if not t)} | "
            f"{sum(spent) / max(1, len(spent)):,.0f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=False)
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "notebooks_speed.jsonl")
    parser.add_argument("--only", default="", help="comma list of case ids (default: all)")
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one case may take in one checkout")
    parser.add_argument("--table", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = [json.loads(ln) for ln in args.out.read_text().splitlines() if ln.strip()] if args.out.exists() else []
    if args.table:
        print(table(records))
        return
    if args.before is None:
        parser.error("--before CHECKOUT is needed to run")

    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.eval import benchmarks, notebooks
    from selfheal_jupyter.eval.scoring import HIDDEN_OPTIONS
    from selfheal_jupyter.factory import close_shared_sandboxes, shared_sandbox

    settings = {"max_iterations": args.max_iterations, "temperature": 0.0}
    only = {x for x in args.only.split(",") if x}
    problems = [p for p in benchmarks.load(notebooks.NAME) if not only or p.id in only]
    done = {(r["case"], r["side"]) for r in records}
    base = SelfHeal()
    sandbox = shared_sandbox(base)
    limits = base.with_values(**HIDDEN_OPTIONS).limits()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    try:
        with args.out.open("a") as out, ThreadPoolExecutor(max_workers=2) as pool:
            for problem in problems:
                todo = [side for side in sides if (problem.id, side) not in done]
                if not todo:
                    continue
                load = os.getloadavg()[0]
                case = notebooks.data_root() / problem.id
                futures = {side: pool.submit(run_case, sides[side], case, settings, args.timeout) for side in todo}
                for side, future in futures.items():
                    got = future.result()
                    run = got.get("run") or {}
                    solved, detail = (False, got.get("error", "")[-300:])
                    if "run" in got:
                        solved, detail = grade(problem, got.get("code"), sandbox, limits)
                    record = {
                        "case": problem.id,
                        "kind": "question" if notebooks.is_question(problem) else "heal",
                        "side": side,
                        "checkout": str(sides[side]),
                        "solved": solved,
                        "detail": detail,
                        "outcome": run.get("outcome"),
                        "verified": run.get("verified"),
                        "rounds": len(run.get("iterations") or []),
                        "moments": got.get("moments") or {},
                        "wall_s": round(got.get("wall_s", 0.0), 1),
                        "load_1min": round(load, 2),
                        "run": run,
                    }
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                    records.append(record)
                    print(
                        f"{problem.id:28} {side:6} {'SOLVED' if solved else 'no':6} {run.get('outcome')!s:17} "
                        f"first {record['moments'].get('first_feedback_s', math.inf):7.1f} s  "
                        f"fix {record['moments'].get('pass_s', math.inf):7.1f} s  load {load:.2f}  {detail[:60]}",
                        flush=True,
                    )
    finally:
        close_shared_sandboxes()
    print(table(records))


if __name__ == "__main__":
    main()
