"""The scripted OpenAI-compatible server, exercised through the real ``openai`` client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from tests.scripted_server import Fault, Reply, ScriptedServer

MSG = [{"role": "user", "content": "say hi"}]


def client(server: ScriptedServer, **kw) -> openai.OpenAI:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 0)
    kw.setdefault("api_key", "test-key")
    return openai.OpenAI(base_url=server.base_url, **kw)


def stream_text(c: openai.OpenAI, model: str = "scripted-model", messages=MSG):
    text, usage = [], None
    stream = c.chat.completions.create(
        model=model, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.choices:
            text.append(chunk.choices[0].delta.content or "")
        if chunk.usage:
            usage = chunk.usage
    return "".join(text), usage


def test_plain_and_streaming_replies_with_usage():
    with ScriptedServer(["hello there", "```python\nprint(1)\n```"]) as s:
        c = client(s)
        r = c.chat.completions.create(model="scripted-model", messages=MSG)
        assert r.choices[0].message.content == "hello there"
        assert r.usage.completion_tokens == 2 and r.usage.prompt_tokens > 0
        text, usage = stream_text(c)
        assert text == "```python\nprint(1)\n```"
        assert usage is not None and usage.completion_tokens > 0
        assert [b["messages"] for b in s.requests] == [MSG, MSG]
        assert s.requests[1]["stream"] is True
        assert c.models.list().data[0].id == "scripted-model"


def test_no_usage_when_told():
    with ScriptedServer(["abc def"], report_usage=False) as s:
        text, usage = stream_text(client(s))
        assert text == "abc def" and usage is None


def test_match_serves_replies_out_of_order():
    with ScriptedServer([Reply("PLAN", match="planner"), "CODE"]) as s:
        c = client(s)
        first, _ = stream_text(c, messages=[{"role": "user", "content": "developer here"}])
        second, _ = stream_text(c, messages=[{"role": "system", "content": "you are the planner"}])
        assert (first, second) == ("CODE", "PLAN")
        assert s.remaining == 0


def test_exhausted_script_fails_loudly():
    with ScriptedServer([]) as s, pytest.raises(openai.InternalServerError, match="script exhausted"):
        client(s).chat.completions.create(model="scripted-model", messages=MSG)


def test_status_faults_and_sdk_retry():
    with ScriptedServer([Fault("status", status=429), "ok after 429"]) as s:
        text, _ = stream_text(client(s, max_retries=2))
        assert text == "ok after 429"
        assert len(s.requests) == 2
    with ScriptedServer([Fault("status", status=429, times=3), "never reached"]) as s:
        with pytest.raises(openai.RateLimitError):
            stream_text(client(s, max_retries=2))
        assert len(s.requests) == 3 and s.remaining == 1
    with ScriptedServer([Fault("status", status=401)]) as s, pytest.raises(openai.AuthenticationError):
        stream_text(client(s))


def test_api_key_and_unknown_model():
    with ScriptedServer(["x"], api_key="right") as s:
        with pytest.raises(openai.AuthenticationError):
            stream_text(client(s, api_key="wrong"))
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            stream_text(client(s, api_key="right"), model="gpt-nonexistent")
        assert stream_text(client(s, api_key="right"))[0] == "x"


def test_hang_past_client_timeout():
    hang = Fault("hang", seconds=60)
    with ScriptedServer([hang]) as s:
        with pytest.raises(openai.APITimeoutError):
            stream_text(client(s, timeout=0.5))
        assert hang.hung_up.wait(30) and s.hung_up.is_set()  # the server saw the client leave


def test_truncated_stream_is_a_connection_error():
    with ScriptedServer([Fault("truncated", content="```python\nprint('cut")]) as s:
        c = client(s)
        seen = []
        with pytest.raises(openai.APIConnectionError):
            for chunk in c.chat.completions.create(model="scripted-model", messages=MSG, stream=True):
                if chunk.choices:
                    seen.append(chunk.choices[0].delta.content or "")
        assert "".join(seen).startswith("```python")


def test_runs_as_a_process(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["first", {"content": "second", "match": "two"}, {"fault": "status", "status": 500}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.scripted_server", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "READY"
        c = openai.OpenAI(base_url=line[1], api_key="k", max_retries=0, timeout=5)
        assert stream_text(c, messages=[{"role": "user", "content": "one"}])[0] == "first"
        assert stream_text(c, messages=[{"role": "user", "content": "two"}])[0] == "second"
        with pytest.raises(openai.InternalServerError):
            stream_text(c)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
