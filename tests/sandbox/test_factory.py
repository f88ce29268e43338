"""The factory's loop and shared sandbox on the real engine. (Endpoint resolution:
tests/unit/test_factory.py.)"""

from __future__ import annotations

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import (
    build_loop,
    close_shared_sandboxes,
    shared_sandbox,
)
from selfheal_jupyter.model import Task
from tests.scripted_server import ScriptedServer
from tests.unit import test_factory as unit_factory

# Fixtures shared with the unit lane's tests.
clean_env = unit_factory.clean_env


def test_build_loop_wires_settings_and_runs(sandbox):
    right = "```python\ntotal = 6\n```"
    with ScriptedServer([right]) as s:
        settings = SelfHeal(
            base_url=s.base_url,
            model=s.model,
            max_iterations=3,
            auto_plan=False,
            token_budget=1234,
            time_budget_s=55,
            timeout_s=9,
        )
        loop = build_loop(settings, sandbox=sandbox)
        assert loop.max_iterations == 3 and not loop.auto_plan
        assert loop.budget.token_budget == 1234 and loop.budget.time_budget_s == 55
        assert loop.sandbox_limits.timeout_s == 9
        run = loop.run(Task("set total to 6", tests="assert total == 6"))
        assert run.outcome == "success"
        assert run.model == s.model and run.base_url == s.base_url


@pytest.mark.sandbox
def test_shared_sandbox_is_one_per_image_and_limits():
    settings = SelfHeal(pool_size=1)
    try:
        a = shared_sandbox(settings)
        assert shared_sandbox(SelfHeal(pool_size=1)) is a
        assert a.execute("print(40 + 2)").stdout == "42\n"
    finally:
        close_shared_sandboxes()
