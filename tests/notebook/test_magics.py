"""The magics' runs in a plain in-process shell, end to end: the scripted server through
the real ``openai`` client and the real Docker sandbox. (Parsing and user errors:
tests/unit/test_magics.py.)"""

from __future__ import annotations

import pytest

from tests.unit import test_magics as unit_magics
from tests.unit.test_magics import run, user_names

# Fixtures shared with the unit lane's tests.
shell = unit_magics.shell


@pytest.mark.sandbox
def test_a_run_in_a_plain_shell_renders_inline_and_records_only_agent_result(shell):
    """No kernel here: the synchronous path with the static renderer, end to end."""
    from tests.scripted_server import Reply, ScriptedServer

    buggy = "```python\ntotal = sum(nums)\nprint('total', total.value)\n```"  # no edit the tool could try
    fixed = "```python\ntotal = sum(nums)\nprint('total', total)\n```"
    replies = [Reply("1. Sum nums.\n2. Print the total."), Reply(buggy), Reply(fixed, match="value")]
    with ScriptedServer(replies) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("nums = [1, 2, 3]\nchecks = 'assert total == 6'", store_history=True)
        before = user_names(shell)
        result, cap = run(shell, "%%agent --inputs nums --tests checks --max-iterations 3\nPrint the total of {nums}.")
        assert result.success, cap.stderr
        assert server.remaining == 0
        assert user_names(shell) - before == {"agent_result"}
        record = shell.user_ns["agent_result"]
        assert shell.user_ns["_"] is record
        assert record.task.prompt == "Print the total of [1, 2, 3]."
        assert record.outcome == "success" and len(record.iterations) == 2
        html = "".join(o.data.get("text/html", "") for o in cap.outputs)
        assert 'class="selfheal-plan"' in html and "AttributeError" in html and 'data-outcome="success"' in html
        text = "".join(o.data.get("text/plain", "") for o in cap.outputs)
        assert "✔ Done — verified by your tests · 2 attempts" in text


@pytest.mark.sandbox
def test_a_failed_run_in_a_plain_shell_names_its_best_attempt_and_hands_nothing_over(shell):
    from tests.scripted_server import Reply, ScriptedServer

    with ScriptedServer([Reply("```python\ntotal = 5\n```")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("checks = 'assert total > 0\\nassert total == 6'", store_history=True)
        before = user_names(shell)
        result, cap = run(shell, "%%agent --no-plan --tests checks --max-iterations 1\nSet total to six.")
        assert result.success, cap.stderr
        assert user_names(shell) - before == {"agent_result"}  # the failed program was not run here
        assert shell.user_ns["agent_result"].best_attempt.candidate.code.strip() == "total = 5"
        text = "".join(o.data.get("text/plain", "") for o in cap.outputs)
        assert "attempt 1, is in agent_result.best_attempt.candidate.code" in text
        assert not shell.payload_manager.read_payload()  # no set_next_input of a failed program


@pytest.mark.sandbox
def test_plan_only_then_plan_in_a_plain_shell(shell):
    from tests.scripted_server import Reply, ScriptedServer

    code = "```python\nprint('hi there')\n```"
    with ScriptedServer([Reply("1. Greet.\n2. Stop."), Reply(code)]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        before = user_names(shell)
        result, cap = run(shell, "%%agent --plan-only steps\nSay hi.")
        assert result.success, cap.stderr
        assert user_names(shell) - before == {"steps"}
        assert shell.user_ns["steps"] == ["Greet.", "Stop."]
        assert "Plan (stored in steps)" in "".join(o.data.get("text/plain", "") for o in cap.outputs)
        shell.user_ns["steps"][1] = "Print hi there."
        result, cap = run(shell, "%%agent --plan steps\nSay hi.")
        assert result.success, cap.stderr
        record = shell.user_ns["agent_result"]
        assert record.plan.steps == ["Greet.", "Print hi there."] and record.plan.source == "user"
        assert record.outcome == "success"
        # the planner was asked once (for --plan-only); the given plan was used as is
        assert len(server.chat_requests()) == 2


@pytest.mark.sandbox
def test_a_stated_expectation_is_checked_and_says_it_verified_the_heal(shell):
    """``%%heal the total should be 42``: a fix that runs but gives 30 is no success."""
    from tests.scripted_server import Reply, ScriptedServer

    cell = "total = sum(prices[1:])\nprint('total', total)\n"
    runs_but_wrong = "```python\ntotal = sum(prices[:2])\nprint('total', total)\n```"
    right = "```python\ntotal = sum(prices)\nprint('total', total)\n```"
    with ScriptedServer([Reply(runs_but_wrong), Reply(right, match="you said total should be 42")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("prices = [10, 20, 12]", store_history=True)
        result, cap = run(shell, "%%heal --max-iterations 2 the total should be 42\n" + cell)
        assert result.success, cap.stderr
        first_prompt = server.requests[0]["messages"][1]["content"]
    record = shell.user_ns["agent_result"]
    assert record.task.stated == ["assert total == 42, 'you said total should be 42; it is ' + repr(total)"]
    assert "assert total == 42" in first_prompt
    zero, first, second = record.iterations
    assert not zero.verdict.passed and not first.verdict.passed  # 32, then 30: both run
    assert first.result.status == "ok" and first.verdict.tests_failed == 1
    assert record.outcome == "success" and "sum(prices)" in record.final_code
    assert record.verified and record.verified_by == ["your stated expectation"]
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    assert "verified by your stated expectation" in html
