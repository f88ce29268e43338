"""The shared embedded server with the real 1.5B model: two kernels share one that stops
when idle, and it changes its threads when the machine does. (The same code on temp
directories, without the model: tests/unit/test_localserver.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.localmodel.endpoint import (
    server_options,
    state_path,
)
from selfheal_jupyter.localmodel.threads import physical_cores
from selfheal_jupyter.localmodel.weights import cache_dir
from tests.conftest import pid_gone
from tests.unit.test_localserver import SPEC
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


# --- the real model (slow) ----------------------------------------------------------

_KERNEL = textwrap.dedent(
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
    kernels = [subprocess.Popen([sys.executable, "-c", _KERNEL, idle_s], env=env, cwd=REPO,
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
    third = subprocess.run([sys.executable, "-c", _KERNEL, idle_s, "stop"], env=env, cwd=REPO,
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
