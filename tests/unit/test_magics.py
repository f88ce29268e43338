"""The magics in an in-process IPython shell: argument parsing, interpolation,
user errors as one short line, the namespace left alone but for ``agent_result``.

Runs that reach the model use the scripted server (a real HTTP server through the
real ``openai`` client) and the real Docker sandbox.
"""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from ipywidgets.widgets.widget import _instances as widget_instances

from selfheal_jupyter.errors import BadInput
from selfheal_jupyter.model import Plan
from selfheal_jupyter.notebook import arguments as magic_args
from selfheal_jupyter.notebook import autoheal
from selfheal_jupyter.notebook.magics import SelfHealMagics
from selfheal_jupyter.teaching.policy import kernel_gate
from tests.conftest import selfheal_shell
from tests.scripted_server import ScriptedServer


@pytest.fixture()
def shell():
    with selfheal_shell(
        "%config SelfHeal.base_url = 'http://127.0.0.1:9/v1'", "%config SelfHeal.model = 'scripted-model'"
    ) as ip:
        yield ip


def run(ip: InteractiveShell, code: str):
    with capture_output() as cap:
        result = ip.run_cell(code, store_history=True)
    return result, cap


def user_names(ip: InteractiveShell) -> set[str]:
    return set(ip.run_line_magic("who_ls", ""))


# ---------------------------------------------------------------- help and parsing
def test_help_lists_every_option():
    doc = SelfHealMagics.agent.__doc__
    for option in (
        "--max-iterations",
        "--model",
        "--no-plan",
        "--plan-only",
        "--plan",
        "--inputs",
        "--tests",
        "--timeout",
        "--memory",
        "--quiet",
    ):
        assert option in doc, option
    assert "{name}" in doc
    for option in ("--inputs", "--tests", "hint"):
        assert option in SelfHealMagics.heal.__doc__


def test_help_through_pinfo(shell):
    with capture_output() as cap:
        shell.run_line_magic("pinfo", "%%agent")
    # pinfo pages the doc; the pager writes to stdout in a plain shell
    assert "--max-iterations" in cap.stdout and "Plan, write, run" in cap.stdout


@pytest.mark.parametrize(
    "cell, expected",
    [
        ("%%agent --bogus\ndo it", "unrecognized arguments: --bogus"),
        ("%%agent\n   \n", "The task is empty"),
        ("%%agent --inputs nope\nuse it", "the notebook has no variable 'nope'"),
        ("%%agent --inputs 'a b'\nuse it", "is not a variable name"),
        ("%%agent --tests missing\ndo it", "the notebook has no variable 'missing'"),
        ("%%agent --tests In[99]\ndo it", "there is no input cell 99"),
        ("%%agent --plan nothing\ndo it", "Run %%agent --plan-only first"),
        ("%%agent --plan p --plan-only\ndo it", "do not go together"),
        ("%%agent --max-iterations 0\ndo it", "at least 1"),
        ("%%agent --max-iterations many\ndo it", "invalid int value"),
        ("%%agent --memory 1x\ndo it", "write a size such as 512m or 1g"),
        ("%%heal --timeout -1\nx = 1", "must be a positive number"),
        ("%%heal\n\n", "%%heal needs code"),
        ("%agent_export /tmp/x.ipynb", "Nothing to export yet"),
        ("%agent_autoheal maybe", "takes on or off"),
    ],
)
def test_user_errors_are_one_short_line(shell, cell, expected):
    before = user_names(shell)
    result, cap = run(shell, cell)
    assert not result.success
    assert expected in cap.stderr, cap.stderr
    assert "Traceback" not in cap.stderr and "selfheal_jupyter/" not in cap.stderr
    assert user_names(shell) == before


DEEP_CELL = "x = " + " + ".join(["1"] * 1200) + "\nprint(x)\n"
"""Nests 1200 levels: too deep for pyflakes in a kernel too (IPython imports jedi, which
raises the recursion limit to 3000)."""


def test_a_cell_nested_too_deep_is_refused_before_a_run_is_counted(shell):
    """`%%heal` on `x = 1 + 1 + …` ended "Internal error (RecursionError)"; `%%hint`
    said "No hint this time … Run %%hint again", and each retry counted a run of the
    policy's and crashed again. Now each front refuses the cell where it admits the task:
    what nests too deep and what to do, no model request, no run counted."""
    with ScriptedServer(["```python\nx = 1200\nprint(x)\n```"] * 4) as model:
        shell.run_cell(f"%config SelfHeal.base_url = '{model.base_url}'", store_history=False)
        shell.user_ns["deep_tests"] = DEEP_CELL.replace("x = ", "assert 0 < ")
        runs = kernel_gate().runs
        for cell, said in (
            (f"%%heal\n{DEEP_CELL}", "Your code nests"),
            (f"%%hint\n{DEEP_CELL}", "Your code nests"),
            (f"%%hint\n{DEEP_CELL}", "Your code nests"),  # asked again: refused again, nothing spent
            ("%%agent --tests deep_tests\nAdd them up.", "Your tests nest"),
        ):
            result, cap = run(shell, cell)
            assert not result.success, cap.stdout[-500:]
            assert f"{said} deeper than 100 levels at line 1" in cap.stderr, cap.stderr[-1000:]
            assert "Split the expression" in cap.stderr and "Traceback" not in cap.stderr
        asked = model.chat_requests()
    assert asked == [] and kernel_gate().runs == runs
    assert "agent_result" not in shell.user_ns


def test_the_autoheal_button_on_a_cell_nested_too_deep_counts_no_run(shell):
    """The autoheal button on a failing cell nested 400 levels: the run was counted before
    the cell was read, so each press spent a run of the policy's for a refusal. Now the
    policy is asked, the cell admitted, and only then a run counted."""
    run(shell, "%agent_autoheal on")
    result, cap = run(shell, "x = " + " + ".join(["1"] * 400) + "\nprint(y)\n")
    assert not result.success
    views = [
        o.data["application/vnd.jupyter.widget-view+json"]
        for o in cap.outputs
        if o.data.get("text/plain", "").startswith("[")
    ]
    box = widget_instances[views[-1]["model_id"]]
    button = box.children[0]
    assert button.description == autoheal.BUTTON_TEXT
    runs = kernel_gate().runs
    with capture_output() as pressed:
        button.click()
    said = " ".join(o.data["text/plain"] for o in pressed.outputs)
    assert "Your code nests deeper than 100 levels at line 1" in said and "Split the expression" in said
    assert kernel_gate().runs == runs
    run(shell, "%agent_autoheal off")


def test_endpoint_down_is_a_short_message(shell):
    shell.run_cell("%config SelfHeal.model = ''", store_history=False)  # forces a /models call
    before = user_names(shell)
    result, cap = run(shell, "%%agent\nPrint hello.")
    text = cap.stderr + cap.stdout
    assert "127.0.0.1:9" in text
    assert "Traceback" not in text
    assert user_names(shell) == before


def test_tests_option_reads_a_variable_or_a_cell(shell):
    shell.run_cell("checks = 'assert total == 6'", store_history=True)
    ns, raw = shell.user_ns, shell.history_manager.input_hist_raw
    assert magic_args.resolve_tests("checks", ns, raw + ["<current>"]) == "assert total == 6"
    number = len(raw) - 1
    assert magic_args.resolve_tests(f"In[{number}]", ns, raw + ["<current>"]) == "checks = 'assert total == 6'"
    assert magic_args.resolve_tests("-1", ns, raw + ["<current>"]) == "checks = 'assert total == 6'"
    shell.user_ns["bad"] = "assert ("
    with pytest.raises(BadInput, match="does not parse"):
        magic_args.resolve_tests("bad", ns, raw)
    shell.user_ns["num"] = 3
    with pytest.raises(BadInput, match="not a string"):
        magic_args.resolve_tests("num", ns, raw)


# ---------------------------------------------------------------- interpolation
def test_interpolation_like_jupyter_ai():
    ns = {"name": "sales", "n": 3, "df": type("D", (), {"shape": (4, 2)})()}
    assert magic_args.interpolate("sum {name} over {n} rows", ns) == "sum sales over 3 rows"
    assert magic_args.interpolate("shape {df.shape}", ns) == "shape (4, 2)"
    assert magic_args.interpolate("literal {{name}} and {{}}", ns) == "literal {name} and {}"
    assert magic_args.interpolate("unknown {missing} stays", ns) == "unknown {missing} stays"
    assert magic_args.interpolate("code {'a': 1} and {n + 1}", ns) == "code {'a': 1} and {n + 1}"
    assert magic_args.interpolate("bad attr {df.nope}", ns) == "bad attr {df.nope}"


def test_plan_values():
    assert magic_args.plan_from_value(["a", " b "]).steps == ["a", "b"]
    assert magic_args.plan_from_value("1. load\n2) clean\n- plot\n\n").steps == ["load", "clean", "plot"]
    plan = magic_args.plan_from_value(Plan(["x"], source="planner"))
    assert plan.steps == ["x"] and plan.source == "user"
    with pytest.raises(BadInput, match="no steps"):
        magic_args.plan_from_value([])
    with pytest.raises(BadInput, match="got a int"):
        magic_args.plan_from_value(5)


def test_inputs_are_resolved_by_name():
    ns = {"df": [1, 2], "x": 3}
    assert magic_args.resolve_inputs("df, x", ns) == {"df": [1, 2], "x": 3}
    assert magic_args.resolve_inputs(None, ns) == {}


def test_in_a_kernel_our_cell_magics_are_awaited_without_rewriting_the_cell():
    import ast
    from types import SimpleNamespace

    from IPython.core.async_helpers import _asyncio_runner

    from selfheal_jupyter.notebook.controller import AwaitCellMagics, _ShouldRunAsync

    kernel = SimpleNamespace(kernel=object(), autoawait=True, loop_runner=_asyncio_runner)
    ours = "get_ipython().run_cell_magic('agent', '--quiet', 'do it\\n')\n"
    tree = AwaitCellMagics(kernel).visit(ast.parse(ours))
    assert ast.unparse(tree) == (
        "await __import__('selfheal_jupyter.notebook.controller', fromlist=['_'])"
        ".run_cell_magic_async('agent', '--quiet', 'do it\\n')"
    )
    other = "get_ipython().run_cell_magic('time', '', 'x=1\\n')\n"
    assert ast.unparse(AwaitCellMagics(kernel).visit(ast.parse(other))) == other.strip()
    terminal = SimpleNamespace(kernel=None, autoawait=True, loop_runner=_asyncio_runner)
    assert ast.unparse(AwaitCellMagics(terminal).visit(ast.parse(ours))) == ours.strip()

    should = _ShouldRunAsync(kernel, lambda raw, **kw: False)
    assert should("%%agent --quiet\ndo it\n", transformed_cell=ours)
    assert not should("%%time\nx=1\n", transformed_cell=other)
    assert not should("x = 1\n", transformed_cell="x = 1\n")
    assert not _ShouldRunAsync(terminal, lambda raw, **kw: False)("", transformed_cell=ours)


def test_config_reaches_per_call_settings(shell):
    shell.run_cell("%config SelfHeal.max_iterations = 7", store_history=False)
    magics = shell.magics_manager.registry["SelfHealMagics"]
    from IPython.core.magic_arguments import parse_argstring

    from selfheal_jupyter.notebook.magics import AGENT_FLAGS

    args = parse_argstring(magics.agent, "--timeout 5 --memory 1g")
    settings = magic_args.settings_for(args, shell, AGENT_FLAGS)
    assert settings.max_iterations == 7 and settings.timeout_s == 5 and settings.memory == "1g"
    args = parse_argstring(magics.agent, "--max-iterations 2 --model m --quiet")
    settings = magic_args.settings_for(args, shell, AGENT_FLAGS)
    assert settings.max_iterations == 2 and settings.model == "m" and settings.quiet
    with capture_output() as cap:
        shell.run_line_magic("config", "SelfHeal")
    assert "max_iterations" in cap.stdout


def test_export_writes_a_teaching_notebook_and_json(shell, tmp_path, monkeypatch):
    import json

    import nbformat

    from tests.unit.test_render import make_run

    magics = shell.magics_manager.registry["SelfHealMagics"]
    magics.last_run = make_run()
    monkeypatch.chdir(tmp_path)  # the kernel's folder: where the notebook is
    result, cap = run(shell, "%agent_export exports/run#1.ipynb")
    assert result.success
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    # a link the front end resolves next to the notebook and opens
    assert '<a href="exports/run%231.ipynb" target="_blank"' in html and ">exports/run#1.ipynb</a>" in html
    assert "selfheal: wrote exports/run#1.ipynb" in "".join(o.data.get("text/plain", "") for o in cap.outputs)
    (tmp_path / "exports" / "run#1.ipynb").rename(tmp_path / "run.ipynb")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.ipynb"
    result, cap = run(shell, f"%agent_export {elsewhere}")
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    assert "<a " not in html and str(elsewhere) in html and "cannot link" in html
    elsewhere.unlink()
    nb = nbformat.read(tmp_path / "run.ipynb", as_version=4)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells]
    assert sources[0].startswith("# Task") and "## Plan" in sources[1]
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.metadata["selfheal"]["iteration"] for c in code_cells] == [1, 2]
    assert code_cells[0].outputs[-1].output_type == "error" and code_cells[0].outputs[-1].ename == "KeyError"
    assert any("```diff" in s for s in sources)
    assert "Done — verified by your tests" in sources[-1] and nb.metadata["selfheal"]["outcome"] == "success"
    assert nb.metadata["selfheal"]["verified"] is True
    assert nb.metadata["selfheal"]["verified_by"] == ["your tests"]
    result, cap = run(shell, f"%agent_export {tmp_path}/run.json --json")
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["outcome"] == "success" and len(record["iterations"]) == 2


def test_autoheal_chains_to_an_existing_handler_and_restores_it(shell):
    seen = []

    def theirs(ip, etype, evalue, tb, tb_offset=None):
        seen.append(etype)
        return ["their traceback"]

    shell.set_custom_exc((KeyError,), theirs)
    before = (shell.custom_exceptions, shell.CustomTB)
    try:
        run(shell, "%agent_autoheal on")
        assert KeyError in shell.custom_exceptions and Exception in shell.custom_exceptions
        run(shell, "{}['missing']")
        assert seen == [KeyError]
        run(shell, "1 / 0")  # not theirs: IPython's own traceback, then our button
        assert seen == [KeyError]
        run(shell, "%agent_autoheal off")
        assert (shell.custom_exceptions, shell.CustomTB) == before
    finally:
        shell.set_custom_exc((), None)
