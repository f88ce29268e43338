"""``selfheal model serve | status | fetch``: the embedded model from a terminal.

``fetch`` assembles and verifies the weights up front (CI, first set-up),
``serve`` runs the local OpenAI-compatible endpoint in the foreground, ``status``
says which endpoint a run would use and what state the embedded model is in.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import signal
import sys
import time
from typing import Any

from ..config import SelfHeal
from ..localmodel import MODELS, ensure_weights, get_spec, running_servers, start_server
from ..localmodel.endpoint import require_runtime, server_options
from ..localmodel.gguf import describe, read_metadata
from ..localmodel.weights import Progress, state, xllamacpp_installed
from . import trait_overrides


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "model",
        help="the embedded offline model: serve, status, fetch",
        description="The embedded model used when no endpoint is configured.",
    )
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    model_help = f"embedded model: {' | '.join(MODELS)} (default: SelfHeal.local_model)"

    serve = sub.add_parser("serve", help="run the local OpenAI-compatible endpoint (foreground)")
    serve.add_argument("--port", type=int, default=0, help="loopback port (default: any free)")
    serve.add_argument("--model", default=None, help=model_help)
    serve.add_argument("--context", type=int, default=None, help="context window in tokens")
    serve.add_argument(
        "--threads", type=int, default=None, help="CPU threads generating tokens (default SelfHeal.local_threads)"
    )
    serve.set_defaults(handler=serve_command)

    status = sub.add_parser("status", help="which endpoint is configured; state of the model")
    status.add_argument("--model", default=None, help=model_help)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=status_command)

    fetch = sub.add_parser("fetch", help="assemble and verify the weights now")
    fetch.add_argument("--model", default=None, help=model_help)
    fetch.add_argument("--force", action="store_true", help="assemble again even if cached")
    fetch.set_defaults(handler=fetch_command)


def _progress(label: str) -> Progress:
    """A progress printer on stderr: a live percentage on a terminal, else quarters."""
    tty = sys.stderr.isatty()
    shown = {"last": -1}

    def report(done: int, total: int) -> None:
        pct = 100 * done // max(total, 1)
        step = pct if tty else pct // 25 * 25
        if step != shown["last"]:
            shown["last"] = step
            end = "\r" if tty and pct < 100 else "\n"
            print(f"{label}: {pct:3d}% of {total / 1e9:.2f} GB", end=end, file=sys.stderr,
                  flush=True)  # fmt: skip

    return report


def fetch_command(args: argparse.Namespace) -> int:
    spec = get_spec(args.model or SelfHeal(**trait_overrides(args)).local_model)
    started = time.monotonic()
    path = ensure_weights(spec, progress=_progress(spec.key), force=args.force)
    meta = read_metadata(path)
    print(f"{spec.key}: {path}")
    print(f"  {path.stat().st_size:,} bytes, SHA-256 {spec.sha256} (verified)")
    print(f"  GGUF: {describe(meta)}; licence (model card): {spec.license}")
    print(f"  ready in {time.monotonic() - started:.1f} s")
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def serve_command(args: argparse.Namespace) -> int:
    settings = SelfHeal(**trait_overrides(args))
    spec = get_spec(args.model or settings.local_model)
    require_runtime()
    path = ensure_weights(spec, progress=_progress(spec.key))
    started = time.monotonic()
    if args.context:
        settings.local_context = args.context
    if args.threads:
        settings.local_threads = args.threads
    options = server_options(settings).resolved()
    server = start_server(spec, path, port=args.port, options=options)
    print(f"{spec.alias} ready in {time.monotonic() - started:.1f} s (pid {server.pid}; "
          f"threads {options.threads} generating / {options.batch_threads} reading, "
          f"speculation {options.speculation})")  # fmt: skip
    print(f"base URL: {server.base_url}   model: {spec.alias}")
    # it refuses requests without its key (any local user can reach the port): said here, to its owner only
    print(f"use it:   export OPENAI_BASE_URL={server.base_url} SELFHEAL_MODEL={spec.alias} "
          f"OPENAI_API_KEY={server.api_key}")  # fmt: skip
    print("Ctrl-C stops it.", flush=True)
    process = server.process
    assert process is not None  # start_server's own child (only a found shared server lacks it)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as cleanly as Ctrl-C
    try:
        code = process.wait()
    except KeyboardInterrupt:
        server.stop()
        print("stopped.", file=sys.stderr)
        return 0
    print(f"selfheal: the model server exited with code {code}; log: {server.log_path}",
          file=sys.stderr)  # fmt: skip
    return 1


def _status(model: str | None, traits: dict[str, Any] | None = None) -> dict[str, Any]:
    settings = SelfHeal(**(traits or {}))
    spec = get_spec(model or settings.local_model)
    if settings.base_url:
        source = "$OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else "SelfHeal.base_url"
        endpoint = {"kind": "configured", "base_url": settings.base_url, "source": source,
                    "model": settings.model or "(the endpoint's first listed model)"}  # fmt: skip
    else:
        endpoint = {"kind": "embedded", "model": spec.alias,
                    "base_url": "(started on first use, on a free loopback port)"}  # fmt: skip
    weights = state(spec)
    try:
        runtime = importlib.metadata.version("xllamacpp") if xllamacpp_installed() else None
    except importlib.metadata.PackageNotFoundError:
        runtime = "installed"
    return {
        "endpoint": endpoint,
        "embedded": {
            "model": spec.key,
            "extra": spec.extra,
            "install": spec.install_hint(),
            "runtime_xllamacpp": runtime,
            "weight_packages_installed": weights.packages_installed,
            "weights_file": str(weights.path),
            "weights_assembled": weights.assembled,
            "weights_verified": weights.verified,
            "servers_running": running_servers(),
        },
    }


def status_command(args: argparse.Namespace) -> int:
    info = _status(args.model, trait_overrides(args))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    ep, emb = info["endpoint"], info["embedded"]
    if ep["kind"] == "configured":
        print(f"endpoint: {ep['base_url']} (from {ep['source']}), model: {ep['model']}")
        print("          the embedded model is not used while an endpoint is configured.")
    else:
        print(f"endpoint: the embedded model {ep['model']} (no $OPENAI_BASE_URL / "
              "SelfHeal.base_url set); started on first use on a free loopback port")  # fmt: skip
    yes = {True: "yes", False: "no"}
    print(f"embedded model {emb['model']}:")
    print(f"  runtime (xllamacpp):   {emb['runtime_xllamacpp'] or 'not installed'}")
    print(f"  weight packages:       {yes[emb['weight_packages_installed']]}")
    if emb["weights_assembled"]:
        verified = "verified" if emb["weights_verified"] else "not yet verified (checked on start)"
        print(f"  weights file:          {emb['weights_file']} ({verified})")
    else:
        print(f"  weights file:          not assembled yet ({emb['weights_file']})")
    if not emb["runtime_xllamacpp"] or not emb["weight_packages_installed"]:
        print(f"  to install:            {emb['install']}")
    elif not emb["weights_verified"]:
        print("  to prepare now:        selfheal model fetch")
    servers = emb["servers_running"]
    if not servers:
        print("  servers running:       none")
    for s in servers:
        answers = "answers" if s["answers"] else "does NOT answer"
        idle = float(s.get("idle_s") or 0)  # type: ignore[arg-type]
        life = f"shared, stops after {idle:.0f} s idle" if idle > 0 else "ends with its starter"
        print(f"  server running:        {s['url']}/v1 model {s['alias']} (pid {s['pid']}, "
              f"started by pid {s.get('started_by')}, {life}, {answers})")  # fmt: skip
    return 0
