"""The process that hosts the model: ``python -m selfheal_jupyter.localmodel.child``.

Why a separate process: a gigabyte of weights and a native library that may crash
must never take the Jupyter kernel down with them. This process loads the GGUF into
xllamacpp's in-process llama.cpp HTTP server on a loopback port, reports
``{"url": ..., "pid": ...}`` as one JSON line on a private pipe, and lives exactly
as long as its parent: a parent-death signal (``prctl(PR_SET_PDEATHSIG)``) when
the parent asks for it, and a watchdog that notices being re-parented. Everything
the native library prints goes to stderr, which the parent sends to a log file.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
WATCHDOG_INTERVAL_S = 0.5


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
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--threads", type=int, default=1, help="threads generating tokens")
    p.add_argument("--batch-threads", type=int, default=0,
                   help="threads reading the prompt (0: same as --threads)")
    p.add_argument("--parent", type=int, required=True, help="pid whose death ends us")
    p.add_argument("--pdeathsig", action="store_true", help="also use PR_SET_PDEATHSIG")
    p.add_argument("--ready-fd", type=int, default=1, help="fd to report readiness on")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pdeathsig:
        _set_parent_death_signal()
    if os.getppid() != args.parent:  # the parent died before prctl took effect
        return 0
    threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    # Keep a private handle for the readiness line; anything a library prints on
    # stdout then lands in the log with stderr instead of filling a pipe.
    ready = os.fdopen(os.dup(1) if args.ready_fd == 1 else args.ready_fd, "w")
    os.dup2(2, 1)

    import xllamacpp  # imported here: only this process pays for it

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: the whole context for one conversation
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads or args.threads
    params.verbosity = 0
    server = xllamacpp.Server(params)  # loads the model; returns once listening

    ready.write(json.dumps({"url": server.listening_address, "pid": os.getpid()}) + "\n")
    ready.close()
    print(f"selfheal local model {args.alias} listening on {server.listening_address}",
          file=sys.stderr, flush=True)
    while True:  # the HTTP server runs on its own threads
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
