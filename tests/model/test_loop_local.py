"""The loop with the embedded model, resolved by the factory like a user gets it.

Slow (a real model on the CPU). What must hold whatever the model writes: the run
ends in an outcome, every round is recorded with usage and timings, and an easy task
passes.
"""

from __future__ import annotations

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.localmodel import stop_local_endpoint
from selfheal_jupyter.model import Task

pytestmark = pytest.mark.slow


@pytest.fixture()
def local_settings(monkeypatch):
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


def test_embedded_model_repairs_a_name_error(local_settings, sandbox):
    loop = build_loop(local_settings, sandbox=sandbox)
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
