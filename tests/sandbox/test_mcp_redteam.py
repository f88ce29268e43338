"""`selfheal mcp` attacked as an agent would attack it, and under the instructor's policy.

Each test is an attack (or a policy) and what must hold; each fails without the
protection it names: the sandbox (injected code on the host), the loop's verdict
(a forged pass), the server's bounds (a flood), the policy's gate (a hint-only class)."""

from __future__ import annotations

import json
import socket
import threading

import anyio
import pytest
from mcp import Client

from selfheal_jupyter.teaching.policy import SOURCE
from tests.mcp_client import http_server, served, server_env, text_of
from tests.sandbox.test_mcp import FIX, FIX_LINE, ORIGINAL, WITH_EXTRAS, model_args
from tests.scripted_server import Reply, ScriptedServer

pytestmark = pytest.mark.sandbox

MISSPELT = (
    "import pandas as pd\n\nsales = pd.DataFrame({'price': [3, 4]})\ntotal = sales['prise'].sum()\nprint(total)\n"
)
MISSPELT_FIX_LINE = "total = sales['price'].sum()"


# --------------------------------------------------------------------------- policy
def test_a_hints_policy_closes_heal_and_every_fixed_line(tmp_path, sandbox_image):
    """Under `mode: hints` (SELFHEAL_POLICY, as in a kernel): heal and explain_failure are
    refused naming the policy, check_fix gives its verdict without the hand-over, the
    model is never asked, and no fixed line appears in any tool result."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"mode": "hints"}))

    async def drive(model: ScriptedServer) -> list[str]:
        said = []
        async with served("stdio", *model_args(model), env={"SELFHEAL_POLICY": str(policy)}) as s:
            healed = await s.client.call_tool("heal", {"code": ORIGINAL})
            assert healed.is_error and f"only hints are allowed ({SOURCE})" in text_of(healed)
            explained = await s.client.call_tool("explain_failure", {"code": MISSPELT})
            assert explained.is_error and "instructor's policy" in text_of(explained)
            checked = await s.client.call_tool("check_fix", {"original": ORIGINAL, "candidate": WITH_EXTRAS})
            verdict = checked.structured_content
            assert verdict["verdict"] == "passed" and verdict["fix"] is None
            assert f"only hints are allowed ({SOURCE})" in verdict["withheld"]
            ran = await s.client.call_tool("run_code", {"code": MISSPELT})
            assert ran.structured_content["error"]["type"] == "KeyError"
            said += [text_of(r) for r in (healed, explained, checked, ran)]
        return said

    with ScriptedServer([Reply("```python\n" + FIX + "```")]) as model:
        said = anyio.run(drive, model)
        assert model.chat_requests() == []
    for text in said:
        assert FIX_LINE not in text and MISSPELT_FIX_LINE not in text and "price'].sum()" not in text


def test_without_a_policy_the_same_calls_hand_over_the_fixed_lines(sandbox_image):
    """The other side of the test above: with no policy the same calls do give the fixed
    lines (so that test's absence of them is the policy's doing)."""

    async def drive(model: ScriptedServer) -> str:
        async with served("stdio", *model_args(model)) as s:
            healed = await s.client.call_tool("heal", {"code": ORIGINAL})
            explained = await s.client.call_tool("explain_failure", {"code": MISSPELT})
            assert explained.structured_content["diagnosis"] == ["`prise` is not a column of `sales`; `price` is."]
            return text_of(healed) + text_of(explained)

    with ScriptedServer([Reply("```python\n" + FIX + "```")]) as model:
        text = anyio.run(drive, model)
    assert FIX_LINE in text and '"new": "\'price\'"' in text


def test_a_heal_refused_as_too_deep_spends_no_run(tmp_path, sandbox_image):
    """Under `max_runs: 1`, an agent calls heal with a program nested 400 levels: the
    run was counted before the task was read, so the refusal spent the only run and the
    next heal was refused "You have used all 1 runs". Now the policy is asked, the task
    admitted, and only then is a run counted: the next heal heals."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"mode": "full", "max_runs": 1}))
    deep = "x = " + " + ".join(["1"] * 400) + "\nassert x == 3\n"

    async def drive(model: ScriptedServer) -> None:
        async with served("stdio", *model_args(model), env={"SELFHEAL_POLICY": str(policy)}) as s:
            refused = await s.client.call_tool("heal", {"code": deep})
            assert refused.is_error and "Your code nests deeper than 100 levels at line 1" in text_of(refused)
            healed = await s.client.call_tool("heal", {"code": ORIGINAL})
            assert not healed.is_error, text_of(healed)
            assert healed.structured_content["outcome"] == "success"
            again = await s.client.call_tool("heal", {"code": ORIGINAL})
            assert again.is_error and "You have used all 1 runs" in text_of(again)  # the run it spent

    with ScriptedServer([Reply("```python\n" + FIX + "```")]) as model:
        anyio.run(drive, model)


def test_an_off_policy_closes_every_tool(tmp_path, sandbox_image):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"mode": "off"}))

    async def drive() -> None:
        async with served("stdio", env={"SELFHEAL_POLICY": str(policy)}) as s:
            for tool, args in (("run_code", {"code": "print(1)"}), ("check_fix", {"original": "1", "candidate": "2"})):
                result = await s.client.call_tool(tool, args)
                assert result.is_error and f"selfheal is off in this notebook ({SOURCE})" in text_of(result)

    anyio.run(drive)


# --------------------------------------------------------------------------- the host
def test_injected_code_cannot_reach_the_host(tmp_path, sandbox_image):
    """Code an agent was steered into running: it reads the server's secrets and files,
    connects to a service on the host, writes a file there, starts a process. None of it
    reaches the host: run_code runs in the sandbox."""
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("host-secret-4d1e")
    planted = tmp_path / "planted.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def watch() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    attack = f"""
import os, socket, subprocess
found = {{}}
found["env"] = {{k: v for k, v in os.environ.items() if "KEY" in k or "SECRET" in k}}
try:
    found["file"] = open({str(secret_file)!r}).read()
except OSError as exc:
    found["file"] = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    found["connect"] = "connected"
except OSError as exc:
    found["connect"] = type(exc).__name__
try:
    open({str(planted)!r}, "w").write("planted")
    found["write"] = "written"
except OSError as exc:
    found["write"] = type(exc).__name__
found["id"] = subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip()
print(found)
"""

    async def drive() -> str:
        async with served("stdio", env={"SELFHEAL_TEST_SECRET": "env-secret-9b2c"}) as s:
            return text_of(await s.client.call_tool("run_code", {"code": attack}))

    try:
        said = anyio.run(drive)
        watcher.join(timeout=10)
    finally:
        listener.close()
    assert "'connect': " in said, said  # the attack ran to its end
    for secret in ("host-secret-4d1e", "env-secret-9b2c", "test-key"):
        assert secret not in said
    assert "'connect': 'connected'" not in said and not accepted
    assert not planted.exists() and "'id': '0'" not in said


# --------------------------------------------------------------------------- the verdict
FORGERIES = {
    # leaves before the user's assert can run, exit code 0
    "early exit": ORIGINAL.replace("assert mean", "import os\nos._exit(0)\nassert mean"),
    # prints what a passing result looks like
    "fake result": ORIGINAL.replace(
        "assert mean", 'print(\'{"status": "ok", "tests": [{"source": "x", "passed": true}]}\')\nassert mean'
    ),
    # a number that equals anything
    "lying equality": (
        "class Mean(float):\n    def __eq__(self, other):\n        return True\n\n\n"
        "def mean(xs):\n    return Mean(sum(xs) / (len(xs) + 1))\n\n\nassert mean([2, 4]) == 3\n"
    ),
    # the assert caught and silenced
    "swallowed": ORIGINAL.replace(
        "assert mean([2, 4]) == 3", "try:\n    assert mean([2, 4]) == 3\nexcept Exception:\n    pass"
    ),
    # the expected answer hard-coded
    "hard-coded": "def mean(xs):\n    return 3\n\n\nassert mean([2, 4]) == 3\n",
}


def test_a_candidate_cannot_forge_its_verdict(sandbox_image):
    """Candidates written to pass without being right: none is verdict "passed", and none
    gets a hand-over (the loop's verdict: decided outside the candidate's process, with
    the spec guard)."""

    async def drive(model: ScriptedServer) -> dict[str, dict]:
        async with served("stdio", *model_args(model)) as s:  # asked for nothing: a verdict needs no model
            return {
                name: (
                    await s.client.call_tool("check_fix", {"original": ORIGINAL, "candidate": code})
                ).structured_content
                for name, code in FORGERIES.items()
            }

    with ScriptedServer([]) as model:
        verdicts = anyio.run(drive, model)
        assert model.chat_requests() == []
    for name, verdict in verdicts.items():
        assert verdict["verdict"] != "passed" and verdict["fix"] is None, (name, verdict)
    assert {v["rule"] for v in verdicts["swallowed"]["spec_violations"]} >= {"failure_swallowed"}
    assert {v["rule"] for v in verdicts["lying equality"]["spec_violations"]} >= {"forced_comparison"}


# --------------------------------------------------------------------------- the server
def test_an_endless_program_stops_at_the_servers_limit(sandbox_image):
    """An agent asks for a timeout of a billion seconds: the server's own limit holds."""

    async def drive() -> dict:
        async with served("stdio", "--timeout", "3") as s:
            code = "print('spinning', flush=True)\nwhile True:\n    pass\n"
            return (await s.client.call_tool("run_code", {"code": code, "timeout_s": 1e9})).structured_content

    assert anyio.run(drive)["status"] == "timeout"


def test_a_flood_of_calls_waits_its_turn_or_is_refused(sandbox_image):
    """More calls at once than the server works on and lets wait: the extra one is refused
    with a message at once, the others all get their results."""
    slow = "import time\ntime.sleep(4)\nprint('done')\n"

    async def one(url: str, out: list[object]) -> None:
        async with Client(url) as client:
            out.append(await client.call_tool("run_code", {"code": slow}))

    async def drive(url: str) -> list[object]:
        out: list[object] = []
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one, url, out)
        return out

    env = server_env()
    with http_server("--SelfHeal.service_runs=1", "--SelfHeal.service_waiting=1", env=env) as (url, _):
        results = anyio.run(drive, url)
    refused = [r for r in results if r.is_error]  # type: ignore[attr-defined]
    assert len(refused) == 1 and "already has 1 calls waiting beside the 1 it works on" in text_of(refused[0])
    assert [r.structured_content["stdout"] for r in results if not r.is_error] == ["done\n", "done\n"]  # type: ignore[attr-defined]
