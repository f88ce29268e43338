"""Static HTML of a run and of each iteration, derived from the Run record only.

The result survives ``nbconvert --to html`` and static viewers: inline styles, no
scripts, no widget state. Pygments highlights code with inline styles
(``noclasses=True``) for the same reason.
"""

from __future__ import annotations

import ast

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from ..codeblocks import code_diff
from ..model import (
    DATA_CHECK_PREFIX,
    DATA_RULES,
    Capability,
    ExecutionResult,
    Explanation,
    Iteration,
    NotebookContext,
    Plan,
    Run,
    Sample,
    Task,
    TestOutcome,
    Verdict,
    safe_outputs,
    split_checks,
)
from ..safe_output import HTML, PNG, clean_text
from .diff import diff_html
from .style import (
    AMBER,
    BLUE,
    BLUE_BG,
    BORDER,
    BOX,
    CODE_BG,
    GREEN,
    GREY,
    MONO,
    OUTCOME_STYLE,
    PRE,
    RED,
    RED_BG,
    YELLOW_BG,
    esc,
    heading,
    pre,
)
from .traceback import failing_line, traceback_html

_FORMATTER = HtmlFormatter(noclasses=True, nowrap=True, style="default")


def code_html(code: str, *, mark_line: int | None = None) -> str:
    """Syntax-highlighted code with line numbers; ``mark_line`` is marked like IPython's arrow."""
    body = highlight(clean_text(code), PythonLexer(stripnl=False, ensurenl=True), _FORMATTER)
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = []
    for number, line in enumerate(lines, start=1):
        if number == mark_line:
            rows.append(
                f'<div data-failing-line="{number}" style="background:{RED_BG}">'
                f'<span style="color:{GREEN};font-weight:700;user-select:none">----&gt;{number:>4} </span>'
                f"{line or ' '}</div>"
            )
        else:
            rows.append(
                f'<div><span style="color:{GREY};user-select:none">      {number:>3} </span>{line or " "}</div>'
            )
    return (
        f'<div class="selfheal-code" style="{BOX}"><pre style="margin:0;padding:6px 8px;{MONO};'
        f'line-height:1.45;background:{CODE_BG};white-space:pre">{"".join(rows)}</pre></div>'
    )


def plan_html(plan: Plan | None) -> str:
    """The plan as a numbered list."""
    if plan is None or not plan.steps:
        return ""
    source = {"user": " (yours)", "planner": "", "none": ""}.get(plan.source, "")
    items = "".join(f'<li style="margin:1px 0">{esc(step)}</li>' for step in plan.steps)
    return (
        f'<div class="selfheal-plan">{heading("Plan" + source)}'
        f'<ol style="margin:2px 0 4px 0;padding-left:24px">{items}</ol></div>'
    )


def _rich_outputs_html(result: ExecutionResult, title: str = "Output") -> str:
    parts = []
    # Written by untrusted code: only the kinds and forms hygiene lets through (HTML
    # sanitised, PNG checked, anything else dropped), whoever built this result.
    for out in safe_outputs(result.outputs):
        if out.mime == PNG:
            parts.append(f'<img alt="figure" style="max-width:100%" src="data:image/png;base64,{esc(out.data)}"/>')
        elif out.mime == HTML:
            parts.append(f'<div class="selfheal-rich" style="overflow:auto">{out.data}</div>')
        else:
            parts.append(pre(out.data))
    if not parts:
        return ""
    return (heading(title) if title else "") + "".join(parts)


def result_html(result: ExecutionResult | None, code: str = "", *, name: str = "") -> str:
    """What the sandbox run produced: stdout/stderr, rich outputs, the error, tests
    (``name``: what the traceback calls the program, e.g. "your cell")."""
    if result is None:
        return f'<div style="color:{GREY}">(not run)</div>'
    parts = []
    status_colour = GREEN if result.ok else RED
    parts.append(
        f'<div style="color:{GREY};{MONO}">sandbox: '
        f'<span style="color:{status_colour};font-weight:600">{esc(result.status)}</span>'
        f" in {result.duration_s:.2f} s</div>"
    )
    if result.message:
        parts.append(f'<div style="background:{YELLOW_BG};padding:4px 8px">{esc(result.message)}</div>')
    if result.stdout:
        more = " (truncated)" if result.stdout_truncated else ""
        parts.append(heading("stdout" + more) + pre(result.stdout))
    if result.stderr and not result.error:
        more = " (truncated)" if result.stderr_truncated else ""
        parts.append(heading("stderr" + more) + pre(result.stderr, colour=RED))
    parts.append(_rich_outputs_html(result))
    if result.error is not None:
        parts.append(heading("Traceback", RED) + traceback_html(result.error, code, name=name))
    if result.tests:
        rows = []
        for t in result.tests:
            mark = f'<span style="color:{GREEN}">✔</span>' if t.passed else f'<span style="color:{RED}">✘</span>'
            msg = f' <span style="color:{RED}">{esc(t.message)}</span>' if t.message else ""
            rows.append(f'<div style="{MONO}">{mark} {esc(t.source)}{msg}</div>')
        parts.append(heading("Your tests") + "".join(rows))
    return "".join(parts)


def spec_html(verdict: Verdict) -> str:
    """The spec mark: which of the user's asserts/tests the candidate changed, and the rule."""
    if not verdict.spec_violations:
        return ""
    rows = "".join(
        f"<li><b>{esc(v.title)}</b> "
        f'<span style="color:{GREY};{MONO}">[{esc(v.rule)}]</span>: {esc(v.message)}'
        f'<div style="color:{GREY}">to comply: {esc(v.fix)}</div></li>'
        for v in verdict.spec_violations
    )
    if all(v.rule in DATA_RULES for v in verdict.spec_violations):
        title, why = "⚠ Rejected: it does not use your data as it is", "(the answer must come from your data)"
    else:
        title, why = "⚠ Rejected: changes your spec", "(your asserts and tests are never weakened to reach success)"
    return (
        f'<div class="selfheal-spec" data-spec="violated" style="border-left:4px solid {RED};'
        f'background:{RED_BG};padding:4px 8px;margin:4px 0">'
        f'<b style="color:{RED}">{title}</b> {why}<ul style="margin:2px 0 2px 18px;padding:0">{rows}</ul></div>'
    )


def verdict_html(verdict: Verdict) -> str:
    """The check's verdict in one line; each fact once (the reasons already count the tests)."""
    colour, label = (GREEN, "✔ passed") if verdict.passed else (RED, "✘ failed")
    reasons = "; ".join(verdict.reasons)
    if verdict.spec_violations:
        reasons = "; ".join(x for x in (verdict.rejected_for, reasons) if x)
    return (
        f'<div class="selfheal-verdict" style="margin:4px 0"><b style="color:{colour}">Check: {label}</b>'
        f'<span style="color:{GREY}">{" · " + esc(reasons) if reasons else ""}</span></div>'
        + spec_html(verdict)
        + notebook_changes_line(verdict)
    )


def _sample_text(sample: Sample) -> str:
    what = (
        "passed" if sample.passed else ("failed" if sample.status in ("ok", "error") else f"failed ({sample.status})")
    )
    facts = [what]
    if sample.tests_passed:
        facts.append(f"{sample.tests_passed} of your tests passed")
    if sample.checks_passed:
        facts.append(f"{sample.checks_passed} generated checks passed")
    return " · ".join(facts)


def runtime_values(values: list[TestOutcome]) -> list[TestOutcome]:
    """The values to show, each fact once: an expression that raised what one of its
    parts raised (the same error) is left out, so is a repeat of an earlier line."""
    kept: list[TestOutcome] = []
    for v in values:
        inner = any(
            o is not v
            and o.passed == v.passed
            and o.message == v.message
            and o.source != v.source
            and o.source in v.source
            for o in values
        )
        if not inner and all((k.source, k.message) != (v.source, v.message) for k in kept):
            kept.append(v)
    return kept


def _value_html(v: TestOutcome) -> str:
    value = v.message if v.passed else "raises " + v.message
    if "\n" in value:  # a table (DataFrame, Series) or another many-line repr: kept as laid out
        return (
            f'<div style="{MONO}">{esc(v.source)} =</div>'
            f'<pre class="selfheal-value" style="{PRE};margin:0 0 4px 16px;white-space:pre">{esc(value)}</pre>'
        )
    return f'<div style="{MONO}">{esc(v.source)} = {esc(value)}</div>'


def notebook_changes_line(verdict: Verdict) -> str:
    """The notebook definitions (other cells) this program defines again, differently."""
    if not verdict.notebook_changes:
        return ""
    names = ", ".join(f"`{n}`" for n in verdict.notebook_changes)
    return (
        f'<div class="selfheal-notebook-changes" style="border-left:4px solid {BLUE};'
        f'padding:2px 8px;margin:4px 0">{esc(NOTEBOOK_CHANGES.format(names=names))}</div>'
    )


NOTEBOOK_CHANGES = (
    "Also changes {names}, defined in another cell of your notebook: the fix "
    "redefines it in this cell (the other cell stays as it was)."
)


def notebook_changes_html(run: Run) -> str:
    """For the result: each notebook definition it changes, as a diff to that cell's source."""
    it = run.final_iteration
    if it is None or not it.verdict.notebook_changes or run.task.context is None:
        return ""
    sources = {e.name: e.source for e in run.task.context.entries}
    parts = []
    for name in it.verdict.notebook_changes:
        mine = definition_text(it.candidate.code, name)
        if name in sources and mine:
            parts.append(
                diff_html(
                    code_diff(sources[name], mine, old_name=f"{name} (your notebook)", new_name=f"{name} (this fix)")
                )
            )
    return "".join(parts)


def definition_text(code: str, name: str) -> str:
    """The source of the top-level ``def``/``class`` ``name`` in ``code`` ("" when none)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            return ast.get_source_segment(code, stmt) or ""
    return ""


def strategies_html(it: Iteration) -> str:
    """What the repair strategies added to this round, each apart from the user's tests:
    QA's generated checks (soft), the values at the failing statement, the diagnosis, the
    sampled programs, a restart, an edit reply."""
    parts = []
    if it.quick_fix and it.answer:
        parts.append(
            f'<div class="selfheal-quick-fix" style="color:{GREY}">The tool\'s own program for your question '
            f"(no model was asked), reading it as: {esc(it.candidate.reply)}. It reads your data by "
            "name and changes none of it.</div>"
        )
    elif it.quick_fix:
        parts.append(
            f'<div class="selfheal-quick-fix" style="color:{GREY}">The tool\'s own edit, from its explanation '
            f"of the last failure (no model was asked): {esc(it.candidate.reply)}</div>"
        )
    if it.restarted:
        parts.append(
            f'<div class="selfheal-restart" style="color:{GREY}">Started over after repeated failed repairs.</div>'
        )
    if it.edited:
        parts.append(
            f'<div class="selfheal-edited" style="color:{GREY}">The reply edited the '
            "previous program (its changed parts only); the code is the whole result.</div>"
        )
    if it.diagnosis:
        parts.append(heading("Diagnosis (the model's explanation before fixing)") + pre(it.diagnosis))
    if it.samples:
        rows = "".join(
            f'<div style="{MONO}">{"➜" if x.chosen else "&nbsp;"} program {i}'
            f"{' (written afresh)' if x.fresh else ''}: {esc(_sample_text(x))}</div>"
            for i, x in enumerate(it.samples, 1)
        )
        parts.append(
            f'<div class="selfheal-samples">'
            f"{heading(f'{len(it.samples)} programs tried in this attempt; the one marked ➜ was kept')}{rows}</div>"
        )
    derived, generated = split_checks(it.checks)
    if derived:
        rows = "".join(
            f'<div style="{MONO}">'
            + (f'<span style="color:{GREEN}">✔</span>' if t.passed else f'<span style="color:{BLUE}">?</span>')
            + f" {esc(t.source.removeprefix(DATA_CHECK_PREFIX))}"
            + (f' <span style="color:{GREY}">{esc(t.message)}</span>' if t.message else "")
            + "</div>"
            for t in derived
        )
        parts.append(
            '<div class="selfheal-data-checks" data-soft="true">'
            + heading("Checks from your data (the answer each group should show, computed from your notebook)")
            + rows
            + "</div>"
        )
    if generated:
        check_rows: list[str] = []
        for t in generated:
            mark = f'<span style="color:{GREEN}">✔</span>' if t.passed else f'<span style="color:{BLUE}">?</span>'
            msg = f' <span style="color:{GREY}">{esc(t.message)}</span>' if t.message else ""
            check_rows.append(f'<div style="{MONO}">{mark} {esc(t.source)}{msg}</div>')
        parts.append(
            '<div class="selfheal-generated" data-soft="true">'
            + heading("Generated checks (written from the task before any code; soft, not your tests)")
            + "".join(check_rows)
            + "</div>"
        )
    if it.runtime_values:
        rows = "".join(_value_html(v) for v in runtime_values(it.runtime_values))
        parts.append(f'<div class="selfheal-values">{heading("Values where it failed")}{rows}</div>')
    return "".join(parts)


def iteration_title(it: Iteration) -> str:
    """One line: 'Attempt 2 · ✘ KeyError' (plain text, used by the widget too)."""
    mark = "✔" if it.verdict.passed else "✘"
    why = ""
    if it.result is not None and it.result.error is not None:
        why = f" {it.result.error.type}"
    elif it.result is not None and not it.result.ok:
        why = f" {it.result.status}"
    elif it.verdict.spec_violations:
        why = f" {it.verdict.rejected_for}"
    elif not it.verdict.passed and it.verdict.reasons:
        why = f" {it.verdict.reasons[0][:60]}"
    label = "your cell" if it.index == 0 else f"Attempt {it.index}"
    return f"{label} · {mark}{why}"


def _inline_code(text: str) -> str:
    """Plain text with `backticks` as code (escaped)."""
    parts = text.split("`")
    return "".join(f'<code style="{MONO}">{esc(p)}</code>' if i % 2 else esc(p) for i, p in enumerate(parts))


def explanation_html(explanation: Explanation | None) -> str:
    """What the tool worked out of a failure on its own: the failing line, the exception
    and the diagnosis ("" when there is nothing to say beyond the traceback)."""
    if explanation is None:
        return ""
    where = f"line {explanation.line}: " if explanation.line else ""
    source = f'<div style="{MONO}">{esc(where)}{esc(explanation.source)}</div>' if explanation.source else ""
    items = "".join(f"<li>{_inline_code(s)}</li>" for s in explanation.diagnosis)
    said = f'<ul style="margin:2px 0 2px 18px;padding:0">{items}</ul>' if items else ""
    return (
        f'<div class="selfheal-explanation" style="border-left:4px solid {BLUE};background:{BLUE_BG};'
        f'padding:4px 8px;margin:4px 0"><b>Why it failed</b>{source}'
        f'<div style="{MONO};color:{RED}">{esc(explanation.error)}</div>{said}</div>'
    )


def waiting_text(ahead: int) -> str:
    """``waiting for the model — 2 requests ahead``."""
    return f"waiting for the model — {ahead} request{'' if ahead == 1 else 's'} ahead"


def iteration_body_html(it: Iteration) -> str:
    """Code (with the failing line marked), diff, result and verdict of one iteration."""
    code = it.candidate.code
    mark = None
    if it.result is not None and it.result.error is not None:
        mark = failing_line(it.result.error)
    if it.repeat_of is not None:
        return (
            f'<div class="selfheal-repeat" style="color:{GREY};margin:2px 0">The model wrote the program of '
            f"round {it.repeat_of} again; it was not run again, and the next round was told to change it.</div>"
            + verdict_html(it.verdict)
        )
    parts = [heading("Code"), code_html(code, mark_line=mark)]
    if it.diff:
        parts += [heading("Diff to the previous attempt"), diff_html(it.diff, headers=False)]
    elif it.index > 1:
        parts.append(
            f'<div class="selfheal-same" style="color:{GREY};margin:2px 0">Same code as the previous attempt.</div>'
        )
    parts.append(result_html(it.result, code, name="your cell" if it.index == 0 else f"attempt {it.index}"))
    parts.append(explanation_html(it.explanation))
    parts.append(strategies_html(it))
    parts.append(verdict_html(it.verdict))
    return "".join(parts)


def iteration_html(it: Iteration, *, open_: bool = True) -> str:
    """One iteration as a ``<details>`` block (open by default so printouts show it all)."""
    colour = GREEN if it.verdict.passed else RED
    return (
        f'<details class="selfheal-iteration" data-iteration="{it.index}"{" open" if open_ else ""} '
        f'style="border-left:3px solid {colour};padding:2px 0 2px 10px;margin:6px 0">'
        f'<summary style="cursor:pointer;font-weight:600;color:{colour}">{esc(iteration_title(it))}</summary>'
        f"{iteration_body_html(it)}</details>"
    )


RUNS_ONLY = "Runs — nothing checked its output"
"""The headline of a pass that only ran: no test, assert or check looked at its output."""
CHANGED = "Changed what your program showed"
"""The headline of a pass whose checks also pass the program the task says is wrong, but
which showed other output or values on them than that program."""


def blind_sentence(run: Run) -> str:
    """Why the checks a pass passed that the program the task says is wrong passes too
    verify nothing ("" when there are none): "your asserts also pass on …"."""
    blind = run.blind_checks
    if not blind:
        return ""
    one = blind == ["your stated expectation"]
    return (
        f"{' and '.join(blind)} also pass{'es' if one else ''} on the program the task says is wrong, "
        f"so {'it does' if one else 'they do'} not verify the fix"
    )


def headline(run: Run) -> tuple[str, str, str]:
    """(colour, symbol, words) of the verdict in one line: "✔ Fixed — verified by your
    asserts", "● Runs — nothing checked its output", "● Changed what your program showed —
    your asserts also pass on the program the task says is wrong, so they do not verify
    the fix", "✘ Not fixed — budget exhausted"."""
    colour, symbol, label = OUTCOME_STYLE.get(run.outcome, OUTCOME_STYLE[None])
    heal = run.task.initial_code is not None
    if run.outcome == "success":
        blind = blind_sentence(run)
        if not run.verified:
            if blind:
                return AMBER, "●", f"{CHANGED if run.changed_behaviour else 'Runs'} — {blind}"
            return AMBER, "●", RUNS_ONLY
        by = run.verified_by
        who = ", ".join(by[:-1]) + " and " + by[-1] if len(by) > 1 else by[0]
        return colour, symbol, f"{'Fixed' if heal else 'Done'} — verified by {who}" + (f" ({blind})" if blind else "")
    if run.outcome in ("failed", "budget_exhausted"):
        return colour, symbol, f"{'Not fixed' if heal else 'Not done'} — {label}"
    return colour, symbol, label


def summary_text(run: Run) -> str:
    """'✔ Fixed — verified by your asserts · 2 attempts · 1,234 tokens · 12.3 s' (plain text)."""
    _, symbol, words = headline(run)
    return f"{symbol} {words} · {_figures(run)}"


def _figures(run: Run) -> str:
    t = run.totals
    iterations = run.attempts if run.iterations else t.iterations
    tokens = t.prompt_tokens + t.completion_tokens
    estimated = any(it.usage.estimated for it in run.iterations) or run.planning_usage.estimated
    plural = "" if iterations == 1 else "s"
    text = f"{iterations} attempt{plural} · {'~' if estimated else ''}{tokens:,} tokens · {t.duration_s:.1f} s"
    if run.model:
        text += f" · {run.model}"
    return text


def unverified_review_html(run: Run) -> str:
    """For a success nothing checked: the output beside what the cell was for, to review."""
    it = run.final_iteration
    if run.outcome != "success" or it is None or run.verified:
        return ""
    result = run.fix.result if run.fix is not None and run.fix.result is not None else it.result
    shown = (result.stdout.strip() if result else "") or "(it printed nothing)"
    if result is not None and any(o.mime == PNG for o in safe_outputs(result.outputs)):
        shown += "\n(and a figure: below, with the fix)"
    shown = "\n".join(shown.splitlines()[-15:])
    return (
        '<div class="selfheal-intent-review" style="color:#24292f;font-weight:400;margin-top:4px">'
        "Review it before you use it: does this output do what the cell is for?"
        f'<div style="display:flex;gap:8px;flex-wrap:wrap">'
        f'<div style="flex:1;min-width:220px"><div style="color:{GREY}">the cell\'s intent</div>'
        f"{pre(intent_text(run))}</div>"
        f'<div style="flex:1;min-width:220px"><div style="color:{GREY}">what the fix printed</div>'
        f"{pre(shown)}</div></div></div>"
    )


def intent_text(run: Run) -> str:
    """What the cell says it is for: the user's words to the agent (a heal's hint) and the
    cell's own comments."""
    said = [run.task.prompt] if not run.task.initial_code or run.task.given_is_wrong else []
    comments = [
        ln.strip().lstrip("#").strip()
        for ln in (run.task.initial_code or "").splitlines()
        if ln.strip().startswith("#") and ln.strip().lstrip("#").strip()
    ]
    return "\n".join([*said, *comments[:6]]) or "(the cell says nothing about its intent)"


def summary_html(run: Run) -> str:
    """The verdict in one line (bold), the run's figures beside it, the error below."""
    colour, symbol, words = headline(run)
    detail = ""
    if run.error:
        detail = f'<div style="color:#24292f;font-weight:400;margin-top:2px">{esc(run.error)}</div>'
    detail += unverified_review_html(run)
    final = run.final_iteration
    if final is not None and final.verdict.notebook_changes and not (run.fix and run.fix.definitions):
        # said once: where the decision shows the change to the earlier cell, not here too
        detail += notebook_changes_line(final.verdict) + notebook_changes_html(run)
    verified = "true" if run.verified else "false"
    return (
        f'<div class="selfheal-summary" data-outcome="{esc(run.outcome or "running")}" data-verified="{verified}" '
        f'style="border:1px solid {BORDER};border-left:4px solid {colour};border-radius:4px;'
        f'padding:6px 10px;margin:6px 0;font-weight:600;color:{colour}">'
        f'<span class="selfheal-headline">{esc(symbol)} {esc(words)}</span>'
        f'<span style="color:{GREY};font-weight:400"> · {esc(_figures(run))}</span>{detail}</div>'
    )


def context_lines(ctx: NotebookContext | None) -> list[str]:
    """``from your notebook: df (DataFrame 3×2), scale (function), np (numpy)``, then one
    line per name that could not be sent, naming it and why."""
    if ctx is None:
        return []
    lines = []
    if ctx.available:
        lines.append("from your notebook: " + ", ".join(f"{e.name} ({e.label()})" for e in ctx.available))
    for e in ctx.unavailable:
        what = f" ({e.type})" if e.type else ""
        lines.append(f"not sent: {e.name}{what} — {e.reason}")
    return lines


def context_html(ctx: NotebookContext | None) -> str:
    """The context a run used, for the panel and the static record ("" when none)."""
    lines = context_lines(ctx)
    if not lines:
        return ""
    rows = []
    for line in lines:
        colour = RED if line.startswith("not sent:") else GREY
        rows.append(f'<div style="color:{colour}">{esc(line)}</div>')
    return f'<div class="selfheal-context" style="font-size:12px;margin:2px 0">{"".join(rows)}</div>'


def run_title(task: Task) -> tuple[str, str]:
    """(what the user did, the task in words) for the panel's and the record's title:
    an autoheal run says the button was pressed, not ``%%heal`` and words nobody typed."""
    if task.origin == "autoheal":
        return "autoheal", "You asked the agent to fix this cell's error"
    kind = task.origin or ("%%heal" if task.initial_code is not None else "%%agent")
    return kind, task.prompt


def task_html(run: Run) -> str:
    kind, words = run_title(run.task)
    inputs = ""
    if run.task.inputs:
        inputs = f' <span style="color:{GREY}">inputs: {esc(", ".join(sorted(run.task.inputs)))}</span>'
    return (
        f'<div class="selfheal-task" style="margin:2px 0"><span style="color:{GREY};{MONO}">{esc(kind)}</span> '
        f"<b>{esc(words)}</b>{inputs}</div>{context_html(run.task.context)}"
    )


def run_html(run: Run, *, quiet: bool = False, folded: bool = False) -> str:
    """The whole record: task, plan, every iteration, the summary. ``folded``: the plan
    and the iterations under a closed "How it got there" (the live panel's record, whose
    decision comes right after it)."""
    parts = [task_html(run)]
    if not quiet:
        history = plan_html(run.plan) + "".join(iteration_html(it) for it in run.iterations)
        if folded and history:
            count = run.attempts
            parts.append(
                f'<details class="selfheal-history" style="margin:4px 0"><summary style="cursor:pointer;'
                f'color:{GREY}">How it got there ({count} attempt{"" if count == 1 else "s"})</summary>'
                f"{history}</details>"
            )
        else:
            parts.append(history)
    parts.append(summary_html(run))
    return f'<div class="selfheal-run" style="font-size:13px;line-height:1.4">{"".join(parts)}</div>'


def review_html(
    title: str,
    *,
    diff: str = "",
    code: str = "",
    definitions: list[tuple[str, str]] | None = None,
    left_out: list[str] | None = None,
    note: str = "",
    output: str = "",
    flags: str = "",
    data_changes: dict[str, list[str]] | None = None,
) -> str:
    """The review above the decision's buttons: what the code does to the notebook's
    data when it runs in the kernel (``data_changes``: name → changes), the changes an
    earlier cell's definitions need (name, diff), then ``title`` with the diff to the
    cell (or the ``code`` when there is no cell), what was left out of the passing
    program, a ``note``, the ``output`` of the code handed over, and last, right above
    the buttons, the ``flags`` (what the code newly can do, what it tried in the sandbox)."""
    parts = [data_changes_html(data_changes or {})]
    for name, change in definitions or []:
        parts.append(
            f'<div class="selfheal-definition" data-name="{esc(name)}">'
            + heading(f"Change to {name}, which an earlier cell defines")
            + diff_html(change)
            + f'<div style="color:{GREY};font-size:12px">The fix passed only with this version of {esc(name)}: '
            "it is at the top of the code below, so the cell runs as it passed. You may move it into that "
            "cell instead.</div></div>"
        )
    parts.append(heading(title) + (diff_html(diff) if diff else code_html(code) if code else ""))
    if left_out:
        parts.append(
            f'<div class="selfheal-left-out" style="color:{GREY};font-size:12px;margin:2px 0">'
            f"Left out of the passing program, which passed again without them: {esc('; '.join(left_out))}."
            "</div>"
        )
    if note:
        parts.append(
            f'<div class="selfheal-fix-note" style="color:{GREY};font-size:12px;margin:2px 0">{esc(note)}</div>'
        )
    parts.append(output)
    parts.append(flags)
    return f'<div class="selfheal-review" style="line-height:1.4">{"".join(parts)}</div>'


def _shows_the_same(a: ExecutionResult | None, b: ExecutionResult | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.stdout == b.stdout and [(o.mime, o.data) for o in safe_outputs(a.outputs)] == [
        (o.mime, o.data) for o in safe_outputs(b.outputs)
    ]


def fix_output_html(run: Run) -> str:
    """What the code handed over printed and showed (tables, figures) when it was run in
    the sandbox: the output the user will get, saying so when the passing program's
    differed ("" when there is no fix)."""
    fix, final = run.fix, run.final_iteration
    result = fix.result if fix is not None else None
    if result is None or final is None:
        return ""
    parts = [heading("What the fix prints (run again in the sandbox, as it is handed over)")]
    if result.stdout.strip():
        more = " (truncated)" if result.stdout_truncated else ""
        parts.append(pre(result.stdout + more))
    rich = _rich_outputs_html(result, title="")
    parts.append(f'<div class="selfheal-fix-figures" style="max-width:480px">{rich}</div>' if rich else "")
    if not result.stdout.strip() and not rich:
        parts.append(f'<div style="color:{GREY}">(it prints nothing and shows no table or figure)</div>')
    if fix is not None and fix.code != final.candidate.code and not _shows_the_same(result, final.result):
        parts.append(
            f'<div class="selfheal-output-differs" style="color:{GREY};font-size:12px;margin:2px 0">'
            "The passing program showed something else (under How it got there): it did what the fix "
            "leaves out. This is the output of the code you would accept.</div>"
        )
    return f'<div class="selfheal-fix-output">{"".join(parts)}</div>'


CAPABILITY_WORDS = {
    "network": "a network call",
    "process": "a new process",
    "files": "files written or deleted outside its folder",
    "environment": "a read of environment variables or secrets",
    "dynamic-code": "code built or loaded at run time",
    "threads": "a thread, timer, signal handler or exit hook",
    "probe": "a probe of where it runs",
}
"""How the review names each kind of :class:`~selfheal_jupyter.model.Capability` ("This fix adds: a network call (line 5), ...")."""


def capabilities_sentence(found: list[Capability]) -> str:
    """One sentence, one entry per kind in the order first met: "This fix adds: a
    network call (line 5), a probe of where it runs (lines 9, 12)" ("" when none)."""
    lines: dict[str, list[int]] = {}
    for c in found:
        seen = lines.setdefault(c.kind, [])
        if c.line not in seen:
            seen.append(c.line)
    parts = []
    for kind, where in lines.items():
        numbers = ", ".join(str(n) for n in sorted(where))
        parts.append(f"{CAPABILITY_WORDS.get(kind, kind)} (line{'s' if len(where) > 1 else ''} {numbers})")
    return "This fix adds: " + ", ".join(parts) if parts else ""


TRIED_WORDS = {
    "network": "tried to reach the network",
    "process": "started processes or threads",
    "files": "wrote files outside its folder",
}
"""How the review says each kind of :class:`~selfheal_jupyter.model.Attempt`."""


def flags_html(run: Run) -> str:
    """Right above the buttons: what the code handed over newly can do (its syntax
    against the user's cell) and what was seen tried in the sandbox that its text does
    not show ("" when nothing is flagged)."""
    fix = run.fix
    if fix is None:
        return ""
    parts = []
    said = capabilities_sentence(fix.capabilities)
    if said:
        seen = "; ".join(f"line {c.line}: {c.evidence}" for c in fix.capabilities)
        kinds = " ".join(dict.fromkeys(c.kind for c in fix.capabilities))
        parts.append(
            f'<div class="selfheal-capabilities" data-kinds="{esc(kinds)}" style="font-weight:600">{esc(said)}.</div>'
            f'<div style="color:{GREY};font-size:12px">Read from its code beside your cell ({esc(seen)}): '
            "your kernel has the network, your files and your secrets, which the sandbox did not.</div>"
        )
    lines = tried_lines(run)
    if lines:
        rows = "".join(f"<li>{esc(line)}</li>" for line in lines)
        parts.append(
            f'<div class="selfheal-tried" style="margin-top:4px"><b>Seen in the sandbox:</b>'
            f'<ul style="margin:2px 0 2px 18px;padding:0">{rows}</ul>'
            f'<div style="color:{GREY};font-size:12px">Seen by the sandbox\'s server from outside the program, '
            "which runs as a user of its own and can neither reset the kernel's counters nor reach the server's "
            "file events. Code that reaches out where nothing asked for it is a sign the model was steered "
            "(by text in your data, for instance).</div></div>"
        )
    if not parts:
        return ""
    return (
        f'<div class="selfheal-flags" style="border-left:4px solid {AMBER};background:{YELLOW_BG};'
        f'padding:4px 8px;margin:6px 0">{"".join(parts)}</div>'
    )


def tried_lines(run: Run) -> list[str]:
    """What the sandbox saw the code handed over, or the passing program it came from,
    try that the code handed over does not show (``Fix.tried``), one line each."""
    lines = []
    for a in run.fix.tried if run.fix is not None else []:
        what = TRIED_WORDS.get(a.kind, a.kind)
        if a.by == "passing":
            lines.append(f"The passing program {what} (the fix leaves that part out): {a.evidence}.")
        else:
            lines.append(f"The code handed over {what}, which its text does not show: {a.evidence}.")
    return lines


def data_changes_text(changes: dict[str, list[str]]) -> list[str]:
    """``Changes your `df`: converts `date`, adds `weekday`.`` for each value."""
    return [f"Changes your `{name}`: {', '.join(what)}." for name, what in changes.items() if what]


def data_changes_html(changes: dict[str, list[str]]) -> str:
    """The notebook values the code changes when it runs in the kernel, said before the
    user inserts or runs it ("" when it changes none)."""
    lines = data_changes_text(changes)
    if not lines:
        return ""
    rows = "".join(f"<div>{esc(line)}</div>" for line in lines)
    return (
        f'<div class="selfheal-data-changes" style="border-left:4px solid {AMBER};padding:2px 8px;margin:4px 0">'
        f'{rows}<div style="color:{GREY};font-size:12px">Running this code in your kernel changes '
        f"{'it' if len(lines) == 1 else 'them'} there; the run itself worked on copies.</div></div>"
    )


def message_html(text: str, *, kind: str = "error") -> str:
    """A short boxed message (user errors, hints)."""
    colour = RED if kind == "error" else GREY
    return (
        f'<div style="border-left:4px solid {colour};padding:4px 10px;margin:4px 0;'
        f'background:{RED_BG if kind == "error" else CODE_BG}">{esc(text)}</div>'
    )
