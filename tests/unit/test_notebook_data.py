"""No invented data in a heal, the parts that need no sandbox: the context resolved from
a real in-process IPython shell and the checks on a candidate. (End to end:
tests/notebook/test_notebook_data.py.)"""

from __future__ import annotations

import pytest

from selfheal_jupyter.notebook import context
from selfheal_jupyter.notebook.names_read import names_in_task
from selfheal_jupyter.spec import notebook_data
from tests.conftest import selfheal_shell

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


# --------------------------------------------------------------------------- %%agent on the notebook's data
DATA_NOTEBOOK = """
import pandas as pd

df = pd.DataFrame({
    "region": ["north", "south", "north", "east", "south", "east", "north"],
    "month": ["jan", "jan", "feb", "feb", "mar", "mar", "mar"],
    "sales": [120, 80, 95, 60, 130, 75, 110],
    "date": ["2024-01-08", "2024-01-09", "2024-02-05", "2024-02-06", "2024-03-04", "2024-03-05", "2024-03-06"],
})
customers = pd.DataFrame({"customer_id": [101, 102], "name": ["Maria Lopez", "Tom Berg"]})
orders = pd.DataFrame({"customer_id": [102, 101, 102], "amount": [25.0, 40.5, 12.5]})
"""
QUESTION = "For each month in df, print the region with the highest sales."


@pytest.fixture()
def data_shell():
    with selfheal_shell("%config SelfHeal.model = 'scripted-model'", DATA_NOTEBOOK) as ip:
        yield ip


@pytest.mark.parametrize(
    "code, said",
    [
        ("df['date'] = pd.to_datetime(df['date'])\n", ["converts `date`"]),
        ("df['total'] = df['sales'] * 2\n", ["adds `total`"]),
        ("df['sales'] = df['sales'] * 2\n", ["replaces `sales`"]),
        ("df.sort_values('sales', inplace=True)\n", ["`sort_values(inplace=True)`"]),
        ("df.dropna(inplace=True)\n", ["`dropna(inplace=True)`"]),
        ("df = df[df.sales > 90]\n", ["binds it to a new value (`df = df[df.sales > 90]`)"]),
        ("del df['date']\n", ["removes `date`"]),
        ("df.loc[df.sales > 100, 'sales'] = 100\n", ["replaces `sales`"]),
        ("d = df.copy()\nd['weekday'] = 1\n", []),
        ("print(df.groupby('month').sales.sum())\n", []),
        ("def f(df):\n    df['x'] = 1\n", []),  # a function's own parameter, never called here
    ],
    ids=[
        "convert",
        "add",
        "replace",
        "inplace-sort",
        "inplace-dropna",
        "rebind",
        "delete",
        "loc",
        "copy",
        "read",
        "def",
    ],
)
def test_what_an_answer_does_to_a_notebook_value_is_named(data_shell, code, said):
    ctx = context.for_task("df", data_shell.user_ns, max_bytes=1 << 20)
    assert notebook_data.changes(ctx, "", code).get("df", []) == said


def test_a_heal_is_not_blamed_for_what_the_users_cell_already_does(data_shell):
    cell = "df['month_no'] = pd.to_datetime(df['date']).dt.month\nprint(df.month_no.max())\n"
    ctx = context.for_cell(cell, data_shell.user_ns, hidden=data_shell.user_ns_hidden, max_bytes=1 << 20)
    assert notebook_data.changes(ctx, cell, cell.replace(".max()", ".min()")) == {}
    assert notebook_data.changes(ctx, cell, cell + "df['x'] = 0\n") == {"df": ["adds `x`"]}


def test_a_task_names_the_notebook_values_it_is_about(data_shell):
    ns = data_shell.user_ns
    assert names_in_task("Print the total amount each customer spent, by customer name.", ns) == [
        "customers",
        "orders",
    ]
    assert names_in_task(QUESTION, ns) == ["df"]
    assert names_in_task("Print the mean of 1, 2 and 3.", ns) == []
