"""The live panel in a real JupyterLab and Notebook 7, driven in Debian's Chromium by Playwright.

JupyterLab (from PyPI) serves notebooks in a temp dir with the package's labextension
exactly as the install put it (no ``JUPYTER_PATH`` or copy of the test's own: the test
fails when ``jupyter labextension list`` does not show it enabled); its kernels reach
the scripted server through
``OPENAI_BASE_URL``. The test types like a user: a slow %%agent run is stopped with
the panel's Stop button; a passing run ends its cell at once and **Insert below**,
pressed afterwards, puts the code right below it; %%heal's **Replace this cell**
changes that cell's source; with autoheal on a failing cell shows no foreign warning
and Stop stops the autoheal run; Run All over three %%agent cells finishes with no
click. Notebook 7 (``jupyter notebook``) serves the same labextension: there too a
passing run ends its cell, and Insert below, Replace this cell and Run in my kernel work
afterwards. Screenshots go to ``test-output/browser/``. Playwright only drives
``/usr/bin/chromium``; nothing downloads a browser.

Shared by the module: one Chromium (``chromium``, tests/conftest.py), each test in a
browser context of its own; one JupyterLab (``shared_lab``) for the tests that need only
fresh notebooks, each test's in a folder of its own with its own script for the model,
its kernels shut down after it. The hints test (its kernels read a policy from the
server's environment) and Notebook 7 start servers of their own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_install import assert_extension_installed
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "browser"

SLOW_TASK = "Wait a long time, then print done."
FAST_TASK = "Print the mean of the numbers 1, 2 and 3."
SLOW_CODE = "import time\nprint('working', flush=True)\ntime.sleep(60)\nprint('done')"
BUGGY = "values = [1, 2, 3]\nprint(sum(values) / len(values[5:]))"
FIXED = "values = [1, 2, 3]\nprint(sum(values) / len(values))"
HEAL_BUGGY = "prices = {'tea': 2}\nprint(prices['coffee'])"  # typed without a final newline
HEAL_FIXED = "prices = {'tea': 2}\nprint(prices.get('coffee', 0))"
AUTO_FAILING = "numbers = []\nprint(max(numbers))"
RUN_ALL = ["Print one.", "Print two.", "Print three."]
KERNEL_TASK = "Set answer to six times seven and print it."
KERNEL_CODE = "answer = 6 * 7\nprint(answer)"


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _kernelspec_notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@contextmanager
def _jupyter(
    app: str, tmp_path: Path, replies: list, notebooks: dict[str, list[str]], extra_env: dict[str, str] | None = None
):
    """Serve ``notebooks`` (name -> cell sources) from a temp dir with ``python -m app``
    (``jupyterlab`` or ``notebook``) with the labextension the install put where
    Jupyter looks, no news pop-up, kernels talking to a scripted server. Yields (base
    URL, server)."""
    root = tmp_path / "work"
    root.mkdir()
    for name, cells in notebooks.items():
        nbformat.write(_kernelspec_notebook(cells), root / name)
    assert_extension_installed()
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    with ScriptedServer(replies) as server, open(tmp_path / f"{app}.log", "w") as log:
        port = free_port()
        env = dict(
            os.environ,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
            **(extra_env or {}),
        )
        env.pop("SELFHEAL_MODEL", None)
        env.pop("JUPYTER_PATH", None)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                app,
                "--no-browser",
                "--allow-root",
                f"--port={port}",
                "--ServerApp.ip=127.0.0.1",
                "--IdentityProvider.token=",
                "--ServerApp.password=",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.disable_check_xsrf=True",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _answers(f"{base}/api/status"), 60, f"{app} to answer")
            yield base, server
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@dataclass
class SharedLab:
    """One JupyterLab for the tests that only need fresh notebooks: each test gets a
    folder of its own and gives the scripted model (behind every kernel) its script."""

    base: str
    server: ScriptedServer
    root: Path

    @contextmanager
    def serve(self, folder: str, replies: list, notebooks: dict[str, list[str]]):
        """``notebooks`` (name -> cell sources) in ``folder``, the model on ``replies``;
        afterwards the folder's kernels are shut down (their warm sandboxes go with them)."""
        (self.root / folder).mkdir()
        for name, cells in notebooks.items():
            nbformat.write(_kernelspec_notebook(cells), self.root / folder / name)
        self.server.reset(replies)
        try:
            yield self.base, self.server
        finally:
            for session in get_json(f"{self.base}/api/sessions"):
                if session["path"].startswith(f"{folder}/"):
                    request = urllib.request.Request(f"{self.base}/api/sessions/{session['id']}", method="DELETE")
                    urllib.request.urlopen(request, timeout=30).close()


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("lab")
    with _jupyter("jupyterlab", tmp_path, [], {}) as (base, server):
        yield SharedLab(base, server, tmp_path / "work")


@pytest.fixture()
def lab(shared_lab, tmp_path, request):
    replies = [
        Reply("1. Wait for a long time.\n2. Print done.", match="Wait a long time"),
        Reply(fence(SLOW_CODE), match="Wait a long time"),
        Reply("1. Put the numbers in a list.\n2. Print their mean.", match="mean of the numbers"),
        Reply(fence(BUGGY), match="mean of the numbers"),
        Reply("Divide by the length of the whole list.\n\n" + fence(FIXED), match="ZeroDivisionError"),
        Reply("Use a default.\n\n" + fence(HEAL_FIXED), match="KeyError"),
        Reply(fence(SLOW_CODE), match="ValueError"),
        *[Reply(fence(f"print({task.split()[1][:-1]!r})"), match=task) for task in RUN_ALL],
    ]
    notebooks = {
        "panel.ipynb": [
            "%load_ext selfheal_jupyter",
            f"%%agent\n{SLOW_TASK}",
            f"%%agent\n{FAST_TASK}",
            f"%%heal\n{HEAL_BUGGY}",
            "%agent_autoheal on",
            AUTO_FAILING,
        ],
        "runall.ipynb": ["%load_ext selfheal_jupyter", *[f"%%agent --no-plan\n{task}" for task in RUN_ALL]],
    }
    folder = request.node.name
    with shared_lab.serve(folder, replies, notebooks) as (base, server):
        yield base, server, folder


@pytest.fixture()
def notebook7(tmp_path):
    """Notebook 7 (``jupyter notebook``, built from JupyterLab's components) with the
    same labextension and scripted server."""
    pytest.importorskip("notebook")
    from notebook import __version__

    if int(__version__.split(".")[0]) < 7:
        pytest.fail(f"notebook {__version__} is not Notebook 7: pip install 'notebook>=7,<8'")
    replies = [
        Reply("1. Put the numbers in a list.\n2. Print their mean.", match="mean of the numbers"),
        Reply(fence(BUGGY), match="mean of the numbers"),
        Reply("Divide by the length of the whole list.\n\n" + fence(FIXED), match="ZeroDivisionError"),
        Reply("Use a default.\n\n" + fence(HEAL_FIXED), match="KeyError"),
        Reply(fence(KERNEL_CODE), match=KERNEL_TASK),
    ]
    notebooks = {
        "nb7.ipynb": [
            "%load_ext selfheal_jupyter",
            f"%%agent\n{FAST_TASK}",
            f"%%heal\n{HEAL_BUGGY}",
            f"%%agent --no-plan\n{KERNEL_TASK}",
            "print(answer + 1)",
        ]
    }
    with _jupyter("notebook", tmp_path, replies, notebooks) as (base, server):
        yield base, server


STUDENT_CELL = (
    "def median(values):\n    ordered = sorted(values)\n    middle = len(ordered) / 2\n"
    "    return ordered[middle]\n\nassert median([3, 1, 2]) == 2"
)


@pytest.fixture()
def lab_with_hints_policy(tmp_path):
    """JupyterLab whose kernels read an instructor's policy: hints only, fix hidden."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"mode": "hints", "reveal_fix": False}))
    # Facts only (SelfHeal.hint_prose is off by default): the model is asked for the fix alone.
    replies = [Reply(fence(STUDENT_CELL.replace("/ 2", "// 2")), match="expert Python developer")]
    notebooks = {"hints.ipynb": ["%load_ext selfheal_jupyter", "%agent_autoheal on", STUDENT_CELL]}
    with _jupyter("jupyterlab", tmp_path, replies, notebooks, {"SELFHEAL_POLICY": str(policy)}) as (base, server):
        yield base, server


def test_give_me_a_hint_then_another_hint_then_the_policy_blocked_fix(lab_with_hints_policy, chromium):
    from playwright.sync_api import expect

    base, server = lab_with_hints_policy
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium)
    try:
        cells = _open(page, base, "hints.ipynb", 3)
        cells.nth(0).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")  # %load_ext
        page.keyboard.press("Shift+Enter")  # %agent_autoheal on
        page.keyboard.press("Shift+Enter")  # the student's failing cell
        student = cells.nth(2)
        ask = student.get_by_role("button", name="Give me a hint")
        expect(ask).to_be_visible()
        expect(student.locator(".jp-Cell-outputArea")).to_contain_text("TypeError")
        ask.click()
        expect(student.get_by_role("button", name="Finding a hint…")).to_be_visible()
        expect(student.get_by_text("Hint 1 of 3 — Where")).to_be_visible(timeout=120_000)
        expect(student.locator(".selfheal-hints")).to_contain_text("line 3")
        student.get_by_role("button", name="Another hint").click()
        expect(student.get_by_text("Hint 2 of 3 — Why")).to_be_visible()
        student.get_by_role("button", name="Another hint").click()
        expect(student.get_by_text("Hint 3 of 3 — The fix")).to_be_visible()
        hints = student.locator(".selfheal-hints")
        expect(hints).to_contain_text("keeps the fix hidden")
        assert "// 2" not in hints.inner_text()
        expect(student.get_by_role("button", name="Another hint")).to_be_hidden()
        hints.screenshot(path=str(OUTPUT / "hints.png"))
        assert server.remaining == 0
    finally:
        context.close()


def _answers(url: str) -> bool:
    try:
        get_json(url)
        return True
    except OSError:
        return False


def _kernel_idle(base: str, path: str) -> bool:
    sessions = [s for s in get_json(f"{base}/api/sessions") if s["path"].endswith(path)]
    return bool(sessions) and sessions[0]["kernel"]["execution_state"] == "idle"


def _new_page(chromium, height: int = 1400):
    """A page of its own (a fresh browser context: no cookies, no storage) in the shared Chromium."""
    context = chromium.new_context(viewport={"width": 1280, "height": height})
    return context, context.new_page()


def _open(page, base: str, name: str, count: int):
    """The notebook open in JupyterLab with its kernel idle; its ``count`` cells."""
    from playwright.sync_api import expect

    page.goto(f"{base}/lab/tree/{name}?reset")  # ?reset: no tab of an earlier test's opens again
    wait_until(lambda: _kernel_idle(base, name), 90, "the kernel to start")
    cells = page.locator(".jp-Notebook .jp-Cell")
    expect(cells).to_have_count(count)
    return cells


def _run_in_place(page, cell) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+Enter")  # run in place (no new empty cell)


def test_panel_stops_inserts_replaces_and_autoheals(lab, chromium):
    from playwright.sync_api import expect

    base, server, folder = lab
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium)
    try:
        cells = _open(page, base, f"{folder}/panel.ipynb", 6)

        cells.nth(0).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")  # %load_ext
        page.keyboard.press("Shift+Enter")  # the slow run

        # --- Stop: the first run's candidate sleeps in the sandbox -------------
        slow = cells.nth(1)
        expect(slow.locator(".selfheal-panel")).to_be_visible()
        wait_until(lambda: len(server.chat_requests()) >= 2, 60, "the slow candidate to be written")
        expect(slow.get_by_text("Attempt 1 of 4 · running it in the sandbox")).to_be_visible()
        expect(slow.locator(".selfheal-panel .selfheal-code")).to_be_visible()
        slow.locator(".selfheal-panel").screenshot(path=str(OUTPUT / "panel-running.png"))
        pressed = time.monotonic()
        slow.get_by_role("button", name="Stop").click()
        expect(slow.locator('[data-outcome="cancelled"]').first).to_be_visible(timeout=20_000)
        (OUTPUT / "stop-seconds.txt").write_text(f"{time.monotonic() - pressed:.2f}\n")

        # --- a passing run ends its cell at once; Insert below works afterwards -
        _passing_run_ends_and_inserts_below(page, cells, 2, elsewhere=5, shot="panel.png")

        # --- %%heal: Replace this cell puts the fix into that cell, unrun -------
        _heal_replaces_the_cell(page, cells.nth(4), shot="heal-review.png")

        # --- autoheal: no foreign warning; Stop stops the autoheal run ----------
        _run_in_place(page, cells.nth(5))
        expect(cells.nth(5).locator(".jp-Cell-outputArea")).to_contain_text("autoheal on")
        failing = cells.nth(6)
        _run_in_place(page, failing)
        ask = failing.get_by_role("button", name="Ask the agent to fix this")
        expect(ask).to_be_visible()
        expect(failing.locator(".jp-Cell-outputArea")).to_contain_text("ValueError")
        assert "custom exception handler" not in failing.locator(".jp-Cell-outputArea").inner_text()
        ask.click()
        expect(failing.get_by_text("Attempt 1 of 4 · running it in the sandbox")).to_be_visible()
        pressed = time.monotonic()
        failing.get_by_role("button", name="Stop").click()
        expect(failing.locator('[data-outcome="cancelled"]').first).to_be_visible(timeout=20_000)
        (OUTPUT / "autoheal-stop-seconds.txt").write_text(f"{time.monotonic() - pressed:.2f}\n")
        assert "custom exception handler" not in failing.locator(".jp-Cell-outputArea").inner_text()
        page.screenshot(path=str(OUTPUT / "page.png"), full_page=True)
    finally:
        context.close()


def test_run_all_over_three_agent_cells_needs_no_click(lab, chromium):
    from playwright.sync_api import expect

    base, server, folder = lab
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium)
    try:
        cells = _open(page, base, f"{folder}/runall.ipynb", 4)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        for index in (1, 2, 3):
            expect(cells.nth(index).locator('[data-outcome="success"]').first).to_be_visible(timeout=120_000)
        expect(cells.nth(3).locator(".jp-InputPrompt")).not_to_contain_text("*")
        wait_until(lambda: _kernel_idle(base, f"{folder}/runall.ipynb"), 30, "the kernel to be idle")
        assert [cells.nth(i).locator(".jp-InputPrompt").inner_text().strip() for i in (1, 2, 3)] == [
            "[2]:",
            "[3]:",
            "[4]:",
        ]
        expect(cells).to_have_count(4)  # nothing was inserted without a click
    finally:
        context.close()


def test_notebook7_panel_inserts_replaces_and_runs_after_the_cell_ended(notebook7, chromium):
    """The same hand-over in Notebook 7: the labextension must load there too (the
    buttons are only offered once it answered; "Inserted below the cell." is only
    said on its reply, never on the ``set_next_input`` fallback)."""
    from playwright.sync_api import expect

    base, server = notebook7
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium)
    try:
        page.goto(f"{base}/notebooks/nb7.ipynb")
        wait_until(lambda: _kernel_idle(base, "nb7.ipynb"), 90, "the kernel to start")
        cells = page.locator(".jp-Notebook .jp-Cell")
        expect(cells).to_have_count(5)
        _run_in_place(page, cells.nth(0))  # %load_ext

        # --- a passing run ends its cell; Insert below works afterwards ---------
        _passing_run_ends_and_inserts_below(page, cells, 1, elsewhere=4, shot="notebook7-panel.png")

        # --- %%heal: Replace this cell puts the fix into that cell, unrun -------
        _heal_replaces_the_cell(page, cells.nth(3), shot="notebook7-heal.png")

        # --- Run in my kernel, after the cell ended: the code's names are there -
        agent = cells.nth(4)
        _run_in_place(page, agent)
        run = agent.get_by_role("button", name="Run in my kernel")
        expect(run).to_be_visible(timeout=90_000)
        expect(agent.locator(".jp-InputPrompt")).not_to_contain_text("*")
        run.click()
        expect(agent.get_by_text("Ran the code in your kernel.")).to_be_visible()
        after = cells.nth(5)
        _run_in_place(page, after)  # print(answer + 1): `answer` exists only if the code ran here
        expect(after.locator(".jp-Cell-outputArea")).to_contain_text("43")
        page.screenshot(path=str(OUTPUT / "notebook7-page.png"), full_page=True)
    finally:
        context.close()


def _passing_run_ends_and_inserts_below(page, cells, index: int, *, elsewhere: int, shot: str) -> None:
    """A passing %%agent cell ends at once; Insert below, pressed afterwards while another
    cell is active, puts the code right below it through the labextension (not the
    set_next_input fallback)."""
    from playwright.sync_api import expect

    fast = cells.nth(index)
    count = cells.count()
    _run_in_place(page, fast)
    expect(fast.locator('[data-outcome="success"]').first).to_be_visible(timeout=90_000)
    expect(fast.locator(".jp-InputPrompt")).not_to_contain_text("*", timeout=2_000)
    insert = fast.get_by_role("button", name="Insert below")
    expect(insert).to_be_visible()
    expect(fast.locator(".selfheal-traceback").last).to_contain_text("ZeroDivisionError")
    fast.locator(".selfheal-decision").screenshot(path=str(OUTPUT / shot))
    cells.nth(elsewhere).locator(".cm-content").click()  # another cell is active
    insert.click()
    expect(fast.get_by_text("Inserted below the cell.")).to_be_visible()
    expect(cells).to_have_count(count + 1)
    expect(cells.nth(index + 1).locator(".cm-content")).to_contain_text("sum(values) / len(values)")
    assert "set_next_input" not in fast.locator(".jp-Cell-outputArea").inner_text()


def _heal_replaces_the_cell(page, heal, *, shot: str) -> None:
    """%%heal ends its cell offering Replace this cell with a diff; pressing it puts the
    fix into that cell, which is not run again."""
    from playwright.sync_api import expect

    _run_in_place(page, heal)
    replace = heal.get_by_role("button", name="Replace this cell")
    expect(replace).to_be_visible(timeout=90_000)
    expect(heal.get_by_text("Diff to your cell")).to_be_visible()
    expect(heal.locator(".jp-InputPrompt")).not_to_contain_text("*")
    prompt = heal.locator(".jp-InputPrompt").inner_text()
    heal.locator(".selfheal-decision").screenshot(path=str(OUTPUT / shot))
    replace.click()
    expect(heal.get_by_text("Replaced the cell's code with the fix")).to_be_visible()
    expect(heal.locator(".cm-content")).to_contain_text("prices.get('coffee', 0)")
    assert heal.locator(".jp-InputPrompt").inner_text() == prompt  # not run again
    assert "%%heal" not in heal.locator(".cm-content").inner_text()


# ====================================================================== the review (issue 30)
REVIEW_DATA = (
    "import numpy as np\nimport pandas as pd\n\ndf = pd.DataFrame({\n"
    "    'region': ['north', 'south', 'north', 'east', 'south', 'east', 'north'],\n"
    "    'sales': [120, 80, 95, 60, 130, 75, 110],\n})\nmeasure = 'sales'"
)
REVIEW_SHARE = (
    'def share(totals):\n    """Each total as a percentage of the sum, one decimal."""\n'
    "    return np.round(totals / totals.sum() * 100, 1)"
)
REVIEW_CELL = (
    "totals = df.groupby('Region')[measure].sum().sort_values(ascending=False)\n"
    "print(share(totals))\nassert len(totals) == 3"
)
REVIEW_FIXED = REVIEW_CELL.replace("'Region'", "'region'")
REVIEW_MODEL = (
    "The column is called `region`. Here is the whole program:\n\n"
    + fence(
        "import numpy as np\nimport pandas as pd\n\n"
        "df = pd.DataFrame({'region': ['A', 'B', 'A'], 'sales': [1, 2, 3]})\nmeasure = 'sales'\n\n"
        "# Given function\ndef share(totals):\n    return totals / totals.sum()\n\n" + REVIEW_FIXED
    )
    + "\n\nThe groupby now uses the right column name, so the KeyError is gone and the shares print."
)
AUTO_CELL = "print(df['Sales'].sum())"
AUTO_MODEL = (
    "The column is `sales`, in lower case, as the DataFrame's columns show.\n\n"
    + fence("print(df['sales'].sum())")
    + "\n\nThat prints the total of the sales column."
)


@pytest.fixture()
def review_lab(shared_lab, request):
    """JupyterLab on a notebook that builds on itself (imports, data, a helper) with a
    %%heal cell whose fix is one word, and a cell that fails for autoheal."""
    replies = [
        Reply(REVIEW_MODEL, match="KeyError: 'Region'", chunk_delay_s=0.05),
        Reply(AUTO_MODEL, match="KeyError: 'Sales'", chunk_delay_s=0.05),
    ]
    cells = [
        # the model's answers are the subject: the tool's own edit of a misspelt column
        # (quick fixes) would fix both cells before the model is asked
        "%load_ext selfheal_jupyter\n%config SelfHeal.quick_fixes = False",
        REVIEW_DATA,
        REVIEW_SHARE,
        f"%%heal\n{REVIEW_CELL}",
        "print('the next cell')",
        "%agent_autoheal on",
        AUTO_CELL,
        "print('the last cell')",
    ]
    with shared_lab.serve(request.node.name, replies, {"review.ipynb": cells}) as (base, server):
        yield base, server, request.node.name


def _saved_sources(page, base: str, name: str) -> list[str]:
    """The notebook's cell sources as saved (the editor's text exactly)."""
    before = get_json(f"{base}/api/contents/{name}?content=0")["last_modified"]
    page.keyboard.press("Control+s")
    wait_until(
        lambda: get_json(f"{base}/api/contents/{name}?content=0")["last_modified"] != before,
        30,
        "the notebook to be saved",
    )
    return [c["source"] for c in get_json(f"{base}/api/contents/{name}")["content"]["cells"]]


def test_the_review_shows_the_minimal_fix_and_the_decision_where_the_user_is(review_lab, chromium):
    """Issue 30's scenario as a user meets it, at a laptop's 1280×800: the model answers
    with imports, the notebook's helper redefined, made-up data and the one-word fix.
    While it works the panel says "Attempt 1 of 4" in words and hides the raw reply;
    when it ends the verdict, a diff of one changed line (the word marked) and Accept /
    Reject are in view without scrolling; Accept puts exactly the user's cell with the
    one word changed into it. The progress row (status in words, timer, Stop) stays in
    view while the panel runs past the view's end. Autoheal's button shows its whole label above a folded
    traceback, reads "Fixing…" once pressed, and Reject leaves the cell as it was.
    Screenshots go to test-output/browser/review-*.png (review-failure.png on failure)."""
    from playwright.sync_api import expect

    base, server, folder = review_lab
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium, height=800)  # a laptop's 1280×800
    try:
        cells = _open(page, base, f"{folder}/review.ipynb", 8)
        cells.nth(0).locator(".cm-content").click()
        for _ in range(4):  # %load_ext, the data, the helper, the %%heal cell: as a user runs them
            page.keyboard.press("Shift+Enter")
        heal = cells.nth(3)

        # --- progress in words; the model's raw reply hidden ----------------------
        expect(heal.get_by_text("Attempt 1 of 4 · writing the fix")).to_be_visible()
        # the status row, the timer and Stop stay in view though the panel runs past the view's end
        expect(heal.locator(".selfheal-panel .selfheal-progress")).to_be_in_viewport()
        expect(heal.get_by_role("button", name="Stop")).to_be_in_viewport()
        expect(heal.locator(".selfheal-tokens")).to_have_count(0)
        expect(heal.get_by_role("button", name="Show the model's writing")).to_be_visible()
        page.screenshot(path=str(OUTPUT / "review-progress.png"))

        # --- the decision, in view when the run ends -------------------------------
        decision = heal.locator(".selfheal-decision")
        expect(decision).to_be_visible(timeout=90_000)
        headline = heal.locator(".selfheal-summary").last
        expect(headline).to_contain_text("✔ Fixed — verified by your asserts")
        accept = decision.get_by_role("button", name="Accept (Replace this cell)")
        reject = decision.get_by_role("button", name="Reject")
        diff = decision.locator(".selfheal-diff")
        for shown in (headline, diff, accept, reject):
            expect(shown).to_be_in_viewport()
        expect(heal.locator(".selfheal-history")).to_contain_text("How it got there")
        expect(heal.locator(".selfheal-history .selfheal-iteration").first).not_to_be_visible()  # folded
        expect(diff.locator('[data-diff="del"]')).to_have_count(1)
        expect(diff.locator('[data-diff="add"]')).to_have_count(1)
        expect(diff.locator('[data-diff-word="add"]')).to_have_text("region")
        assert "import" not in diff.inner_text() and "selfheal removed" not in diff.inner_text()
        page.screenshot(path=str(OUTPUT / "review-decision.png"))

        accept.click()
        expect(heal.get_by_text("Replaced the cell's code with the fix")).to_be_visible()
        assert _saved_sources(page, base, f"{folder}/review.ipynb")[3] == REVIEW_FIXED  # exactly: one word changed

        # --- autoheal: the whole label above a folded traceback; Fixing…; Reject ---
        cells.nth(5).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")  # %agent_autoheal on
        page.keyboard.press("Shift+Enter")  # the failing cell
        failing = cells.nth(6)
        ask = failing.get_by_role("button", name="Ask the agent to fix this")
        expect(ask).to_be_visible()
        expect(ask).to_have_text("Ask the agent to fix this")
        assert ask.evaluate("b => b.scrollWidth <= b.clientWidth"), "the label is cut off"
        error = failing.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        expect(error).to_contain_text("frames inside pandas")
        expect(error).to_contain_text("folded: %tb shows the whole traceback")
        assert "hashtable_class_helper" not in error.inner_text()
        assert ask.bounding_box()["y"] < error.bounding_box()["y"], "the button is not above the traceback"
        failing.screenshot(path=str(OUTPUT / "review-autoheal.png"))
        ask.click()
        fixing = failing.get_by_role("button", name="Fixing…")
        expect(fixing).to_be_disabled()
        expect(failing.get_by_text("Attempt 1 of 4 · writing the fix")).to_be_visible()
        decision = failing.locator(".selfheal-decision")
        expect(decision).to_be_visible(timeout=90_000)
        expect(failing.locator(".selfheal-summary").last).to_contain_text("Runs — nothing checked its output")
        expect(decision).to_contain_text("review the change before you accept it")
        page.screenshot(path=str(OUTPUT / "review-autoheal-decision.png"))
        decision.get_by_role("button", name="Reject").click()
        expect(failing.get_by_text("Rejected: your cell and your kernel are as they were")).to_be_visible()
        expect(cells).to_have_count(8)
        sources = _saved_sources(page, base, f"{folder}/review.ipynb")
        assert sources[6] == AUTO_CELL and sources[3] == REVIEW_FIXED
    except Exception:
        page.screenshot(path=str(OUTPUT / "review-failure.png"), full_page=True)
        raise
    finally:
        context.close()


# ====================================================================== what will run (issue 39)
CHART_CELL = (
    "totals = df.groupby('Region')[measure].sum().sort_values(ascending=False)\n"
    "print(share(totals))\ntotals.plot(kind='bar', title='Total sales per region')"
)
CHART_MODEL = "The column is called `region`. Here is the whole program:\n\n" + fence(
    "import numpy as np\nimport pandas as pd\n\n# Given function\ndef share(totals):\n"
    "    return totals / totals.sum()\n\n# Corrected program\n" + CHART_CELL.replace("'Region'", "'region'")
)
ROWS_CELL = "print(len(df['Rows']))"


@pytest.fixture()
def what_will_run_lab(shared_lab, request):
    """JupyterLab on a notebook with a chart heal whose model redefines the notebook's
    helper, a heal a steered model answers with a probe of where it runs, and two
    failing cells for autoheal (Accept, then Accept and run)."""
    from tests.unit.test_minimal import STEERED_CELL, STEERED_MODEL

    replies = [
        Reply(CHART_MODEL, match="KeyError: 'Region'", chunk_delay_s=0.03),
        Reply(fence(STEERED_MODEL), match="NameError", chunk_delay_s=0.03),
        Reply(AUTO_MODEL, match="KeyError: 'Sales'"),
        Reply(fence("print(len(df))"), match="KeyError: 'Rows'"),
    ]
    cells = [
        # the model's fixes are the subject: the tool's own edit of a misspelt column
        # (quick fixes) would fix the chart and autoheal cells before the model is asked
        "%load_ext selfheal_jupyter\n%config SelfHeal.quick_fixes = False",
        REVIEW_DATA,
        REVIEW_SHARE,
        f"%%heal\n{CHART_CELL}",
        f"%%heal\n{STEERED_CELL.rstrip()}",
        "%agent_autoheal on",
        AUTO_CELL,
        ROWS_CELL,
    ]
    with shared_lab.serve(request.node.name, replies, {"will-run.ipynb": cells}) as (base, server):
        yield base, server, request.node.name


def test_the_review_shows_what_will_run_and_asks_before_a_flagged_fix_runs(what_will_run_lab, chromium):
    """Issue 39 as a user meets it. The chart heal's review shows the output of the
    code handed over (the notebook's own share(), in percent) and its figure, saying
    the passing program's differed; the status row sits where the panel ends while it
    grows. The steered heal's review says "This fix adds: ... a probe of where it runs
    (line 4)" above Accept, offers no Accept and run, and Run in my kernel asks first.
    Autoheal: Accept drops the cell's stale KeyError; Accept and run runs the fix in
    the cell. Screenshots: test-output/browser/will-run-*.png."""
    from playwright.sync_api import expect

    base, server, folder = what_will_run_lab
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    context, page = _new_page(chromium)
    try:
        cells = _open(page, base, f"{folder}/will-run.ipynb", 8)
        cells.nth(0).locator(".cm-content").click()
        for _ in range(4):  # %load_ext, the data, the helper, the chart heal
            page.keyboard.press("Shift+Enter")
        chart = cells.nth(3)

        # --- progress: the status row is the panel's last row, current ------------
        status = chart.locator(".selfheal-panel .selfheal-progress")
        expect(status).to_contain_text("Attempt 1 of 4 · writing the fix")
        expect(
            chart.locator(
                ".selfheal-panel .selfheal-iteration, .selfheal-panel .jp-Collapse, "
                ".selfheal-panel .lm-AccordionPanel, .selfheal-panel .widget-accordion"
            ).first
        ).to_be_visible()
        accordion = chart.locator(".selfheal-panel .widget-accordion").first
        expect(accordion).to_contain_text("your cell")
        box, row = accordion.bounding_box(), status.bounding_box()
        assert row["y"] >= box["y"] + box["height"], "the status row is not below the attempts"
        chart.locator(".selfheal-panel").screenshot(path=str(OUTPUT / "will-run-progress.png"))

        # --- the chart fix: its own output and figure ------------------------------
        decision = chart.locator(".selfheal-decision")
        expect(decision).to_be_visible(timeout=120_000)
        output = decision.locator(".selfheal-fix-output")
        expect(output).to_contain_text("48.5")
        expect(output.locator('img[alt="figure"]')).to_be_visible()
        expect(output).to_contain_text("The passing program showed something else")
        assert "0.485" not in output.inner_text()
        expect(decision.locator(".selfheal-flags")).to_have_count(0)
        decision.screenshot(path=str(OUTPUT / "will-run-chart-decision.png"))

        # --- the steered heal: flagged above Accept; Run in my kernel asks first ---
        _run_in_place(page, cells.nth(4))
        steered = cells.nth(4)
        decision = steered.locator(".selfheal-decision")
        expect(decision).to_be_visible(timeout=120_000)
        flags = decision.locator(".selfheal-flags")
        expect(flags).to_contain_text("This fix adds:")
        expect(flags).to_contain_text("a probe of where it runs (line 4)")
        expect(flags).to_contain_text("The passing program tried to reach the network")
        accept = decision.get_by_role("button", name="Accept (Replace this cell)")
        assert flags.bounding_box()["y"] < accept.bounding_box()["y"], "the flags are not above Accept"
        expect(decision.get_by_role("button", name="Accept and run")).to_be_hidden()
        decision.get_by_role("button", name="Run in my kernel").click()
        question = decision.locator(".selfheal-question")
        expect(question).to_contain_text("a probe of where it runs (line 4)")
        expect(question).to_contain_text("Run it in your kernel, where it has your network")
        expect(decision.get_by_role("button", name="Run it anyway")).to_be_visible()
        decision.screenshot(path=str(OUTPUT / "will-run-steered-asks.png"))
        decision.get_by_role("button", name="Do not run it").click()
        expect(accept).to_be_visible()

        # --- autoheal: Accept drops the stale error; Accept and run runs it --------
        _run_in_place(page, cells.nth(5))
        expect(cells.nth(5).locator(".jp-Cell-outputArea")).to_contain_text("autoheal on")
        for index, expected in ((6, None), (7, "7")):
            failing = cells.nth(index)
            _run_in_place(page, failing)
            error = failing.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            expect(error).to_contain_text("KeyError")
            failing.get_by_role("button", name="Ask the agent to fix this").click()
            expect(failing.locator(".selfheal-task")).to_contain_text("autoheal")
            expect(failing.locator(".selfheal-task")).not_to_contain_text("%%heal")
            decision = failing.locator(".selfheal-decision")
            expect(decision).to_be_visible(timeout=120_000)
            if expected is None:
                decision.screenshot(path=str(OUTPUT / "will-run-autoheal-decision.png"))
                decision.get_by_role("button", name="Accept (Replace this cell)").click()
                expect(failing.get_by_text("Replaced the cell's code with the fix")).to_be_visible()
                expect(error).to_have_count(0)  # the old KeyError went with the old code
                expect(failing.locator(".selfheal-decision")).to_be_visible()  # the review stays
            else:
                decision.get_by_role("button", name="Accept and run").click()
                expect(failing.locator(".jp-Cell-outputArea")).to_have_text(expected, timeout=60_000)
                expect(error).to_have_count(0)
        sources = _saved_sources(page, base, f"{folder}/will-run.ipynb")
        assert sources[6] == "print(df['sales'].sum())" and sources[7] == "print(len(df))"
        page.screenshot(path=str(OUTPUT / "will-run-page.png"), full_page=True)
    except Exception:
        page.screenshot(path=str(OUTPUT / "will-run-failure.png"), full_page=True)
        raise
    finally:
        context.close()
