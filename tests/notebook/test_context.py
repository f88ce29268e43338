"""The notebook context end to end: ``%%heal`` and ``%%agent`` in an in-process shell get
the names a cell needs, through the real ``openai`` client against the scripted server
and the real Docker sandbox. (Resolution alone: tests/unit/test_context.py.)"""

from __future__ import annotations

import json

import pytest
from IPython.utils.capture import capture_output

from tests.unit.test_context import HEAL_CELL, NOTEBOOK

FIXED_CELL = HEAL_CELL.replace("regionn", "region")


# ---------------------------------------------------------------- end to end
def _heal(shell, server_replies, cell, setup):
    from tests.scripted_server import ScriptedServer

    server = ScriptedServer(server_replies)
    server.start()
    try:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("%config SelfHeal.max_iterations = 2", store_history=False)
        # what the model is told is the subject: the tool's own edit of a misspelt column
        # (quick fixes) would fix the cell before the model is asked
        shell.run_cell("%config SelfHeal.quick_fixes = False", store_history=False)
        shell.run_cell(setup, store_history=True)
        before = set(shell.run_line_magic("who_ls", ""))
        with capture_output() as cap:
            result = shell.run_cell(cell, store_history=True)
        return result, cap, before, server
    finally:
        server.stop()


@pytest.mark.sandbox
def test_heal_repairs_a_cell_that_uses_the_notebook(shell):
    from tests.scripted_server import Reply

    fixed = f"```python\n{FIXED_CELL}```"
    result, cap, before, server = _heal(shell, [Reply(fixed, match="regionn")], "%%heal\n" + HEAL_CELL, NOTEBOOK)
    assert result.success, cap.stderr
    run = shell.user_ns["agent_result"]
    first = run.iterations[0]
    # iteration 0 is the user's own error, not a NameError of a cell without its notebook
    assert first.result.error.type == "KeyError" and "regionn" in first.result.error.message
    assert first.result.error.line == 1
    assert run.outcome == "success"
    assert run.iterations[-1].result.stdout.split() == ["81", "4.0", "3.0", "105"]
    assert run.final_code == FIXED_CELL  # the prelude is not part of the candidate
    assert "import numpy" not in run.final_code
    # the model saw the context (types, no values) and was told not to redefine it
    prompt = json.dumps(server.chat_requests()[-1]["messages"])
    assert "`df`: pandas.DataFrame" in prompt and "never replace them" in prompt
    assert "north" not in prompt.split("What happened")[0].split("current program")[0]
    # the panel's static record lists what came from the notebook
    text = "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "from your notebook: df (DataFrame 3×2)" in text and "acct (Account)" in text
    # copies only: the candidate deposited 5 in its copy; the kernel's acct is as it was
    assert shell.user_ns["acct"].balance == 100
    assert set(shell.run_line_magic("who_ls", "")) - before == {"agent_result"}
    assert json.dumps(run.task.to_dict())  # the record names the context, without values


@pytest.mark.sandbox
def test_heal_with_a_hint_repairs_a_cell_that_runs_but_is_wrong(shell):
    """`%%heal the total should include tax`: the cell runs, so only the hint says it is
    wrong; the loop repairs it instead of handing the cell back as "success"."""
    from tests.scripted_server import Reply

    cell = "total = acct.balance\nprint(total)\n"
    fixed = "total = acct.balance * 1.2\nprint(total)\n"
    result, cap, _, server = _heal(
        shell, [Reply(f"```python\n{fixed}```")], "%%heal the total should include 20% tax\n" + cell, NOTEBOOK
    )
    assert result.success, cap.stderr
    run = shell.user_ns["agent_result"]
    assert run.task.given_is_wrong
    assert run.iterations[0].result.status == "ok" and not run.iterations[0].verdict.passed
    assert "include 20% tax" in json.dumps(server.chat_requests()[0]["messages"])
    assert run.outcome == "success" and run.final_code == fixed
    assert run.iterations[-1].result.stdout.strip() == "120.0"


@pytest.mark.sandbox
def test_a_failure_inside_a_notebook_function_is_shown_in_that_function(shell):
    from tests.scripted_server import Reply

    cell = "print(helper(None) + 1)\n"
    fixed = "```python\nprint(helper(3) + 1)\n```"
    result, cap, _, _ = _heal(shell, [Reply(fixed)], "%%heal\n" + cell, NOTEBOOK)
    assert result.success, cap.stderr
    error = shell.user_ns["agent_result"].iterations[0].result.error
    assert error.type == "TypeError" and error.line == 1
    assert [(f.file, f.function) for f in error.frames] == [("candidate.py", "<module>"), ("<notebook>", "helper")]
    assert error.frames[-1].source == "return x * RATE"
    assert shell.user_ns["agent_result"].outcome == "success"


@pytest.mark.sandbox
def test_agent_gets_the_type_and_columns_of_df_and_runs_on_the_real_df(shell):
    from tests.scripted_server import Reply

    code = "```python\nprint(len(df))\n```"
    result, cap, before, server = _heal(
        shell,
        [Reply("1. Count the rows of df.\n2. Print it."), Reply(code)],
        "%%agent\nprint how many rows df has",
        NOTEBOOK,
    )
    assert result.success, cap.stderr
    run = shell.user_ns["agent_result"]
    assert run.outcome == "success" and run.iterations[-1].result.stdout.strip() == "3"
    for request in server.chat_requests():
        prompt = json.dumps(request["messages"], ensure_ascii=False)
        assert "3 rows × 2 columns (region: " in prompt
        assert "north" not in prompt and "south" not in prompt
    assert set(shell.run_line_magic("who_ls", "")) - before == {"agent_result"}


@pytest.mark.sandbox
def test_a_cell_reading_a_generator_gets_one_line_naming_it(shell):
    from tests.scripted_server import Reply

    fixed = "```python\nprint(sum([1, 2]))\n```"
    result, cap, _, server = _heal(shell, [Reply(fixed)], "%%heal\nprint(sum(gen))\n", "gen = (i for i in range(3))")
    assert result.success, cap.stderr
    text = "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert sum(line.startswith("not sent: gen (generator)") for line in text.splitlines()) == 1
    prompt = json.dumps(server.chat_requests()[0]["messages"])
    assert "NOT available" in prompt and "`gen` (generator)" in prompt
    assert next(shell.user_ns["gen"]) == 0  # the kernel's generator was not consumed


@pytest.mark.sandbox
def test_values_are_pickled_once_per_run_not_once_per_iteration(shell):
    from tests.scripted_server import Reply

    setup = (
        "pickled = []\n"
        "class Box:\n"
        "    def __init__(self, v):\n"
        "        self.v = v\n"
        "    def __reduce__(self):\n"
        "        pickled.append(1)\n"
        "        return (Box, (self.v,))\n"
        "box = Box(4)\n"
    )
    still_broken = "```python\nprint(box.w)\n```"
    fixed = "```python\nprint(box.v)\n```"
    result, cap, _, _ = _heal(shell, [Reply(still_broken), Reply(fixed)], "%%heal\nprint(box.value)\n", setup)
    assert result.success, cap.stderr
    run = shell.user_ns["agent_result"]
    assert len(run.iterations) == 3 and run.outcome == "success"
    assert run.iterations[-1].result.stdout.strip() == "4"
    assert shell.user_ns["pickled"] == [1]
