"""The process that hosts the model: ``python -m selfheal_jupyter.localmodel.child``.

Why a separate process: a gigabyte of weights and a native library that may crash
must never take the Jupyter kernel down with them. This process loads the GGUF into
xllamacpp's in-process llama.cpp HTTP server on a loopback port and reports
``{"url": ..., "pid": ...}`` as one JSON line on a private pipe.

How long it lives depends on ``--idle-s``:

- ``0``: exactly as long as its parent (a parent-death signal, ``prctl(PR_SET_PDEATHSIG)``,
  when the parent asks for it, and a watchdog that notices being re-parented).
- ``> 0``: it is the *shared* server of every kernel and CLI run of this user. It
  writes its own state file (``--state-file``: pid, url, settings) so others find
  it, outlives the process that started it, and exits after ``idle_s`` seconds in
  which it neither served a request nor was claimed by a client (a client claims
  it by touching ``<state-file>.lease``). It removes its state file on the way out.
  With ``--auto-threads`` it is a supervisor that forwards to a model process and
  decides its threads again while it lives (:mod:`.retune`).

Everything the native library prints goes to stderr, which the parent sends to a
log file.

The server answers only requests that carry its API key (:mod:`.apikey`).
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .apikey import api_key, authorized

PR_SET_PDEATHSIG = 1
WATCHDOG_INTERVAL_S = 0.5
IDLE_POLL_S = 1.0

# What ``--speculation`` may say, and the xllamacpp speculative type each one uses.
SPECULATION_TYPES = {
    "off": "COMMON_SPECULATIVE_TYPE_NONE",
    "draft": "COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE",
    "ngram-simple": "COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE",
    "ngram-map-k": "COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K",
    "ngram-mod": "COMMON_SPECULATIVE_TYPE_NGRAM_MOD",
    "ngram-cache": "COMMON_SPECULATIVE_TYPE_NGRAM_CACHE",
}


def _set_parent_death_signal() -> None:
    """Ask the kernel to SIGTERM us when the thread that spawned us dies (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog still works


def _watch_parent(parent_pid: int) -> None:
    """Exit as soon as we are re-parented (the parent died, however it died)."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(WATCHDOG_INTERVAL_S)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True, help="path of the verified GGUF file")
    p.add_argument("--alias", required=True, help="model name the endpoint answers to")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    # How the server is shaped: always given by ServerOptions.child_args (no defaults here).
    p.add_argument("--ctx", type=int, required=True)
    p.add_argument("--threads", type=int, required=True, help="threads generating tokens")
    p.add_argument("--batch-threads", type=int, required=True, help="threads reading the prompt (0: same as --threads)")
    p.add_argument(
        "--parallel", type=int, required=True, help="slots serving requests at once (they share one KV cache)"
    )
    p.add_argument(
        "--cache-reuse",
        type=int,
        required=True,
        help="reuse cached prompt chunks of at least N tokens by KV shifting (0: off)",
    )
    p.add_argument("--speculation", choices=sorted(SPECULATION_TYPES), required=True)
    p.add_argument("--draft-model", default="", help="GGUF of the draft model (--speculation draft)")
    p.add_argument("--draft-max", type=int, required=True, help="most tokens drafted at once")
    p.add_argument("--ngram-n", type=int, required=True, help="lookup n-gram size (0: llama.cpp's)")
    p.add_argument("--ngram-m", type=int, required=True, help="draft m-gram size (0: llama.cpp's)")
    p.add_argument("--parent", type=int, default=0, help="pid whose death ends us (0: none)")
    p.add_argument("--pdeathsig", action="store_true", help="also use PR_SET_PDEATHSIG")
    p.add_argument(
        "--idle-s", type=float, default=0.0, help="exit after this many idle seconds (0: live as long as --parent)"
    )
    p.add_argument("--state-file", default="", help="where to announce ourselves (shared mode)")
    p.add_argument("--settings-json", default="{}", help="recorded in the state file as is")
    p.add_argument("--ready-fd", type=int, default=1, help="fd to report readiness on")
    p.add_argument(
        "--auto-threads",
        action="store_true",
        help="shared mode: decide the threads again while alive (localmodel/retune.py)",
    )
    p.add_argument("--retune-s", type=float, default=10.0, help="with --auto-threads: seconds between two decisions")
    p.add_argument("--load-file", default="", help="with --auto-threads: read the load from this file (benches, tests)")
    return p.parse_args(argv)


def _model_args(args: argparse.Namespace) -> list[str]:
    """The arguments of a backend that supervise() starts (all but threads and place)."""
    out = [
        "--model",
        args.model,
        "--alias",
        args.alias,
        "--ctx",
        str(args.ctx),
        "--parallel",
        str(args.parallel),
        "--cache-reuse",
        str(args.cache_reuse),
        "--speculation",
        args.speculation,
        "--draft-max",
        str(args.draft_max),
        "--ngram-n",
        str(args.ngram_n),
        "--ngram-m",
        str(args.ngram_m),
    ]
    if args.draft_model:
        out += ["--draft-model", args.draft_model]
    return out


def supervise(args: argparse.Namespace, ready: Any, state: Path) -> int:
    """The shared server whose threads follow the machine (:mod:`.retune`): it owns the
    port, forwards to a backend, re-decides the threads every ``--retune-s`` seconds,
    and stops after ``--idle-s`` idle seconds like the plain shared server."""
    import socket

    from .retune import OwnLoad, Proxy, Retuner, cpu_seconds, load_reader, start_backend, switch
    from .threads import ThreadCounts, physical_cores

    def log(text: str) -> None:
        print(f"selfheal retune: {text}", file=sys.stderr, flush=True)

    counts = ThreadCounts(args.threads, args.batch_threads or args.threads)
    model_args = _model_args(args)
    backend = start_backend(model_args, counts, log)
    listener = socket.create_server((args.host, args.port))
    url = f"http://{args.host}:{listener.getsockname()[1]}"
    proxy = Proxy(listener, backend.address)
    threading.Thread(target=proxy.serve, name="selfheal-proxy", daemon=True).start()
    settings = json.loads(args.settings_json)

    def announce() -> None:
        settings.update(threads=backend.counts.generation, batch_threads=backend.counts.batch)
        _write_state(
            state,
            {
                "pid": os.getpid(),
                "url": url,
                "alias": args.alias,
                "model_file": args.model,
                "started_by": args.parent,
                "idle_s": args.idle_s,
                "settings": settings,
            },
        )

    announce()
    try:
        ready.write(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
        ready.close()
    except OSError:
        pass
    print(f"selfheal local model {args.alias} listening on {url}", file=sys.stderr, flush=True)
    lease = Path(str(state) + ".lease")
    read_load = load_reader(args.load_file)
    retuner = Retuner(physical_cores(), counts)
    own = OwnLoad()
    clock = IdleClock(url)
    last_check = time.monotonic()
    while True:
        time.sleep(IDLE_POLL_S)
        now = time.monotonic()
        own.sample(cpu_seconds(backend.process.pid), now)
        if clock.idle_for(now, lease) >= args.idle_s:
            with open(str(state) + ".lock", "a+") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not _leased_within(lease, args.idle_s):
                    print(f"idle for {args.idle_s:.0f} s: stopping", file=sys.stderr, flush=True)
                    _remove_state(state)
                    backend.stop()
                    os._exit(0)
        if args.retune_s <= 0 or now - last_check < args.retune_s:
            continue
        last_check = now
        want = retuner.observe(read_load(), own.cores(), now)
        if want is None or backend.busy():
            continue
        try:
            fresh = start_backend(model_args, want, log)
        except RuntimeError as exc:
            log(str(exc))
            retuner.switched(backend.counts, now)  # try again after the usual interval
            continue
        old, backend = backend, fresh
        switch(proxy, old, backend, log)
        retuner.switched(want, time.monotonic())
        own = OwnLoad()
        announce()


def build_params(args: argparse.Namespace) -> Any:
    import xllamacpp  # imported here: only this process pays for it

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.api_keys = [api_key()]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = max(1, args.parallel)
    # One KV cache for all slots: each slot may use the whole context, and a lone
    # request is not limited to n_ctx / n_parallel.
    params.kv_unified = True
    params.cache_prompt = True
    params.n_cache_reuse = max(0, args.cache_reuse)
    params.endpoint_metrics = True  # /metrics: how the idle clock sees requests
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads or args.threads
    params.verbosity = 0
    spec = params.speculative
    kind = getattr(xllamacpp.common_speculative_type, SPECULATION_TYPES[args.speculation])
    if args.speculation == "draft":
        if not args.draft_model:
            raise SystemExit("--speculation draft needs --draft-model")
        spec.draft.mparams.path = args.draft_model
        spec.draft.n_max = args.draft_max
        spec.draft.cpuparams.n_threads = args.threads
        spec.draft.cpuparams_batch.n_threads = args.batch_threads or args.threads
    elif args.speculation.startswith("ngram-"):
        for name in ("ngram_simple", "ngram_map_k", "ngram_map_k4v"):
            ngram = getattr(spec, name)
            if args.ngram_n:
                ngram.size_n = args.ngram_n
            if args.ngram_m:
                ngram.size_m = args.ngram_m
        if args.ngram_n:
            spec.ngram_mod.n_match = args.ngram_n
        spec.draft.n_max = args.draft_max
    spec.types = [kind]
    return params


def _metrics_activity(url: str) -> tuple[float, ...] | None:
    """Counters that move whenever a request is served, or None if unreadable."""
    try:
        with urllib.request.urlopen(authorized(url + "/metrics"), timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    values: list[float] = []
    busy = 0.0
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, _, value = line.rpartition(" ")
        if name.endswith(("_total", "requests_processing", "requests_deferred")):
            try:
                number = float(value)
            except ValueError:
                continue
            values.append(number)
            if name.endswith(("requests_processing", "requests_deferred")):
                busy += number
    return (busy, *values)


class IdleClock:
    """Seconds since the server last served a request or was claimed (a new lease)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.last_seen = _metrics_activity(url)
        self.last_active = time.monotonic()

    def idle_for(self, now: float, lease: Path) -> float:
        seen = _metrics_activity(self.url)
        if seen is not None and (seen != self.last_seen or seen[0] > 0):
            self.last_active = now
        self.last_seen = seen
        try:  # a client that just found us claims the next idle_s seconds
            leased_ago = time.time() - lease.stat().st_mtime
            self.last_active = max(self.last_active, now - max(0.0, leased_ago))
        except OSError:
            pass
        return now - self.last_active


def idle_watch(url: str, idle_s: float, lease: Path, poll_s: float = IDLE_POLL_S) -> None:
    """Return once ``idle_s`` seconds passed without a request or a new lease."""
    clock = IdleClock(url)
    while True:
        time.sleep(poll_s)
        if clock.idle_for(time.monotonic(), lease) >= idle_s:
            return


def _write_state(path: Path, record: dict[str, Any]) -> None:
    """Write the state file (it holds the key: readable by our user only)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(json.dumps({**record, "api_key": api_key()}))
    os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one


def _remove_state(path: Path) -> None:
    """Remove the state file if it still announces this process."""
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shared = args.idle_s > 0
    if args.parent and not shared:
        if args.pdeathsig:
            _set_parent_death_signal()
        if os.getppid() != args.parent:  # the parent died before prctl took effect
            return 0
        threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    state = Path(args.state_file) if args.state_file else None

    def _terminate(*_: object) -> None:
        if state is not None:
            _remove_state(state)
        os._exit(0)

    signal.signal(signal.SIGTERM, _terminate)

    # Keep a private handle for the readiness line; anything a library prints on
    # stdout then lands in the log with stderr instead of filling a pipe.
    ready = os.fdopen(os.dup(1) if args.ready_fd == 1 else args.ready_fd, "w")
    os.dup2(2, 1)
    if shared and args.auto_threads:
        assert state is not None
        return supervise(args, ready, state)

    import xllamacpp

    server = xllamacpp.Server(build_params(args))  # loads the model; returns once listening
    url = str(server.listening_address)
    record = {"pid": os.getpid(), "url": url, "alias": args.alias, "model_file": args.model,
              "started_by": args.parent, "idle_s": args.idle_s,
              "settings": json.loads(args.settings_json)}  # fmt: skip
    if state is not None:
        _write_state(state, record)
    try:
        ready.write(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
        ready.close()
    except OSError:  # whoever started us is gone; others can still find us
        pass
    print(f"selfheal local model {args.alias} listening on {url}", file=sys.stderr, flush=True)
    if not shared:
        while True:  # the HTTP server runs on its own threads
            time.sleep(3600)
    assert state is not None
    lease = Path(str(state) + ".lease")
    while True:
        idle_watch(url, args.idle_s, lease)
        # Clients read the state file and touch the lease under this lock: holding it
        # while we check the lease once more and withdraw means no client is handed
        # the url of a server that is about to go.
        with open(str(state) + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _leased_within(lease, args.idle_s):
                print(f"idle for {args.idle_s:.0f} s: stopping", file=sys.stderr, flush=True)
                _remove_state(state)
                os._exit(0)  # the native server's threads need no orderly goodbye


def _leased_within(lease: Path, seconds: float) -> bool:
    try:
        return time.time() - lease.stat().st_mtime < seconds
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
