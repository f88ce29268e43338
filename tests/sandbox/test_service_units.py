"""The class service's hint writer on the real sandbox: its tokens count against the
quota. (The service's other parts without a hub: tests/unit/test_service_units.py.)"""

from __future__ import annotations

import json

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import (
    Task,
)
from selfheal_jupyter.service.runs import Request
from selfheal_jupyter.teaching.policy import Policy


def test_the_hint_writer_s_tokens_count_against_the_token_quota(tmp_path, sandbox_image):
    """With ``hint_prose`` every hint asks the model again, and those tokens were not in the
    log: a student past their token quota's worth of hints kept spending the model."""
    import threading

    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Service
    from tests.scripted_server import Reply, ScriptedServer

    mean = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
    fix = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) == 3\n```"
    with ScriptedServer([Reply(fix) for _ in range(12)]) as model:
        settings = SelfHeal(base_url=model.base_url, model="scripted-model", hint_prose=True)
        service = Service(settings, policy=None, log=RunLog(tmp_path / "log.jsonl"))
        service.start()
        try:
            request = Request("hint", Task(prompt="", initial_code=mean), "", {})
            for _ in range(2):
                service.work("ann", request, Policy(mode="hints"), lambda event: None, threading.Event())
        finally:
            service.close()  # its log and its containers
    first, second = (json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines())
    assert second["runs"] == 0 and second.get("hints"), second  # the second hint needed no run: only the writer
    assert second["tokens"] > 0, second


def test_a_plan_s_tokens_count_against_the_token_quota(tmp_path, sandbox_image):
    """``%%agent --plan-only`` through the service asks the model for a plan, and the log
    counted neither a run nor a token of it: a student under a token quota (or a quota of
    runs) could ask for plans without end, each a request to the class's model. In a
    kernel a plan is a run of the agent (``max_runs``); so it is here."""
    import threading

    import pytest

    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Refused, Service
    from selfheal_jupyter.teaching.policy import Quota
    from tests.scripted_server import Reply, ScriptedServer

    with ScriptedServer([Reply("1. Read the list.\n2. Add up its numbers.") for _ in range(3)]) as model:
        settings = SelfHeal(base_url=model.base_url, model="scripted-model")
        service = Service(settings, policy=None, log=RunLog(tmp_path / "log.jsonl"))
        service.start()
        try:
            policy = Policy(mode="full", quota=Quota(tokens=1))
            request = Request("agent", Task(prompt="add up a list of numbers"), "", {"plan_only": True})
            service.admit("ann", policy, request)
            said: list = []
            service.work("ann", request, policy, said.append, threading.Event())
            assert said and type(said[-1]).__name__ == "Finished" and said[-1].run.plan.steps, said
            with pytest.raises(Refused, match="model tokens of today's quota"):
                service.admit("ann", policy, request)
            with pytest.raises(Refused, match="all 1 runs of today's quota"):
                service.admit("ann", Policy(mode="full", quota=Quota(runs=1)), request)
        finally:
            service.close()
    (line,) = (json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines())
    assert line["tokens"] > 0 and line["runs"] == 1 and line["outcome"] == "planned", line


def test_a_student_asking_again_in_a_loop_grows_the_log_by_a_bounded_amount(tmp_path, sandbox_image):
    """Once a cell's run is known, asking for a hint again costs nothing (no run, no hint,
    no token: the answer is a note, "nothing to hint at" or "that was the last hint"), and
    each answer was a log line holding the whole cell: a loop of them (200 KB cells) grew
    the run log, and the instructor's page's copy of it, without end — as refusals once did."""
    import threading

    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import FREE_LOGGED, Service

    cell = "# " + "x" * 10_000 + "\nassert 1 + 1 == 2\n"
    service = Service(SelfHeal(base_url="http://127.0.0.1:9/v1", model="m"), policy=None, log=RunLog(tmp_path / "l"))
    service.start()
    try:
        request = Request("hint", Task(prompt="", initial_code=cell), "", {}, cell_id="c1")
        said: list = []
        for _ in range(FREE_LOGGED + 20):
            service.work("ann", request, Policy(mode="hints"), said.append, threading.Event())
    finally:
        service.close()
    assert said[-1].note and "nothing to hint at" in said[-1].note
    lines = [json.loads(line) for line in (tmp_path / "l").read_text().splitlines()]
    assert lines[0]["runs"] == 1 and len(lines) == FREE_LOGGED + 1, len(lines)


def test_a_run_the_student_stops_while_the_model_writes_counts_the_model_s_tokens(tmp_path, sandbox_image):
    """A student who stops each hint run while the model is writing (Stop, or closing the
    connection) should still pay for what the model read and wrote: under a token quota
    the stopped runs' tokens are the class's model spent all the same."""
    import threading

    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Service
    from tests.scripted_server import Reply, ScriptedServer

    mean = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
    slow = "```python\n" + mean.replace("(len(xs) + 1)", "len(xs)") + "```" + " " * 400
    with ScriptedServer([Reply(slow, chunk_delay_s=0.05) for _ in range(3)]) as model:
        settings = SelfHeal(base_url=model.base_url, model="scripted-model", auto_plan=False)
        service = Service(settings, policy=None, log=RunLog(tmp_path / "log.jsonl"))
        service.start()
        cancel = threading.Event()

        def emit(event) -> None:
            if "attempt" in str(getattr(event, "text", "")):  # the model is writing
                cancel.set()

        try:
            request = Request("hint", Task(prompt="", initial_code=mean), "", {})
            service.work("ann", request, Policy(mode="hints"), emit, cancel)
        finally:
            service.close()
    (line,) = (json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines())
    assert cancel.is_set() and line["tokens"] > 0, line
