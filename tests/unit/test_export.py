"""Exports stay inert pages (issue 35): ``%agent_export`` (a run) and ``--hints`` (what a
student asked), published as a teacher does, with the real ``jupyter nbconvert --to
html``. Everything that came from a model or a candidate — plan steps, verdicts,
feedback, diffs, stdout, error messages, hint prose — carries live markup and lines of
backticks that would close a code fence; none of it may be active in the page."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from selfheal_jupyter.model import (
    Candidate,
    ErrorInfo,
    ExecutionResult,
    Frame,
    Hint,
    Iteration,
    Plan,
    Run,
    SpecViolation,
    Task,
    Verdict,
)
from selfheal_jupyter.notebook.export import export_hints, export_run

PAYLOADS = [
    "<img src=x onerror=alert('pwn-img')>",
    "<script>alert('pwn-script')</script>",
    "<iframe src=\"javascript:alert('pwn-iframe')\"></iframe>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(\'pwn-meta\')">',
    "<form action=\"javascript:alert('pwn-form')\"><input type=submit></form>",
    "[click me](javascript:alert('pwn-link'))",
    "<a href=\"javascript:alert('pwn-a')\">x</a>",
    "<svg onload=alert('pwn-svg')></svg>",
]
HOSTILE = "\n".join(["``` ", "```", "~~~", *PAYLOADS, "````", "<!--", *PAYLOADS])
"""Fences of every length first (to close whatever block the text is in), then markup."""


def hostile_run() -> Run:
    error = ErrorInfo(
        type="ValueError",
        message=HOSTILE,
        line=1,
        frames=[Frame("candidate.py", 1, "<module>", HOSTILE)],
        locals={"x": HOSTILE},
    )
    result = ExecutionResult(status="error", exit_code=1, stdout=HOSTILE, stderr=HOSTILE, error=error)
    violation = SpecViolation(rule="hard_coded", message=HOSTILE, fix=HOSTILE)
    first = Iteration(0, Candidate("x = 1\n", 0), result, Verdict(False, reasons=[HOSTILE]), feedback=HOSTILE)
    second = Iteration(
        1,
        Candidate(f"x = {HOSTILE!r}\n", 1, reply=HOSTILE),
        result,
        Verdict(False, reasons=[HOSTILE], spec_violations=[violation]),
        diff=f"--- a\n+++ b\n@@ -1 +1 @@\n-x = 1\n+x = {HOSTILE}\n",
        feedback=HOSTILE,
        diagnosis=HOSTILE,
    )
    hint = Hint(2, "Why", HOSTILE, facts=[HOSTILE], prose=HOSTILE, check="passed", cell="x = 1\n", diff=HOSTILE)
    return Run(
        task=Task(prompt=HOSTILE, tests=HOSTILE, initial_code="x = 1\n"),
        plan=Plan(steps=[HOSTILE, HOSTILE]),
        iterations=[first, second],
        outcome="failed",
        error=HOSTILE,
        hints=[hint],
    )


class Live(HTMLParser):
    """What of the payloads is live in a page: elements, attributes, script text."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        for name, value in attrs:
            if "pwn" in (value or "") or "pwn" in name:
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and "pwn" in data:
            self.found.append(f"<script>{data[:60]}")

    def handle_comment(self, data: str) -> None:
        if "pwn" in data:
            self.found.append("a comment swallowing the page")


def nbconvert(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return path.with_suffix(".html").read_text(encoding="utf-8")


def test_both_exports_published_with_nbconvert_hold_no_live_markup_from_a_model_or_a_candidate(tmp_path):
    run = hostile_run()
    pages = {
        "run": nbconvert(export_run(run, tmp_path / "run.ipynb")),
        "hints": nbconvert(export_hints(run.hints, tmp_path / "hints.ipynb")),
    }
    for name, page in pages.items():
        live = Live()
        live.feed(page)
        assert live.found == [], (name, live.found)
        assert "pwn-img" in page and "pwn-script" in page  # shown, as text
    assert pages["run"].count("pwn-meta") >= 10  # every field is in the page, none swallowed
