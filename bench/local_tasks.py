"""Tune the embedded model: run a fixed set of small tasks through the real loop.

    python bench/local_tasks.py [--model qwen2.5-coder-1.5b] [--configs base,hot,...]
                                [--tasks fib,nameerror,...] [--repeat 1] [--json OUT]

Each task is a writing task (prompt only) or a repair task (``initial_code``: the
buggy program is iteration 0), with the user's own asserts as tests where the task
has a checkable answer. Every configuration varies one knob of what is sent to the
embedded model (temperature, max_tokens, stop sequence, retry temperature, context
size, planner on/off); the table says how many tasks passed, in how many iterations,
how many tokens and seconds. Uses the real sandbox (Docker) and the real server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_loop, close_shared_sandboxes, shared_sandbox
from selfheal_jupyter.llm import ChatReply, Endpoint, LLMClient
from selfheal_jupyter.localmodel import ensure_weights, get_spec, start_server
from selfheal_jupyter.localmodel.endpoint import server_options
from selfheal_jupyter.loop.orchestrator import Loop
from selfheal_jupyter.model import Task


@dataclass(frozen=True)
class Config:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    """The ``SelfHeal`` options this configuration changes (the rest are the defaults)."""
    stop: tuple[str, ...] = ()


CONFIGS = {
    c.name: c
    for c in (
        Config("base"),
        Config("greedy", {"temperature": 0.0}),
        Config("warm", {"temperature": 0.5}),
        Config("short", {"max_tokens": 512}),
        Config("stopfence", stop=("\n```\n",)),
        Config("noplan", {"auto_plan": False}),
        Config("hotretry", {"retry_temperature": 1.0}),
        Config("ctx4k", {"local_context": 4096}),
    )
}


@dataclass(frozen=True)
class BenchTask:
    name: str
    prompt: str
    initial_code: str | None = None
    tests: str | None = None


TASKS = {
    t.name: t
    for t in (
        BenchTask(
            "fib",
            "write a function that returns the n-th Fibonacci number and print fib(10)",
            tests="assert fib(10) == 55 and fib(1) == 1",
        ),
        BenchTask(
            "primes",
            "write a function is_prime(n) and print the primes below 30",
            tests="assert is_prime(29) and not is_prime(1) and not is_prime(21) and is_prime(2)",
        ),
        BenchTask(
            "wordcount",
            "write a function word_count(text) that returns a dict mapping each "
            "lower-cased word to how often it occurs, and print word_count('a b A')",
            tests="assert word_count('a b A') == {'a': 2, 'b': 1}",
        ),
        BenchTask(
            "revenue",
            "build a pandas DataFrame df of 4 products with columns name, price and qty, "
            "add a column revenue = price * qty and print the name of the product with "
            "the highest revenue",
            tests="assert 'revenue' in df.columns and (df['revenue'] == df['price'] * df['qty']).all()",
        ),
        BenchTask(
            "nameerror",
            "",
            initial_code="data = [3, 1, 12]\nprint(math.sqrt(sum(data)))\n",
        ),
        BenchTask(
            "keyerror",
            "compute the total revenue (price * qty) of df and print it",
            initial_code=(
                "import pandas as pd\n"
                "df = pd.DataFrame({'price': [1.0, 2.5, 4.0], 'qty': [3, 1, 2]})\n"
                "df['revenue'] = df['Price'] * df['qty']\n"
                "print(df['revenue'].sum())\n"
            ),
            tests="assert abs(df['revenue'].sum() - 13.5) < 1e-9",
        ),
        BenchTask(
            "zerodiv",
            "average(xs) must return 0 for an empty list",
            initial_code=(
                "def average(xs):\n    return sum(xs) / len(xs)\n\nprint(average([2, 4]))\nprint(average([]))\n"
            ),
            tests="assert average([]) == 0 and average([2, 4]) == 3",
        ),
        BenchTask(
            "emptyguard",
            "largest(xs) must return None for an empty list",
            initial_code=(
                "def largest(xs):\n    best = xs[0]\n    for x in xs:\n"
                "        if x > best:\n            best = x\n    return best\n\n"
                "print(largest([1, 5, 2]))\nprint(largest([]))\n"
            ),
            tests="assert largest([]) is None and largest([1, 5, 2]) == 5",
        ),
        BenchTask(
            "typeerror",
            "",
            initial_code="items = [1, 2, 3]\nprint('total: ' + sum(items))\n",
        ),
        BenchTask(
            "vowels",
            "count_vowels must count upper- and lower-case vowels",
            initial_code=(
                "def count_vowels(s):\n    return sum(1 for c in s if c in 'aeiou')\n\n"
                "print(count_vowels('Hello World'))\n"
            ),
            tests="assert count_vowels('AEIOU') == 5 and count_vowels('hello') == 2",
        ),
    )
}


class StopClient(LLMClient):
    """An LLMClient that sends default stop sequences with every request."""

    def __init__(self, endpoint: Endpoint, *, stop: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(endpoint, **kw)
        self.default_stop = list(stop)

    def chat(self, messages: Any, *, stop: Sequence[str] | None = None, **kw: Any) -> ChatReply:
        return super().chat(messages, stop=stop or self.default_stop or None, **kw)


@dataclass
class Result:
    config: str
    task: str
    outcome: str
    iterations: int
    tokens: int
    seconds: float
    error: str = ""
    codes: list[str] = field(default_factory=list)


def run_one(loop: Loop, task: BenchTask) -> tuple[str, int, int, float, str, list[str]]:
    started = time.monotonic()
    run = loop.run(Task(prompt=task.prompt, tests=task.tests, initial_code=task.initial_code))
    codes = [it.candidate.code for it in run.iterations if it.candidate is not None]
    return (
        str(run.outcome),
        len(run.iterations),
        run.totals.prompt_tokens + run.totals.completion_tokens,
        time.monotonic() - started,
        run.error or "",
        codes,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--configs", default="base")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--json", default=None, help="write every result here")
    args = ap.parse_args()

    spec = get_spec(args.model)
    path = ensure_weights(spec)
    sandbox = shared_sandbox(SelfHeal())
    results: list[Result] = []
    try:
        for cname in args.configs.split(","):
            cfg = CONFIGS[cname]
            settings = SelfHeal(
                max_iterations=args.max_iterations, llm_timeout_s=600, time_budget_s=0, token_budget=0, **cfg.options
            )
            server = start_server(spec, path, options=server_options(settings))
            try:
                client = StopClient(
                    Endpoint(server.base_url, server.api_key, spec.alias, local=True),
                    stop=cfg.stop, temperature=settings.temperature,
                    max_tokens=settings.max_tokens, timeout_s=settings.llm_timeout_s,
                    max_retries=settings.llm_max_retries,
                )  # fmt: skip
                loop = build_loop(settings, llm=client, sandbox=sandbox)
                for _ in range(args.repeat):
                    for tname in args.tasks.split(","):
                        outcome, its, toks, secs, err, codes = run_one(loop, TASKS[tname])
                        r = Result(cname, tname, outcome, its, toks, secs, err[:200], codes)
                        results.append(r)
                        print(f"{cname:10} {tname:11} {outcome:17} it={its} tok={toks:5d} "
                              f"{secs:6.1f}s {err[:80]}", flush=True)  # fmt: skip
            finally:
                server.stop()
    finally:
        close_shared_sandboxes()
    print()
    print(f"{'config':10} {'passed':>7} {'mean it':>8} {'mean tok':>9} {'median s':>9} {'total s':>8}")
    for cname in args.configs.split(","):
        rs = [r for r in results if r.config == cname]
        ok = [r for r in rs if r.outcome == "success"]
        print(f"{cname:10} {len(ok):3d}/{len(rs):<3d} "
              f"{statistics.mean(r.iterations for r in rs):8.2f} "
              f"{statistics.mean(r.tokens for r in rs):9.0f} "
              f"{statistics.median(r.seconds for r in rs):9.1f} "
              f"{sum(r.seconds for r in rs):8.0f}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.__dict__ for r in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
