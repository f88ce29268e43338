"""`selfheal mcp` driven by the official MCP client over stdio and streamable HTTP: the
tools and their schemas, a crash, a spec-breaking and a passing fix, a heal on the
scripted model with its progress, a cancelled heal and a client gone (no container
left), bad input, two clients at once, --print-config."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.conftest import own_containers, pid_gone, wait_no_containers
from tests.mcp_client import ROOT, TRANSPORTS, command, http_server, served, server_env, text_of
from tests.scripted_server import Fault, Reply, ScriptedServer
from tests.waiting import wait_until

pytestmark = pytest.mark.sandbox

ORIGINAL = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\n\nassert mean([2, 4]) == 3\n"
FIX_LINE = "return sum(xs) / len(xs)"
FIX = f"def mean(xs):\n    {FIX_LINE}\n\n\nassert mean([2, 4]) == 3\n"
DELETES_ASSERT = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
# passes; needs its environment line, not its network helper (the minimal hand-over drops it)
WITH_EXTRAS = """import os
import urllib.request


def mean(xs):
    return sum(xs) / int(os.environ.get("MEAN_COUNT", len(xs)))


def fetch(url):
    return urllib.request.urlopen(url).read()


assert mean([2, 4]) == 3
"""
CRASH = "def ratio(a, b):\n    return a / b\n\n\nshare = ratio(3, 0)\n"


def model_args(model: ScriptedServer) -> tuple[str, ...]:
    return ("--base-url", model.base_url, "--model", model.model)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_tools_over_each_transport(transport, sandbox_image):
    """Tools with schemas; a crash with its line and frames; a deleted assert rejected by
    the spec guard; a passing fix handed over minimal with what it can do; a heal on the
    scripted model, verified, with progress per attempt and its record as a resource."""

    async def drive() -> None:
        with ScriptedServer([Reply("```python\n" + FIX + "```", match="def mean(")]) as model:
            async with served(transport, *model_args(model)) as s:
                listed = {t.name: t for t in (await s.client.list_tools()).tools}
                assert set(listed) == {"run_code", "check_fix", "heal", "explain_failure"}
                for tool in listed.values():
                    assert tool.description and tool.output_schema and tool.input_schema["type"] == "object"
                assert set(listed["heal"].input_schema["properties"]) == {"code", "tests", "task", "max_iterations"}
                assert listed["check_fix"].input_schema["required"] == ["original", "candidate"]

                crash = (await s.client.call_tool("run_code", {"code": CRASH})).structured_content
                assert crash["status"] == "error" and crash["error"]["type"] == "ZeroDivisionError"
                assert crash["error"]["line"] == 2
                assert [f["line"] for f in crash["error"]["frames"]] == [5, 2]
                assert crash["error"]["locals"] == {"a": "3", "b": "0"}

                rejected = (
                    await s.client.call_tool("check_fix", {"original": ORIGINAL, "candidate": DELETES_ASSERT})
                ).structured_content
                assert rejected["verdict"] == "rejected" and not rejected["passed"] and rejected["fix"] is None
                assert [v["rule"] for v in rejected["spec_violations"]] == ["assert_removed"]

                passed = (
                    await s.client.call_tool("check_fix", {"original": ORIGINAL, "candidate": WITH_EXTRAS})
                ).structured_content
                assert passed["verdict"] == "passed" and passed["verified_by"] == ["your asserts"]
                assert not passed["only_runs"] and not passed["original_passed"]
                fix = passed["fix"]
                assert "urlopen" not in fix["code"] and "os.environ" in fix["code"]
                assert fix["dropped"] and "urllib" in fix["dropped"][0]
                assert [(c["kind"], c["evidence"]) for c in fix["capabilities"]] == [("environment", "os.environ")]
                assert "+    return sum(xs) / int(os.environ" in fix["diff"]

                unchecked = (
                    await s.client.call_tool("check_fix", {"original": "print(1 / 0)\n", "candidate": "print(1 / 1)\n"})
                ).structured_content
                assert unchecked["verdict"] == "passed" and unchecked["only_runs"] and unchecked["verified_by"] == []

                seen: list[tuple[float, float | None, str | None]] = []

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    seen.append((done, total, message))

                healed = await s.client.call_tool("heal", {"code": ORIGINAL}, progress_callback=progress)
                record = healed.structured_content
                assert record["outcome"] == "success" and record["verified_by"] == ["your asserts"]
                assert FIX_LINE in record["fix"]["code"] and record["task_detail"]["origin"] == "selfheal mcp"
                assert [m for _, _, m in seen] == [
                    "your program as it is: failed: raised AssertionError: ",
                    "attempt 1: passed",
                ]
                link = next(b for b in healed.content if b.type == "resource_link")
                again = json.loads((await s.client.read_resource(link.uri)).contents[0].text)
                assert again == record

    anyio.run(drive)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_cancelled_heal_leaves_no_container(transport, sandbox_image, docker_client):
    """The heal waits on a model that never answers; the client cancels the call: every
    container of the heal goes, and the server lives on."""
    hang = Fault("hang", seconds=300, match="def mean(")

    async def drive() -> None:
        with ScriptedServer([hang]) as model:
            async with served(transport, *model_args(model)) as s:
                round_zero = anyio.Event()

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    round_zero.set()

                async def heal() -> None:
                    await s.client.call_tool("heal", {"code": ORIGINAL}, progress_callback=progress)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(heal)
                    with anyio.fail_after(120):
                        await round_zero.wait()
                    assert own_containers(docker_client, s.pid), "the heal runs in a sandbox of its own"
                    with anyio.fail_after(120):
                        await anyio.to_thread.run_sync(model.asked.wait)
                    tg.cancel_scope.cancel()
                left = await anyio.to_thread.run_sync(lambda: wait_no_containers(docker_client, s.pid, timeout=60))
                assert left == [], f"the cancelled heal left {[c['Id'][:12] for c in left]}"
                after = await s.client.call_tool("run_code", {"code": "print(6 * 7)"})
                assert after.structured_content["stdout"] == "42\n"

    anyio.run(drive)


AGENT = """
import sys, anyio
from tests.mcp_client import served

async def main():
    async with served("stdio", "--base-url", sys.argv[1], "--model", sys.argv[2]) as s:
        print(s.pid, flush=True)
        await s.client.call_tool("heal", {"code": sys.argv[3]})

anyio.run(main)
"""


def test_an_agent_gone_mid_heal_ends_its_run_and_server(sandbox_image, docker_client):
    """The agent's process dies (SIGKILL) while a heal waits on the model: the stdio server
    sees its input close, stops the run, removes the heal's containers and exits."""
    hang = Fault("hang", seconds=300, match="def mean(")
    with ScriptedServer([hang]) as model:
        agent = subprocess.Popen(
            [sys.executable, "-c", AGENT, model.base_url, model.model, ORIGINAL],
            cwd=ROOT,
            env=server_env({"PYTHONPATH": str(ROOT)}),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert agent.stdout is not None
            pid = int(agent.stdout.readline())
            assert model.asked.wait(120), "the heal never asked the model"
            assert own_containers(docker_client, pid)
        finally:
            agent.kill()
            agent.wait()
        wait_until(lambda: pid_gone(pid), 60, "the server to exit")
        assert wait_no_containers(docker_client, pid, timeout=60) == []


def test_bad_input_is_refused_with_a_message(sandbox_image):
    """Oversized code, a NUL byte, deep or unusable inputs, an argument no tool takes, a
    wrong type: each one clear error, and the server still answers."""

    async def drive() -> None:
        async with served("stdio", "--SelfHeal.max_code_bytes=1000") as s:
            call = s.client.call_tool
            big = await call("run_code", {"code": "x = 1\n" * 400})
            assert big.is_error and "2,400 bytes, more than this server takes (1,000" in text_of(big)
            nul = await call("run_code", {"code": "print(1)\x00"})
            assert nul.is_error and "NUL byte" in text_of(nul)
            deep: object = 1
            for _ in range(40):
                deep = [deep]
            nested = await call("run_code", {"code": "print(1)", "inputs": {"x": deep}})
            assert nested.is_error and "nest deeper than 32 levels" in text_of(nested)
            named = await call("run_code", {"code": "print(1)", "inputs": {"not a name": 1}})
            assert named.is_error and "is not a Python variable name" in text_of(named)
            with pytest.raises(MCPError, match="run_code takes no argument 'network'"):
                await call("run_code", {"code": "print(1)", "network": True})
            typed = await call("run_code", {"code": "print(1)", "timeout_s": -1})
            assert typed.is_error and "timeout_s" in text_of(typed)
            fine = await call("run_code", {"code": "print(sum(x))", "inputs": {"x": [1, 2, 3]}})
            assert fine.structured_content["stdout"] == "6\n"

    anyio.run(drive)


def test_two_clients_at_once_each_get_their_result(sandbox_image):
    """Two agents on one HTTP server at the same time: each gets its own clean result."""

    async def one(url: str, n: int, out: dict[int, str]) -> None:
        async with Client(url) as client:
            result = await client.call_tool("run_code", {"code": f"import time\ntime.sleep(0.5)\nprint({n} * 2)"})
            out[n] = result.structured_content["stdout"]

    async def drive(url: str) -> dict[int, str]:
        out: dict[int, str] = {}
        async with anyio.create_task_group() as tg:
            for n in (1, 2):
                tg.start_soon(one, url, n, out)
        return out

    with http_server(env=server_env()) as (url, _):
        assert anyio.run(drive, url) == {1: "2\n", 2: "4\n"}


def test_print_config_starts_the_server_it_describes(sandbox_image):
    """The block --print-config prints is what a client needs: started as it says, the
    server answers with the options it was given."""
    printed = subprocess.run(
        command("--print-config", "--timeout", "7"), capture_output=True, text=True, cwd=ROOT, env=server_env()
    )
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"]["selfheal"]
    assert entry["command"] == sys.executable and "--SelfHeal.timeout_s=7.0" in entry["args"]

    async def drive() -> str:
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=server_env(), cwd=str(ROOT))
        async with Client(params) as client:
            result = await client.call_tool("run_code", {"code": "while True:\n    pass\n", "timeout_s": 60})
            return result.structured_content["status"]

    assert anyio.run(drive) == "timeout"  # at the configured 7 s, not the 60 asked
    http = subprocess.run(
        command("--print-config", "--http", "127.0.0.1:8765"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=server_env(),
    )
    assert json.loads(http.stdout) == {"mcpServers": {"selfheal": {"type": "http", "url": "http://127.0.0.1:8765/mcp"}}}


def test_bytes_that_are_not_json_text_never_stop_the_server(sandbox_image):
    """Written to the stdio server as they are (no client would send them): bytes that
    are not UTF-8 arrive as U+FFFD (a clean result: the program does not parse); a
    message nested past the JSON parser's depth is dropped by the SDK's transport; the
    next call is answered."""
    proc = subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=server_env())
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: bytes) -> None:
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()

    def call(n: int, arguments: bytes) -> bytes:
        return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_code","arguments":%s}}' % (
            n,
            arguments,
        )

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert json.loads(proc.stdout.readline())["id"] == 1
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send(call(2, b'{"code":"x = \xff\xfe"}'))
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2 and answer["result"]["structuredContent"]["error"]["type"] == "SyntaxError"
        send(call(3, b'{"code":"print(1)","inputs":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}"))
        send(call(4, b'{"code":"print(4)"}'))
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 4 and answer["result"]["structuredContent"]["stdout"] == "4\n"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
