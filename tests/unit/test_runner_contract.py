"""Where a run happens (:mod:`selfheal_jupyter.runner`): the choice in one place, and each
operation written once, waited for blocking or awaited. No engine, model or hub."""

from __future__ import annotations

import asyncio

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import Cancelled, ServiceError
from selfheal_jupyter.runner import AWAITING, BLOCKING, Pump, run_sync, runner_for
from selfheal_jupyter.runner.local import LocalRunner
from selfheal_jupyter.runner.service import ServiceRunner, error_of
from selfheal_jupyter.service_client import wire
from selfheal_jupyter.teaching.policy import PolicyBlocked

URL = "http://127.0.0.1:9/services/selfheal/"


def test_the_class_service_runs_it_when_its_url_is_set_else_the_loop_here(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "token")
    assert isinstance(runner_for(SelfHeal(service_url=URL)), ServiceRunner)
    here = runner_for(SelfHeal(service_url=""))
    assert isinstance(here, LocalRunner) and here._loop is None  # nothing started before start()
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    with pytest.raises(ServiceError, match="JUPYTERHUB_API_TOKEN"):
        runner_for(SelfHeal(service_url=URL))


def test_a_request_the_service_ended_without_a_record_is_the_same_error_as_here():
    assert isinstance(error_of(wire.Failed("Stopped.", kind="cancelled")), Cancelled)
    assert isinstance(error_of(wire.Failed("No runs left.", kind="quota")), PolicyBlocked)
    assert isinstance(error_of(wire.Failed("The engine is down.")), ServiceError)


def test_an_operation_written_once_runs_blocking_or_awaited_with_the_same_events():
    seen: list[object] = []

    def work(emit, cancel):
        emit("working")
        return 41 + cancel.is_set()

    async def operation(wait):
        return await wait(Pump(work, seen.append)) + 1

    assert run_sync(operation(BLOCKING)) == 42
    assert asyncio.run(operation(AWAITING)) == 42
    assert seen == ["working", "working"]


def test_the_blocking_adapter_refuses_an_operation_that_suspends():
    async def suspends():
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="suspended"):
        run_sync(suspends())
