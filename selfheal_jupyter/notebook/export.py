"""A run as a teaching notebook (nbformat) or as its raw JSON record; the hints a
student asked for (teaching mode) as a notebook or JSON for the teacher.

Each iteration becomes: a markdown heading with the verdict, the diff (as a ``diff``
block), and a code cell holding the candidate with the sandbox's stdout and error
as that cell's saved outputs, so the notebook reads like a debugging session.

An export is a page a teacher publishes (``jupyter nbconvert --to html``), and much of it
came from a model or a candidate: plan steps, verdicts, feedback, diffs, hints. All of
that goes into markdown as escaped text (:func:`md_text`: no HTML, no link, no emphasis
survives) or inside a fence longer than any run of backticks in it (:func:`md_block`),
so no line of it can close its block and become live HTML.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from dataclasses import asdict
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from ..model import Hint, Iteration, Run, safe_outputs
from ..render.html import summary_text
from ..render.style import GREY, esc
from ..render.traceback import traceback_text
from ..safe_output import clean_text

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:=])")


def md_text(text: str) -> str:
    """``text`` as markdown that shows it and does nothing else: every character
    markdown reads is backslash-escaped, and ``& < >`` are entities (no raw HTML)."""
    escaped = _MARKDOWN.sub(r"\\\1", text)
    escaped = escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "  \n".join(escaped.splitlines())  # each line its own, as it was shown


def md_block(text: str, info: str = "text") -> str:
    """``text`` in a fenced block that no line of it can close (the fence is longer than
    its longest run of backticks)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def _outputs(it: Iteration) -> list:
    result = it.result
    if result is None:
        return []
    outputs = []
    if result.stdout:
        outputs.append(new_output("stream", name="stdout", text=result.stdout))
    if result.stderr and result.error is None:
        outputs.append(new_output("stream", name="stderr", text=result.stderr))
    for rich in safe_outputs(result.outputs):  # nbconvert would run a forged script
        outputs.append(new_output("display_data", data={rich.mime: rich.data}))
    if result.error is not None:
        lines = traceback_text(result.error, it.candidate.code).splitlines()
        outputs.append(new_output("error", ename=result.error.type, evalue=result.error.message, traceback=lines))
    elif not result.ok:
        outputs.append(new_output("stream", name="stderr", text=f"[{result.status}] {result.message}\n"))
    return outputs


def run_to_notebook(run: Run) -> nbformat.NotebookNode:
    """The task, the plan, then each iteration's diff, code and outcome as cells."""
    cells = [new_markdown_cell(f"# Task\n\n{md_text(run.task.prompt)}")]
    if run.task.initial_code is not None:
        cells.append(new_markdown_cell("The starting point was your own code (iteration 0)."))
    if run.withheld:
        cells.append(new_markdown_cell(md_text(run.withheld[:1].upper() + run.withheld[1:] + ".")))
    if run.plan and run.plan.steps:
        steps = "\n".join(f"{i}. {md_text(s)}" for i, s in enumerate(run.plan.steps, 1))
        cells.append(new_markdown_cell(f"## Plan\n\n{steps}"))
    if run.task.tests:
        cells.append(new_markdown_cell(f"## Tests the result had to pass\n\n{md_block(run.task.tests, 'python')}"))
    for it in run.iterations:
        label = "Your code" if it.index == 0 else f"Iteration {it.index}"
        verdict = "passed ✔" if it.verdict.passed else "failed ✘"
        reasons = md_text("; ".join(it.verdict.why))
        text = f"## {label}: {verdict}\n\n{reasons}".rstrip()
        if it.diff:
            text += f"\n\nWhat changed since the previous attempt:\n\n{md_block(it.diff, 'diff')}"
        cells.append(new_markdown_cell(text))
        cell = new_code_cell(it.candidate.code, outputs=_outputs(it))
        cell.metadata["selfheal"] = {"iteration": it.index, "passed": it.verdict.passed}
        cells.append(cell)
        if it.feedback:
            cells.append(new_markdown_cell(f"Feedback sent to the model:\n\n{md_block(it.feedback)}"))
    outcome = md_text(summary_text(run)) + (f"\n\n{md_text(run.error)}" if run.error else "")
    cells.append(new_markdown_cell(f"## Outcome\n\n{outcome}"))
    cells.extend(_hint_cells(run.hints))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["selfheal"] = {
        "outcome": run.outcome,
        "model": run.model,
        "verified": run.verified,
        "verified_by": run.verified_by,
    }
    return nb


def _hint_cells(hints: list[Hint]) -> list:
    return [
        new_markdown_cell(
            f"**Hint {i} — {md_text(h.title)}**\n\n{md_text(h.text)}"
            + (f"\n\n{md_block(h.diff, 'diff')}" if h.diff else "")
        )
        for i, h in enumerate(hints, 1)
    ]


def hints_by_cell(asked: list[Hint]) -> list[tuple[str, list[Hint]]]:
    """The hints in the order they were asked, grouped by the cell they were about
    (cells in the order of their first hint)."""
    cells: dict[str, list[Hint]] = {}
    for hint in asked:
        cells.setdefault(hint.cell, []).append(hint)
    return list(cells.items())


def hints_to_notebook(asked: list[Hint]) -> nbformat.NotebookNode:
    """For the teacher: each cell a student asked hints for, then its hints in order."""
    cells = [
        new_markdown_cell(
            "# Hints asked for\n\nEach cell as the student ran it, then the hints they were given, in order."
        )
    ]
    for number, (code, hints) in enumerate(hints_by_cell(asked), 1):
        cells.append(new_markdown_cell(f"## Cell {number}: {len(hints)} hint{'s' if len(hints) != 1 else ''}"))
        cell = new_code_cell(code)
        cell.metadata["selfheal"] = {"hints": [h.level for h in hints]}
        cells.append(cell)
        cells.extend(_hint_cells(hints))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def export_hints(asked: list[Hint], path: str | Path, *, as_json: bool = False) -> Path:
    """Write the hints of this kernel to ``path`` (notebook, or JSON with ``as_json``)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if as_json:
        data = [{"cell": code, "hints": [asdict(h) for h in hints]} for code, hints in hints_by_cell(asked)]
        target.write_text(json.dumps(data, indent=1), encoding="utf-8")
    else:
        target.write_text(clean_text(nbformat.writes(hints_to_notebook(asked))) + "\n", encoding="utf-8")
    return target


def export_run(run: Run, path: str | Path, *, as_json: bool = False) -> Path:
    """Write ``run`` to ``path`` (notebook, or JSON with ``as_json``); returns the path."""
    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    if as_json:
        target.write_text(json.dumps(run.to_dict(), indent=1), encoding="utf-8")
    else:
        # Lone surrogates (from a candidate's output or a model's reply) cannot be
        # written as UTF-8; they become U+FFFD.
        target.write_text(clean_text(nbformat.writes(run_to_notebook(run))) + "\n", encoding="utf-8")
    return target


def export_link_html(path: Path) -> str:
    """ "wrote <link>": a link relative to the kernel's directory (where a notebook front
    end resolves it, next to the notebook, and opens the file), or the plain path of a
    file outside it."""
    target = path.resolve()
    here = Path(os.getcwd()).resolve()
    try:
        relative = target.relative_to(here)
    except ValueError:
        return (
            f'<div>selfheal: wrote <code>{esc(target)}</code> <span style="color:{GREY}">(outside the '
            "notebook's folder, so the front end cannot link to it)</span></div>"
        )
    href = urllib.parse.quote(relative.as_posix())
    return (
        f'<div>selfheal: wrote <a href="{esc(href)}" target="_blank" rel="noopener">{esc(relative.as_posix())}'
        "</a></div>"
    )
