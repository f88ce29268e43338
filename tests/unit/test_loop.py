"""The loop's helpers for its tests, and a loop whose engine cannot be reached.
(The loop end to end in the real Docker sandbox: tests/sandbox/test_loop.py.)"""

from __future__ import annotations

import pandas as pd

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm, build_loop
from selfheal_jupyter.llm import LLMClient
from selfheal_jupyter.loop.orchestrator import Loop
from selfheal_jupyter.model import Task
from selfheal_jupyter.sandbox.docker import DockerSandbox
from tests.scripted_server import ScriptedServer

DF = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
TESTS = "assert total == 6"

RIGHT = "```python\ntotal = int(df['x'].sum())\nprint('total', total)\n```"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def server_settings(server: ScriptedServer, **options) -> SelfHeal:
    """``SelfHeal`` options (by their names) pointing at the scripted server; quick to
    give up on it unless a test says otherwise."""
    options.setdefault("model", server.model)
    options.setdefault("llm_timeout_s", 5.0)
    options.setdefault("llm_max_retries", 0)
    return SelfHeal(base_url=server.base_url, **options)


def llm_for(server: ScriptedServer, **options) -> LLMClient:
    return build_llm(server_settings(server, **options))


def make_loop(server: ScriptedServer, sandbox, **options) -> Loop:
    """The loop the factory builds for these ``SelfHeal`` options, on ``sandbox``."""
    return build_loop(server_settings(server, **options), sandbox=sandbox)


def task(**kw) -> Task:
    kw.setdefault("prompt", "Compute the total of column x of df and store it in `total`.")
    kw.setdefault("inputs", {"df": DF})
    kw.setdefault("tests", TESTS)
    return Task(**kw)


def test_unreachable_docker_engine_is_recorded(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    box = DockerSandbox.from_config(SelfHeal())
    try:
        with ScriptedServer([RIGHT]) as s:
            run = make_loop(s, box, auto_plan=False).run(task())
    finally:
        box.close()
    assert run.outcome == "error" and "DOCKER_HOST" in run.error
