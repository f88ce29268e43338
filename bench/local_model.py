"""Benchmark of the embedded model's server: load time, peak RSS, prompt and
generation speed, per model and thread count.

    python bench/local_model.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b] [--threads 1,2]

Prints a table. Uses the real child process (``start_server``) and llama.cpp's own
``timings`` from the HTTP reply.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request

from selfheal_jupyter.localmodel import ensure_weights, get_spec, start_server

# About the size of a repair prompt of the loop (~400 tokens): task, program, error.
PROMPT = (
    "Task: write a function `median(xs)` that returns the median of a list of numbers, "
    "raising ValueError on an empty list, and print median([3, 1, 2]).\n\n"
    "The current program:\n```python\n"
    + "\n".join(f"def helper_{i}(values):\n    return [v * {i} for v in values if v > {i}]"
                for i in range(12))
    + "\n\ndef median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n"
    "print(median([]))\n```\n\nWhat happened when it ran:\nIndexError: list index out "
    "of range (line 3, in median: return s[len(s) // 2])\n\nFix the program. Reply with "
    "ONE fenced ```python block holding the complete corrected program."
)


def _vm_hwm_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _chat(url: str, model: str, max_tokens: int) -> dict:
    body = json.dumps({
        "model": model, "temperature": 0, "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": PROMPT}], "cache_prompt": False,
    }).encode()  # fmt: skip
    req = urllib.request.Request(url + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    ap.add_argument("--threads", default="1/1,1/2,2/2", help="generation/prompt threads")
    ap.add_argument("--max-tokens", type=int, default=200)
    args = ap.parse_args()
    print(f"{'model':22} {'thr':>5} {'load s':>7} {'RSS MB':>7} {'prompt t/s':>10} "
          f"{'gen t/s':>8} {'gen tok':>7} {'wall s':>7}   (load avg {os.getloadavg()[0]:.1f})")  # fmt: skip
    for key in args.models.split(","):
        spec = get_spec(key)
        path = ensure_weights(spec)
        for combo in args.threads.split(","):
            gen, _, batch = combo.partition("/")
            threads, batch_threads = int(gen), int(batch or gen)
            t0 = time.monotonic()
            server = start_server(spec, path, threads=threads, batch_threads=batch_threads)
            load = time.monotonic() - t0
            try:
                _chat(server.url, spec.alias, 8)  # warm-up
                t1 = time.monotonic()
                reply = _chat(server.url, spec.alias, args.max_tokens)
                wall = time.monotonic() - t1
                tm = reply.get("timings", {})
                pn = tm.get("prompt_n", 0)
                print(f"{key:22} {combo:>5} {load:7.1f} {_vm_hwm_mb(server.pid):7.0f} "
                      f"{tm.get('prompt_per_second', float('nan')):10.1f} "
                      f"{tm.get('predicted_per_second', float('nan')):8.1f} "
                      f"{tm.get('predicted_n', 0):7d} {wall:7.1f}  prompt_n={pn}", flush=True)  # fmt: skip
            finally:
                server.stop()


if __name__ == "__main__":
    main()
