"""The embedded model's server as the user meets it: shared by kernels and CLI runs,
its thread counts, speculation and the --SelfHeal.<trait>=<value> flags.

Fast tests run the real code on temp directories (no model). Slow ones start the
real 1.5B model; they never assert a wall-clock figure: they wait on state they can
observe (a pid, a state file), with loose upper bounds only to end a broken run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfheal_jupyter.agents.developer import Developer, RepairContext
from selfheal_jupyter.cli import main as cli_main
from selfheal_jupyter.config import SelfHeal, split_trait_args
from selfheal_jupyter.errors import BadInput
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.localmodel.catalog import get_spec
from selfheal_jupyter.localmodel.endpoint import (
    find_shared_server,
    running_servers,
    server_options,
    state_path,
)
from selfheal_jupyter.localmodel.threads import auto_threads, physical_cores, resolve_threads

SPEC = get_spec("qwen2.5-coder-1.5b")


# --- --SelfHeal.<trait>=<value> ---------------------------------------------------


def test_trait_flags_are_parsed_by_the_traits_and_removed() -> None:
    rest, traits = split_trait_args(
        ["run", "task", "--SelfHeal.local_speculation=off", "--SelfHeal.local_threads=2",
         "--SelfHeal.auto_plan=False", "--json"]
    )  # fmt: skip
    assert rest == ["run", "task", "--json"]
    assert traits == {"local_speculation": "off", "local_threads": 2, "auto_plan": False}
    # after "--" nothing is taken
    rest, traits = split_trait_args(["run", "--", "--SelfHeal.local_threads=2"])
    assert rest == ["run", "--", "--SelfHeal.local_threads=2"] and traits == {}


@pytest.mark.parametrize(
    "arg, says",
    [
        ("--SelfHeal.local_speculation=fast", "'ngram', 'draft', 'off'"),
        ("--SelfHeal.no_such=1", "has no option 'no_such'"),
        ("--SelfHeal.local_threads", "give a value"),
        ("--SelfHeal.local_threads=-2", "0 (from the machine)"),
        ("--SelfHeal.local_threads=many", "local_threads"),
    ],
)
def test_bad_trait_flags_say_what_is_wrong(arg: str, says: str) -> None:
    with pytest.raises(BadInput) as err:
        split_trait_args(["model", "status", arg])
    assert says in str(err.value) and arg in str(err.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["model", "status", "--json"],
        ["model", "fetch", "--help"],
        ["run", "--help"],
        ["eval", "--help"],
        ["sandbox", "doctor", "--help"],
        ["kernel", "install", "--help"],
    ],
)
def test_every_command_accepts_the_speculation_flag(argv: list[str], capsys) -> None:
    """Accepted anywhere on the line; a bad value is refused before any command runs."""
    try:
        code = cli_main([*argv, "--SelfHeal.local_speculation=off"])
    except SystemExit as exc:  # --help
        code = exc.code
    assert code == 0, capsys.readouterr().err
    assert cli_main([*argv[:1], "--SelfHeal.local_speculation=fast", *argv[1:]]) == 2
    assert "local_speculation" in capsys.readouterr().err


def test_run_and_eval_settings_take_the_trait_flags() -> None:
    from selfheal_jupyter.cli import build_parser
    from selfheal_jupyter.commands import eval as eval_cmd
    from selfheal_jupyter.commands.run import build_settings

    args = build_parser().parse_args(["run", "t", "--max-iterations", "2"])
    args.selfheal_traits = {"local_speculation": "off", "max_iterations": 5}
    settings = build_settings(args)
    assert settings.local_speculation == "off"
    assert settings.max_iterations == 5  # the --SelfHeal form wins over the flag
    args = build_parser().parse_args(["eval", "--benchmark", "humaneval"])
    args.selfheal_traits = {"local_idle_s": 0.0}
    assert eval_cmd.settings_from(args)["local_idle_s"] == 0.0


# --- threads ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cores, load, generation, batch",
    [
        (2, 3.0, 1, 1),  # busy 2-core box
        (2, 1.0, 1, 1),  # one other process: generation keeps to one core
        (2, 0.2, 2, 2),  # idle 2-core box
        (8, 1.0, 6, 7),  # laptop with a browser
        (8, 0.0, 7, 8),
        (8, 20.0, 1, 1),  # overloaded: never 0
        (1, 0.0, 1, 1),
    ],
)
def test_thread_rule(cores: int, load: float, generation: int, batch: int) -> None:
    got = auto_threads(cores=cores, load=load)
    assert (got.generation, got.batch) == (generation, batch)


def test_configured_threads_win_each_on_its_own() -> None:
    both = resolve_threads(3, 5)
    assert (both.generation, both.batch) == (3, 5)
    assert resolve_threads(3, 0).generation == 3 and resolve_threads(3, 0).batch >= 1
    assert resolve_threads(0, 4).batch == 4 and resolve_threads(0, 4).generation >= 1


def test_physical_cores_count_hyperthreads_once(tmp_path: Path) -> None:
    # 4 logical CPUs: two cores with two hyper-threads each
    for cpu, core in enumerate([0, 1, 0, 1]):
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert physical_cores({0, 1, 2, 3}, tmp_path) == 2
    assert physical_cores({0, 2}, tmp_path) == 1  # affinity to one core's siblings
    assert physical_cores({0, 1, 7}, tmp_path) == 3  # no topology for cpu7: count CPUs


# --- speculation and the child's parameters -----------------------------------------


def test_options_follow_the_settings(cache_home: Path) -> None:
    from selfheal_jupyter.localmodel.tuning import recommended_settings

    tuned = recommended_settings()
    ngram = server_options(SelfHeal(local_threads=2, local_batch_threads=3, local_speculation="ngram"))
    assert (ngram.threads, ngram.batch_threads, ngram.speculation) == (2, 3, tuned.ngram_type)
    off = server_options(SelfHeal(local_threads=2, local_batch_threads=3))
    assert off.speculation == "off"  # the default (docs/measurements.md, issue 46)
    # other settings, another server: never handed a server configured otherwise
    assert state_path(SPEC, ngram) != state_path(SPEC, off)
    assert state_path(SPEC, ngram) == state_path(SPEC, server_options(
        SelfHeal(local_threads=2, local_batch_threads=3, local_speculation="ngram")))  # fmt: skip
    # threads from the machine: found by what was asked, whatever the load is now
    auto = server_options(SelfHeal())
    assert (auto.threads, auto.batch_threads) == (0, 0)
    assert auto.resolved().threads >= 1 and auto.resolved().batch_threads >= 1
    with pytest.raises(Exception, match="smaller model"):
        server_options(SelfHeal(local_model="qwen2.5-coder-0.5b", local_speculation="draft"))


# --- the shared server's state file -------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_state_of_a_dead_process_is_recovered(cache_home: Path) -> None:
    state = state_path(SPEC, server_options(SelfHeal()))
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"pid": _dead_pid(), "url": "http://127.0.0.1:9"}))
    assert find_shared_server(SPEC, state) is None
    assert not state.exists()
    assert running_servers() == []


def test_state_of_a_live_stranger_is_dropped_but_the_process_spared(cache_home: Path) -> None:
    """A recycled pid that is not our server (here: this test) is never signalled."""
    state = state_path(SPEC, server_options(SelfHeal()))
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:9"}))
    assert find_shared_server(SPEC, state) is None
    assert not state.exists()
    state.write_text("{not json")
    assert find_shared_server(SPEC, state) is None and not state.exists()


# --- a stable prompt prefix across repair rounds -------------------------------------


def test_repair_prompts_share_their_prefix_up_to_the_program() -> None:
    """The server reuses its prompt cache only up to the first changed token: the
    system message, the task, the inputs and the checks come first and are the same
    in every round; only the program and what happened change."""
    llm = build_llm(SelfHeal(), Endpoint("http://127.0.0.1:9/v1", "k", "m", local=True))
    dev = Developer(llm, retry_temperature=SelfHeal().retry_temperature, repair_format=SelfHeal().repair_format)
    one = dev.build_messages(
        "sum the list", None, [], "assert total == 6", RepairContext(code="total = sum(x)\n", feedback="NameError: x")
    )
    two = dev.build_messages("sum the list", None, [], "assert total == 6",
                             RepairContext(code="x = [1, 2, 3]\ntotal = sum(x) + 1\n",
                                           feedback="AssertionError", same_failure=True))  # fmt: skip
    assert one[0] == two[0]
    a, b = one[1]["content"], two[1]["content"]
    common = len(os.path.commonprefix([a, b]))
    assert "assert total == 6" in a[:common] and "sum the list" in a[:common]
    assert a[:common].rstrip().endswith("```python")  # it diverges inside the program


# --- threads that follow the machine (localmodel/retune.py) --------------------------


def test_the_retuner_does_not_count_its_own_generation_and_waits_for_agreement() -> None:
    from selfheal_jupyter.localmodel.retune import AGREEING_CHECKS, MIN_SWITCH_INTERVAL_S, Retuner
    from selfheal_jupyter.localmodel.threads import ThreadCounts

    one, two = ThreadCounts(1, 1), ThreadCounts(2, 2)
    # a 2-core box where only the server itself generates (load 1.0, its own 1.0): quiet
    quiet = Retuner(2, one)
    decisions = [quiet.observe(1.0, 1.0, float(t)) for t in range(AGREEING_CHECKS)]
    assert decisions == [None] * (AGREEING_CHECKS - 1) + [two]
    # counted as load, the same figure would keep it at one thread
    assert all(Retuner(2, one).observe(1.0, 0.0, float(t)) is None for t in range(5))
    # a single quiet reading between busy ones changes nothing
    flicker = Retuner(2, one)
    assert [flicker.observe(load, 0.0, float(t)) for t, load in enumerate([0, 0, 3, 0, 0])] == [None] * 5
    # after a switch, the next one waits for the interval
    quiet.switched(two, 100.0)
    busy = [quiet.observe(4.0, 2.0, 100.0 + t) for t in range(1, 2 * AGREEING_CHECKS)]
    assert busy == [None] * len(busy)
    assert quiet.observe(4.0, 2.0, 100.0 + MIN_SWITCH_INTERVAL_S) == one


def test_own_load_is_the_backends_cpu_over_the_last_minute() -> None:
    from selfheal_jupyter.localmodel.retune import OWN_WINDOW_S, OwnLoad, cpu_seconds

    own = OwnLoad()
    for t in range(0, 121, 10):  # one core busy for the first minute, idle after
        own.sample(min(t, 60) * 1.0, float(t))
    assert own.cores() == pytest.approx(0.0, abs=0.2)
    again = OwnLoad()
    for t in range(0, 61, 10):
        again.sample(t * 1.5, float(t))
    assert again.cores() == pytest.approx(1.5) and OWN_WINDOW_S == 60.0
    assert cpu_seconds(os.getpid()) > 0 and cpu_seconds(2**30) == 0.0


def test_the_proxy_sends_new_connections_to_the_new_backend_and_closes_idle_ones() -> None:
    import http.client
    import http.server
    import socket
    import threading

    from selfheal_jupyter.localmodel.retune import Proxy

    def backend(name: str) -> http.server.ThreadingHTTPServer:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                body = name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    old, new = backend("old"), backend("new")
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = Proxy(listener, old.server_address[:2])
    threading.Thread(target=proxy.serve, daemon=True).start()
    port = listener.getsockname()[1]
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # a keep-alive client
    kept.request("GET", "/")
    assert kept.getresponse().read() == b"old"
    proxy.target = new.server_address[:2]
    fresh = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    fresh.request("GET", "/")
    assert fresh.getresponse().read() == b"new"
    proxy.close_to(old.server_address[:2])  # the old backend is idle: its pipes go
    with pytest.raises((http.client.HTTPException, OSError)):
        kept.request("GET", "/")
        kept.getresponse().read()
    kept.close()
    again = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # what a client's retry does
    again.request("GET", "/")
    assert again.getresponse().read() == b"new"
    for server in (old, new):
        server.shutdown()
    listener.close()
