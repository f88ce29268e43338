"""The class service's MCP endpoint behind a real JupyterHub: `/services/selfheal/mcp`,
the hub's token as bearer auth, the student's policy, their own records."""

from __future__ import annotations

import contextlib
import json
import threading

import anyio
import httpx
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.class_hub import INSTRUCTOR, MODEL_KEY, STUDENTS, class_hub, ensure_user, wait_until
from tests.mcp_client import text_of
from tests.sandbox.test_mcp import FIX, FIX_LINE, ORIGINAL
from tests.sandbox.test_mcp_redteam import HELLO, STREAMS, call, open_session
from tests.scripted_server import Fault, Reply, ScriptedServer

pytestmark = pytest.mark.hub


def agent(url: str, token: str, mode: str = "auto") -> Client:
    """An agent's MCP client with the student's hub token as bearer auth; ``mode="legacy"``:
    one of the protocol before 2026 (a session, its standing GET stream, a DELETE at the end)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(url, http_client=http), mode=mode)


AGENTS = 8
"""A student's agents in the flood below: as many sessions as they may hold (``service_mcp_sessions``)."""


async def flood(url: str, token: str, held: Reply) -> list[str]:
    """One student's agents (sessions of the protocol before 2026, each with its standing
    stream) call at once while the service works on the first call (a heal whose model
    reply is ``held``): the service lets three wait, so the others are refused, saying
    why, and the rest run once the model answers. Counted among the student's requests in
    flight, the agents' streams, or an agent's tool list read after its call, had refused
    calls (or a call that ran) with another message, depending on when they came."""
    said: list[str] = []
    refusals = 0
    all_refused = anyio.Event()

    async def one(client: Client, name: str, arguments: dict) -> None:
        nonlocal refusals
        result = await client.call_tool(name, arguments)
        if result.is_error:
            said.append(f"refused: {text_of(result)}")
            refusals += 1
            if refusals == AGENTS - 4:
                all_refused.set()
        else:
            said.append(result.structured_content.get("outcome") or result.structured_content["stdout"].strip())

    async with contextlib.AsyncExitStack() as agents:
        clients = [await agents.enter_async_context(agent(url, token, "legacy")) for _ in range(AGENTS)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, clients[0], "heal", {"code": ORIGINAL})
            assert await anyio.to_thread.run_sync(held.held.wait, 120), "the heal never asked the model"
            for client in clients[1:]:
                tg.start_soon(one, client, "run_code", {"code": "print('ok')"})
            with anyio.fail_after(120):  # not a pace: refusals that never come would hang here
                await all_refused.wait()
            held.hold.set()  # type: ignore[union-attr]
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

        held = Reply("```python\n" + FIX + "```", match="def mean(", hold=threading.Event())
        model.add(held)
        flooded = anyio.run(flood, url, hub.token(s1), held)
        refused = [x for x in flooded if x.startswith("refused: ")]
        assert sorted(set(flooded) - set(refused)) == ["ok", "success"] and flooded.count("ok") == 3, flooded
        assert len(refused) == AGENTS - 4, flooded
        assert all("You already have 3 requests waiting: let them finish (or cancel one)" in x for x in refused)

        log = [json.loads(line) for line in (tmp_path / "hub" / "service-log.jsonl").read_text().splitlines()]
        heals = [(e["user"], e["entry"], e["outcome"]) for e in log]
        assert (s1, "heal", "success") in heals


# --------------------------------------------------------------------------- a student's agent attacks
SESSIONS = 2
"""Each student's MCP sessions at once in the hub below (``SelfHeal.service_mcp_sessions``)."""


@pytest.fixture(scope="module")
def mcp_class(tmp_path_factory, sandbox_image):
    """One hub for the attacks below; its model hangs on the first heal it is asked."""
    for user in (*STUDENTS, INSTRUCTOR):
        ensure_user(user)
    folder = tmp_path_factory.mktemp("mcp-attacks")
    with (
        ScriptedServer([Fault("hang", seconds=300, match="def mean(")], api_key=MODEL_KEY) as model,
        class_hub(
            folder / "hub", {"mode": "full"}, model.base_url, f"--SelfHeal.service_mcp_sessions={SESSIONS}"
        ) as hub,
    ):
        yield hub, model


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_another_students_session_id_opens_nothing(mcp_class):
    """A student who learns another's MCP session id (a shared screen, a log, a proxy)
    sends requests in it with their own token: the session is the other student's, so it
    is not found for them; they cannot list in it, read its stream or end it."""
    hub, _ = mcp_class
    s1, s2 = STUDENTS
    url = hub.service_url + "mcp"
    with httpx.Client(timeout=60) as http:
        mine = open_session(http, url, bearer(hub.token(s1)))
        try:
            theirs = {**mine, **bearer(hub.token(s2))}
            listed = http.post(url, headers=theirs, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert listed.status_code == 404, listed.text
            ended = http.delete(url, headers=theirs)
            assert ended.status_code == 404, ended.text
            again = http.post(url, headers=mine, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert again.status_code == 200 and '"run_code"' in again.text
        finally:
            http.delete(url, headers=mine)


def test_one_students_sessions_shut_out_nobody_else(mcp_class):
    """A student's agent opens sessions in a loop (300 took 13 s here) and never closes
    them: the SDK's one limit (10,000 for the whole service) would have shut every other
    student out for the 30 minutes sessions stay. Each student holds at most
    ``service_mcp_sessions``; one more is refused saying so, the others still connect,
    and a session closed makes room."""
    hub, _ = mcp_class
    s1, s2 = STUDENTS
    url = hub.service_url + "mcp"
    one = bearer(hub.token(s1))
    with httpx.Client(timeout=60) as http:
        held = [open_session(http, url, one) for _ in range(SESSIONS)]
        try:
            hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}
            refused = http.post(url, headers={**STREAMS, **one}, json=hello)
            assert refused.status_code == 429, refused.text
            assert f"already hold {SESSIONS} MCP sessions" in refused.json()["message"]
            other = open_session(http, url, bearer(hub.token(s2)))
            assert http.delete(url, headers=other).status_code == 200
            assert http.delete(url, headers=held.pop()).status_code == 200
            held.append(open_session(http, url, one))
        finally:
            for headers in held:
                http.delete(url, headers=headers)


def test_a_heal_whose_agent_went_away_ends_in_the_service(mcp_class):
    """The student's agent drops its connection while its heal waits on the model: the
    heal stops (its log line says cancelled) instead of holding the student's turn and a
    model slot until the model answers, and the student's next call is served."""
    hub, model = mcp_class
    s1 = STUDENTS[0]
    url = hub.service_url + "mcp"
    token = hub.token(s1)
    log = hub.folder / "service-log.jsonl"
    with httpx.Client(timeout=httpx.Timeout(60, read=300)) as http:
        headers = open_session(http, url, bearer(token))
        with http.stream("POST", url, headers=headers, json=call("heal", {"code": ORIGINAL})) as healing:
            assert healing.status_code == 200
            assert model.asked.wait(120), "the heal never asked the model"
        # gone without a word: no cancel notification, no DELETE of its session

    def heal_logged() -> list[dict]:
        lines = log.read_text().splitlines() if log.exists() else []
        return [e for e in map(json.loads, lines) if e["user"] == s1 and e["entry"] == "heal"]

    (line,) = wait_until(heal_logged, "the dropped heal to end", timeout=60)
    assert line["outcome"] == "cancelled", line

    async def next_call() -> str:
        async with agent(url, token) as client:
            return (await client.call_tool("run_code", {"code": "print(6 * 7)"})).structured_content["stdout"]

    assert anyio.run(next_call) == "42\n"
    with httpx.Client(timeout=60) as http:
        http.delete(url, headers=headers)  # the dropped agent's session, still open


def test_a_call_too_large_for_the_service_is_refused_saying_so(mcp_class):
    """An agent sends a program larger than the service reads (``4 × max_code_bytes`` and
    some JSON): it is refused before its body is read, saying so and what to do, instead
    of its connection closed mid-body with nothing said; the agent's next call is served."""
    hub, _ = mcp_class
    url = hub.service_url + "mcp"

    async def drive() -> str:
        async with agent(url, hub.token(STUDENTS[1])) as client:
            with pytest.raises(MCPError, match=r"bytes, more than the selfheal service takes \("):
                await client.call_tool("run_code", {"code": "x = 1\n" * 200_000})
            return (await client.call_tool("run_code", {"code": "print(6 * 7)"})).structured_content["stdout"]

    assert anyio.run(drive) == "42\n"
