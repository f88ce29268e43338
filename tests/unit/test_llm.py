"""LLMClient through the real openai client against the scripted server; extract_code."""

from __future__ import annotations

import socket
import threading

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import (
    Cancelled,
    LLMAuthError,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnreachable,
    ModelNotFound,
)
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint, LLMClient, extract_code
from tests.scripted_server import Fault, Reply, ScriptedServer

MSG = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write code"}]


def make(server: ScriptedServer, api_key: str = "k", **options) -> LLMClient:
    """The client the factory builds for these ``SelfHeal`` options (quick to give up)."""
    options.setdefault("llm_timeout_s", 5.0)
    options.setdefault("llm_max_retries", 0)
    model = options.pop("model", server.model)
    return build_llm(SelfHeal(**options), Endpoint(server.base_url, api_key, model))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- chat
def test_streams_tokens_and_reports_usage():
    reply = "Here:\n```python\nprint('hello world')\n```\n"
    with ScriptedServer([reply], chunk_size=5) as s:
        seen: list[str] = []
        out = make(s).chat(MSG, on_token=seen.append)
        assert out.text == reply and "".join(seen) == reply and len(seen) > 3
        assert out.finish_reason == "stop"
        assert out.usage.completion_tokens > 0 and out.usage.prompt_tokens > 0
        assert not out.usage.estimated
        body = s.requests[0]
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["messages"] == MSG and body["temperature"] == 0.2


def test_estimates_usage_when_server_reports_none():
    with ScriptedServer(["x = 1\n" * 10], report_usage=False) as s:
        out = make(s).chat(MSG, temperature=0.9)
        assert out.usage.estimated
        assert out.usage.completion_tokens == (len(out.text) + 3) // 4
        assert out.usage.prompt_tokens > 0
        assert s.requests[0]["temperature"] == 0.9


def test_unreachable_endpoint():
    client = build_llm(
        SelfHeal(llm_timeout_s=2, llm_max_retries=0), Endpoint(f"http://127.0.0.1:{free_port()}/v1", "k", "m")
    )
    with pytest.raises(LLMUnreachable, match="OPENAI_BASE_URL"):
        client.chat(MSG)


def test_wrong_key():
    with ScriptedServer(["never"], api_key="right") as s, pytest.raises(LLMAuthError, match="OPENAI_API_KEY"):
        make(s, api_key="wrong").chat(MSG)


def test_unknown_model():
    with ScriptedServer(["never"]) as s:
        with pytest.raises(ModelNotFound, match=r"'gpt-9'.*SelfHeal.model"):
            make(s, model="gpt-9").chat(MSG)
        assert s.remaining == 1


def test_rate_limited_then_ok_uses_sdk_retry():
    with ScriptedServer([Fault("status", status=429), "```python\nprint(1)\n```"]) as s:
        out = make(s, llm_max_retries=2).chat(MSG)
        assert "print(1)" in out.text and len(s.requests) == 2


def test_rate_limited_beyond_retries():
    with ScriptedServer([Fault("status", status=429, times=3)]) as s:
        with pytest.raises(LLMRateLimited, match="429"):
            make(s, llm_max_retries=2).chat(MSG)
        assert len(s.requests) == 3


def test_server_error_is_retried_then_reported():
    with ScriptedServer([Fault("status", status=500, times=2)]) as s:
        with pytest.raises(LLMError, match="HTTP 500"):
            make(s, llm_max_retries=1).chat(MSG)
        assert len(s.requests) == 2


def test_hang_past_timeout():
    hang = Fault("hang", seconds=120)
    with ScriptedServer([hang]) as s:
        with pytest.raises(LLMTimeout, match="llm_timeout_s"):
            make(s, llm_timeout_s=0.5).chat(MSG)
        assert hang.hung_up.wait(60)  # the client gave up: the 120 s hang was not waited out


def test_truncated_stream():
    with ScriptedServer([Fault("truncated")]) as s, pytest.raises(LLMError, match="cut in the middle"):
        make(s).chat(MSG)


NEXT = "```python\nprint('next')\n```"


def test_endless_stream_is_stopped_past_max_tokens_and_its_tokens_counted():
    endless = Fault("endless", content="x = 1\n", seconds=20)
    with ScriptedServer([endless, NEXT], chunk_size=3) as s:
        client = make(s, max_tokens=50)
        with pytest.raises(
            LLMError,
            match=r"past the reply's limit of 50 tokens.*"
            r"`%config SelfHeal.max_tokens`",
        ) as caught:
            client.chat(MSG)
        assert not isinstance(caught.value, LLMTimeout)
        assert caught.value.usage.completion_tokens > 50 and caught.value.usage.prompt_tokens > 0
        assert endless.hung_up.wait(30)  # the server saw the client stop reading
        assert "print('next')" in client.chat(MSG).text  # the next request works


def test_a_reply_streaming_longer_than_llm_timeout_s_is_stopped():
    slow = Fault("endless", content="x = 1\n", chunk_delay_s=0.05, seconds=20)
    with ScriptedServer([slow, NEXT], chunk_size=3) as s:
        client = make(s, llm_timeout_s=1, max_tokens=100_000)
        with pytest.raises(
            LLMTimeout,
            match=r"still writing its reply after 1 s.*"
            r"`%config SelfHeal.llm_timeout_s`",
        ) as caught:
            client.chat(MSG)
        assert caught.value.usage.completion_tokens > 0
        assert slow.hung_up.wait(30)
        assert "print('next')" in client.chat(MSG).text


def test_a_200_that_is_not_an_api_reply_says_what_came():
    page = "<html><head><title>Login</title></head>\n<body>Sign in to continue</body></html>"
    with ScriptedServer([Fault("not_json", content=page), NEXT]) as s:
        client = make(s)
        with pytest.raises(LLMError) as caught:
            client.chat(MSG)
        said = str(caught.value)
        assert ("is not an OpenAI-compatible reply: <html><head><title>Login</title></head>\\n<body>Sign in") in said, (
            said
        )
        assert "crash" not in said and "early" not in said
        assert "print('next')" in client.chat(MSG).text


def test_an_event_whose_data_is_not_json_says_what_came():
    with ScriptedServer([Fault("garbled", content="{'reply': oops"), NEXT]) as s:
        client = make(s)
        with pytest.raises(LLMError, match=r"is not an OpenAI-compatible reply: \{'reply': oops"):
            client.chat(MSG)
        assert "print('next')" in client.chat(MSG).text


def test_a_whole_completion_to_a_streaming_request_is_taken():
    with ScriptedServer([Reply("```python\nprint(2)\n```", whole=True)]) as s:
        out = make(s).chat(MSG)
        assert out.text == "```python\nprint(2)\n```" and out.finish_reason == "stop"
        assert not out.usage.estimated and out.usage.completion_tokens > 0


def test_embedded_server_cut_names_its_log_and_the_restart():
    with ScriptedServer([Fault("truncated"), NEXT]) as s:
        client = build_llm(
            SelfHeal(llm_timeout_s=5, llm_max_retries=0),
            Endpoint(s.base_url, "k", s.model, local=True, log="/tmp/m-1.log"),
        )
        with pytest.raises(LLMUnreachable) as caught:
            client.chat(MSG)
        said = str(caught.value)
        assert said.startswith("The embedded model's server stopped in the middle of a reply")
        assert "/tmp/m-1.log" in said and "next run starts it again" in said
        assert "network" not in said and "OPENAI_BASE_URL" not in said


def test_cancel_during_streaming_stops_the_reply():
    slow = Reply("```python\n" + "x = 1\n" * 200 + "```", chunk_delay_s=0.2)  # 60 s in all
    with ScriptedServer([slow], chunk_size=4) as s:
        cancel = threading.Event()
        seen: list[str] = []

        def on_token(text: str) -> None:
            seen.append(text)
            cancel.set()  # the reply is streaming: stop it

        with pytest.raises(Cancelled):
            make(s).chat(MSG, on_token=on_token, cancel=cancel)
        assert seen
        assert s.hung_up.wait(60)  # the reply was stopped mid-stream, not read to its end


def test_cancel_before_first_token():
    with ScriptedServer([Fault("hang", seconds=60)]) as s:
        cancel = threading.Event()

        def once_asked() -> None:
            s.asked.wait(30)
            cancel.set()

        threading.Thread(target=once_asked, daemon=True).start()
        # Cancelled, not the error the end of the 60 s hang would give: it was not waited out
        with pytest.raises(Cancelled):
            make(s, llm_timeout_s=120).chat(MSG, cancel=cancel)


def test_list_models():
    with ScriptedServer([], model="tiny") as s:
        assert make(s).list_models() == ["tiny"]


# --------------------------------------------------------------------------- extract_code
def test_single_python_block():
    assert extract_code("Sure!\n```python\nprint(1)\n```\nDone.") == "print(1)\n"


def test_block_without_language_tag():
    assert extract_code("```\nimport math\nprint(math.pi)\n```") == "import math\nprint(math.pi)\n"


def test_tilde_fence_and_py_tag():
    assert extract_code("~~~py\nx = 2\n~~~") == "x = 2\n"


def test_python_blocks_preferred_over_other_languages():
    reply = "Install:\n```bash\npip install pandas\n```\nThen:\n```python\nimport pandas\n```\n"
    assert extract_code(reply) == "import pandas\n"


def test_parts_are_joined_in_order():
    reply = (
        "First the imports:\n```python\nimport math\n```\n"
        "Then the function:\n```python\ndef area(r):\n    return math.pi * r * r\n```\n"
        "And use it:\n```python\nprint(area(2))\n```\n"
    )
    code = extract_code(reply)
    assert code == "import math\n\ndef area(r):\n    return math.pi * r * r\n\nprint(area(2))\n"
    compile(code, "x", "exec")


def test_versions_take_the_last_complete_one():
    reply = (
        "Your code:\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\nprint(mean([]))\n```\n"
        "Fixed:\n```python\ndef mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n"
        "print(mean([]))\n```\n"
    )
    assert "if xs else 0.0" in extract_code(reply)
    assert extract_code(reply).count("def mean") == 1


def test_excerpt_of_the_program_is_dropped():
    full = "import math\n\nr = 3\nprint(math.pi * r * r)\n"
    reply = f"```python\n{full}```\nThe key line is:\n```python\nprint(math.pi * r * r)\n```"
    assert extract_code(reply) == full


def test_unterminated_final_fence():
    assert extract_code("Here you go:\n```python\nx = 1\nprint(x)\n") == "x = 1\nprint(x)\n"


def test_unfenced_code_and_prose_around_it():
    assert extract_code("import os\nprint(os.sep)") == "import os\nprint(os.sep)\n"
    reply = "Here is the program:\nimport math\nprint(math.e)\nThis prints e."
    assert extract_code(reply) == "import math\nprint(math.e)\n"


def test_no_code():
    assert extract_code("") is None
    assert extract_code("I cannot help with that.") is None
    assert extract_code("Sorry") is None
    assert extract_code("The result is shown below.\n```text\n42\n```") is None


def test_think_section_is_ignored():
    reply = "<think>maybe ```python\nwrong()\n``` no</think>\n```python\nright()\n```"
    assert extract_code(reply) == "right()\n"


def test_untagged_block_with_syntax_error_is_still_the_attempt():
    assert extract_code("```\ndef f(:\n    pass\n```") == "def f(:\n    pass\n"


def test_a_reply_past_its_own_cap_is_cut_as_a_server_cuts_it():
    """A repair's cap (``max_tokens`` of one request, below the client's) on a server that
    ignores it: the reply ended the run with "the server ignores max_tokens ... raise
    SelfHeal.max_tokens", which was not the limit that cut it (red team, issue 46)."""
    endless = Fault("endless", content="x = 1\n", seconds=20)
    with ScriptedServer([endless, NEXT], chunk_size=3) as s:
        client = make(s, max_tokens=1_000)
        reply = client.chat(MSG, max_tokens=50)
        assert reply.finish_reason == "length" and reply.text.startswith("x = 1\nx = 1")
        assert 50 <= reply.usage.completion_tokens < 1_000
        assert endless.hung_up.wait(30)  # the server saw the client stop reading
        assert "print('next')" in client.chat(MSG).text
