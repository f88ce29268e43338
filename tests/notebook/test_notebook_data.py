"""No invented data in a heal: a candidate may not feed or replace the notebook's values
with data of its own; a notebook definition it changes is shown as a change to that cell.

The context is resolved from a real in-process IPython shell; the end-to-end heal runs
through the real openai client, the scripted server and the real sandbox.
"""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from tests.scripted_server import Reply, ScriptedServer
from tests.unit import test_notebook_data as unit_notebook_data
from tests.unit.test_notebook_data import CELL, FIXED_PCT, QUESTION

# Fixtures shared with the unit lane's tests.
data_shell = unit_notebook_data.data_shell
shell = unit_notebook_data.shell


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
