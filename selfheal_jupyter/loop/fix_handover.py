"""The smallest change to the user's cell that passes: what a passing run hands over.

A passing program often carries what the notebook already supplies: the imports of
earlier cells, a notebook helper written again (sometimes with other behaviour), and
the notes the tool left where it removed made-up data. Handed over as it is, all of
that would land in the user's cell. :func:`smaller_versions` leaves out, with the AST
and the run's notebook context, what the candidate *added* of that kind (never a
statement the user's cell holds) and keeps the user's own text for every line the fix
did not change. :func:`work_out_fix` re-judges each smaller version the way the run
judged its candidates (``Loop.recheck``: a sandbox run with the same prelude, tests,
spec and checks); the first that passes is handed over, else the whole passing program,
saying why (:func:`run_with_fix`: a run and its fix, in a kernel or in the class service).
Nothing here imports the loop or IPython: the caller passes the loop in.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..agents.qa import is_removed_note
from ..errors import SelfHealError
from ..model import ContextEntry, DefinitionChange, Fix, NotebookContext, Run, TestOutcome, Verdict
from .events import CheckingFix

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass
class Version:
    """A smaller form of the passing program, and what was left out of it."""

    code: str
    dropped: list[str] = field(default_factory=list)
    definitions: list[DefinitionChange] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


def _bindings(stmt: ast.Import | ast.ImportFrom) -> dict[str, str] | None:
    """The names an import binds and the dotted path each names (None: ``*``, relative,
    ``__future__``: never left out)."""
    out: dict[str, str] = {}
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            # ``import a.b`` binds ``a`` but also loads ``a.b``: the same only as itself
            out[alias.asname or alias.name.split(".")[0]] = alias.name
        return out
    if stmt.level or not stmt.module or stmt.module == "__future__":
        return None
    for alias in stmt.names:
        if alias.name == "*":
            return None
        out[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return out


def _prelude_statements(ctx: NotebookContext | None, kinds: tuple[str, ...]) -> Iterator[tuple[ContextEntry, ast.stmt]]:
    """Each top-level statement of the prelude's entries of ``kinds``, with its entry."""
    for entry in ctx.available if ctx else []:
        if entry.kind not in kinds:
            continue
        try:
            body = ast.parse(entry.source).body
        except SyntaxError:
            continue
        for stmt in body:
            yield entry, stmt


def _notebook_imports(ctx: NotebookContext | None) -> dict[str, str]:
    """name → dotted path of every import line the prelude runs."""
    out: dict[str, str] = {}
    for entry, stmt in _prelude_statements(ctx, ("module", "import")):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found = _bindings(stmt) or {}
            if entry.name in found:
                out[entry.name] = found[entry.name]
    return out


def _notebook_definitions(ctx: NotebookContext | None) -> dict[str, tuple[str, Definition]]:
    """name → (source, node) of every function or class the prelude defines."""
    out: dict[str, tuple[str, Definition]] = {}
    for entry, stmt in _prelude_statements(ctx, ("function", "class")):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == entry.name:
            out[entry.name] = (entry.source, stmt)
    return out


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", [])
    return min([d.lineno for d in decorators] + [stmt.lineno])


def _string_lines(code: str) -> set[int]:
    """Lines that lie inside a multi-line string (never read as comments or blanks)."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def _loaded(nodes: list[ast.stmt]) -> set[str]:
    return {
        n.id for stmt in nodes for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
    }


# --------------------------------------------------------------------------- versions


def smaller_versions(
    cell: str | None, code: str, context: NotebookContext | None, tests: str | None = None
) -> list[Version]:
    """Forms of ``code`` (the passing program) to try, smallest first; empty when
    nothing can be left out.

    Left out: the tool's notes; import lines the prelude runs too, or that nothing
    reads once the rest is left out; functions and classes the notebook defines,
    written again. A definition written differently is left out in the first version
    and kept in the second (the fix may need it: then it is a change to an earlier
    cell). Statements of the user's own cell are always kept; what ``tests`` (run after
    the program) read counts as used."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    try:
        own = {ast.dump(s) for s in ast.parse(cell).body} if cell else set()
    except SyntaxError:
        own = set()
    try:
        tested = _loaded(ast.parse(tests).body) if tests else set()
    except SyntaxError:
        tested = set()
    imports = _notebook_imports(context)
    definitions = _notebook_definitions(context)
    lines = code.splitlines(keepends=True)
    strings = _string_lines(code)
    body = tree.body
    cell_lines = {line.rstrip() for line in (cell or "").splitlines()}

    def alone(stmt: ast.stmt) -> bool:  # no other statement shares its lines (``a; b``)
        first, last = _first_line(stmt), stmt.end_lineno or stmt.lineno
        return not any(o is not stmt and _first_line(o) <= last and (o.end_lineno or o.lineno) >= first for o in body)

    same: dict[int, str] = {}  # statement index → why it goes in every version
    different: dict[int, DefinitionChange] = {}
    for i, stmt in enumerate(body):
        if ast.dump(stmt) in own or not alone(stmt):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in definitions:
            source, node = definitions[stmt.name]
            if ast.dump(stmt) == ast.dump(node):
                same[i] = f"{_what(stmt)} (the same as in your notebook)"
            else:
                written = "".join(lines[_first_line(stmt) - 1 : stmt.end_lineno])
                different[i] = DefinitionChange(stmt.name, notebook=source.rstrip() + "\n", fix=written.rstrip() + "\n")

    def version(keep_different: bool) -> Version:
        left_out = dict(same)
        if not keep_different:
            for i, _change in different.items():
                left_out[i] = f"{_what(body[i])} written again (your notebook defines it)"
        # Imports last: one is unused once what read it is left out.
        kept = [s for i, s in enumerate(body) if i not in left_out]
        for i, stmt in enumerate(body):
            if i in left_out or not isinstance(stmt, (ast.Import, ast.ImportFrom)) or ast.dump(stmt) in own:
                continue
            bound = _bindings(stmt)
            if not bound or not alone(stmt):
                continue
            reads = _loaded([s for s in kept if s is not stmt]) | tested
            supplied = all(imports.get(name) == path for name, path in bound.items())
            unused = all(name not in reads for name in bound)
            if supplied or unused:
                text = ast.unparse(stmt)
                left_out[i] = f"{text} ({'your notebook imports it' if supplied else 'unused'})"
                kept = [s for s in kept if s is not stmt]
        drop: set[int] = set()
        for i in left_out:
            stmt = body[i]
            first = _first_line(stmt)
            drop.update(range(first, (stmt.end_lineno or stmt.lineno) + 1))
            above = first - 1  # the comment lines right above it go with it (``# Given function``)
            while (
                above >= 1
                and above not in strings
                and lines[above - 1].strip().startswith("#")
                and lines[above - 1].rstrip() not in cell_lines
            ):
                drop.add(above)
                above -= 1
        notes = {n for n, line in enumerate(lines, 1) if n not in strings and is_removed_note(line)}
        if notes:
            left_out[-1] = "selfheal's notes where it removed made-up data"
        text = "".join(line for n, line in enumerate(lines, 1) if n not in drop | notes)
        changes = list(different.values()) if keep_different else []
        return Version(_tidy(text, cell), [left_out[i] for i in sorted(left_out, key=_last_first)], changes)

    out: list[Version] = []
    for keep in [False, True] if different else [False]:
        v = version(keep)
        if v.code != code and v.code.strip() and all(v.code != o.code for o in out):
            out.append(v)
    return out


def _what(stmt: ast.stmt) -> str:
    return f"class {stmt.name}" if isinstance(stmt, ast.ClassDef) else f"{getattr(stmt, 'name', '?')}()"


def _last_first(i: int) -> tuple[bool, int]:
    return i < 0, i


def _tidy(text: str, cell: str | None) -> str:
    """``text`` with the user's own lines where it did not change them: blank lines it
    added are dropped, blank lines it removed are put back, lines equal but for trailing
    spaces are the user's, and the end keeps the cell's final newline (or lack of one)."""
    strings = _string_lines(text)
    new = text.splitlines()
    while new and not new[0].strip() and 1 not in strings:
        new.pop(0)
    if cell is None:
        return "\n".join(new).rstrip() + "\n" if new else ""
    old = cell.splitlines()
    matcher = difflib.SequenceMatcher(
        None, [line.rstrip() for line in old], [line.rstrip() for line in new], autojunk=False
    )
    out: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        mine, theirs = old[i1:i2], new[j1:j2]
        blank = not any(line.strip() for line in theirs)
        if tag == "equal":
            out.extend(mine)
        elif tag == "delete" and not any(line.strip() for line in mine):
            out.extend(mine)  # blank lines of the user's, removed by the model
        elif tag == "insert" and blank and not any(j + 1 in strings for j in range(j1, j2)):
            continue  # blank lines the model added
        else:
            out.extend(theirs)
    result = "\n".join(out)
    return result + "\n" if cell.endswith("\n") else result


def without_notes(code: str) -> str:
    """``code`` without the notes selfheal wrote in it (comment lines only, so it runs
    the same): for a program handed over that did not pass, which cannot be re-judged."""
    strings = _string_lines(code)
    lines = code.splitlines(keepends=True)
    return "".join(line for n, line in enumerate(lines, 1) if n in strings or not is_removed_note(line))


# --------------------------------------------------------------------------- checking


def _checks_passed(checks: list[TestOutcome]) -> int:
    return sum(1 for c in checks if c.passed)


Recheck = Callable[[str], tuple[Verdict, list[TestOutcome]]]
"""Judges a program as the run judged its candidates: (verdict, generated checks)."""


def work_out_fix(run: Run, recheck: Recheck) -> Fix | None:
    """The :class:`Fix` of a passing ``run`` (None when none passed): the smallest
    version that passes the same checks as the passing program, else that program."""
    final = run.final_iteration
    if final is None:
        return None
    code = final.candidate.code
    versions = smaller_versions(run.task.initial_code, code, run.task.context, run.task.tests)
    why_not = ""
    for v in versions:
        try:
            verdict, checks = recheck(v.code)
        except SelfHealError as exc:
            return Fix(
                code, note=f"A smaller version could not be checked ({exc}); this is the whole program that passed."
            )
        if verdict.passed and _checks_passed(checks) >= _checks_passed(final.checks):
            return Fix(v.code, dropped=v.dropped, definitions=v.definitions)
        why = "; ".join(verdict.why) if not verdict.passed else "it passed fewer of the generated checks"
        why_not = why_not or why
    if why_not:
        return Fix(code, note=f"A smaller version did not pass ({why_not}); this is the whole program that passed.")
    return Fix(code)


def run_with_fix(loop: Any, task: Any, emit: Callable[[Any], None], cancel: Any) -> Run:
    """``loop.run(task)`` and, when a candidate passed, the fix it hands over: what a
    cell's run does wherever it runs (in the kernel, or in the class service)."""
    run = loop.run(task, on_event=emit, cancel=cancel)
    if run.final_code is not None:
        emit(CheckingFix())

        def recheck(code: str) -> tuple[Verdict, list[TestOutcome]]:
            trial = loop.recheck(run, code, cancel=cancel)
            return trial.verdict, trial.checks

        run.fix = work_out_fix(run, recheck)
    return run
