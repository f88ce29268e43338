"""The live panel in a real JupyterLab, driven in Debian's Chromium by Playwright.

JupyterLab (from PyPI) serves a notebook in a temp dir; its kernels reach the
scripted server through ``OPENAI_BASE_URL``. The test types Shift+Enter like a user:
the first %%agent run is stopped with the panel's Stop button while its candidate
sleeps in the sandbox; the second passes and its code is inserted with **Insert as
next cell**. A screenshot of the panel is saved under ``test-output/browser/``.
Playwright only drives ``/usr/bin/chromium``; nothing downloads a browser.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.scripted_server import Reply, ScriptedServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
OUTPUT = Path(__file__).resolve().parent.parent / "test-output" / "browser"

SLOW_TASK = "Wait a long time, then print done."
FAST_TASK = "Print the mean of the numbers 1, 2 and 3."
SLOW_CODE = "import time\nprint('working', flush=True)\ntime.sleep(60)\nprint('done')"
BUGGY = "values = [1, 2, 3]\nprint(sum(values) / len(values[5:]))"
FIXED = "values = [1, 2, 3]\nprint(sum(values) / len(values))"


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture()
def lab(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    pytest.importorskip("playwright.sync_api")
    replies = [
        Reply("1. Wait for a long time.\n2. Print done.", match="Wait a long time"),
        Reply(fence(SLOW_CODE), match="Wait a long time"),
        Reply("1. Put the numbers in a list.\n2. Print their mean.", match="mean of the numbers"),
        Reply(fence(BUGGY), match="mean of the numbers"),
        Reply("Divide by the length of the whole list.\n\n" + fence(FIXED), match="ZeroDivisionError"),
    ]
    root = tmp_path / "work"
    root.mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext selfheal_jupyter"),
        nbformat.v4.new_code_cell(f"%%agent\n{SLOW_TASK}"),
        nbformat.v4.new_code_cell(f"%%agent\n{FAST_TASK}"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "panel.ipynb")
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    with ScriptedServer(replies) as server:
        port = free_port()
        env = dict(
            os.environ,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        )
        env.pop("SELFHEAL_MODEL", None)
        log = open(tmp_path / "lab.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
             f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
             "--ServerApp.password=", f"--ServerApp.root_dir={root}",
             "--ServerApp.disable_check_xsrf=True"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _answers(f"{base}/api/status"), 60, "JupyterLab to answer")
            yield base, server, tmp_path
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def _answers(url: str) -> bool:
    try:
        get_json(url)
        return True
    except OSError:
        return False


def _kernel_idle(base: str) -> bool:
    sessions = get_json(f"{base}/api/sessions")
    return bool(sessions) and sessions[0]["kernel"]["execution_state"] == "idle"


def test_panel_fills_stops_and_inserts(lab):
    from playwright.sync_api import expect, sync_playwright

    base, server, tmp_path = lab
    OUTPUT.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=60_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        try:
            page.goto(f"{base}/lab/tree/panel.ipynb")
            wait_until(lambda: _kernel_idle(base), 90, "the kernel to start")
            cells = page.locator(".jp-Notebook .jp-Cell")
            expect(cells).to_have_count(3)

            cells.nth(0).locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")  # %load_ext
            page.keyboard.press("Shift+Enter")  # the slow run

            # --- Stop: the first run's candidate sleeps in the sandbox -------------
            slow = cells.nth(1)
            expect(slow.locator(".selfheal-panel")).to_be_visible()
            wait_until(lambda: server.remaining == 3, 60, "the slow candidate to be written")
            expect(slow.get_by_text("Running iteration 1 in the sandbox")).to_be_visible()
            expect(slow.locator(".selfheal-panel .selfheal-code")).to_be_visible()
            slow.locator(".selfheal-panel").screenshot(path=str(OUTPUT / "panel-running.png"))
            pressed = time.monotonic()
            slow.get_by_role("button", name="Stop").click()
            expect(slow.locator('[data-outcome="cancelled"]').first).to_be_visible(timeout=10_000)
            stop_s = time.monotonic() - pressed
            assert stop_s < 5, f"Stop took {stop_s:.1f} s"
            (OUTPUT / "stop-seconds.txt").write_text(f"{stop_s:.2f}\n")

            # --- a run that passes; its code goes into a new cell ------------------
            fast = cells.nth(2)
            fast.locator(".cm-content").click()
            page.keyboard.press("Control+Enter")  # run in place (no new empty cell)
            panel = fast.locator(".selfheal-panel")
            insert = fast.get_by_role("button", name="Insert as next cell")
            expect(insert).to_be_visible(timeout=90_000)
            expect(fast.locator('[data-outcome="success"]').first).to_be_visible()
            expect(fast.locator(".selfheal-traceback").last).to_contain_text("ZeroDivisionError")
            panel.screenshot(path=str(OUTPUT / "panel.png"))
            fast.screenshot(path=str(OUTPUT / "cell.png"))
            insert.click()
            expect(cells).to_have_count(4)
            expect(cells.nth(3).locator(".cm-content")).to_contain_text("sum(values) / len(values)")
            expect(fast.get_by_text("Inserted as the next cell.")).to_be_visible()
            page.screenshot(path=str(OUTPUT / "page.png"), full_page=True)
        finally:
            browser.close()
    assert server.remaining == 0
