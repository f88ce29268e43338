"""What does the notebook context cost? (issue 9, point 8)

    python bench/context.py [--runs 15] [--json FILE]

Rows (medians and p90 over ``--runs``, after one warm-up; the first, cold call is
reported apart):
  resolve: typical cell     context.for_cell on a cell that reads np, a 3x2 DataFrame,
                            a notebook function (+ what it reads) and an instance of a
                            notebook class, in a real IPython shell
  resolve: 50 MB DataFrame  the same for a cell reading a 50 MB numeric DataFrame: the
                            copy (pickle) is made here, once per run
  sandbox: print(1)         DockerSandbox.execute with no context (the floor)
  sandbox: 50 MB, prepared  one iteration with the 50 MB DataFrame already pickled
                            (what every iteration of a run pays: write + load inside)
  sandbox: 50 MB, raw       the same value handed over unpickled (pickled again per
                            iteration: what a run would pay without the prepared copy)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.notebook import context
from selfheal_jupyter.sandbox.docker import DockerSandbox
from selfheal_jupyter.sandbox.serialize import Pickled

NOTEBOOK = """
import numpy as np
import pandas as pd
df = pd.DataFrame({"region": ["north", "south", "north"], "sales": [10, 20, 30]})
RATE = 2
def helper(x):
    return x * RATE
def scale(x):
    return helper(x) + 1
class Account:
    def __init__(self, owner, balance):
        self.owner, self.balance = owner, balance
    def deposit(self, amount):
        self.balance += amount
acct = Account("ann", 100)
"""
CELL = 'totals = df.groupby("regionn")["sales"].sum()\nprint(scale(totals), np.sqrt(4), acct.balance)\n'
BIG_CELL = "print(big.shape, big['a'].sum())\n"


def timed(func: Callable[[], object], runs: int) -> list[float]:
    func()  # warm-up
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        func()
        out.append(time.perf_counter() - t0)
    return out


def row(name: str, samples: list[float]) -> dict:
    samples = sorted(samples)
    p90 = samples[min(len(samples) - 1, int(round(0.9 * (len(samples) - 1))))]
    return {
        "row": name,
        "median_ms": round(statistics.median(samples) * 1000, 2),
        "p90_ms": round(p90 * 1000, 2),
        "runs": len(samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    ip = InteractiveShell.instance()
    ip.run_cell(NOTEBOOK, store_history=True)
    rows_ = int(50e6 // 16)  # two float64 columns: 50 MB of data
    ip.user_ns["big"] = pd.DataFrame({"a": np.random.rand(rows_), "b": np.random.rand(rows_)})

    def resolve(cell: str) -> context.NotebookContext:
        return context.for_cell(cell, ip.user_ns, max_bytes=200 << 20, hidden=ip.user_ns_hidden)

    t0 = time.perf_counter()
    typical = resolve(CELL)
    cold_ms = (time.perf_counter() - t0) * 1000
    names = ", ".join(f"{e.name}:{e.kind}" for e in typical.entries)
    rows = [row("resolve: typical cell", timed(lambda: resolve(CELL), args.runs))]
    rows[0]["cold_ms"] = round(cold_ms, 2)
    rows[0]["names"] = names
    big = resolve(BIG_CELL)
    size_mb = len(big.values["big"]) / 1e6
    rows.append(row("resolve: 50 MB DataFrame", timed(lambda: resolve(BIG_CELL), args.runs)))
    rows[-1]["pickled_mb"] = round(size_mb, 1)

    prepared = {"big": Pickled(big.values["big"])}
    raw = {"big": ip.user_ns["big"]}
    with DockerSandbox.from_config(SelfHeal(memory="1g")) as sb:
        rows.append(row("sandbox: print(1)", timed(lambda: sb.execute("print(1)"), args.runs)))

        def run(inputs: dict) -> None:
            result = sb.execute(BIG_CELL, inputs=inputs)
            assert result.ok, (result.status, result.stderr[-500:], result.message)

        rows.append(row("sandbox: 50 MB, prepared", timed(lambda: run(prepared), args.runs)))
        rows.append(row("sandbox: 50 MB, raw", timed(lambda: run(raw), args.runs)))

    width = max(len(r["row"]) for r in rows)
    print(f"{'row':<{width}}  median ms   p90 ms")
    for r in rows:
        extra = "".join(f"  {k}={r[k]}" for k in ("cold_ms", "pickled_mb") if k in r)
        print(f"{r['row']:<{width}}  {r['median_ms']:>9.2f} {r['p90_ms']:>8.2f}{extra}")
    print(f"typical cell resolves to: {names}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
