"""The instant explanation from the notebook's context alone, without a sandbox run.
(Failures run in the real sandbox and the heal's quick edit: tests/notebook.)"""

from __future__ import annotations

import linecache
import sys
import types
from collections.abc import Iterator

import pytest

from selfheal_jupyter.agents.inputs import format_context
from selfheal_jupyter.diagnosis import close_name, explain
from selfheal_jupyter.notebook import context

SALES_NOTEBOOK = """
import numpy as np
import pandas as pd

sales = pd.DataFrame({
    "region": ["north", "south", "north", "east"],
    "date": ["2024-01-03", "2024-01-17", "2024-02-02", "2024-03-05"],
    "price": ["3.50", "4.25", "2.00", "5.75"],
    "units": [3, 1, 4, 2],
})
weights = np.array([0.2, 0.3, 0.5])
marks = np.array([7.0, 8.0, 6.5, 9.0])
"""
"""A frame with a text date and a text price, two arrays: what the explanations read."""

NOTEBOOK = (
    SALES_NOTEBOOK
    + """

class Account:
    def __init__(self):
        self.balance = 0

    def deposit(self, amount):
        self.balance += amount


acct = Account()
total_units = 10
managers = pd.DataFrame({"region_name": ["north", "south", "east"], "manager": ["Ann", "Bo", "Cy"]})
units_csv = "day,units\\nmon,3\\ntue,n/a\\nwed,4"
"""
)


@pytest.fixture(scope="module")
def notebook() -> Iterator[dict]:
    """The notebook's namespace, its module standing as ``__main__`` (a kernel's cells)."""
    module = types.ModuleType("__main__")
    filename = "<notebook test_diagnosis>"
    linecache.cache[filename] = (len(NOTEBOOK), None, NOTEBOOK.splitlines(True), filename)
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module
    try:
        exec(compile(NOTEBOOK, filename, "exec"), module.__dict__)
        yield module.__dict__
    finally:
        sys.modules["__main__"] = saved


def test_a_misspelt_notebook_name_travels_with_the_cell(notebook):
    ctx = context.for_cell("print(total_unit * 2)\n", notebook, max_bytes=1 << 20)
    assert {e.name: e.kind for e in ctx.entries} == {"total_unit": "unavailable", "total_units": "value"}


def test_close_names_are_close():
    assert close_name("Region", ["region", "sales"]) == "region"
    assert close_name("unit_price", ["unitprice", "units"]) == "unitprice"
    assert close_name("colour", ["color", "size"]) == "color"
    assert close_name("revenue", ["region", "date"]) is None
    assert close_name("x", ["y"]) is None


def test_columns_travel_with_dtypes_and_kinds_of_values_never_values(notebook):
    ctx = context.for_task("the units of sales", notebook, max_bytes=1 << 20)
    text = format_context(ctx)
    assert "region: str" in text and "date: str (dates as text)" in text and "units: int64" in text
    assert "price: str (numbers as text)" in text
    for value in ("north", "2024-01-03", "3.50"):
        assert value not in text


def test_a_misspelt_name_is_renamed_in_the_smallest_expression_its_line_holds_once():
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    def edits(code: str, name: str, line: int) -> list[tuple[str, str]]:
        error = ErrorInfo(type="NameError", message=f"name '{name}' is not defined", line=line)
        found = explain(ExecutionResult(status="error", error=error), code, None)
        return [(e.old, e.new) for e in found.edits]

    # `value` is also a part of `values` on its line: the call around it is the edit's text
    assert edits("values = [1, 2]\nmean = sum(values) / len(value)\n", "value", 2) == [("len(value)", "len(values)")]
    # a line of a longer statement, which does not parse alone: the name, where it is once
    assert edits("values = [1, 2]\nmean = (sum(values) /\n    len(valu))\n", "valu", 3) == [("valu", "values")]
    # read twice on the line: which to change is not one edit's
    assert edits("values = [1, 2]\nmean = sum(value) / len(value)\n", "value", 2) == []


MERGE = 'merged = students.merge(grades, on="id")\n'
CLOSE = 'print(sales["population_milions_total"].sum())\n'
MERGE_PAYLOAD = 'x") or __import__("os").system("touch /tmp/owned") or ("_id'
CLOSE_PAYLOAD = 'population_millions_total"+run()+"'


@pytest.mark.parametrize(
    "code, key, columns, edited",
    [
        (MERGE, "id", {"students": ["id", "name"], "grades": ["student_id", "grade"]}, True),
        (MERGE, "id", {"students": ["id", "name"], "grades": [MERGE_PAYLOAD, "grade"]}, False),
        (CLOSE, "population_milions_total", {"sales": ["population_millions_total", "units"]}, True),
        (CLOSE, "population_milions_total", {"sales": [CLOSE_PAYLOAD, "units"]}, False),
    ],
    ids=["merge-key", "merge-key-payload", "close-column", "close-column-payload"],
)
def test_a_column_name_from_the_users_data_cannot_write_code_into_the_tools_edit(code, key, columns, edited):
    """The tool's own edits quote a column name the data chose; one that closes the quote
    would make the edit run other code (in the sandbox, and in the notebook once accepted)."""
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    locals_ = {name: f"DataFrame shape=(2, 2) columns={cols!r}" for name, cols in columns.items()}
    error = ErrorInfo("KeyError", repr(key), 1, [], locals_)
    found = explain(ExecutionResult(status="error", error=error), code, None)
    assert bool(found.edits) is edited, found.edits
    assert all("__import__" not in e.new and "run()" not in e.new for e in found.edits)


FSTRING_TEXT = "col = 'population_milions_total'\nprint(f\"sum of 'population_milions_total': {sales[col].sum()}\")\n"
"""The key is read from a variable; the same text stands in an f-string's literal part,
where braces are code."""
FSTRING_FIELD = "merged = f\"{students.merge(grades, on='id')}\"\n"
"""A merge inside an f-string's field: before Python 3.12 a `"` there closes the f-string."""


@pytest.mark.parametrize(
    "code, error, values",
    [
        pytest.param(
            "print(df.total_revenue_by_region.sum())\n",
            ("AttributeError", "'DataFrame' object has no attribute 'total_revenue_by_region'", 1),
            {"df": {"total_revenue_by_region']+run()+df['": [1], "units": [2]}},
            id="attribute-to-column",
        ),
        pytest.param(
            "print(cfg.threshol)\n",
            ("AttributeError", "'SimpleNamespace' object has no attribute 'threshol'", 1),
            {"cfg": types.SimpleNamespace(**{"threshold+r()": 1})},
            id="attribute-set-from-data",
        ),
        pytest.param(
            FSTRING_TEXT,
            ("KeyError", "'population_milions_total'", 2),
            {"sales": {"population_millions_total{run()}": [1], "units": [2]}, "col": "population_milions_total"},
            id="key-in-an-fstrings-text",
        ),
        pytest.param(
            FSTRING_FIELD,
            ("KeyError", "'id'", 1),
            {"students": {"id": [1], "name": ["a"]}, "grades": {'x"+run()+"_id': [1], "grade": [2]}},
            id="merge-in-an-fstrings-field",
        ),
    ],
)
def test_the_tools_edit_changes_code_never_the_text_around_it(code, error, values):
    """A name from the user's data goes into the tool's own edit only as a name, or a plain
    literal standing where code stands: never into a string's text, an f-string, or as a
    name that is not one (an attribute ``setattr`` made from a row of data)."""
    import ast

    import pandas as pd

    from selfheal_jupyter.diagnosis import apply_edits
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    ns = {k: pd.DataFrame(v) if isinstance(v, dict) else v for k, v in values.items()}
    ctx = context.for_cell(code, ns, max_bytes=1 << 20)
    kind, message, line = error
    summaries = {
        k: f"DataFrame shape=(1, 2) columns={list(v.columns)!r}" for k, v in ns.items() if hasattr(v, "columns")
    }
    found = explain(ExecutionResult(status="error", error=ErrorInfo(kind, message, line, [], summaries)), code, ctx)
    fixed = apply_edits(code, found.edits) if found.edits else code
    assert fixed is not None

    def called(program: str) -> set[str]:
        return {
            n.func.id for n in ast.walk(ast.parse(program)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }

    assert called(fixed) == called(code), fixed


def test_the_tools_own_edit_never_changes_an_assert():
    """``assert totl == 10``: renaming inside the user's assert is refused by the spec guard
    (the user decides), and its round counted as the model changing the assert and made the
    model's same program a "repeat" that stopped the run."""
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    code = "total = 4 + 6\nassert totl == 10\n"
    error = ErrorInfo("NameError", "name 'totl' is not defined", 2, [], {})
    found = explain(ExecutionResult(status="error", error=error), code, None, code)
    assert found.diagnosis == ["`totl` is not defined; `total` is (in the program)."] and found.edits == []


@pytest.mark.parametrize(
    "code, error, columns, edited",
    [
        ("print(f\"Mean: {sales['Regoin'].mean()}\")\n", ("KeyError", "'Regoin'"), ["region", "units"], "'region'"),
        ('total = 1\nprint(f"Total: {totl}")\n', ("NameError", "name 'totl' is not defined"), [], "total"),
    ],
)
def test_an_edit_inside_an_fstrings_field_that_keeps_its_quotes_is_made(code, error, columns, edited):
    """A print of an f-string is most of a notebook's output: a close column or a misspelt
    name in its field is mended, as long as the edit keeps the f-string's quotes and braces."""
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    locals_ = {"sales": f"DataFrame shape=(2, 2) columns={columns!r}"} if columns else {}
    found = explain(
        ExecutionResult(status="error", error=ErrorInfo(error[0], error[1], code.count("\n"), [], locals_)), code, None
    )
    assert [e.new for e in found.edits] == [edited], found
