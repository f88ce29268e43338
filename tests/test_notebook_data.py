"""No invented data in a heal: a candidate may not feed or replace the notebook's values
with data of its own; a notebook definition it changes is shown as a change to that cell.

The context is resolved from a real in-process IPython shell; the end-to-end heal runs
through the real openai client, the scripted server and the real sandbox.
"""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from selfheal_jupyter.notebook import context
from selfheal_jupyter.spec import notebook_data
from tests.conftest import selfheal_shell
from tests.scripted_server import Reply, ScriptedServer

NOTEBOOK = """
import pandas as pd

class RunningStats:
    def __init__(self):
        self.values = []

    def add(self, x):
        self.values.append(x)

    def mean(self):
        return sum(self.values) / len(self.values)

    @property
    def n(self):
        return len(self.values)

stats = RunningStats()
for reading in [3, 5, 7]:
    stats.add(reading)

sales = pd.DataFrame({"month": ["2024-01-05", "2024-02-11", "2024-02-20"], "amount": [50, 30, 20]})

def pct(part, whole):
    return part / whole * 10
"""

CELL = """print("n =", stats.n)
print("mean =", stats.mean())
share = pct(sales.amount.iloc[0], sales.amount.sum())
print(f"share {share:.0f}%")
assert share == 50
"""
FIXED_PCT = "def pct(part, whole):\n    return part / whole * 100\n\n\n"


@pytest.fixture()
def shell():
    with selfheal_shell("%config SelfHeal.model = 'scripted-model'", NOTEBOOK) as ip:
        yield ip


def rules(ctx, candidate: str) -> list[str]:
    return [v.rule for v in notebook_data.check(ctx, CELL, candidate)]


@pytest.mark.parametrize(
    "added, rule",
    [
        ("stats.add(1)\nstats.add(6)\n", "data_added"),
        ("for v in range(6):\n    stats.add(v)\n", "data_added"),
        ("stats.values.extend([1, 2, 3])\n", "data_added"),
        ('sales.loc[len(sales)] = ["2024-03-01", 10]\n', "data_added"),
        ('sales = pd.DataFrame({"month": ["2024-01"], "amount": [100]})\n', "data_replaced"),
        ("sales = pd.concat([sales, pd.DataFrame({'amount': [10]})])\n", "data_replaced"),
        ("stats = RunningStats()\n", None),  # a fresh empty object: not data (reported by the run)
        ("sales = sales.dropna()\n", None),
        ('sales["m"] = pd.to_datetime(sales["month"]).dt.month\n', None),
        ("values = list(stats.values)\nvalues.append(4)\n", None),  # the candidate's own list
    ],
    ids=[
        "add-literals",
        "add-in-a-loop",
        "extend-attribute",
        "loc-row",
        "replace-frame",
        "concat-made-up",
        "fresh-object",
        "derived",
        "new-column",
        "own-copy",
    ],
)
def test_made_up_data_fed_to_or_replacing_a_notebook_value_is_refused(shell, added, rule):
    ctx = context.for_cell(CELL, shell.user_ns, hidden=shell.user_ns_hidden, max_bytes=1 << 20)
    assert {e.name: e.kind for e in ctx.entries}["stats"] == "value"
    found = rules(ctx, added + CELL)
    assert found == ([rule] if rule else []), found


def test_what_the_users_cell_itself_does_is_theirs(shell):
    cell = "stats.add(4)\n" + CELL
    ctx = context.for_cell(cell, shell.user_ns, hidden=shell.user_ns_hidden, max_bytes=1 << 20)
    assert notebook_data.check(ctx, cell, cell.replace("* 10", "* 100")) == []


def test_a_changed_notebook_definition_is_named_an_identical_copy_is_not(shell):
    ctx = context.for_cell(CELL, shell.user_ns, hidden=shell.user_ns_hidden, max_bytes=1 << 20)
    assert notebook_data.redefined(ctx, CELL, FIXED_PCT + CELL) == ["pct"]
    same = "def pct(part, whole):\n    return part / whole * 10\n\n\n"
    assert notebook_data.redefined(ctx, CELL, same + CELL) == []
    assert notebook_data.redefined(ctx, FIXED_PCT + CELL, FIXED_PCT + CELL) == []


@pytest.mark.sandbox
def test_a_heal_that_invents_data_is_rejected_and_a_fix_in_a_notebook_function_is_shown(shell):
    invented = (
        "```python\nstats.add(1)\nstats.add(6)\n"
        + CELL.replace(
            "share = pct(sales.amount.iloc[0], sales.amount.sum())",
            "share = pct(sales.amount.iloc[0], sales.amount.sum()) * 10",
        )
        + "```"
    )
    fixed = f"```python\n{FIXED_PCT}{CELL}```"
    with ScriptedServer([Reply(invented), Reply(fixed, match="RULE data_added")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        with capture_output() as cap:
            result = shell.run_cell("%%heal --max-iterations 2\n" + CELL, store_history=True)
        assert result.success, cap.stderr
        repair = server.requests[1]["messages"][1]["content"]
    run = shell.user_ns["agent_result"]
    zero, first, second = run.iterations
    assert zero.result.error.type == "AssertionError"
    # it ran cleanly and its asserts held: only the data rule stands between it and success
    assert first.result.status == "ok" and first.result.error is None
    assert [v.rule for v in first.verdict.spec_violations] == ["data_added"]
    assert "`stats.add(1)` adds made-up data to `stats`" in first.feedback
    assert "Do not add values to the user's notebook data" in repair
    assert run.outcome == "success" and second.verdict.notebook_changes == ["pct"]
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    assert "Also changes `pct`, defined in another cell" in html
    assert "pct (your notebook)" in html and "return part / whole * 100" in html
    assert shell.user_ns["stats"].n == 3  # the kernel's object is untouched
