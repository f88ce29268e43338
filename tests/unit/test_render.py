"""Static rendering of hand-made runs: every section present, text escaped, diff
coloured, failing line marked. Fast; no kernel, no sandbox."""

from __future__ import annotations

import re

from selfheal_jupyter.codeblocks import code_diff
from selfheal_jupyter.model import (
    Candidate,
    ErrorInfo,
    ExecutionResult,
    Frame,
    Iteration,
    Plan,
    RichOutput,
    Run,
    Task,
    Totals,
    Usage,
    Verdict,
)
from selfheal_jupyter.model import TestOutcome as Outcome
from selfheal_jupyter.render.diff import diff_html
from selfheal_jupyter.render.html import code_html, run_html, summary_text
from selfheal_jupyter.render.traceback import traceback_text

BAD = "import pandas as pd\ntotals = df.groupby('regoin')['sales'].sum()\nprint(totals)\n"
GOOD = "import pandas as pd\ntotals = df.groupby('region')['sales'].sum()\nprint(totals)\n"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def make_run(prompt: str = "Sum <sales> by region & plot") -> Run:
    error = ErrorInfo(
        type="KeyError",
        message="'regoin'",
        line=2,
        frames=[Frame("candidate.py", 2, "<module>", "totals = df.groupby('regoin')['sales'].sum()")],
        locals={"df": "DataFrame(4 rows × 2 columns)"},
    )
    first = Iteration(
        index=1,
        candidate=Candidate(BAD, 1, reply="```python\n" + BAD + "```"),
        result=ExecutionResult(status="error", exit_code=1, stderr="Traceback ...", error=error, stdout="<before>"),
        verdict=Verdict(False, ["KeyError: 'regoin'"]),
        usage=Usage(100, 40),
    )
    second = Iteration(
        index=2,
        candidate=Candidate(GOOD, 2),
        result=ExecutionResult(
            status="ok",
            exit_code=0,
            stdout="region\nnorth    3\n",
            outputs=[RichOutput("image/png", PNG), RichOutput("text/html", "<table><tr><td>north</td></tr></table>")],
            tests=[Outcome("assert totals['north'] == 3", True)],
        ),
        verdict=Verdict(True, [], tests_passed=1, verified_by=["your tests"]),
        diff=code_diff(BAD, GOOD),
        usage=Usage(150, 50),
    )
    return Run(
        task=Task(prompt=prompt),
        plan=Plan(["Group <df> by region", "Sum sales", "Plot a bar chart"]),
        iterations=[first, second],
        outcome="success",
        model="scripted-model",
        totals=Totals(iterations=2, prompt_tokens=250, completion_tokens=90, duration_s=3.25),
    )


def test_every_section_present():
    page = run_html(make_run())
    assert 'class="selfheal-plan"' in page and "<ol" in page and page.count("<li") == 3
    assert page.count('class="selfheal-iteration"') == 2
    assert page.count('class="selfheal-code"') == 2
    assert 'class="selfheal-diff"' in page
    assert 'class="selfheal-traceback"' in page and "KeyError" in page
    assert "data:image/png;base64," + PNG in page
    assert "<table>" in page and "<td>north</td>" in page  # DataFrame HTML shown as HTML
    assert "region\nnorth    3" in page  # stdout
    assert "assert totals[&#x27;north&#x27;] == 3" in page  # the user's test, escaped
    assert 'data-outcome="success"' in page
    assert "Check: ✔ passed" in page and "Check: ✘ failed" in page
    assert "QA" not in page


def test_summary_line_has_outcome_iterations_tokens_time():
    text = summary_text(make_run())
    assert text.startswith("✔ Done — verified by your tests · ")
    assert "2 attempts" in text and "340 tokens" in text and "3.2 s" in text
    assert "scripted-model" in text


def test_a_pass_that_only_ran_never_reads_as_success():
    run = make_run()
    run.iterations[1].verdict = Verdict(True, ["ran cleanly (no tests given)"])
    assert summary_text(run).startswith("● Runs — nothing checked its output · ")
    page = run_html(run)
    assert 'data-verified="false"' in page and "✔" not in page.split('class="selfheal-summary"')[1]
    run.task.initial_code = "assert 1 + 1 == 2\nprint(totals)\n"  # a heal whose asserts were kept
    run.iterations[1].verdict = Verdict(
        True, ["ran cleanly (no tests given)"], spec_checked=True, verified_by=["your asserts"]
    )
    assert summary_text(run).startswith("✔ Fixed — verified by your asserts · ")
    run.outcome = "budget_exhausted"
    assert summary_text(run).startswith("✘ Not fixed — budget exhausted · ")


def test_a_pass_of_checks_the_wrong_program_passes_too_says_they_verify_nothing():
    """The task said the given program is wrong and it passed its asserts too: the
    headline, the transcript and the record say so, never "verified by your asserts"."""
    run = make_run()
    run.task.initial_code = "assert 1 + 1 == 2\nprint(totals)\n"
    run.task.given_is_wrong = True
    run.iterations[1].verdict = Verdict(
        True, ["ran cleanly; all 1 tests passed"], 1, spec_checked=True, blind_checks=["your asserts"]
    )
    blind = "your asserts also pass on the program the task says is wrong, so they do not verify the fix"
    assert summary_text(run).startswith(f"● Runs — {blind} · ")
    from selfheal_jupyter.render.text import verified_line

    assert verified_line(run) == f"not verified: {blind}"
    run.iterations[1].verdict.changed_behaviour = True
    assert summary_text(run).startswith(f"● Changed what your program showed — {blind} · ")
    assert verified_line(run) == f"not verified: it changed what the given program showed, but {blind}"
    assert 'data-verified="false"' in run_html(run) and "verified by" not in run_html(run)
    run.iterations[1].verdict.verified_by = ["checks from your data"]
    assert summary_text(run).startswith(f"✔ Fixed — verified by checks from your data ({blind}) · ")
    assert verified_line(run) == f"verified by checks from your data; {blind}"


def test_user_and_model_text_is_escaped():
    run = make_run(prompt="<script>alert(1)</script>")
    run.iterations[0].result.stdout = "<b>bold</b>"
    page = run_html(run)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "Group &lt;df&gt; by region" in page


def test_diff_lines_are_coloured_by_kind():
    html = diff_html(code_diff(BAD, GOOD))
    kinds = re.findall(r'data-diff="(\w+)"', html)
    assert kinds.count("add") == 1 and kinds.count("del") == 1
    assert "hunk" in kinds and "meta" in kinds
    added = re.search(r'<div data-diff="add" style="([^"]*)">(.*?)</div>', html)
    assert "background:#e6ffec" in added.group(1) and "region" in added.group(2)
    removed = re.search(r'<div data-diff="del" style="([^"]*)">(.*?)</div>', html)
    assert "background:#ffebe9" in removed.group(1) and "regoin" in removed.group(2)
    assert diff_html("") == ""


def test_the_changed_word_is_marked_inside_a_changed_line():
    html = diff_html(code_diff(BAD, GOOD))
    assert re.findall(r'data-diff-word="(\w+)"[^>]*>([^<]*)<', html) == [("del", "regoin"), ("add", "region")]
    # a changed line is paired with the added line most like it, not the first one
    moved = diff_html(code_diff("a = f('Region')\n", "def g():\n    pass\na = f('region')\n"))
    assert re.findall(r'data-diff-word="(\w+)"[^>]*>([^<]*)<', moved) == [("del", "Region"), ("add", "region")]
    # lines that have little in common are not marked word by word
    other = diff_html(code_diff("x = 1\n", "print('something else entirely')\n"))
    assert "data-diff-word" not in other


def test_failing_line_is_marked_in_code_and_traceback():
    page = run_html(make_run())
    first = page.split('data-iteration="1"')[1].split('data-iteration="2"')[0]
    marks = re.findall(r'data-failing-line="(\d+)"', first)
    assert marks and set(marks) == {"2"}
    assert "----&gt;" in first
    second = page.split('data-iteration="2"')[1]
    assert "data-failing-line" not in second


def test_code_is_highlighted_with_inline_styles_only():
    html = code_html("def f(x):\n    return x  # note\n")
    assert "<style" not in html and 'class="k"' not in html
    assert 'style="color: #008000; font-weight: bold">def</span>' in html
    assert html.count("<div><span") == 2  # one row per line, numbered


def test_traceback_text_is_ipython_like():
    run = make_run()
    text = traceback_text(run.iterations[0].result.error, BAD)
    assert text.splitlines()[0] == "Traceback (most recent call last):"
    assert "----> totals = df.groupby('regoin')" in text
    assert text.endswith("KeyError: 'regoin'")


def test_cancelled_and_error_runs_say_so():
    run = make_run()
    run.outcome = "cancelled"
    assert summary_text(run).startswith("■ stopped")
    run.outcome = "error"
    run.error = "The endpoint http://127.0.0.1:9/v1 does not answer: start it, or set SelfHeal.base_url."
    page = run_html(run)
    assert "does not answer" in page and 'data-outcome="error"' in page


def test_quiet_shows_only_task_and_summary():
    page = run_html(make_run(), quiet=True)
    assert "selfheal-iteration" not in page and "selfheal-summary" in page


def test_a_repeated_attempt_says_so():
    run = make_run()
    run.iterations[1].diff = ""
    page = run_html(run)
    assert page.count('class="selfheal-same"') == 1  # not on the first attempt
    assert "Same code as the previous attempt." in page.split('data-iteration="2"')[1]


def test_html_from_the_sandbox_cannot_run_or_load_anything_in_the_users_browser():
    from selfheal_jupyter.model import ExecutionResult, RichOutput
    from selfheal_jupyter.render.html import result_html

    hostile = (
        '<table class="dataframe" border="1"><tr><th>a</th><td onclick="steal()">1</td></tr></table>'
        "<script>fetch('/api/kernels')</script><img src=\"http://evil.example/x.png\">"
        '<a href="javascript:alert(1)">x</a><style>body{background:url(http://evil.example)}</style>'
    )
    html = result_html(ExecutionResult(status="ok", outputs=[RichOutput("text/html", hostile)]))
    assert '<table border="1">' in html  # no class: it could borrow the page's styles
    assert "<td>1</td>" in html
    for bad in ("<script", "onclick", "evil.example", "javascript:", "<style>body", "fetch("):
        assert bad not in html, bad


def test_the_users_cell_is_called_your_cell_in_the_traceback():
    run = make_run()
    run.task.initial_code = BAD
    run.iterations[0].index = 0
    page = run_html(run)
    assert "candidate.py" not in page
    assert "your cell" in page and "your cell · ✘ KeyError" in page
    assert "attempt 2" not in page  # the passing round has no traceback


def test_runtime_values_each_once_and_tables_as_laid_out():
    run = make_run()
    run.iterations[0].runtime_values = [
        Outcome("s['c'] + t['c']", False, "KeyError: 'c'"),
        Outcome("s['c']", False, "KeyError: 'c'"),
        Outcome("t['c']", False, "KeyError: 'c'"),
        Outcome("t", True, "region\na    4\nb    2\nName: sales, dtype: int64"),
    ]
    first = run_html(run).split('data-iteration="1"')[1].split('data-iteration="2"')[0]
    values = first.split('class="selfheal-values"')[1]
    assert "s[&#x27;c&#x27;] + t" not in values  # raised what its part raised: said once
    assert values.count("raises KeyError") == 2
    table = re.search(r'<pre class="selfheal-value"[^>]*>([^<]*)</pre>', values).group(1)
    assert table == "region\na    4\nb    2\nName: sales, dtype: int64"  # rows kept, not flattened


def test_sampled_programs_in_plain_words():
    from selfheal_jupyter.model import Sample

    run = make_run()
    run.iterations[1].samples = [
        Sample(GOOD, "ok", True, tests_passed=1, agreement=1, chosen=True),
        Sample(BAD, "error", False, fresh=True),
    ]
    page = run_html(run)
    assert "2 programs tried in this attempt; the one marked ➜ was kept" in page
    assert "program 1: passed · 1 of your tests passed" in page
    assert "program 2 (written afresh): failed" in page
    assert "agreement" not in page and "Sampled programs" not in page


def test_the_folded_record_keeps_the_history_under_how_it_got_there():
    page = run_html(make_run(), folded=True)
    history = page.split('<details class="selfheal-history"')[1]
    assert history.split(">", 1)[1].startswith("<summary")  # closed: no "open" attribute
    assert "How it got there (2 attempts)" in history
    assert history.count('class="selfheal-iteration"') == 2
    assert page.index("selfheal-history") < page.index('class="selfheal-summary"')  # the verdict comes last


def test_a_success_says_what_verified_it_and_one_that_only_runs_never_reads_as_success_alone():
    checked = make_run()
    assert summary_text(checked).startswith("✔ Done — verified by your tests ·")
    assert 'data-verified="true"' in run_html(checked)
    only_runs = make_run()
    last = only_runs.iterations[-1]
    last.verdict = Verdict(True, ["ran cleanly (no tests given)"])
    last.result.tests = []
    only_runs.task = Task(
        prompt="Make this code run without errors.", initial_code="# monthly totals of the sales\nprint(totals)\n"
    )
    assert summary_text(only_runs).startswith("● Runs — nothing checked its output ·")
    page = run_html(only_runs)
    assert 'data-verified="false"' in page and 'class="selfheal-intent-review"' in page
    review = page[page.index('class="selfheal-intent-review"') :]
    assert "monthly totals of the sales" in review and "region\nnorth    3" in review
    failed = make_run()
    failed.outcome = "budget_exhausted"
    assert "verified" not in summary_text(failed) and "Runs —" not in summary_text(failed)


# ----------------------------------------------------------------------- every event, every renderer
def one_of_each_event(run: Run) -> list:
    """An event of each type an observer may be handed (``EVENT_TYPES``)."""
    from selfheal_jupyter.loop import events as ev
    from selfheal_jupyter.model import Explanation

    failed, passed = run.iterations
    explained = Explanation(
        "KeyError: 'regoin'", line=2, source="x", diagnosis=["`regoin` is not a column; `region` is"]
    )
    made = [
        ev.RunStarted(run),
        ev.PlanReady(Plan(["Sum sales by region."])),
        ev.TokensStreamed("developer", 1, "tot"),
        ev.CandidateReady(failed.candidate, ""),
        ev.ExecutionStarted(1),
        ev.ExecutionDone(1, failed.result),
        ev.FailureExplained(1, explained),
        ev.ModelWaiting(2),
        ev.VerdictReady(failed),
        ev.VerdictReady(passed),
        ev.CheckingFix(),
        ev.Waiting(1),
        ev.RunFinished(run),
    ]
    assert {type(e) for e in made} == set(ev.EVENT_TYPES)
    return made


def test_every_renderer_maps_every_event_type_once_and_renders_each():
    """A new event is one entry per renderer: a renderer that misses one fails here."""
    import io

    from selfheal_jupyter.loop.events import EVENT_TYPES
    from selfheal_jupyter.notebook.controller import CellRun
    from selfheal_jupyter.render.inline import StaticRenderer
    from selfheal_jupyter.render.text import Progress, Transcript
    from selfheal_jupyter.render.widget import Panel

    for renderer in (Progress, Panel, StaticRenderer, CellRun):
        assert set(renderer.HANDLERS) == set(EVENT_TYPES), renderer.__name__
    run = make_run()
    run.outcome = "success"
    out, err = io.StringIO(), io.StringIO()
    progress = Progress(err)
    progress.transcript = Transcript(out)
    panel = Panel("Sum sales by region", kind="task", max_iterations=4, on_stop=lambda: None, on_action=lambda _: None)
    static = StaticRenderer()
    try:
        for event in one_of_each_event(run):
            progress.on_event(event)
            panel.handle(event)
            static.handle(event)
    finally:
        progress.clear()
    assert "KeyError" in out.getvalue() and "Sum sales by region." in out.getvalue()
    assert panel.plan.value and "regoin" in panel.explanation.value + "".join(
        child.value for child in panel.accordion.children
    )
    assert panel.progress.bar_style == "success"
