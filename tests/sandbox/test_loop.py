"""The loop where running code is the subject: a cancel during a run kills the program in
the real Docker sandbox; a missing image is said. (The loop's rounds, feedback and verdicts
on recorded runs: tests/unit/test_loop.py.)"""

from __future__ import annotations

import threading

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.sandbox.docker import DockerSandbox
from tests.scripted_server import ScriptedServer
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
