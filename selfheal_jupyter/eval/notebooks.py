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
"""

from __future__ import annotations

import contextlib
import io
import linecache
import re
import sys
import threading
import types
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

from ..model import ExecutionResult, NotebookContext, Task
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
    """Run ``earlier`` as a kernel would (cell sources where IPython keeps them, a
    ``__main__`` of their own), then resolve what ``cell`` needs from that namespace."""
    from ..notebook import context

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
            return context.for_cell(cell, main.__dict__, max_bytes=CONTEXT_MAX_BYTES)
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def load() -> list[Problem]:
    problems = []
    for path in case_dirs():
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
    """The task ``%%heal <hint>`` makes of the last cell, with the notebook's context."""
    from ..notebook.arguments import heal_task

    args = SimpleNamespace(hint=problem.prompt.split(), tests=None, inputs=None)
    made = heal_task(args, problem.initial_code or "", {}, [])
    made.context = problem.hidden["context"]
    return made


def hidden_run(problem: Problem) -> HiddenRun:
    """The program with the notebook's prelude; the grade reads its run (:func:`grade`)."""
    return HiddenRun(tests="", prelude=problem.hidden["context"].prelude)


_WHOLE = re.compile(r"(?<![\d.])(\d+)\.0+(?![\d.])")


def _norm(line: str) -> str:
    """A printed line as the grade compares it: spacing, letter case and the zero
    decimals of a whole number do not count (a fix may rewrite a label as "Average days to
    ship", or print a rate of 0 as ``0%`` where the cell's format gave ``0.0%``; its values
    must stay). Every other digit counts: the month ``01`` is not ``1``, and ``2024.1``
    is not ``2024.10``."""
    return _WHOLE.sub(r"\1", " ".join(line.split()).casefold())


def grade(problem: Problem, result: ExecutionResult, code: str) -> tuple[bool, str]:
    """Passed: a clean run, the cell's spec kept, every expected line shown in order."""
    from ..spec import guard as spec
    from ..spec import notebook_data

    if result.status != "ok" or result.error is not None:
        what = f"{result.error.type}: {result.error.message}" if result.error else result.status
        return False, f"did not run to its end: {what}"[:300]
    cell = problem.initial_code or ""
    broken = spec.check(spec.extract(cell), code) + notebook_data.check(problem.hidden["context"], cell, code)
    if broken:
        return False, f"breaks the cell's spec ({broken[0].rule}): {broken[0].message}"[:300]
    shown = iter(_norm(ln) for ln in result.stdout.splitlines())
    for want in problem.hidden["expected"]:
        if not any(_norm(want) == line for line in shown):
            return False, f"its output lacks {want!r} (in order)"
    return True, ""
