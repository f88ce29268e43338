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
INVENTED = """```python
import pandas as pd

def best_regions(df):
    for month, group in df.groupby("month"):
        print(month, group.loc[group["sales"].idxmax(), "region"])

# Example usage
df = pd.DataFrame({"region": ["A", "B", "C"], "month": ["Jan", "Jan", "Feb"], "sales": [10, 20, 30]})
best_regions(df)
```"""
ANSWER = """```python
best = df.loc[df.groupby("month", sort=False)["sales"].idxmax()]
for _, row in best.iterrows():
    print(row["month"], row["region"])
```"""
IN_PLACE = """```python
import pandas as pd

df["date"] = pd.to_datetime(df["date"])
df["weekday"] = df["date"].dt.day_name()
print(df.groupby("weekday").size())
```"""


@pytest.fixture()
def data_shell():
    with selfheal_shell("%config SelfHeal.model = 'scripted-model'", DATA_NOTEBOOK) as ip:
        yield ip


def agent(shell, server, task: str, flags: str = "--no-plan --max-iterations 2"):
    shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
    with capture_output() as cap:
        result = shell.run_cell(f"%%agent {flags}\n{task}", store_history=True)
    assert result.success, cap.stderr
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    return shell.user_ns["agent_result"], html


@pytest.mark.sandbox
def test_an_agent_answer_that_invents_the_notebooks_data_is_rejected(data_shell):
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # what the model is told is the subject
    before = data_shell.user_ns["df"].copy()
    with ScriptedServer([Reply(INVENTED), Reply(ANSWER, match="RULE data_replaced")]) as server:
        run, html = agent(data_shell, server, QUESTION)
        repair = server.requests[1]["messages"][1]["content"]
    first, second = run.iterations
    assert first.result.status == "ok"  # it ran, on its own made-up frame...
    assert [v.rule for v in first.verdict.spec_violations] == ["data_replaced"]  # ...and is rejected
    assert "replaces `df`" in first.feedback and "does not work on the user's notebook data" in repair
    assert "Rejected: it does not use your data as it is" in html
    assert (
        run.outcome == "success"
        and second.verdict.passed
        and second.result.stdout.split() == [*("jan", "north", "feb", "north", "mar", "south")]
    )
    # what the user takes, run in their kernel, leaves their data alone and names regions
    data_shell.run_cell(run.fix.code)
    assert data_shell.user_ns["df"].equals(before)


ROW_NUMBERS = """```python
print(df.groupby("month")["sales"].idxmax().reset_index())
```"""


@pytest.mark.sandbox
def test_an_answer_that_prints_row_numbers_for_the_data_is_no_success(data_shell):
    """The shape of the CI failure of stop 42: the embedded model printed each month's row
    number for its region, and the run ended "success" (a soft check). Checks from the
    user's data hold the verdict: the next round is asked, told which check failed."""
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # what the model is told is the subject
    with ScriptedServer([Reply(ROW_NUMBERS), Reply(ANSWER, match="FROM THE USER'S DATA")]) as server:
        run, html = agent(data_shell, server, QUESTION)
        repair = server.requests[1]["messages"][1]["content"]
    first, second = run.iterations
    assert first.result.status == "ok" and not first.verdict.passed and first.verdict.held == "data_checks"
    assert "north" not in repair and "expected lines are not printed" in repair  # never the values
    assert run.outcome == "success" and run.verified_by == ["checks from your data"]
    with ScriptedServer([Reply(ROW_NUMBERS), Reply(ROW_NUMBERS)]) as server:
        run, html = agent(data_shell, server, QUESTION)
    assert run.outcome != "success" and run.fix is None


@pytest.mark.sandbox
def test_the_tools_own_program_answers_the_question_before_the_model(data_shell):
    """Issue 40: the embedded model answers 02's question with ``idxmax``'s row labels or
    the wrong grouping, round after round. The check from the data knows the question's
    shape and the tool's own program for it passes that check, so (issue 46: no request
    whose answer the tool already has) it runs first, judged by the same check, and the
    model is never asked; it reads the user's frame and changes none of it."""
    before = data_shell.user_ns["df"].copy()
    with ScriptedServer([]) as server:  # no reply: a request would fail the run
        run, html = agent(data_shell, server, QUESTION, flags="--max-iterations 1")
        assert server.chat_requests() == []
    (tool,) = run.iterations
    assert tool.index == 1 and tool.quick_fix and tool.answer and tool.usage.total_tokens == 0
    assert run.outcome == "success" and run.verified_by == ["checks from your data"] and run.plan.steps == []
    assert tool.result.stdout.split() == ["jan:", "north", "feb:", "north", "mar:", "south"]
    assert "The tool&#x27;s own program for your question" in html or "The tool's own program for your question" in html
    assert "each `month` of `df` with the `region` of highest `sales`" in tool.candidate.reply
    data_shell.run_cell(run.fix.code)  # what the user takes, run in their kernel
    assert data_shell.user_ns["df"].equals(before)


@pytest.mark.sandbox
def test_with_the_tools_own_edits_off_the_model_answers_and_no_tool_program_follows(data_shell):
    """``SelfHeal.quick_fixes = False``: the model answers, and its refused answer (made-up
    data in place of `df`) is not followed by the tool's program either."""
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")
    with ScriptedServer([Reply(INVENTED)]) as server:
        run, _ = agent(data_shell, server, QUESTION, flags="--no-plan --max-iterations 1")
        assert len(server.chat_requests()) == 1
    assert [v.rule for v in run.iterations[0].verdict.spec_violations] == ["data_replaced"]
    assert [it.answer for it in run.iterations] == [False] and run.outcome != "success"


RIGHT_BEST_TOTAL = """```python
totals = df.groupby(["month", "region"], sort=False)["sales"].sum()
for month, best in totals.groupby(level="month", sort=False).idxmax().items():
    print(month, best[1])
```"""


@pytest.mark.sandbox
def test_a_question_the_check_would_misread_is_no_tool_answer(data_shell):
    """Red team of the tool's own program: "which region had the highest total sales in
    each month" was read as each month's total. The model's right answer was refused and
    the tool's program printed the monthly totals, "verified by checks from your data"."""
    question = "Which region had the highest total sales in each month in df?"
    with ScriptedServer([Reply(RIGHT_BEST_TOTAL)]) as server:
        run, html = agent(data_shell, server, question, flags="--no-plan --max-iterations 1")
    (only,) = run.iterations
    assert not only.answer and only.result.stdout.split() == ["jan", "north", "feb", "north", "mar", "south"]
    assert run.outcome == "success" and "checks from your data" not in run.verified_by
    assert "The tool's own program" not in html and "The tool&#x27;s own program" not in html


@pytest.mark.sandbox
def test_no_tool_answer_for_a_question_that_asks_more_than_it_prints(data_shell):
    """Red team of the tool's own program: after a refused answer it printed each month's
    region alone, "verified by checks from your data", for a question that also asks how
    much that region sold."""
    question = "For each month in df, print the region with the highest sales, and how much it sold."
    with ScriptedServer([Reply(ROW_NUMBERS)]) as server:
        run, html = agent(data_shell, server, question, flags="--no-plan --max-iterations 1")
    assert [it.answer for it in run.iterations] == [False]
    assert run.outcome != "success" and run.fix is None


@pytest.mark.sandbox
def test_an_agent_answer_from_a_table_of_its_own_is_rejected(data_shell):
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # what the model is told is the subject
    own = '```python\nspending = {"Alice": 10.0, "Bob": 5.0}\nfor name, total in spending.items():\n    print(name, total)\n```'
    right = (
        "```python\ntotals = orders.merge(customers, on='customer_id').groupby('name')['amount'].sum()\n"
        "for name, total in totals.items():\n    print(name, total)\n```"
    )
    with ScriptedServer([Reply(own), Reply(right, match="RULE data_ignored")]) as server:
        run, _ = agent(data_shell, server, "Print the total amount each customer spent, by customer name.")
    assert {e.name for e in run.task.context.entries if e.kind == "value"} == {"customers", "orders"}
    first, second = run.iterations
    assert [v.rule for v in first.verdict.spec_violations] == ["data_ignored"]
    assert "never reads it" in first.verdict.spec_violations[0].message
    assert run.outcome == "success" and "Maria Lopez 40.5" in second.result.stdout


@pytest.mark.sandbox
def test_an_agent_answer_that_changes_the_data_in_place_says_so_in_the_review(data_shell):
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # the model's answer is the subject
    with ScriptedServer([Reply(IN_PLACE)]) as server:
        run, html = agent(data_shell, server, "Count the rows of df per weekday of its date column.")
    assert run.outcome == "success"
    assert "Changes your `df`: converts `date`, adds `weekday`." in html
    assert "Running this code in your kernel changes it there" in html
    assert "weekday" not in data_shell.user_ns["df"].columns  # the run worked on a copy


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
    assert context.names_in_task("Print the total amount each customer spent, by customer name.", ns) == [
        "customers",
        "orders",
    ]
    assert context.names_in_task(QUESTION, ns) == ["df"]
    assert context.names_in_task("Print the mean of 1, 2 and 3.", ns) == []


WHOLE_FRAME = "```python\nprint(df)\n```"


@pytest.mark.sandbox
def test_printing_the_whole_frame_is_no_verified_answer(data_shell):
    """Every month's winner has a row of its own in the frame: before a line had to answer
    for one group with one answer, ``print(df)`` was "verified by checks from your data".
    The next round is told to print one line per group (never the values) and that a check
    from the data is not one to argue with."""
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # what the model is told is the subject
    before = data_shell.user_ns["df"].copy()
    with ScriptedServer([Reply(WHOLE_FRAME), Reply(ANSWER, match="FROM THE USER'S DATA")]) as server:
        run, _ = agent(data_shell, server, QUESTION)
        requests = [m["content"] for r in server.requests for m in r["messages"]]
    first, second = run.iterations
    assert first.result.status == "ok" and first.verdict.held == "data_checks" and not first.verdict.verified_by
    repair = requests[-1]
    assert "one line per group" in repair and "with another answer too" in repair
    assert "computed from the user's own values: fix the program" in repair
    assert "FROM YOUR DATA (what each group should show, computed from the user's data) may be wrong" not in repair
    assert run.outcome == "success" and run.verified_by == ["checks from your data"]
    for text in requests:  # the expected answers stay on the host
        assert not any(pair in text.casefold() for pair in ("jan north", "feb north", "mar south"))
    assert data_shell.user_ns["df"].equals(before)


COUNTS_TABLE = """```python
counts = orders.merge(customers, on="customer_id").groupby("name", as_index=False).size()
print(counts)
```"""


@pytest.mark.sandbox
def test_a_right_answer_printed_as_a_pandas_table_is_verified(data_shell):
    """The table's row labels (0, 1) are counts too: they are read as labels, not as a
    second answer beside each customer's count."""
    data_shell.run_cell("%config SelfHeal.quick_fixes = False")  # the model's answer is the subject
    with ScriptedServer([Reply(COUNTS_TABLE)]) as server:
        run, _ = agent(data_shell, server, "How many orders did each customer place? Print each name and the count.")
    (only,) = run.iterations
    assert "1     Tom Berg     2" in only.result.stdout
    assert run.outcome == "success" and run.verified_by == ["checks from your data"]
