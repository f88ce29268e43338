"""``selfheal eval``: the paper's metrics on public benchmarks, single pass vs the loop.

selfheal eval --benchmark humaneval --limit 20 [--workers 2] [--no-plan]
selfheal eval report [--out DIR]
selfheal eval --compare A.jsonl B.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..flags import add_to_parser
from . import command_options

DEFAULT_OUT = "eval-results"


EVAL_FLAGS = ("model", "base_url", "max_iterations", "no_plan", "llm_timeout", "image", "runtime")
"""The SelfHeal options `selfheal eval` offers as flags (selfheal_jupyter.flags)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..eval.benchmarks import BENCHMARKS

    p = subparsers.add_parser(
        "eval",
        help="evaluate the loop vs a single pass on HumanEval, repair, dataframe tasks",
        description=(
            "Run a benchmark through the self-healing loop and the single-pass baseline "
            "(same model, same prompts, one round, no feedback). Hidden tests run in the "
            "sandbox for the final score only. Results are appended to OUT/BENCHMARK.jsonl; "
            "a rerun skips finished problems. `selfheal eval report` renders OUT/report.html."
        ),
    )
    p.add_argument("action", nargs="?", choices=("run", "report"), default="run", help="run (default) or report")
    p.add_argument("--benchmark", choices=sorted(BENCHMARKS), help="which benchmark to run")
    p.add_argument("--limit", type=int, metavar="N", help="only N problems (in shipped order)")
    p.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N problems")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="problems in parallel, each with its own sandbox (default 1)",
    )
    p.add_argument("--conditions", default="loop,baseline", help="comma list of loop,baseline (default both)")
    p.add_argument(
        "--derive-baseline",
        action="store_true",
        help="read the baseline off round 1 of the loop run instead of running it "
        "(exact with greedy decoding; halves the compute)",
    )
    p.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy, reproducible)"
    )
    add_to_parser(p, EVAL_FLAGS, defaults={"image": "the benchmark's image"})
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"results directory (default {DEFAULT_OUT})")
    p.add_argument(
        "--compare", nargs=2, metavar=("A.jsonl", "B.jsonl"), help="print two result files side by side and exit"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=eval_command)


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """The options every condition of the evaluation runs with (checked before any model
    or sandbox starts)."""
    return command_options(args, EVAL_FLAGS, temperature=args.temperature)


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    from ..eval.table import summary_table

    print(json.dumps(summary, indent=2, default=str) if as_json else summary_table(summary))


def eval_command(args: argparse.Namespace) -> int:
    from ..eval.aggregate import summarize_records
    from ..eval.report import write_report
    from ..eval.store import read_records

    if args.compare:
        from ..eval.table import compare_table

        a, b = (Path(x) for x in args.compare)
        for path in (a, b):
            if not path.exists():
                raise BadInput(f"{path} does not exist; give two results files of `selfheal eval`.")
        print(
            compare_table(
                summarize_records(read_records(a)), summarize_records(read_records(b)), names=(a.stem, b.stem)
            )
        )
        return 0
    out = Path(args.out)
    if args.action == "report":
        files = sorted(out.glob("*.jsonl"))
        records = [r for f in files for r in read_records(f)]
        if not records:
            raise BadInput(f"No results in {out}/*.jsonl; run `selfheal eval --benchmark NAME --out {out}` first.")
        summary = summarize_records(records)
        html_path, json_path = write_report(summary, out)
        _print_summary(summary, args.json)
        print(f"\nreport: {html_path}\nsummary: {json_path}", file=sys.stderr)
        return 0
    if not args.benchmark:
        raise BadInput(
            "Name a benchmark: selfheal eval --benchmark humaneval|repair|dataframe "
            "(or `selfheal eval report`, `selfheal eval --compare A.jsonl B.jsonl`)."
        )
    from ..eval.benchmark_run import EvalConfig, run_eval

    config = EvalConfig(
        benchmark=args.benchmark,
        out_dir=out,
        offset=args.offset,
        limit=args.limit,
        workers=args.workers,
        conditions=tuple(c.strip() for c in args.conditions.split(",") if c.strip()),
        derive_baseline=args.derive_baseline,
        settings=settings_from(args),
    )
    path = run_eval(config, log=lambda m: print(m, file=sys.stderr))
    from ..eval.benchmarks import load
    from ..eval.store import ResultStore

    records = ResultStore(path).records()
    wanted = {p.id for p in load(args.benchmark, offset=args.offset, limit=args.limit)}
    summary = summarize_records(r for r in records if r["problem_id"] in wanted)
    (out / f"{args.benchmark}.summary.json").write_text(json.dumps(summary, indent=2, default=str))
    _print_summary(summary, args.json)
    print(f"\nresults: {path}", file=sys.stderr)
    return 0
