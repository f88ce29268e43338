"""``selfheal mcp``: the sandbox and the verifier as MCP tools for any agent.

Over stdio by default (the client starts it), or streamable HTTP with ``--http
HOST:PORT`` (the endpoint is ``/mcp``). ``--print-config`` prints the JSON block an MCP
client's configuration needs (``mcpServers``) for the same options, and exits. The
instructor's policy (``SELFHEAL_POLICY``) holds as in a kernel; for a class, the service
serves the same tools at ``/services/selfheal/mcp`` instead (the hub's token as bearer).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import BadInput
from ..flags import add_to_parser
from . import command_settings, trait_overrides

MCP_FLAGS = ("max_iterations", "model", "base_url", "timeout", "memory", "llm_timeout", "image", "runtime")
"""The SelfHeal options `selfheal mcp` offers as flags (selfheal_jupyter.flags)."""
SERVER_NAME = "selfheal"
HTTP_PATH = "/mcp"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "mcp",
        help="serve the sandbox and the verifier as MCP tools (run_code, check_fix, heal, explain_failure)",
        description="An MCP server for coding agents (Claude Code, Codex, jupyter-ai, any MCP client): "
        "run code in the sandbox, check a fix against the user's asserts and the spec guard before "
        "handing it over, heal a program with selfheal's loop, explain a failure. Stdio by default.",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help=f"serve streamable HTTP at http://HOST:PORT{HTTP_PATH} instead of stdio (keep HOST a loopback "
        "address: whoever reaches the port may use the tools)",
    )
    p.add_argument(
        "--print-config", action="store_true", help="print the JSON an MCP client's configuration needs, and exit"
    )
    add_to_parser(p, MCP_FLAGS)
    p.set_defaults(handler=handle, flags=MCP_FLAGS)


def listen_address(where: str) -> tuple[str, int]:
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--http {where!r}: give HOST:PORT, e.g. --http 127.0.0.1:8765.")
    return host.strip("[]") or "127.0.0.1", int(port)


def client_config(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """The ``mcpServers`` entry for these options: the command a client starts (stdio),
    or the URL it connects to (``--http``)."""
    if args.http:
        host, port = listen_address(args.http)
        shown = f"[{host}]" if ":" in host else host
        entry: dict[str, Any] = {"type": "http", "url": f"http://{shown}:{port}{HTTP_PATH}"}
    else:
        entry = {"command": sys.executable, "args": ["-m", "selfheal_jupyter", "mcp", *argv]}
    return {"mcpServers": {SERVER_NAME: entry}}


def given_argv(args: argparse.Namespace) -> list[str]:
    """The options given, as ``--SelfHeal.<name>=<value>`` (what the client must pass on)."""
    options = command_settings(args, MCP_FLAGS)
    given = {**{name: getattr(options, name) for name in options.given()}, **trait_overrides(args)}
    return [f"--SelfHeal.{name}={value}" for name, value in sorted(given.items())]


def handle(args: argparse.Namespace) -> int:
    if args.print_config:
        print(json.dumps(client_config(args, given_argv(args)), indent=2))
        return 0
    from ..mcp_server.local import LocalHost, serve_http
    from ..mcp_server.server import build_server

    settings = command_settings(args, MCP_FLAGS)
    server = build_server(LocalHost(settings))
    if args.http:
        host, port = listen_address(args.http)
        print(f"selfheal mcp: serving http://{host}:{port}{HTTP_PATH}", file=sys.stderr, flush=True)
        serve_http(server, host, port, HTTP_PATH)
    else:
        server.run()
    return 0
