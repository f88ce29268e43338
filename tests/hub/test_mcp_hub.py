"""The class service's MCP endpoint behind a real JupyterHub: `/services/selfheal/mcp`,
the hub's token as bearer auth, the student's policy, their own records."""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.class_hub import MODEL_KEY, STUDENTS, class_hub
from tests.mcp_client import text_of
from tests.sandbox.test_mcp import FIX, FIX_LINE, ORIGINAL
from tests.scripted_server import Reply, ScriptedServer

pytestmark = pytest.mark.hub


def agent(url: str, token: str) -> Client:
    """An agent's MCP client with the student's hub token as bearer auth."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(url, http_client=http))


async def flood(url: str, token: str) -> list[str]:
    """Five calls at once from one student (the service works on one of theirs at a time
    and lets three wait): the fifth is refused before its body is read, the rest run."""
    slow = "import time\ntime.sleep(2)\nprint('ok')\n"
    said: list[str] = []

    async def one() -> None:
        try:
            async with agent(url, token) as client:
                result = await client.call_tool("run_code", {"code": slow})
                said.append(text_of(result) if result.is_error else result.structured_content["stdout"].strip())
        except Exception as exc:  # the refused one: HTTP 429 before its body was read
            said.append(repr(exc))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    return said


def test_the_services_mcp_endpoint_gives_each_student_what_they_may_get(tmp_path, sandbox_image):
    s1, s2 = STUDENTS
    policy = {"mode": "full", "groups": {"exam": {"mode": "hints"}}}
    groups = f'c.JupyterHub.load_groups = {{"cs101": {{"users": {list(STUDENTS)!r}}}, "exam": {{"users": [{s2!r}]}}}}'
    with (
        ScriptedServer([Reply("```python\n" + FIX + "```", match="def mean(")], api_key=MODEL_KEY) as model,
        class_hub(tmp_path / "hub", policy, model.base_url, more_config=groups + "\n") as hub,
    ):
        url = hub.service_url + "mcp"
        anonymous = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert anonymous.status_code == 401 and "refused your token" in anonymous.json()["message"]
        forged = requests.post(url, json={}, headers={"Authorization": "Bearer 0123abcd"})
        assert forged.status_code == 401

        async def first(token: str) -> tuple[str, list[str | None], dict, str]:
            async with agent(url, token) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {"run_code", "check_fix", "heal", "explain_failure"}
                seen: list[str | None] = []

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    seen.append(message)

                healed = await client.call_tool("heal", {"code": ORIGINAL}, progress_callback=progress)
                link = next(b for b in healed.content if b.type == "resource_link")
                mine = json.loads((await client.read_resource(link.uri)).contents[0].text)
                assert mine == healed.structured_content
                return link.uri, seen, healed.structured_content, text_of(healed)

        async def second(token: str, other: str) -> str:
            async with agent(url, token) as client:
                with pytest.raises(MCPError, match="No run .* of yours is kept"):
                    await client.read_resource(other)
                refused = await client.call_tool("heal", {"code": ORIGINAL})
                assert refused.is_error
                return text_of(refused)

        uri, seen, record, said = anyio.run(first, hub.token(s1))
        assert seen == ["your program as it is: failed: raised AssertionError: ", "attempt 1: passed"]
        assert record["outcome"] == "success" and FIX_LINE in record["fix"]["code"]
        assert MODEL_KEY not in said

        refused = anyio.run(second, hub.token(s2, roles=["server"]), uri)
        assert "only hints are allowed (your instructor's policy" in refused and "exam" in refused
        assert FIX_LINE not in refused

        flooded = anyio.run(flood, url, hub.token(s1))
        assert flooded.count("ok") == 4 and len(flooded) == 5, flooded
        refused_at_once = next(x for x in flooded if x != "ok")
        assert "MCPError" in refused_at_once and "Server returned an error response" in refused_at_once

        log = [json.loads(line) for line in (tmp_path / "hub" / "service-log.jsonl").read_text().splitlines()]
        heals = [(e["user"], e["entry"], e["outcome"]) for e in log]
        assert (s1, "heal", "success") in heals
