"""`selfheal mcp` as an agent's client starts it: a real process, driven by the official
MCP client of the same SDK over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
TRANSPORTS = ("stdio", "http")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the model's and selfheal's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    env.update(extra or {})
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "selfheal_jupyter", "mcp", *args]


@dataclass
class Served:
    """A connected client and the server process's pid (its containers carry it)."""

    client: Client
    pid: int


def children_named(text: str) -> list[int]:
    """Pids of this process's children whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and text in cmdline:
            found.append(int(entry.name))
    return found


@contextlib.asynccontextmanager
async def served(transport: str, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[Served]:
    """``selfheal mcp ARGS`` over ``transport``, with the official client connected."""
    full_env = server_env(env)
    if transport == "stdio":
        before = set(children_named("selfheal_jupyter mcp"))
        params = StdioServerParameters(command=sys.executable, args=command(*args)[1:], env=full_env, cwd=str(ROOT))
        async with Client(params) as client:
            pid = wait_until(
                lambda: next(iter(set(children_named("selfheal_jupyter mcp")) - before), None), 30, "the server"
            )
            yield Served(client, pid)
        return
    with http_server(*args, env=full_env) as (url, proc):
        async with Client(url) as client:
            yield Served(client, proc.pid)


@contextlib.contextmanager
def http_server(*args: str, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen]]:
    """``selfheal mcp --http`` on a free loopback port; stopped (SIGTERM) at the end."""
    port = free_port()
    proc = subprocess.Popen(
        command("--http", f"127.0.0.1:{port}", *args), env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: _listening(port) or proc.poll() is not None, 60, "the server to listen")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def text_of(result: Any) -> str:
    """Everything a tool result says, as one text (its content blocks and structured content)."""
    parts = [getattr(block, "text", "") or getattr(block, "uri", "") for block in result.content]
    return "\n".join([*parts, json.dumps(result.structured_content or {})])
