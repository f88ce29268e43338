"""The example notebooks, executed top to bottom by nbclient against the scripted
server (a real OpenAI-compatible HTTP server) and the real Docker sandbox; then the
saved outputs are read as a user (or nbconvert) would see them. Plus: a kernel
interrupt during a run ends it cleanly.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import docker
import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from tests.scripted_server import Reply, ScriptedServer, load_script
from tests.waiting import wait_until

pytestmark = pytest.mark.sandbox  # kernels that run cells in the sandbox

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCRIPTS = Path(__file__).resolve().parents[1] / "notebook_scripts"
NAMES = ["01-quickstart", "02-data-exploration", "03-teaching-self-debugging"]
HEADLINE = r"✔ (Fixed|Done) — verified by|● Runs — nothing checked its output"
"""The verdict in one line: what checked the output, or that nothing did."""


def kernel_env(server: ScriptedServer) -> dict[str, str]:
    env = dict(os.environ, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")
    env.pop("SELFHEAL_MODEL", None)  # the model name comes from the server's /models
    return env


def is_magic(cell, name: str) -> bool:
    return cell.cell_type == "code" and cell.source.startswith(f"%%{name}")


def html_of(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)


def who_ls(cell) -> set[str]:
    (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    return set(eval(result.data["text/plain"]))  # a list literal of names


def execute(name: str, tmp_path: Path):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        assert cell.cell_type != "code" or not cell.outputs, "notebooks are committed without outputs"
    # Around the first agent/heal cell: what the user's namespace holds before and after.
    first = next(i for i, c in enumerate(nb.cells) if is_magic(c, "agent") or is_magic(c, "heal"))
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell("%who_ls"))
    nb.cells.insert(first, nbformat.v4.new_code_cell("%who_ls"))
    with ScriptedServer(load_script(str(SCRIPTS / f"{name}.json"))) as server:
        client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        started = time.monotonic()
        client.execute(env=kernel_env(server))  # raises on any cell error
        elapsed = time.monotonic() - started
        assert server.remaining == 0, "every scripted reply was used"
    nbformat.write(nb, tmp_path / f"{name}.executed.ipynb")
    return nb, first + 1, elapsed


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_shows_every_iteration(name, tmp_path):
    nb, agent_index, elapsed = execute(name, tmp_path)
    before, agent_cell, after = nb.cells[agent_index - 1 : agent_index + 2]
    assert who_ls(after) - who_ls(before) == {"agent_result"}

    page = html_of(agent_cell)
    if is_magic(agent_cell, "agent"):
        assert 'class="selfheal-plan"' in page and "<ol" in page
    assert page.count('class="selfheal-iteration"') >= 2
    assert page.count('class="selfheal-code"') >= 2
    assert 'class="selfheal-diff"' in page and 'data-diff="add"' in page
    assert 'class="selfheal-traceback"' in page and "data-failing-line=" in page
    assert 'data-outcome="success"' in page and re.search(HEADLINE, page)
    # The record is readable without widget state: nbconvert's HTML holds it.
    body, _ = HTMLExporter().from_notebook_node(nb)
    assert re.search(HEADLINE, body) and "selfheal-traceback" in body
    print(f"{name}: executed in {elapsed:.1f} s")


def test_the_data_notebooks_heal_reviews_the_output_of_the_code_handed_over(tmp_path):
    """Issue 39: the review shows the output of the code handed over — the notebook's
    own ``share()``, in percent — and the chart it draws. (The heal's misspelt column is
    fixed by the tool's own edit, issue 40, so the passing program is the code handed
    over; a model that redefines ``share()`` is tests/browser/test_browser.py's chart heal.)"""
    nb, _, _ = execute("02-data-exploration", tmp_path)
    heal = next(c for c in nb.cells if is_magic(c, "heal"))
    page = html_of(heal)
    review = page.split('class="selfheal-review"', 1)[1]
    shown = review.split('class="selfheal-fix-output"', 1)[1]
    assert "48.5" in shown and "0.485075" not in shown  # the notebook's own share(), in percent
    assert '<img alt="figure"' in shown  # the chart the fix draws
    assert "The passing program showed something else" not in shown  # it is the code handed over
    assert "This fix adds" not in review and "selfheal-flags" not in review  # nothing to flag


def test_a_steered_heal_hands_over_its_probe_only_and_flags_it(tmp_path):
    """Issue 39's Done-when in a notebook run by nbclient: the fix is the user's cell
    with the word changed plus the probe line only, flagged (kind ``probe``) at its line
    in ``agent_result.fix.capabilities``, and the review shows it."""
    from tests.unit.test_minimal import STEERED_CELL, STEERED_FIX, STEERED_MODEL

    cells = [
        "%load_ext selfheal_jupyter\n%config SelfHeal.quick_fixes = False",  # the model's fix is the subject
        "%%heal\n" + STEERED_CELL,
        "import json\nprint(json.dumps(agent_result.to_dict()['fix']))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with ScriptedServer([Reply("```python\n" + STEERED_MODEL + "```", match="NameError")]) as server:
        client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        client.execute(env=kernel_env(server))
    import json

    fix = json.loads("".join(o.get("text", "") for o in nb.cells[2].outputs))
    assert fix["code"] == STEERED_FIX
    assert {"kind": "probe", "line": 4, "evidence": "'/opt/selfheal'"} in fix["capabilities"]
    review = html_of(nb.cells[1]).split('class="selfheal-review"', 1)[1]
    assert "a probe of where it runs (line 4)" in review
    assert "The passing program tried to reach the network" in review


def test_teaching_notebook_story(tmp_path):
    nb, agent_index, _ = execute("03-teaching-self-debugging", tmp_path)
    page = html_of(nb.cells[agent_index])
    assert "your cell · ✘ TypeError" in page
    assert "Attempt 1 · ✘" in page and "Attempt 2 · ✔" in page
    assert "list indices must be integers or slices, not float" in page
    exported = nbformat.read(tmp_path / "median-debugging.ipynb", as_version=4)
    errors = [o for c in exported.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "TypeError"


def _containers_of(pid: int) -> list:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"selfheal.pid={pid}"})
    finally:
        client.close()


def test_kernel_interrupt_stops_the_run_cleanly():
    slow = "```python\nimport time\nprint('working', flush=True)\ntime.sleep(60)\n```"
    with ScriptedServer([Reply("1. Wait a long time.\n2. Print done."), Reply(slow)]) as server:
        km, kc = start_new_kernel(kernel_name="python3", env=kernel_env(server), startup_timeout=60)
        pid = km.provisioner.process.pid
        try:
            assert kc.execute_interactive("%load_ext selfheal_jupyter", timeout=60)["content"]["status"] == "ok"
            outputs: list[dict] = []
            msg_id = kc.execute("%%agent\nWait a long time, then print done.")

            def candidate_runs() -> bool:
                msg = kc.get_iopub_msg(timeout=60)
                if msg["parent_header"].get("msg_id") == msg_id:
                    outputs.append(msg)
                return "Attempt 1 of 4 · running it in the sandbox" in str(msg["content"].get("data", ""))

            # the panel says the candidate runs (it sleeps 60 s in the sandbox)
            wait_until(candidate_runs, 60, "the candidate to start", interval=0)
            km.interrupt_kernel()
            reply = kc.get_shell_msg(timeout=60)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = kc.get_shell_msg(timeout=60)
            while True:
                msg = kc.get_iopub_msg(timeout=10)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                outputs.append(msg)
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
            html = "".join(m["content"].get("data", {}).get("text/html", "") for m in outputs)
            assert 'data-outcome="cancelled"' in html and "■ stopped" in html
            assert not any(m["msg_type"] == "error" for m in outputs)
            # the kernel is alive and the record says what happened: the candidate was
            # stopped, its 60 s sleep not waited out
            check = []
            kc.execute_interactive(
                "print(1 + 1, agent_result.outcome, agent_result.iterations[-1].result.status)",
                timeout=30,
                output_hook=lambda m: check.append(m["content"].get("text", "")),
            )
            assert "2 cancelled killed" in "".join(check)
            # the killed container is gone (at most the warm pool remains while the kernel lives)
            wait_until(
                lambda: len(_containers_of(pid)) <= 1,
                30,
                lambda: f"the killed container to go: {[(c.short_id, c.status) for c in _containers_of(pid)]}",
            )
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)
    wait_until(lambda: not _containers_of(pid), 30, lambda: f"the kernel's containers to go: {_containers_of(pid)}")


def test_teaching_notebook_hints_never_the_answer_until_level_3(tmp_path):
    nb, _, _ = execute("03-teaching-self-debugging", tmp_path)
    hint_cells = [c for c in nb.cells if is_magic(c, "hint")]
    pages = ["".join(o.get("data", {}).get("text/plain", "") for o in c.outputs) for c in hint_cells]
    assert "Hint 1 of 3" in pages[0] and "fails on line 8" in pages[0] and "starts on line 4" in pages[0]
    (listing,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("for hint in agent_result")]
    assert "".join(o.get("text", "") for o in listing.outputs).count("facts only") == 3  # the default: no prose
    why = pages[1].split("Hint 2 of 3", 1)[1]
    assert "`i` is `1` (a whole number): the first time line 4 runs when `average` gets `marks`" in why
    assert "Which positions of `marks` should `i` go through" in why and "line 4 is a call" in why
    for page in pages[:2]:
        assert "range(len(marks))" not in page
    assert "Hint 3 of 3" in pages[2] and "+    for i in range(len(marks)):" in pages[2]
    exported = nbformat.read(tmp_path / "hints-asked.ipynb", as_version=4)
    code = [c for c in exported.cells if c.cell_type == "code"]
    assert len(code) == 1 and code[0].metadata["selfheal"]["hints"] == [1, 2, 3]
