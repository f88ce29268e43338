"""`selfheal mcp` through the MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`,
installed by `make test`): a client nobody here wrote, over stdio (started from the
block `--print-config` prints) and over streamable HTTP, doing what tests/test_mcp.py does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_client import ROOT, command, http_server, server_env
from tests.sandbox.test_mcp import CRASH, DELETES_ASSERT, FIX, FIX_LINE, ORIGINAL, WITH_EXTRAS, model_args
from tests.scripted_server import Reply, ScriptedServer

pytestmark = pytest.mark.sandbox
INSPECTOR = Path(os.environ.get("SELFHEAL_MCP_INSPECTOR_DIR", "/opt/selfheal-test/mcp-inspector"))


def inspector(target: list[str], method: str, *args: str) -> dict[str, Any]:
    """One call of the Inspector CLI; its JSON answer."""
    binary = INSPECTOR / "node_modules" / ".bin" / "mcp-inspector"
    assert binary.exists(), f"no MCP Inspector at {binary}: `make test` installs it (sandbox/setup-engine.sh)"
    proc = subprocess.run(
        [str(binary), "--cli", *target, "--method", method, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**server_env(), "MCP_INSPECTOR_SECRET_STORE": "memory"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def tool(target: list[str], name: str, **arguments: str) -> dict[str, Any]:
    args = [item for key, value in arguments.items() for item in ("--tool-arg", f"{key}={value}")]
    answer = inspector(target, "tools/call", "--tool-name", name, *args)
    assert not answer.get("isError"), answer
    return answer["structuredContent"]


def test_the_inspector_cli_over_stdio_and_http(tmp_path, sandbox_image):
    replies = [Reply("```python\n" + FIX + "```", match="def mean(") for _ in range(2)]
    with ScriptedServer(replies) as model:
        printed = subprocess.run(
            command("--print-config", *model_args(model)), capture_output=True, text=True, cwd=ROOT, env=server_env()
        )
        config = tmp_path / "mcp.json"
        config.write_text(printed.stdout)
        stdio = ["--config", str(config), "--server", "selfheal", "-e", f"PYTHONPATH={ROOT}", "-e", "OPENAI_API_KEY=k"]
        with http_server(*model_args(model), env=server_env()) as (url, _):
            for target in (stdio, [url]):
                tools = {t["name"]: t for t in inspector(target, "tools/list")["tools"]}
                assert set(tools) == {"run_code", "check_fix", "heal", "explain_failure"}
                assert all(t["description"] and t["outputSchema"] for t in tools.values())

                crash = tool(target, "run_code", code=CRASH)
                assert crash["error"]["type"] == "ZeroDivisionError" and crash["error"]["line"] == 2
                assert [f["line"] for f in crash["error"]["frames"]] == [5, 2]

                rejected = tool(target, "check_fix", original=ORIGINAL, candidate=DELETES_ASSERT)
                assert rejected["verdict"] == "rejected"
                assert [v["rule"] for v in rejected["spec_violations"]] == ["assert_removed"]

                passed = tool(target, "check_fix", original=ORIGINAL, candidate=WITH_EXTRAS)
                assert passed["verdict"] == "passed" and "urlopen" not in passed["fix"]["code"]
                assert [c["kind"] for c in passed["fix"]["capabilities"]] == ["environment"]

                healed = tool(target, "heal", code=ORIGINAL)
                assert healed["outcome"] == "success" and healed["verified_by"] == ["your asserts"]
                assert FIX_LINE in healed["fix"]["code"]
