"""Loop overhead and tokens per iteration over a scripted 4-iteration repair.

    python bench/loop.py [--runs 5] [--json OUT]

What it measures, through the real loop, the real ``openai`` client, the scripted
server (``tests/scripted_server.py``) and the real Docker sandbox:

1. **Overhead per iteration** outside LLM and sandbox time: each iteration's wall
   time minus its LLM time minus its sandbox time (static pre-check, diff, feedback,
   events, bookkeeping). Goal: ≤ 20 ms.
2. **Prompt tokens sent per iteration** by this loop (task + plan + last program +
   structured feedback) versus a loop that replays the whole conversation (every
   earlier reply and feedback appended). Token counts are the scripted server's own
   count over what it received, identical for both. Goal: the last iteration costs
   ≤ half of the replaying loop's.

Run from the repository root (``tests`` must be importable).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd

from selfheal_jupyter.agents.developer import Developer, Proposal, RepairContext
from selfheal_jupyter.codeblocks import extract_code
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm, build_loop
from selfheal_jupyter.llm import Endpoint, LLMClient
from selfheal_jupyter.model import InputDescription, Plan, Run, Task
from selfheal_jupyter.sandbox.docker import DockerSandbox
from tests.scripted_server import Reply, ScriptedServer

TASK = (
    "For the sales DataFrame `sales` (columns: region, month, units, price), compute the "
    "revenue per region (units * price), the best month per region, and the share of "
    "each region in the total revenue. Store the result as a DataFrame `summary` indexed "
    "by region with columns revenue, best_month, share, sorted by revenue descending, "
    "and print it."
)
TESTS = """\
assert list(summary.columns) == ["revenue", "best_month", "share"]
assert abs(summary["share"].sum() - 1.0) < 1e-9
assert summary.index[0] == "north"
assert summary.loc["south", "best_month"] == 2
"""
PLAN = Reply(
    "1. Compute revenue = units * price for each row.\n"
    "2. Sum revenue per region.\n"
    "3. Find the month with the highest revenue per region.\n"
    "4. Compute each region's share of the total.\n"
    "5. Build `summary`, sort by revenue descending, print it.",
    match="planner",
)

_BODY = '''\
import pandas as pd

def revenue_table(frame):
    """Revenue per row, then aggregated per region."""
    frame = frame.copy()
    frame["revenue"] = frame["units"] * frame["{price}"]
    per_region = frame.groupby("region")["revenue"].sum()
    return frame, per_region

def best_months(frame):
    """Month with the highest revenue in each region."""
    by_month = frame.groupby(["region", "month"])["revenue"].sum().reset_index()
    idx = by_month.groupby("region")["revenue"].idxmax()
    return by_month.loc[idx].set_index("region")["month"]

rows, per_region = revenue_table(sales)
best = best_months(rows)
total = per_region.sum()
summary = pd.DataFrame({{
    "revenue": per_region,
    "best_month": best,
    "share": per_region / {total},
}})
summary = summary.sort_values("revenue", ascending={ascending})
print(summary)
'''


def _reply(note: str, **fmt: Any) -> str:
    return f"{note}\n\n```python\n{_BODY.format(**fmt)}```\n"


# Four candidates: three different mistakes, then the right program.
CANDIDATES = [
    _reply("Here is the program.", price="prices", total="total", ascending="False"),
    _reply("The column is called `price`; fixed.", price="price", total="totl", ascending="False"),
    _reply("Fixed the variable name.", price="price", total="total", ascending="True"),
    _reply("Sorted descending now.", price="price", total="total", ascending="False"),
]

SALES = pd.DataFrame(
    {
        "region": ["north", "north", "south", "south", "east", "east"],
        "month": [1, 2, 1, 2, 1, 2],
        "units": [100, 120, 30, 50, 40, 20],
        "price": [10.0, 10.0, 8.0, 8.0, 9.0, 9.0],
    }
)


class ReplayingDeveloper(Developer):
    """The baseline: a developer that replays the whole conversation every round."""

    def __init__(self, llm: LLMClient) -> None:
        super().__init__(llm, retry_temperature=SelfHeal().retry_temperature, repair_format=SelfHeal().repair_format)
        self.history: list[dict[str, str]] = []
        self.last_reply = ""

    def propose(
        self,
        prompt: str,
        plan: Plan | None,
        inputs: list[InputDescription],
        tests: str | None = None,
        repair: RepairContext | None = None,
        *,
        previous_codes: Any = (),
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Proposal:
        if repair is None:
            self.history = self.build_messages(prompt, plan, inputs, tests)
        else:
            self.history.append({"role": "assistant", "content": self.last_reply})
            self.history.append(
                {
                    "role": "user",
                    "content": f"What happened when it ran:\n{repair.feedback}\n\nFix the "
                    "program. Reply with ONE fenced ```python block holding the complete "
                    "corrected program.",
                }
            )
        reply = self.llm.chat(self.history, on_token=on_token, cancel=cancel)
        self.last_reply = reply.text
        return Proposal(
            code=extract_code(reply.text),
            reply=reply.text,
            usage=reply.usage,
            llm_s=reply.duration_s,
            finish_reason=reply.finish_reason,
        )


def one_run(sandbox: DockerSandbox, *, replay: bool) -> Run:
    with ScriptedServer([PLAN, *CANDIDATES]) as server:
        settings = SelfHeal(max_iterations=4, llm_timeout_s=10, llm_max_retries=0)
        llm = build_llm(settings, Endpoint(server.base_url, "bench", server.model))
        loop = build_loop(settings, llm=llm, sandbox=sandbox)
        if replay:
            loop.developer = ReplayingDeveloper(llm)
        run = loop.run(Task(TASK, inputs={"sales": SALES}, tests=TESTS))
        llm.close()
    if run.outcome != "success" or len(run.iterations) != 4:
        raise SystemExit(f"bench script went wrong: {run.outcome} {run.error}")
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)

    with DockerSandbox.from_config(SelfHeal()) as sandbox:
        sandbox.execute("import pandas")  # warm
        ours = [one_run(sandbox, replay=False) for _ in range(args.runs)]
        replays = [one_run(sandbox, replay=True) for _ in range(max(1, args.runs // 2))]

    overhead_ms = [[it.timings.overhead_s * 1000 for it in run.iterations] for run in ours]
    flat = [x for per in overhead_ms for x in per]
    llm_ms = [it.timings.llm_s * 1000 for run in ours for it in run.iterations]
    sandbox_ms = [it.timings.sandbox_s * 1000 for run in ours for it in run.iterations if it.timings.sandbox_s]
    ours_tokens = [it.usage.prompt_tokens for it in ours[0].iterations]
    replay_tokens = [it.usage.prompt_tokens for it in replays[0].iterations]

    print(f"Loop overhead per iteration ({args.runs} runs × 4 iterations, scripted LLM, real sandbox)")
    print(f"{'iteration':>10} {'median ms':>10} {'max ms':>8}")
    for i in range(4):
        col = [per[i] for per in overhead_ms]
        print(f"{i + 1:>10} {statistics.median(col):>10.2f} {max(col):>8.2f}")
    p95 = sorted(flat)[max(0, int(round(0.95 * len(flat))) - 1)]
    print(f"{'all':>10} {statistics.median(flat):>10.2f} {max(flat):>8.2f}   (p95 {p95:.2f} ms; goal ≤ 20 ms)")
    print(
        f"for scale: LLM call median {statistics.median(llm_ms):.1f} ms (scripted, local), "
        f"sandbox run median {statistics.median(sandbox_ms):.1f} ms"
    )
    print()
    print("Prompt tokens sent per developer iteration (server-counted)")
    print(f"{'iteration':>10} {'this loop':>10} {'replaying':>10} {'ratio':>7}")
    for i, (a, b) in enumerate(zip(ours_tokens, replay_tokens, strict=True), 1):
        print(f"{i:>10} {a:>10} {b:>10} {a / b:>7.2f}")
    print(
        f"{'total':>10} {sum(ours_tokens):>10} {sum(replay_tokens):>10} {sum(ours_tokens) / sum(replay_tokens):>7.2f}"
    )
    last_ratio = ours_tokens[-1] / replay_tokens[-1]
    print(f"last iteration: {last_ratio:.2f} of the replaying loop's (goal ≤ 0.50)")

    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "overhead_ms": overhead_ms,
                    "overhead_median_ms": statistics.median(flat),
                    "overhead_max_ms": max(flat),
                    "prompt_tokens": {"loop": ours_tokens, "replay": replay_tokens},
                    "last_iteration_ratio": last_ratio,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
