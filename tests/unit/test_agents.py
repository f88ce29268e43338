"""Planner parsing, input descriptions, QA pre-check and verdict, developer prompts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from selfheal_jupyter.agents.developer import Developer, RepairContext, normalise
from selfheal_jupyter.agents.environment import installed_libraries, parse_requirements
from selfheal_jupyter.agents.inputs import describe_inputs, format_inputs
from selfheal_jupyter.agents.planner import build_messages, drop_harmful_steps, parse_plan
from selfheal_jupyter.agents.qa import check_tests, precheck, strip_input_overwrites
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import BadInput
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.loop.verdict import judge
from selfheal_jupyter.model import ErrorInfo, ExecutionResult, Plan
from selfheal_jupyter.model import TestOutcome as Outcome


# --------------------------------------------------------------------------- planner
def test_parse_numbered_plan():
    text = "Here is the plan:\n1. Load df.\n2) Group by month\n**3.** Plot the mean\n\nDone."
    assert parse_plan(text) == ["Load df.", "Group by month", "Plot the mean"]


def test_parse_bullets_and_step_labels():
    assert parse_plan("- read\n- compute\n") == ["read", "compute"]
    assert parse_plan("Step 1: read\nStep 2: print") == ["read", "print"]
    assert parse_plan("1. a\n```python\n2. not a step\n```\n2. b") == ["a", "b"]
    assert parse_plan("no list at all") == []
    assert len(parse_plan("\n".join(f"{i}. s{i}" for i in range(1, 20)))) == 8


def test_steps_that_would_replace_inputs_or_only_import_are_dropped():
    steps = [
        "Import necessary libraries.",
        "Define the `sales` DataFrame.",
        "Read the sales data into a pandas DataFrame.",
        "Compute revenue = units * price per row of `sales`.",
        "Create a Series `per_region` from the revenue.",
        "Print the results.",
    ]
    assert drop_harmful_steps(steps, ["sales"]) == [
        "Compute revenue = units * price per row of `sales`.",
        "Create a Series `per_region` from the revenue.",
        "Print the results.",
    ]
    assert drop_harmful_steps(["Define the `df` DataFrame."], []) == ["Define the `df` DataFrame."]


def test_planner_prompt_has_inputs_and_environment():
    inputs = describe_inputs({"df": pd.DataFrame({"a": [1]})})
    msgs = build_messages("plot a", inputs)
    user = msgs[1]["content"]
    assert "`df`: pandas.DataFrame" in user and "no network" in user
    assert "numbered" in msgs[0]["content"]


# --------------------------------------------------------------------------- inputs
def test_describe_inputs():
    df = pd.DataFrame({"price": [1.0, 2.0], "city": ["a", "b"]})
    arr = np.zeros((3, 4), dtype=np.float32)
    d = {
        x.name: x
        for x in describe_inputs({"df": df, "arr": arr, "s": df["price"], "n": 3, "names": ["a", "b"], "cfg": {"k": 1}})
    }
    assert d["df"].type == "pandas.DataFrame"
    assert d["df"].summary.startswith("2 rows × 2 columns (price: float64, city: ")
    assert d["arr"].type == "numpy.ndarray" and d["arr"].summary == "shape (3, 4), dtype float32"
    assert d["s"].type == "pandas.Series" and "name 'price'" in d["s"].summary
    assert d["n"].summary == "" and d["names"].summary == "length 2 of str"
    assert d["cfg"].summary == "1 keys of str"
    assert list(d) == sorted(d)
    assert format_inputs([d["n"]]) == "- `n`: int"


def test_describe_never_contains_the_data():
    secret = pd.DataFrame({"ssn": ["123-45-6789"] * 5})
    text = format_inputs(describe_inputs({"df": secret}))
    assert "123-45" not in text


def test_an_input_string_bytes_number_or_dict_key_never_reaches_the_prompt():
    """Issue 35: ``--input api_key=secret.pkl`` (a str) put ``'sk-…'`` in the first prompt."""
    key = "sk-proj-0123456789abcdef"
    inputs = {"api_key": key, "raw": key.encode(), "pin": 482913, "tokens": {key: 1}, "rate": 0.0731}
    text = format_inputs(describe_inputs(inputs))
    for value in ("sk-", "482913", "0.0731", "0123456789"):
        assert value not in text, text
    assert "- `api_key`: str — length 24" in text and "- `pin`: int" in text


# --------------------------------------------------------------------------- QA
def test_precheck_syntax_error():
    r = precheck("x = 1\nif x\n    print(x)\n")
    assert r.status == "blocked" and r.error.type == "SyntaxError" and r.error.line == 2
    assert r.error.frames[0].source == "if x"


def test_precheck_undefined_names_but_inputs_and_builtins_are_defined():
    assert precheck("print(len(df))", {"df", "print", "len"}) is None
    r = precheck("import math\nprint(math.pi + radius + other)\n", {"print"})
    assert r.error.type == "NameError"
    assert r.error.message == "name 'radius' is not defined (also undefined: 'other')"
    assert r.error.line == 2
    # pyflakes is lenient where Python is: names bound somewhere at module level pass
    assert precheck("def f():\n    return later\nlater = 1\nprint(f())", {"print"}) is None


def test_precheck_refuses_code_that_replaces_an_input_with_made_up_data():
    code = "import pandas as pd\n\nsales = pd.DataFrame({'x': [1, 2]})\nprint(sales.x.sum())\n"
    r = precheck(code, {"print"}, inputs={"sales"})
    assert r.status == "blocked" and r.error.type == "InputOverwritten" and r.error.line == 3
    assert "'sales'" in r.error.message and r.error.frames[0].source.startswith("sales = pd.")
    assert "Delete line 3" in r.error.message
    multi = precheck("sales = [\n  1,\n  2,\n]\nprint(sales)", {"print"}, inputs={"sales"})
    assert "Delete lines 1-4" in multi.error.message
    # using the input to derive a new value of it is fine
    assert precheck("sales = sales.dropna()\nprint(sales)", {"print"}, inputs={"sales"}) is None
    assert precheck("n = len(sales)\nsales = [1]\nprint(n)", {"print", "len"}, inputs={"sales"}) is None
    assert precheck("total: int = 3\nprint(total)", {"print"}, inputs={"sales"}) is None
    # no inputs given: nothing to protect
    assert precheck(code, {"print"}) is None or precheck(code, {"print"}).error.type == "NameError"


def test_precheck_refuses_a_definition_or_import_that_takes_an_inputs_name():
    # a class named like the user's data iterates as rigged numbers wherever it stands
    rigged = "class sales(metaclass=Rigged):\n    pass\n\n\nprint(len(sales))\n"
    for code in (
        rigged,
        "print(sales)\n\n\ndef sales():\n    return [1]\n",
        "from x import y as sales\nprint(sales)\n",
    ):
        r = precheck(code, {"print", "len", "Rigged"}, inputs={"sales"})
        assert r is not None and r.error.type == "InputOverwritten" and "'sales'" in r.error.message
        assert strip_input_overwrites(code, {"sales"}) == (code, [])  # not clear-cut: refused, not cut
    assert (
        precheck("def total(sales):\n    return sum(sales)\nprint(total(sales))\n", {"print", "sum"}, inputs={"sales"})
        is None
    )


def test_made_up_input_data_is_removed_when_clear_cut():
    code = (
        "import pandas as pd\n"
        "# Define the sales DataFrame\n"
        "sales = pd.DataFrame({\n"
        "    'x': [1, 2],\n"
        "})\n"
        "total = sales['x'].sum()\n"
    )
    new, removed = strip_input_overwrites(code, {"sales"})
    assert removed == ["sales"]
    assert new == (
        "import pandas as pd\n# Define the sales DataFrame\n"
        "# (selfheal removed an assignment here: `sales` already holds the user's data)\n"
        "total = sales['x'].sum()\n"
    )
    assert precheck(new, {"print"}, inputs={"sales"}) is None
    # a repair that copied the note and made the data up again below it: the note is said once
    again = new.replace("total =", "sales = pd.DataFrame({'x': [9]})\ntotal =")
    assert strip_input_overwrites(again, {"sales"}) == (new, ["sales"])
    # reads first, tuple targets, several statements on a line: left alone
    for keep in ("sales = sales.dropna()\n", "sales, n = [1], 2\n", "sales = [1]; n = 2\n"):
        assert strip_input_overwrites(keep, {"sales"}) == (keep, [])
    assert strip_input_overwrites(code, set()) == (code, [])


def test_check_tests():
    check_tests(None)
    check_tests("assert x == 1\nassert y")
    with pytest.raises(BadInput, match="line 1"):
        check_tests("assert x ==")


def test_verdict_rules():
    ok = ExecutionResult(status="ok", exit_code=0)
    assert judge(ok, None).passed
    assert not judge(ok, "assert x").passed  # tests given but none reported
    passed = ExecutionResult(status="ok", exit_code=0, tests=[Outcome("assert x", True)])
    v = judge(passed, "assert x")
    assert v.passed and v.tests_passed == 1 and v.reasons == ["ran cleanly; all 1 tests passed"]
    err = ExecutionResult(status="error", exit_code=1, error=ErrorInfo("ValueError", "bad"))
    assert judge(err, None).reasons == ["raised ValueError: bad"]
    assert judge(ExecutionResult(status="timeout"), None).reasons == ["did not finish within the time limit"]
    assert not judge(ExecutionResult(status="ok", exit_code=3), None).passed
    assert not judge(None, None).passed


# --------------------------------------------------------------------------- developer
def test_developer_prompts():
    settings = SelfHeal()
    dev = Developer(
        build_llm(settings, Endpoint("http://127.0.0.1:9/v1", "k", "m")),
        retry_temperature=settings.retry_temperature,
        repair_format=settings.repair_format,
    )
    plan = Plan(["Load", "Print"])
    first = dev.build_messages("sum x", plan, [], "assert total == 6")
    system, user = first[0]["content"], first[1]["content"]
    assert "Python 3.11" in system and "no network" in system and "input()" in system
    assert "ONE fenced ```python" in system and "pandas" in system
    assert "1. Load\n2. Print" in user and "assert total == 6" in user
    assert "not editable" in user
    repair = dev.build_messages(
        "sum x",
        plan,
        [],
        None,
        RepairContext(code="total = 5", feedback="AssertionError", same_failure=True),
    )[1]["content"]
    assert "```python\ntotal = 5\n```" in repair and "AssertionError" in repair
    assert "previous fix did not work" in repair


def test_requirements_give_the_library_list():
    assert parse_requirements("# c\nnumpy==2.0\npandas[perf] == 3.1 ; python_version>'3'\n-r x\n") == [
        "numpy 2.0",
        "pandas 3.1",
    ]
    grouped = "# top\nnumpy==2\npandas==3\n\n# deps\nsix==1\n"
    assert parse_requirements(grouped, first_group=True) == ["numpy 2", "pandas 3"]
    assert parse_requirements(grouped) == ["numpy 2", "pandas 3", "six 1"]
    libs = " ".join(installed_libraries())
    assert "numpy" in libs and "pandas" in libs and "matplotlib" in libs


def test_normalise_ignores_blank_lines_and_trailing_spaces():
    assert normalise("a = 1  \n\n\nb = 2\n") == normalise("a = 1\nb = 2")
