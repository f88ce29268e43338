"""The curriculum exercises, two checkouts in one run: solved (hidden tests), false
successes, the time to a verified fix, and what a model round costs.

Each exercise is healed by ``selfheal eval --benchmark exercises --conditions loop
--temperature 0`` in one checkout, then in the other (the side that goes first alternates),
each checkout on its own shared embedded server with the same threads. One side at a time
is how a user meets the model: one heal on the machine's cores. Alternating per exercise
keeps the two sides within a minute or two of each other, so a load that moves by the
minute meets both alike. ``--together`` runs both at once instead (each then has half the
machine; the earlier runs of docs/measurements.md).

    flock /work/locks/bench.lock python bench/exercises_speed.py --before /work/wt/base \\
        --after . --out bench-results/exercises_speed [--only 01_average_grade] [--threads 2]
    python bench/exercises_speed.py --out bench-results/exercises_speed --table

Rerunning skips the exercises ``--out`` holds. Stop other embedded servers first: a
server's prompt cache (llama.cpp keeps prompts in RAM) that has seen these exercises makes
its first rounds read less. The table's "verified fix" is the seconds to the verdict of
the passing round of an exercise solved by the hidden tests; one not solved counts as
never (the median is over all exercises); percentiles are nearest-rank.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from notebooks_speed import percentile, seconds  # noqa: E402

BENCHMARK = "exercises"
SIDES = ("before", "after")


def heal(checkout: Path, index: int, out: Path, threads: int) -> None:
    """Exercise number ``index`` (0-based) in ``checkout``, its record appended under ``out``."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    for key in ("OPENAI_BASE_URL", "SELFHEAL_MODEL"):
        env.pop(key, None)  # the embedded model, as a fresh user has it
    command = [
        sys.executable, "-m", "selfheal_jupyter", "eval", "--benchmark", BENCHMARK, "--conditions", "loop",
        "--temperature", "0", "--workers", "1", "--offset", str(index), "--limit", "1", "--out", str(out),
        f"--SelfHeal.local_threads={threads}", f"--SelfHeal.local_batch_threads={threads}",
    ]  # fmt: skip
    with (out.parent / f"{out.name}.log").open("a") as log:
        subprocess.run(command, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)


def records(out: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """side → exercise → its record (the loop condition's)."""
    found: dict[str, dict[str, dict[str, Any]]] = {side: {} for side in SIDES}
    for side in SIDES:
        path = out / side / f"{BENCHMARK}.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            record = json.loads(line)
            if record.get("condition") == "loop":
                found[side][record["problem_id"]] = record
    return found


def model_rounds(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The iterations of a record that asked the model (the tool's own edit asks none)."""
    its = (record.get("run") or {}).get("iterations") or []
    return [it for it in its if sum((it.get("usage") or {}).get(k, 0) for k in ("prompt_tokens", "completion_tokens"))]


def table(found: dict[str, dict[str, dict[str, Any]]]) -> str:
    common = sorted(set(found["before"]) & set(found["after"]))
    rows = [
        "| checkout | exercises | solved (hidden tests) | false success | verified fix (median / p90) | within 30 s "
        "| model rounds | prompt / completion tok per model round | model s per round (median) "
        "| round 1: model s (median) / solved there |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for side in SIDES:
        mine = [found[side][p] for p in common]
        fixed = [r["pass_s"] if r["passed"] and r.get("pass_s") is not None else math.inf for r in mine]
        rounds = [it for r in mine for it in model_rounds(r)]
        n = max(1, len(rounds))
        usage = [it.get("usage") or {} for it in rounds]
        first = [it for r in mine for it in model_rounds(r)[:1] if it.get("index") == 1]
        first_solved = sum(1 for r in mine if r["passed"] and r.get("final_round") == 1)
        rows.append(
            f"| {side} | {len(mine)} | {sum(r['passed'] for r in mine)} | "
            f"{sum(bool(r['false_success']) for r in mine)} | "
            f"{seconds(percentile(fixed, 0.5))} / {seconds(percentile(fixed, 0.9))} | "
            f"{sum(1 for t in fixed if t <= 30)} | {len(rounds)} | "
            f"{sum(u.get('prompt_tokens', 0) for u in usage) / n:,.0f} / "
            f"{sum(u.get('completion_tokens', 0) for u in usage) / n:,.0f} | "
            f"{median_s(rounds)} | {median_s(first)} / {first_solved} |"
        )
    lines = [f"{p}: " + " → ".join(outcome(found[side][p]) for side in SIDES) for p in common]
    return "\n".join(rows) + "\n\n" + "\n".join(lines)


def median_s(rounds: list[dict[str, Any]]) -> str:
    values = [(it.get("timings") or {}).get("llm_s", 0.0) for it in rounds]
    return f"{statistics.median(values):.1f}" if values else "-"


def outcome(record: dict[str, Any]) -> str:
    if record["passed"]:
        return f"{record['pass_s']:.1f} s (round {record.get('final_round')})"
    return "false success" if record["false_success"] else "unsolved"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "exercises_speed")
    parser.add_argument("--only", default="", help="comma list of exercise ids (default: all)")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="each server's threads (default: the cores)"
    )
    parser.add_argument("--together", action="store_true", help="both checkouts at once (half the machine each)")
    parser.add_argument("--table", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    if not args.table:
        if args.before is None:
            parser.error("--before CHECKOUT is needed to run")
        run(args)
    print(table(records(args.out)))


def run(args: argparse.Namespace) -> None:
    from selfheal_jupyter.eval import benchmarks

    only = {x for x in args.only.split(",") if x}
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    ids = [p.id for p in benchmarks.load(BENCHMARK)]
    for index, problem in enumerate(ids):
        found = records(args.out)
        todo = [side for side in SIDES if problem not in found[side] and (not only or problem in only)]
        if index % 2:
            todo.reverse()
        if args.together:
            with ThreadPoolExecutor(max_workers=2) as pool:
                for done in [pool.submit(heal, checkouts[s], index, args.out / s, args.threads) for s in todo]:
                    done.result()
        else:
            for side in todo:
                heal(checkouts[side], index, args.out / side, args.threads)
        found = records(args.out)
        print(f"{problem:24} " + "  ".join(f"{s}: {outcome(found[s][problem])}" for s in todo if problem in found[s]))


if __name__ == "__main__":
    main()
