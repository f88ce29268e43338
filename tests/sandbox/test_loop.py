"""The loop where running code is the subject: a cancel during a run kills the program in
the real Docker sandbox; a missing image is said. (The loop's rounds, feedback and verdicts
on recorded runs: tests/unit/test_loop.py.)"""

from __future__ import annotations

import threading

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import Task
from selfheal_jupyter.sandbox.docker import DockerSandbox
from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_loop import RIGHT, fenced, make_loop, task


@pytest.mark.sandbox
def test_missing_image_is_recorded():
    box = DockerSandbox.from_config(SelfHeal(image="selfheal-no-such-image"))
    try:
        with ScriptedServer([RIGHT]) as s:
            run = make_loop(s, box, auto_plan=False).run(task())
    finally:
        box.close()
    assert run.outcome == "error"
    assert "selfheal sandbox build" in run.error or "image" in run.error.lower()


class EnteredSandbox:
    """The real sandbox, saying when the loop has handed it a program."""

    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox
        self.entered = threading.Event()

    def execute(self, code, **kw):
        self.entered.set()
        return self.sandbox.execute(code, **kw)

    def __getattr__(self, name):
        return getattr(self.sandbox, name)


def test_cancel_during_sandbox_run_stops_the_program(sandbox):
    cancel = threading.Event()
    box = EnteredSandbox(sandbox)
    with ScriptedServer([fenced("import time\ntime.sleep(60)\ntotal = 6")]) as s:
        loop = make_loop(s, box, auto_plan=False)
        result = {}
        worker = threading.Thread(target=lambda: result.update(run=loop.run(task(), cancel=cancel)))
        worker.start()
        assert box.entered.wait(30)
        cancel.set()
        worker.join(120)
    run = result["run"]
    assert run.outcome == "cancelled"
    assert run.iterations[0].result.status == "killed"  # stopped, not the 60 s sleep waited out


@pytest.mark.sandbox
def test_the_spec_note_is_sent_only_for_a_program_with_asserts(sandbox):
    """The note that says the user's asserts are their specification (~80 tokens) goes with
    a repair of a program that has asserts, not with one that has none; it comes before the
    program, so the next round's prompt shares it with this one's cached prefix."""
    from selfheal_jupyter.agents.developer import SPEC_NOTE

    plain = "values = [1, 2, 3]\nprint(sum(values) / len(values[5:]))\n"
    checked = "values = [1, 2, 3]\nmean = sum(values) / len(values[5:])\nassert mean == 2\n"
    fixed = "values = [1, 2, 3]\nmean = sum(values) / len(values)\nassert mean == 2\nprint(mean)\n"
    for given, expected in ((plain, False), (checked, True)):
        with ScriptedServer([Reply(fenced(fixed))]) as server:
            loop = make_loop(server, sandbox, quick_fixes=False, auto_plan=False)
            run = loop.run(Task(prompt="Make this code run.", initial_code=given))
            (request,) = server.chat_requests()
        assert run.outcome == "success"
        prompt = request["messages"][1]["content"]
        assert (SPEC_NOTE in prompt) is expected, given
    # before the program, with what stays the same in every round (the server's prompt cache)
    assert prompt.index(SPEC_NOTE) < prompt.index("The current program")
