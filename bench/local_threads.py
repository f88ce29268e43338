"""Do a shared server's threads follow the machine? (issue 28, point 5)

    python bench/local_threads.py [--load-s 75] [--settle-s 300] [--rounds 6] [--json FILE]

1. Makes the machine busy: one spinning process per physical core, until the 1-minute
   load average reaches the core count (at most ``--load-s`` seconds).
2. Starts, under that load, two shared servers of the 1.5B model with threads from the
   machine, each in a private run directory: ``follows`` (decides its threads again
   while it lives, the default) and ``fixed`` (the same, deciding never: what a shared
   server did before issue 28).
3. Stops the load and lets the machine be quiet (both servers idle) until ``follows``
   switches its threads, at most ``--settle-s`` seconds: the hour after a busy job.
4. Then runs the same repair request (a buggy function and its
   traceback; greedy, at most 160 tokens) ``--rounds`` times on ``follows``, then as many
   times on ``fixed`` (one server at a time, so neither counts the other's generation),
   printing per request the server's threads of the moment (its state file), the
   1-minute load and the generation speed; then the median speed per server and round.

The machine is shared: the load of other work is printed with every row, because a
server on a machine that other work keeps busy rightly stays at one thread.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai import OpenAI

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.localmodel.catalog import get_spec
from selfheal_jupyter.localmodel.endpoint import server_options, start_server, state_path
from selfheal_jupyter.localmodel.threads import machine_load, physical_cores
from selfheal_jupyter.localmodel.weights import cache_dir, ensure_weights

REPAIR = """The program below raised an error. Fix it and reply with the whole corrected program.

```python
def average(values):
    total = 0
    for v in values:
        total += v
    return total / len(value)

scores = [3, 4, 5]
print("mean:", average(scores))
```

It raised NameError: name 'value' is not defined (line 5: return total / len(value))."""


def spin() -> None:
    while True:
        pass


def start(spec, name: str, root: Path, retune_s: float):
    home = root / name
    models = home / "selfheal-jupyter" / "models"
    models.parent.mkdir(parents=True)
    models.symlink_to(cache_dir(), target_is_directory=True)
    os.environ["XDG_CACHE_HOME"] = str(home)
    options = server_options(SelfHeal(local_threads=0, local_batch_threads=0))
    state = state_path(spec, options)
    server = start_server(spec, ensure_weights(spec), options=options, idle_s=900, state_file=state, retune_s=retune_s)
    return server, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-s", type=float, default=75.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=300.0,
        help="most seconds of quiet before the requests (until follows switches)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    spec = get_spec("qwen2.5-coder-1.5b")
    weights_home = cache_dir()
    cores = physical_cores()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(cores)]
    for p in spinners:
        p.start()
    t0 = time.monotonic()
    while machine_load() < cores and time.monotonic() - t0 < args.load_s:
        time.sleep(1)
    print(f"busy: load {machine_load():.2f} on {cores} cores after {time.monotonic() - t0:.0f} s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        servers = {}
        for name, retune_s in (("follows", 10.0), ("fixed", 0.0)):
            os.environ["XDG_CACHE_HOME"] = str(weights_home.parent.parent)
            servers[name] = start(spec, name, root, retune_s)
            settings = json.loads(servers[name][1].read_text())["settings"]
            print(f"{name}: started with {settings['threads']}/{settings['batch_threads']} threads")
        for p in spinners:
            p.terminate()
        print(f"load stopped at {machine_load():.2f}", flush=True)
        follows_state = servers["follows"][1]
        began = json.loads(follows_state.read_text())["settings"]["threads"]
        quiet_from = time.monotonic()
        while time.monotonic() - quiet_from < args.settle_s:  # both servers idle
            if json.loads(follows_state.read_text())["settings"]["threads"] != began:
                break
            time.sleep(2)
        now = json.loads(follows_state.read_text())["settings"]
        print(
            f"after {time.monotonic() - quiet_from:.0f} s of quiet (load {machine_load():.2f}): "
            f"follows has {now['threads']}/{now['batch_threads']} threads",
            flush=True,
        )
        try:
            print(f"{'round':>5} {'server':<8} {'threads':>7} {'load':>5} {'tokens':>6} {'tok/s':>6}")
            for name, (server, state) in servers.items():  # one at a time: the other idles
                for round_ in range(1, args.rounds + 1):
                    threads = json.loads(state.read_text())["settings"]["threads"]
                    client = OpenAI(base_url=server.base_url, api_key=server.api_key)
                    started = time.monotonic()
                    reply = client.chat.completions.create(
                        model=spec.alias, max_tokens=160, temperature=0, messages=[{"role": "user", "content": REPAIR}]
                    )
                    seconds = time.monotonic() - started
                    tokens = reply.usage.completion_tokens if reply.usage else 0
                    row = {
                        "round": round_,
                        "server": name,
                        "threads": threads,
                        "load": round(machine_load(), 2),
                        "tokens": tokens,
                        "tok_s": round(tokens / seconds, 2) if seconds else 0.0,
                    }
                    rows.append(row)
                    print(
                        f"{round_:>5} {name:<8} {threads:>7} {row['load']:>5.2f} {tokens:>6} {row['tok_s']:>6.2f}",
                        flush=True,
                    )
        finally:
            for server, _ in servers.values():
                server.stop()
    print()
    for name in ("follows", "fixed"):
        speeds = [r["tok_s"] for r in rows if r["server"] == name]
        last = [r["tok_s"] for r in rows if r["server"] == name and r["round"] > args.rounds // 2]
        print(
            f"{name:<8} median tok/s {statistics.median(speeds):.2f} (second half "
            f"{statistics.median(last):.2f}); threads at the end "
            f"{[r['threads'] for r in rows if r['server'] == name][-1]}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
