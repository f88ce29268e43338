"""A class's own model server: llama.cpp's ``llama-server`` as an instructor runs it
(README, "A model server for the class"), reached through ``SelfHeal.base_url`` like
any OpenAI-compatible endpoint — what ``selfheal service --SelfHeal.base_url=...`` uses.

Slow, and only where the binary is built (``python bench/llama_cpp.py`` builds it from
the llama.cpp the installed xllamacpp embeds, ~25 min on 2 cores, cached under
``~/.cache/selfheal-jupyter/llama.cpp/``): a fresh CI machine has none and skips it.
What must hold whatever the model writes: the model's name is the one the server lists,
every request streams with the server's own usage (not an estimate), and the loop reads
the server's queue while it waits, as it does for the embedded model.
"""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.llm import server_queue
from selfheal_jupyter.localmodel import ensure_weights, get_spec
from selfheal_jupyter.model import Task
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def llama_server() -> Path | None:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    found = sorted((base / "selfheal-jupyter" / "llama.cpp" / version("xllamacpp")).glob("*/bin/llama-server"))
    return found[0] if found else None


@pytest.fixture()
def class_server(tmp_path):
    binary = llama_server()
    if binary is None:
        pytest.skip("llama-server is not built here: python bench/llama_cpp.py builds it")
    model = ensure_weights(get_spec("qwen2.5-coder-0.5b"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "llama-server.log").open("wb")
    # The README's command line: two slots, the metrics the loop reads, one thread here.
    process = subprocess.Popen(
        [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
         "--parallel", "2", "--metrics", "-t", "1", "--alias", "class-coder"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, (tmp_path / "llama-server.log").read_text()[-2000:]
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_until(ready, 180, "llama-server to load the model")
        yield url
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def test_a_heal_reaches_llama_server_through_base_url(class_server, sandbox, monkeypatch):
    for name in ("OPENAI_BASE_URL", "SELFHEAL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    settings = SelfHeal(
        base_url=class_server + "/v1", max_iterations=1, temperature=0.0, llm_timeout_s=1800, time_budget_s=0
    )
    loop = build_loop(settings, sandbox=sandbox)
    assert loop.llm.endpoint.model == "class-coder" and not loop.llm.endpoint.local  # the server's own listing
    assert server_queue(loop.llm.endpoint.base_url) == (0, 0)  # its /metrics, as the queue watch reads it
    run = loop.run(Task(prompt="Make this code run.", initial_code="values = [3, 4]\nprint(sum(values) / len([]))\n"))
    assert run.outcome != "error", run.error
    asked = [it for it in run.iterations if it.index >= 1 and not it.quick_fix]
    assert asked and all(it.usage.completion_tokens > 0 and not it.usage.estimated for it in asked)
