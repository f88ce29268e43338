"""Notebooks: realistic multi-cell notebooks whose last cell has an ordinary bug of data
work, healed the way ``%%heal`` heals it. Written for this project.

Each case (``notebook_cases/NN_name/``) is a notebook in the percent format
(``notebook.py``, cells separated by ``# %%``): imports, data built in one cell,
helpers and classes in others, and a last cell with the bug (a wrong column, a
``.dt`` on text dates, ``and`` between Series, a missing default...), some with an
assert of the cell's own; ``hint.txt`` holds the words after ``%%heal`` when the cell
runs but is wrong. What the loop never sees: ``expected.txt``, the lines the cell's
output must show (in order), and ``solution.py``, a reference last cell (for the tests).

The earlier cells run here, on the host, in a fresh module standing for the user's
kernel (they are this package's own data), and the last cell's context is resolved
from it exactly as ``%%heal`` resolves it (:func:`selfheal_jupyter.notebook.context.for_cell`):
imports, notebook definitions, copies of values. The task is built by the magic's own
:func:`~selfheal_jupyter.notebook.arguments.heal_task`.

Graded in the sandbox, with the same prelude and copies: the program ran to its end
(so the asserts in it held), it keeps the cell's spec (its asserts, no hard-coded answer,
no invented notebook data: :mod:`~selfheal_jupyter.spec.guard`,
:mod:`~selfheal_jupyter.spec.notebook_data`), and its output shows every expected line,
in order (spacing, letter case and a whole number's zero decimals aside).

Questions (``qNN_name/``): a notebook whose cells all ran, and ``question.txt``, what a
user types under ``%%agent`` about its data; the task is built by the magic's own
:func:`~selfheal_jupyter.notebook.arguments.agent_task`, its context resolved from the
question's words as ``%%agent`` resolves it (:func:`~selfheal_jupyter.notebook.context.for_task`).
An answer's wording is the model's, so ``expected.txt`` gives each expected answer as
terms (``jan | north``) that one printed line must show together, in any order of lines
unless its first line is ``# in order`` (a row's alternatives are joined by `` || ``); a
number matches a printed number with at least its decimals that rounds to it (``50.5``
matches ``50.50``, not ``50``; ``15.0`` matches ``15.0%``, not ``0.15``). A line
``# not shown: Dune | Neuromancer`` names values of the data that are no answer to the
question (the books after 1950, the students below the top): an output that shows one
holds the answer among others and answers nothing. Besides, the
answer may not change the notebook's values (checked in the sandbox after it ran: each
value as JSON, a list, or itself, against the notebook's) unless ``may_change.txt``
names them, nor break the data rules.
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import re
import sys
import threading
import types
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..model import DataCheck, ExecutionResult, NotebookContext, Task
from ..sandbox.serialize import Pickled
from .harness import HiddenRun
from .problem import Problem

NAME = "notebooks"
CELL_MARK = "# %%"
CONTEXT_MAX_BYTES = 50 << 20

_MAIN = threading.Lock()
"""Running notebook cells swaps ``sys.modules["__main__"]`` (what a kernel's cells are):
one notebook at a time."""


def data_root() -> Path:
    return Path(str(resources.files(__package__).joinpath("notebook_cases")))


def case_dirs() -> list[Path]:
    return sorted(p for p in data_root().iterdir() if (p / "notebook.py").is_file())


def cells(text: str) -> list[str]:
    """The cells of a percent-format notebook (code before the first mark is dropped)."""
    out: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.strip() == CELL_MARK:
            out.append([])
        elif out:
            out[-1].append(line)
    return ["".join(c).strip("\n") + "\n" for c in out]


def kernel_context(case: str, earlier: list[str], cell: str) -> NotebookContext:
    """Run ``earlier`` as a kernel would, then resolve what ``cell`` needs from that
    namespace."""
    from ..notebook import context

    return _kernel(case, earlier, lambda ns: context.for_cell(cell, ns, max_bytes=CONTEXT_MAX_BYTES))


def _kernel(case: str, earlier: list[str], resolve: Callable[[dict[str, Any]], NotebookContext]) -> NotebookContext:
    """Run ``earlier`` as a kernel would (cell sources where IPython keeps them, a
    ``__main__`` of their own), then ``resolve`` the context from that namespace."""
    with _MAIN:
        saved = sys.modules.get("__main__")
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        try:
            for number, source in enumerate(earlier, 1):
                filename = f"<notebook {case} cell {number}>"
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(source, filename, "exec"), main.__dict__)
            return resolve(main.__dict__)
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved


def unchanged_checks(ns: dict[str, Any], names: list[str]) -> list[str]:
    """One assert per value that it is as the notebook holds it, run after the answer in
    the sandbox's checker (which compares on its side): a frame or series as JSON (a new
    column, a converted dtype or a changed cell shows), an array as a list, plain data as
    itself; a value none of these can state is left out."""
    out = []
    for name in names:
        value: Any = ns[name]
        try:
            if hasattr(value, "to_json"):
                out.append(f"assert {name}.to_json() == {value.to_json()!r}")
            elif type(value).__module__ == "numpy" and hasattr(value, "tolist"):
                out.append(f"assert {name}.tolist() == {value.tolist()!r}")
            elif ast.literal_eval(repr(value)) == value:
                out.append(f"assert {name} == {value!r}")
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return out


NOT_SHOWN = "# not shown:"


def _rows(text: str) -> tuple[list[list[list[str]]], bool, list[str]]:
    """``expected.txt`` of a question: each row's alternatives, each a list of terms;
    whether the rows must come in order; and the terms that must not be shown."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    ordered = bool(lines) and lines[0].casefold() == "# in order"
    not_shown = [
        t.strip() for ln in lines if ln.casefold().startswith(NOT_SHOWN) for t in ln[len(NOT_SHOWN) :].split("|")
    ]
    answers = [ln for ln in lines[ordered:] if not ln.casefold().startswith(NOT_SHOWN)]
    rows = [[[t.strip() for t in alt.split(" | ")] for alt in ln.split(" || ")] for ln in answers]
    return rows, ordered, [t for t in not_shown if t]


def _question(path: Path) -> Problem:
    from ..agents.data_checks import derive
    from ..notebook import context

    notebook = cells(_read(path / "notebook.py"))
    question = _read(path / "question.txt").strip()
    seen: dict[str, Any] = {}

    def resolve(ns: dict[str, Any]) -> NotebookContext:
        ctx = context.for_task(question, ns, max_bytes=CONTEXT_MAX_BYTES)
        seen["checks"] = unchanged_checks(ns, sorted(ctx.data_names()))
        seen["derived"] = derive(question, {name: ns[name] for name in ctx.data_names()})
        return ctx

    ctx = _kernel(path.name, notebook, resolve)
    rows, ordered, not_shown = _rows(_read(path / "expected.txt"))
    may_change = _read(path / "may_change.txt").split()
    return Problem(
        benchmark=NAME,
        id=path.name,
        prompt=question,
        entry_point="",
        feedback="none but the notebook's data (a question: no asserts, no tests)",
        hidden={
            "rows": rows,
            "ordered": ordered,
            "not_shown": not_shown,
            "solution": _read(path / "solution.py"),
            "context": ctx,
            "unchanged": [c for c in seen["checks"] if c.split()[1].split(".")[0] not in may_change],
            "data_checks": seen["derived"],
        },
        hidden_inputs={name: Pickled(data) for name, data in ctx.values.items()},
    )


def is_question(problem: Problem) -> bool:
    return "rows" in problem.hidden


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def load() -> list[Problem]:
    problems = []
    for path in case_dirs():
        if (path / "question.txt").is_file():
            problems.append(_question(path))
            continue
        notebook = cells(_read(path / "notebook.py"))
        cell = notebook[-1]
        ctx = kernel_context(path.name, notebook[:-1], cell)
        hint = _read(path / "hint.txt").strip()
        problems.append(
            Problem(
                benchmark=NAME,
                id=path.name,
                prompt=hint,
                entry_point="",
                initial_code=cell,
                feedback="the cell's own asserts and, with a hint, what it states",
                hidden={
                    "expected": [ln for ln in _read(path / "expected.txt").splitlines() if ln.strip()],
                    "solution": _read(path / "solution.py"),
                    "context": ctx,
                },
                hidden_inputs={name: Pickled(data) for name, data in ctx.values.items()},
            )
        )
    return problems


def task(problem: Problem) -> Task:
    """The task ``%%heal <hint>`` makes of the last cell (``%%agent`` of a question), with
    the notebook's context."""
    from ..notebook.arguments import agent_task, heal_task

    if is_question(problem):
        args = SimpleNamespace(tests=None, inputs=None, plan=None, plan_only=None)
        made = agent_task(args, problem.prompt, {}, [])
        made.data_checks = list(problem.hidden["data_checks"])
    else:
        args = SimpleNamespace(hint=problem.prompt.split(), tests=None, inputs=None)
        made = heal_task(args, problem.initial_code or "", {}, [])
    made.context = problem.hidden["context"]
    return made


def hidden_run(problem: Problem) -> HiddenRun:
    """The program with the notebook's prelude (a question's: then its checks that the
    notebook's values are unchanged); the grade reads its run (:func:`grade`)."""
    return HiddenRun(tests="\n".join(problem.hidden.get("unchanged", [])), prelude=problem.hidden["context"].prelude)


_WHOLE = re.compile(r"(?<![\d.])(\d+)\.0+(?![\d.])")


def _norm(line: str) -> str:
    """A printed line as the grade compares it: spacing, letter case and the zero
    decimals of a whole number do not count (a fix may rewrite a label as "Average days to
    ship", or print a rate of 0 as ``0%`` where the cell's format gave ``0.0%``; its values
    must stay). Every other digit counts: the month ``01`` is not ``1``, and ``2024.1``
    is not ``2024.10``."""
    return _WHOLE.sub(r"\1", " ".join(line.split()).casefold())


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


def _number_matches(term: str, line: str) -> bool:
    """A printed number on ``line`` with at least ``term``'s decimals that rounds to it."""
    want = float(term)
    places = len(term.partition(".")[2])
    for found in _NUMBER.findall(line):
        text = found.replace(",", "")
        try:
            value = float(text)
        except ValueError:
            continue
        shown = len(text.partition(".")[2])
        if places == 0 and value == want:
            return True
        if places > 0 and shown >= places and abs(value - want) <= 0.5 * 10**-places + 1e-9:
            return True
    return False


def _plain(text: str) -> str:
    """Spacing and letter case aside (a question's answer keeps its decimals as printed)."""
    return " ".join(text.split()).casefold()


def _term_on(term: str, line: str) -> bool:
    if _NUMBER.fullmatch(term):
        return _number_matches(term, line)
    return re.search(rf"(?<!\w){re.escape(_plain(term))}(?!\w)", line) is not None


def _row_on(row: list[list[str]], line: str) -> bool:
    return any(all(_term_on(t, line) for t in alternative) for alternative in row)


def grade_answer(problem: Problem, stdout: str) -> str:
    """ "" when the printed output answers the question, else what it lacks."""
    lines = [_plain(ln) for ln in stdout.splitlines() if ln.strip()]
    start = 0
    for row in problem.hidden["rows"]:
        at = next(
            (i for i in range(start if problem.hidden["ordered"] else 0, len(lines)) if _row_on(row, lines[i])), None
        )
        if at is None:
            shown = " || ".join(" | ".join(alt) for alt in row)
            return f"its output lacks a line with {shown!r}" + (" (in order)" if problem.hidden["ordered"] else "")
        start = at + 1
    other = next((t for t in problem.hidden["not_shown"] if any(_term_on(t, ln) for ln in lines)), None)
    if other is not None:
        return f"its output also shows {other!r}, which is no answer to the question"
    return _one_answer_each(problem, stdout)


def _one_answer_each(problem: Problem, stdout: str) -> str:
    """ "" when each group of a question that pairs groups with answers (a region per
    month, a total per customer; in any order) is shown on a line of its own with its one
    answer, as the checks from the user's data read it
    (:func:`~selfheal_jupyter.agents.data_checks.run_checks`, the rows' answers as the
    choices); else what it lacks. The whole frame printed, or a line of every region per
    month, holds each pair's terms and answers nothing."""
    from ..agents.data_checks import run_checks

    rows = problem.hidden["rows"]
    if problem.hidden["ordered"] or not all(len(row) == 1 and len(row[0]) == 2 for row in rows):
        return ""
    (outcome,) = run_checks([DataCheck(source="expected", rows=[row[0] for row in rows])], stdout)
    return "" if outcome.passed else f"its output does not show one answer per group: {outcome.message}"


def grade(problem: Problem, result: ExecutionResult, code: str) -> tuple[bool, str]:
    """Passed: a clean run, the cell's spec kept, every expected line shown in order (a
    question: every expected answer shown, the notebook's values unchanged)."""
    from ..spec import guard as spec
    from ..spec import notebook_data

    if result.status != "ok" or result.error is not None:
        what = f"{result.error.type}: {result.error.message}" if result.error else result.status
        return False, f"did not run to its end: {what}"[:300]
    if is_question(problem):
        broken = notebook_data.check(problem.hidden["context"], "", code)
        if broken:
            return False, f"breaks a data rule ({broken[0].rule}): {broken[0].message}"[:300]
        changed = [t for t in result.tests if not t.passed]
        if changed or len(result.tests) < len(problem.hidden["unchanged"]):
            name = changed[0].source.split()[1].split(".")[0] if changed else "?"
            return False, f"changes the notebook's `{name}`"
        lacks = grade_answer(problem, result.stdout)
        return (not lacks), lacks
    cell = problem.initial_code or ""
    broken = spec.check(spec.extract(cell), code) + notebook_data.check(problem.hidden["context"], cell, code)
    if broken:
        return False, f"breaks the cell's spec ({broken[0].rule}): {broken[0].message}"[:300]
    shown = iter(_norm(ln) for ln in result.stdout.splitlines())
    for want in problem.hidden["expected"]:
        if not any(_norm(want) == line for line in shown):
            return False, f"its output lacks {want!r} (in order)"
    return True, ""
