"""Speed levers of the embedded model, each on and off in the same run, through the
real loop and sandbox.

    python bench/local_model.py [--configs today,threads2,ngram,draft,all,edit]
                                [--tasks grades,inventory,textstats,parens,pandas]
                                [--max-iterations 3] [--json OUT]

The fixed set (``bench/local_speed_tasks.py``): three 30–60-line exercises with
several TODOs and their own asserts, a HumanEval-style function, a pandas repair.
For each task every configuration runs back to back (its own server, started with
the real child process), so a change in the machine's load hits all of them alike.
Per configuration it prints: tasks passed, LLM rounds, median seconds per round,
completion and prompt tokens per round, the share of prompt tokens served from the
server's prompt cache, generation tokens/s, and the speculative acceptance rate —
from llama.cpp's own ``/metrics`` counters, read before and after each run — and the
rounds whose program came from SEARCH/REPLACE edits / whose edits did not apply.

Configurations (one lever each, against ``today``):
  today     1 generation / 1 prompt thread, no speculation, 1 slot (the old settings)
  threads2  2 / 2 threads
  auto      threads from localmodel/threads.py (says what it chose)
  ngram     n-gram speculation (SelfHeal.local_speculation = "ngram")
  draft     the 0.5B model drafts for the 1.5B
  all       the defaults (localmodel/tuning.py): auto threads, n-gram speculation, 2 slots,
            n_cache_reuse 32
  reuse     all with n_cache_reuse pinned to 32 (reuse cached chunks of the program after
            the first change; measured before it became the default)
  ngram16   all + n-gram drafts of at most 16 tokens (llama.cpp's default: 48)
  edit      all + SelfHeal.repair_format = "edit" (repairs answer with SEARCH/REPLACE
            blocks; compare with ``all``: --configs all,edit)
  editreuse edit + n_cache_reuse 32 (the applied program is mostly chunks already cached)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_speed_tasks import TASKS

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import (
    build_llm,
    build_loop,
    close_shared_sandboxes,
    shared_sandbox,
)
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.localmodel import ensure_weights, get_spec, start_server
from selfheal_jupyter.localmodel.endpoint import ServerOptions
from selfheal_jupyter.localmodel.threads import auto_threads
from selfheal_jupyter.localmodel.tuning import recommended_settings

TODAY = ServerOptions(
    context=8192,
    threads=1,
    batch_threads=1,
    parallel=1,
    cache_reuse=0,
    speculation="off",
    draft_model="",
    draft_max=16,
    ngram_n=0,
    ngram_m=0,
)
"""The server before issue 11, spelled out: the fixed reference every lever is compared to."""


def configs(draft_path: str) -> dict[str, ServerOptions]:
    tuned = recommended_settings()
    auto = auto_threads()
    ngram = dict(speculation=tuned.ngram_type, ngram_n=tuned.ngram_n, ngram_m=tuned.ngram_m,
                 draft_max=tuned.draft_max)  # fmt: skip
    table = {
        "today": TODAY,
        "threads2": replace(TODAY, threads=2, batch_threads=2),
        "auto": replace(TODAY, threads=auto.generation, batch_threads=auto.batch),
        "ngram": replace(TODAY, **ngram),
        "draft": replace(TODAY, speculation="draft", draft_model=draft_path, draft_max=tuned.draft_max),
        "all": replace(TODAY, threads=auto.generation, batch_threads=auto.batch,
                       parallel=tuned.parallel, cache_reuse=tuned.cache_reuse, **ngram),
    }  # fmt: skip
    table["reuse"] = replace(table["all"], cache_reuse=32)  # + KV-shifted reuse of program chunks
    table["ngram16"] = replace(table["all"], ngram_m=16)  # + shorter n-gram drafts
    table["edit"] = table["all"]  # the same server; the loop asks for edits (LOOP_OPTIONS)
    table["editreuse"] = table["reuse"]  # edits, and the edited program's chunks reused
    return table


LOOP_OPTIONS: dict[str, dict[str, object]] = {
    "edit": {"repair_format": "edit"},
    "editreuse": {"repair_format": "edit"},
}
"""``SelfHeal`` options of a configuration beyond the server's (none: the defaults)."""


COUNTERS = {
    "prompt": "llamacpp:prompt_tokens_total",
    "cached": "llamacpp:prompt_tokens_cached_total",
    "predicted": "llamacpp:tokens_predicted_total",
    "predicted_s": "llamacpp:tokens_predicted_seconds_total",
    "drafted": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
}


def metrics(url: str, api_key: str) -> dict[str, float]:
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        text = resp.read().decode()
    values = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        values[name] = value
    return {k: float(values.get(name, 0) or 0) for k, name in COUNTERS.items()}


@dataclass
class Result:
    config: str
    task: str
    outcome: str
    rounds: int
    seconds: float
    load: float
    delta: dict[str, float] = field(default_factory=dict)
    threads: str = ""
    edited: int = 0
    """Rounds whose program came from SEARCH/REPLACE blocks."""
    edit_failed: int = 0
    """Rounds whose SEARCH/REPLACE blocks did not apply."""


def run_task(name: str, cfg: str, options: ServerOptions, spec, path, sandbox, max_it: int) -> Result:
    task = TASKS[name]
    server = start_server(spec, path, options=options)
    try:
        settings = SelfHeal(
            max_iterations=max_it,
            llm_timeout_s=900,
            llm_max_retries=0,
            time_budget_s=0,
            token_budget=0,
            **LOOP_OPTIONS.get(cfg, {}),
        )
        client = build_llm(settings, Endpoint(server.base_url, server.api_key, spec.alias, local=True))
        loop = build_loop(settings, llm=client, sandbox=sandbox)
        before = metrics(server.url, server.api_key)
        load = os.getloadavg()[0]
        started = time.monotonic()
        run = loop.run(task)
        seconds = time.monotonic() - started
        after = metrics(server.url, server.api_key)
    finally:
        server.stop()
    rounds = sum(1 for it in run.iterations if it.candidate is not None and it.usage.completion_tokens)
    rounds += 1 if run.plan is not None and run.plan.steps else 0
    delta = {k: after[k] - before[k] for k in COUNTERS}
    return Result(cfg, name, str(run.outcome), max(rounds, 1), seconds, load, delta,
                  f"{options.threads}/{options.batch_threads}",
                  edited=sum(it.edited for it in run.iterations),
                  edit_failed=sum(bool(it.edit_failure) for it in run.iterations))  # fmt: skip


def summarise(results: list[Result], names: list[str]) -> str:
    head = (f"{'config':9} {'thr':>4} {'pass':>5} {'rounds':>6} {'s/round':>8} {'x today':>7} "
            f"{'tok/rnd':>7} {'prompt/rnd':>10} {'cached%':>7} {'gen t/s':>7} {'accept%':>7} {'load':>5} "
            f"{'edits ok/failed':>15}")  # fmt: skip
    lines = [head, "-" * len(head)]
    base = None
    for cfg in names:
        rs = [r for r in results if r.config == cfg]
        if not rs:
            continue
        per_round = [r.seconds / r.rounds for r in rs]
        med = statistics.median(per_round)
        base = med if cfg == "today" else base
        rounds = sum(r.rounds for r in rs)
        tot = {k: sum(r.delta[k] for r in rs) for k in COUNTERS}
        gen = tot["predicted"] / tot["predicted_s"] if tot["predicted_s"] else float("nan")
        acc = 100 * tot["accepted"] / tot["drafted"] if tot["drafted"] else float("nan")
        cached = 100 * tot["cached"] / (tot["prompt"] + tot["cached"]) if tot["prompt"] else float("nan")
        speed = base / med if base else float("nan")
        lines.append(
            f"{cfg:9} {rs[0].threads:>4} {sum(r.outcome == 'success' for r in rs):2d}/{len(rs):<2d} "
            f"{rounds / len(rs):6.1f} {med:8.1f} {speed:7.2f} {tot['predicted'] / rounds:7.0f} "
            f"{(tot['prompt'] + tot['cached']) / rounds:10.0f} {cached:7.0f} {gen:7.1f} {acc:7.0f} "
            f"{statistics.mean(r.load for r in rs):5.1f} "
            f"{sum(r.edited for r in rs):>9d}/{sum(r.edit_failed for r in rs):<5d}"
        )  # fmt: skip
    return "\n".join(lines)


_KERNEL = """
import json, sys, time
t0 = time.monotonic()
from openai import OpenAI
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.localmodel import ensure_local_endpoint, running_server
url, model = ensure_local_endpoint(SelfHeal(local_idle_s=60))
ready = time.monotonic()
key = running_server("qwen2.5-coder-1.5b").api_key
stream = OpenAI(base_url=url, api_key=key).chat.completions.create(
    model=model, stream=True, max_tokens=8, temperature=0,
    messages=[{"role": "user", "content": "Say OK."}])
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        first = time.monotonic()
        break
print(json.dumps({"endpoint_s": ready - t0, "first_token_s": first - ready,
                  "started_here": running_server("qwen2.5-coder-1.5b").process is not None}))
"""


def warm_start() -> None:
    """Two "kernels" one after the other (separate processes, shared server): how long
    each waits for the endpoint and for its first token."""
    import subprocess

    for name in ("kernel 1 (cold)", "kernel 2 (warm)"):
        out = subprocess.run([sys.executable, "-c", _KERNEL], capture_output=True, text=True,
                             timeout=600, check=True).stdout  # fmt: skip
        r = json.loads(out)
        print(
            f"{name}: endpoint ready after {r['endpoint_s']:.2f} s, first token "
            f"{r['first_token_s']:.2f} s later (loaded the model here: {r['started_here']})"
        )
    from selfheal_jupyter.localmodel import ensure_local_endpoint, stop_local_endpoint

    ensure_local_endpoint(SelfHeal(local_idle_s=60))  # attach, then stop it: no 2 GB
    stop_local_endpoint()  # kept for the idle minute


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="today,threads2,ngram,draft,all")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--max-iterations", type=int, default=3)
    ap.add_argument("--json", default=None, help="write every result here")
    ap.add_argument("--warm", action="store_true", help="only measure a second kernel's start on the shared server")
    args = ap.parse_args()
    if args.warm:
        warm_start()
        return 0
    spec = get_spec("qwen2.5-coder-1.5b")
    path = ensure_weights(spec)
    names = args.configs.split(",")
    draft_path = str(ensure_weights(get_spec("qwen2.5-coder-0.5b"))) if "draft" in names else ""
    table = configs(draft_path)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}, auto threads {auto_threads()}",
          flush=True)  # fmt: skip
    sandbox = shared_sandbox(SelfHeal())
    results: list[Result] = []
    try:
        for tname in args.tasks.split(","):
            for cfg in names:
                r = run_task(tname, cfg, table[cfg], spec, path, sandbox, args.max_iterations)
                results.append(r)
                d = r.delta
                print(f"{tname:10} {cfg:9} {r.outcome:17} rounds={r.rounds} {r.seconds:6.1f}s "
                      f"{r.seconds / r.rounds:5.1f}s/round gen={d['predicted']:.0f} "
                      f"prompt={d['prompt']:.0f}+{d['cached']:.0f}cached "
                      f"draft={d['accepted']:.0f}/{d['drafted']:.0f} load={r.load:.1f} "
                      f"edits={r.edited}/{r.edit_failed}failed", flush=True)  # fmt: skip
    finally:
        close_shared_sandboxes()
    print()
    print(summarise(results, names))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
