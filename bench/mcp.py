"""What does an agent pay to run a snippet through `selfheal mcp`? Every row in one run.

    python bench/mcp.py [--runs 40] [--json FILE]

Rows: the round trip of one small program (``print(sum(range(1000)))``), p50 and p95 over
``--runs`` calls after ten warm-ups, the client kept connected where it can be:
  run_code, stdio         `selfheal mcp` over stdio, the official MCP client
  run_code, http          `selfheal mcp --http`, the same client over streamable HTTP
  run_code, in-process    the same server object, the client in this process (no transport)
  sandbox in-process      DockerSandbox.execute, warm pool: the floor under both
  selfheal sandbox exec   one `selfheal sandbox exec --json FILE` process per snippet
  jupyter-mcp-server      its kernel execution tool over stdio (``--jupyter-mcp VENV``: a
                          venv with jupyter-mcp-server, jupyterlab and ipykernel; the row
                          is left out when it is not given or cannot start)
  kernel execute          a Jupyter kernel's own execute_request until idle (jupyter_client):
                          what every kernel-based MCP server pays at least, on the host
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

# Run as `python bench/mcp.py`, this file's folder comes first on sys.path and its name
# would shadow the MCP SDK's package `mcp`: the folder goes (nothing here imports from it).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SNIPPET = "print(sum(range(1000)))"
EXPECTED = "499500"
WARM_UP = 10
"""Calls before the measured ones: a warm container answers its first few dozen runs slower."""


def percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def measure(call: Callable[[], str], runs: int, warm_up: int = WARM_UP) -> list[float]:
    for _ in range(warm_up):
        assert EXPECTED in call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
        assert EXPECTED in out, out
    return times


async def measure_async(call: Callable[[], Any], runs: int) -> list[float]:
    for _ in range(WARM_UP):
        assert EXPECTED in await call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = await call()
        times.append(time.perf_counter() - t0)
        assert EXPECTED in out, out
    return times


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# --------------------------------------------------------------------------- the rows
async def mcp_stdio(runs: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "selfheal_jupyter", "mcp"], env=env())
    async with Client(params) as client:

        async def call() -> str:
            return (await client.call_tool("run_code", {"code": SNIPPET})).structured_content["stdout"]

        return await measure_async(call, runs)


async def mcp_http(runs: int) -> list[float]:
    with served_http() as url:
        async with Client(url) as client:

            async def call() -> str:
                return (await client.call_tool("run_code", {"code": SNIPPET})).structured_content["stdout"]

            return await measure_async(call, runs)


async def mcp_in_process(runs: int) -> list[float]:
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.factory import close_shared_sandboxes
    from selfheal_jupyter.mcp_server.local import LocalHost
    from selfheal_jupyter.mcp_server.server import build_server

    try:
        async with Client(build_server(LocalHost(SelfHeal()))) as client:

            async def call() -> str:
                return (await client.call_tool("run_code", {"code": SNIPPET})).structured_content["stdout"]

            return await measure_async(call, runs)
    finally:
        close_shared_sandboxes()


@contextlib.contextmanager
def served_http() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "selfheal_jupyter", "mcp", "--http", f"127.0.0.1:{port}"],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def in_process(runs: int) -> list[float]:
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.sandbox.docker import DockerSandbox

    with DockerSandbox.from_config(SelfHeal()) as sandbox:
        return measure(lambda: sandbox.execute(SNIPPET).stdout, runs)


def sandbox_exec(runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "snippet.py"
        path.write_text(SNIPPET + "\n")
        command = [sys.executable, "-m", "selfheal_jupyter", "sandbox", "exec", "--json", str(path)]
        return measure(lambda: subprocess.run(command, capture_output=True, text=True, env=env()).stdout, runs, 1)


def kernel_execute(runs: int) -> list[float]:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:

        def call() -> str:
            msg_id = client.execute(SNIPPET)
            out = ""
            while True:
                msg = client.get_iopub_msg(timeout=60)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    out += msg["content"]["text"]
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return out

        return measure(call, runs)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


async def jupyter_mcp(venv: Path, runs: int) -> tuple[list[float], str]:
    """jupyter-mcp-server (stdio) against a JupyterLab of its venv: its execute tool."""
    async with jupyter_lab(venv) as (url, token, notebook):
        server_env = {
            **os.environ,
            "JUPYTER_URL": url,
            "JUPYTER_TOKEN": token,
            "DOCUMENT_ID": notebook,
            "ALLOW_IMG_OUTPUT": "false",
        }
        binary = venv / "bin" / "jupyter-mcp-server"
        params = StdioServerParameters(command=str(binary), args=["start", "--transport", "stdio"], env=server_env)
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            name = next(n for n in ("execute_code", "execute_ipython") if n in names)
            with contextlib.suppress(Exception):
                await client.call_tool("use_notebook", {"notebook_name": "bench", "notebook_path": notebook})

            async def call() -> str:
                result = await client.call_tool(name, {"code": SNIPPET})
                return " ".join(getattr(b, "text", "") for b in result.content) + json.dumps(
                    result.structured_content or {}
                )

            return await measure_async(call, runs), name


@contextlib.asynccontextmanager
async def jupyter_lab(venv: Path) -> AsyncIterator[tuple[str, str, str]]:
    port, token = free_port(), secrets.token_hex(16)
    folder = Path(tempfile.mkdtemp(prefix="bench-jmcp-"))
    (folder / "bench.ipynb").write_text(
        json.dumps(
            {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        )
    )
    proc = subprocess.Popen(
        [
            str(venv / "bin" / "jupyter"),
            "lab",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={folder}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}", token, "bench.ipynb"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the server did not listen")


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--jupyter-mcp", type=Path, metavar="VENV", help="a venv with jupyter-mcp-server")
    args = parser.parse_args(argv)
    rows: list[tuple[str, list[float], str]] = [
        ("run_code, stdio (selfheal mcp)", anyio.run(mcp_stdio, args.runs), "sandbox"),
        ("run_code, http (selfheal mcp --http)", anyio.run(mcp_http, args.runs), "sandbox"),
        ("run_code, in-process client (no transport)", anyio.run(mcp_in_process, args.runs), "sandbox"),
        ("sandbox in-process (DockerSandbox.execute)", in_process(args.runs), "sandbox"),
        ("selfheal sandbox exec --json, a process each", sandbox_exec(min(args.runs, 15)), "sandbox"),
    ]
    if args.jupyter_mcp is not None:
        try:
            times, tool = anyio.run(jupyter_mcp, args.jupyter_mcp, args.runs)
            rows.append((f"jupyter-mcp-server {tool}, stdio", times, "user's kernel"))
        except Exception as exc:  # it needs its Jupyter server: say why the row is missing
            print(f"jupyter-mcp-server: no row ({type(exc).__name__}: {exc})", file=sys.stderr)
    rows.append(("kernel execute (jupyter_client)", kernel_execute(args.runs), "user's kernel"))
    load = os.getloadavg()
    print(f"round trip of `{SNIPPET}`; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'row':50} {'runs':>5} {'p50 ms':>8} {'p95 ms':>8}  where it runs")
    figures = []
    for name, times, where in rows:
        p50, p95 = percentiles(times)
        print(f"{name:50} {len(times):5d} {p50:8.1f} {p95:8.1f}  {where}")
        figures.append({"row": name, "runs": len(times), "p50_ms": p50, "p95_ms": p95, "where": where})
    if args.json:
        args.json.write_text(json.dumps({"load": load, "rows": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
