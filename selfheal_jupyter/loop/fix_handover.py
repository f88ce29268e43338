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
from ..model import (
    Attempt,
    ContextEntry,
    DefinitionChange,
    ExecutionResult,
    Fix,
    NotebookContext,
    Run,
    TestOutcome,
    Verdict,
)
from .capabilities import capabilities, scan
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


def _parsed_body(text: str | None) -> list[ast.stmt]:
    """The top-level statements of ``text`` (none when it is empty or does not parse)."""
    if not text:
        return []
    try:
        return ast.parse(text).body
    except SyntaxError:
        return []


@dataclass
class _Program:
    """The passing program as :func:`smaller_versions` reads it, once."""

    code: str
    cell: str | None
    body: list[ast.stmt]
    own: set[str]
    """The user's cell's statements (``ast.dump``): never left out."""
    tested: set[str]
    """Names the tests read (run after the program): they count as used."""
    lines: list[str] = field(init=False)
    strings: set[int] = field(init=False)
    cell_lines: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.code.splitlines(keepends=True)
        self.strings = _string_lines(self.code)
        self.cell_lines = {line.rstrip() for line in (self.cell or "").splitlines()}

    def alone(self, stmt: ast.stmt) -> bool:
        """No other statement shares its lines (``a; b``)."""
        first, last = _first_line(stmt), stmt.end_lineno or stmt.lineno
        return not any(
            o is not stmt and _first_line(o) <= last and (o.end_lineno or o.lineno) >= first for o in self.body
        )

    def lines_of(self, stmt: ast.stmt) -> set[int]:
        """Its lines, and the comment lines right above it that are not the user's (``# Given function``)."""
        first = _first_line(stmt)
        found = set(range(first, (stmt.end_lineno or stmt.lineno) + 1))
        above = first - 1
        while (
            above >= 1
            and above not in self.strings
            and self.lines[above - 1].strip().startswith("#")
            and self.lines[above - 1].rstrip() not in self.cell_lines
        ):
            found.add(above)
            above -= 1
        return found


def smaller_versions(
    cell: str | None,
    code: str,
    context: NotebookContext | None,
    tests: str | None = None,
    *,
    keep_changed: bool = False,
) -> list[Version]:
    """Forms of ``code`` (the passing program) to try, smallest first; empty when
    nothing can be left out.

    Left out: the tool's notes; import lines the prelude runs too, or that nothing
    reads once the rest is left out; functions and classes the notebook defines,
    written again. A definition written differently is left out in the first version
    and kept in the second (the fix may need it: then it is a change to an earlier
    cell); only kept with ``keep_changed``. Statements of the user's own cell are always
    kept; what ``tests`` (run after the program) read counts as used."""
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return []
    program = _Program(code, cell, body, {ast.dump(s) for s in _parsed_body(cell)}, _loaded(_parsed_body(tests)))
    definitions = _notebook_definitions(context)
    same: dict[int, str] = {}  # statement index → why it goes in every version
    different: dict[int, DefinitionChange] = {}
    for i, stmt in enumerate(body):
        if ast.dump(stmt) in program.own or not program.alone(stmt):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in definitions:
            source, node = definitions[stmt.name]
            if ast.dump(stmt) == ast.dump(node):
                same[i] = f"{_what(stmt)} (the same as in your notebook)"
            else:
                written = "".join(program.lines[_first_line(stmt) - 1 : stmt.end_lineno])
                different[i] = DefinitionChange(stmt.name, notebook=source.rstrip() + "\n", fix=written.rstrip() + "\n")
    imports = _notebook_imports(context)
    out: list[Version] = []
    for keep in ([True] if keep_changed else [False, True]) if different else [False]:
        left_out = dict(same)
        if not keep:
            for i in different:
                left_out[i] = f"{_what(body[i])} written again (your notebook defines it)"
        v = _version(program, _without_imports(program, left_out, imports), list(different.values()) if keep else [])
        if v.code != code and v.code.strip() and all(v.code != o.code for o in out):
            out.append(v)
    return out


def _without_imports(program: _Program, left_out: dict[int, str], imports: dict[str, str]) -> dict[int, str]:
    """``left_out`` and the import lines that go too: those the notebook runs (``imports``),
    and those nothing reads once the rest is left out (taken last for that reason)."""
    left_out = dict(left_out)
    body = program.body
    kept = [s for i, s in enumerate(body) if i not in left_out]
    for i, stmt in enumerate(body):
        if i in left_out or not isinstance(stmt, (ast.Import, ast.ImportFrom)) or ast.dump(stmt) in program.own:
            continue
        bound = _bindings(stmt)
        if not bound or not program.alone(stmt):
            continue
        reads = _loaded([s for s in kept if s is not stmt]) | program.tested
        supplied = all(imports.get(name) == path for name, path in bound.items())
        unused = all(name not in reads for name in bound)
        if supplied or unused:
            left_out[i] = f"{ast.unparse(stmt)} ({'your notebook imports it' if supplied else 'unused'})"
            kept = [s for s in kept if s is not stmt]
    return left_out


def _version(program: _Program, left_out: dict[int, str], changes: list[DefinitionChange]) -> Version:
    """The program without the statements ``left_out`` (and the tool's notes)."""
    drop: set[int] = set()
    for i in left_out:
        drop |= program.lines_of(program.body[i])
    lines, strings = program.lines, program.strings
    notes = {n for n, line in enumerate(lines, 1) if n not in strings and is_removed_note(line)}
    if notes:
        left_out = {**left_out, -1: "selfheal's notes where it removed made-up data"}
    text = "".join(line for n, line in enumerate(lines, 1) if n not in drop | notes)
    return Version(_tidy(text, program.cell), [left_out[i] for i in sorted(left_out, key=_last_first)], changes)


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


# --------------------------------------------------------------------------- line search


@dataclass
class _Hunk:
    """One place where the model's program differs from the user's cell: the user's
    lines ``old`` (a range, empty for an insertion) became the program's lines ``new``."""

    old: tuple[int, int]
    new: tuple[int, int]
    comments: list[int] = field(default_factory=list)
    """The program's lines of an insertion that are comments only (never inside a string)."""


def _pairs(
    old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int, simple: list[tuple[int, int]]
) -> list[_Hunk]:
    """A changed region split where a line of the program is not a changed line of the
    user's but one the model inserted (``difflib`` makes one region of a changed line
    and the new lines right after it): changed lines pair with the user's in order,
    each a hunk of its own unless one statement spans them (``simple``: 1-based line
    spans of the program's statements that hold no others)."""
    hunks: list[_Hunk] = []
    i = i1
    for j in range(j1, j2):
        best, score = -1, 0.6
        for k in range(i, i2):
            ratio = difflib.SequenceMatcher(None, old[k].strip(), new[j].strip(), autojunk=False).ratio()
            if ratio > score:
                best, score = k, ratio
        if best >= 0:
            if best > i:  # user's lines the model removed before this one
                hunks.append(_Hunk((i, best), (j, j)))
            hunks.append(_Hunk((best, best + 1), (j, j + 1)))
            i = best + 1
        elif hunks and hunks[-1].old[0] == hunks[-1].old[1] and hunks[-1].new[1] == j:
            hunks[-1].new = (hunks[-1].new[0], j + 1)
        else:
            hunks.append(_Hunk((i, i), (j, j + 1)))
    if i < i2:
        hunks.append(_Hunk((i, i2), (j2, j2)))
    # consecutive changed lines that one statement spans are one hunk
    merged: list[_Hunk] = []
    for h in hunks:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.old[1] == h.old[0]
            and last.new[1] == h.new[0]
            and last.old[0] < last.old[1]
            and h.old[0] < h.old[1]
            and any(a <= last.new[1] and h.new[0] + 1 <= b for a, b in simple)
        ):
            last.old, last.new = (last.old[0], h.old[1]), (last.new[0], h.new[1])
        else:
            merged.append(h)
    return merged


def _statement_spans(code: str, *, simple: bool = False) -> list[tuple[int, int]]:
    """(first, last) line, 1-based, of every statement at any depth (decorators
    included); ``simple``: only those that hold no other statement."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [
        (_first_line(n), n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and not (simple and hasattr(n, "body"))
    ]


def _by_statement(hunk: _Hunk, spans: list[tuple[int, int]]) -> list[_Hunk]:
    """An insertion split into its outermost statements, each with the comment and
    blank lines above it (so the model's thread can go while its probe line stays);
    the insertion whole when a line of it belongs to no statement inside it."""
    j1, j2 = hunk.new
    inside = [(a, b) for a, b in spans if a >= j1 + 1 and b <= j2]
    outer = sorted({(a, b) for a, b in inside if not any((c, d) != (a, b) and c <= a and b <= d for c, d in inside)})
    if len(outer) < 2:
        return [hunk]
    parts: list[_Hunk] = []
    start = j1
    for _first, last in outer:
        parts.append(_Hunk(hunk.old, (start, last)))
        start = last
    if start < j2:  # comments or blank lines after the last statement
        parts[-1].new = (parts[-1].new[0], j2)
    return parts


def _hunks(cell: str, code: str) -> tuple[list[str], list[str], list[_Hunk]]:
    old, new = cell.splitlines(), code.splitlines()
    strings = _string_lines(code)
    spans, simple = _statement_spans(code), _statement_spans(code, simple=True)
    matcher = difflib.SequenceMatcher(None, [x.rstrip() for x in old], [x.rstrip() for x in new], autojunk=False)
    hunks: list[_Hunk] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        found = _pairs(old, new, i1, i2, j1, j2, simple) if tag == "replace" else [_Hunk((i1, i2), (j1, j2))]
        for h in found:
            hunks.extend(_by_statement(h, spans) if h.old[0] == h.old[1] else [h])
    for h in hunks:  # the model's own comments (a comment of the user's it changed goes back as a line)
        if h.old[0] == h.old[1]:
            h.comments = [j for j in range(*h.new) if j + 1 not in strings and new[j].strip().startswith("#")]
    return old, new, hunks


def _apply(old: list[str], new: list[str], hunks: list[_Hunk], reverted: set[int], uncommented: set[int]) -> str:
    """The program with the hunks in ``reverted`` back to the user's lines and the
    comment lines of those in ``uncommented`` left out."""
    out: list[str] = []
    j = 0
    for index, h in enumerate(hunks):
        out.extend(new[j : h.new[0]])
        if index in reverted:
            out.extend(old[h.old[0] : h.old[1]])
        else:
            drop = set(h.comments) if index in uncommented else set()
            out.extend(line for k, line in enumerate(new[h.new[0] : h.new[1]], h.new[0]) if k not in drop)
        j = h.new[1]
    out.extend(new[j:])
    return "\n".join(out) + "\n"


def _short(line: str, width: int = 48) -> str:
    text = line.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Search:
    """What the search for lines the fix does not need found."""

    code: str
    left_out: list[str] = field(default_factory=list)
    result: ExecutionResult | None = None
    """The sandbox run of ``code`` (None: nothing was left out)."""
    stopped: str = ""
    """Why the search ended before every hunk was tried ("" when it tried them all)."""


Accept = Callable[[str], "ExecutionResult | None"]
"""Runs a program in the sandbox: its result if it passes the same checks, else None."""


def leave_out_unneeded(cell: str, code: str, accept: Accept, tries: int) -> Search:
    """Of the lines the model added or changed beyond the user's ``cell``, leave out each
    whose removal still passes (``accept``): comments first (all at once, then by hunk),
    then statements, one hunk at a time from the bottom (a use goes before what it
    uses, so an import is tried once nothing reads it). A changed line goes back to the
    user's text; the user's own lines are never touched. At most ``tries`` sandbox runs."""
    old, new, hunks = _hunks(cell, code)
    reverted: set[int] = set()
    uncommented: set[int] = set()
    search = Search(code)
    spent = 0
    tried: set[str] = {code}

    def attempt(rev: set[int], unc: set[int]) -> bool:
        nonlocal spent
        text = _tidy(_apply(old, new, hunks, rev, unc), cell)
        if text in tried or not text.strip():
            return False
        tried.add(text)
        try:
            ast.parse(text)
        except SyntaxError:
            return False  # never run: it cannot pass
        spent += 1
        result = accept(text)
        if result is None:
            return False
        search.code, search.result = text, result
        return True

    steps: list[tuple[str, set[int], set[int]]] = []
    with_comments = [i for i, h in enumerate(hunks) if h.comments]
    if with_comments:
        steps.append(("comments", set(), set(with_comments)))
    for i in reversed(range(len(hunks))):
        if hunks[i].new[0] < hunks[i].new[1] or hunks[i].old[0] < hunks[i].old[1]:
            steps.append(("hunk", {i}, set()))
    comment_fallback = True
    for n, (kind, rev, unc) in enumerate(steps):
        if spent >= tries:
            left = len(steps) - n
            search.stopped = (
                f"The search for lines the fix does not need stopped after {tries} sandbox runs "
                f"(SelfHeal.fix_search_tries); {left} more change{'s' if left != 1 else ''} of the model's "
                "were not tried, so some lines handed over may not be needed."
            )
            break
        if kind == "comments":
            if attempt(reverted, uncommented | unc):
                uncommented |= unc
                continue
            if not comment_fallback:
                continue
            for i in unc:  # one hunk's comments at a time
                if spent < tries and attempt(reverted, uncommented | {i}):
                    uncommented.add(i)
            continue
        if any(i in reverted for i in rev):
            continue
        if attempt(reverted | rev, uncommented):
            reverted |= rev
    comments = [new[j] for i in sorted(uncommented) for j in hunks[i].comments]
    if comments:
        shown = ", ".join(_short(c, 40) for c in comments[:3]) + (", …" if len(comments) > 3 else "")
        search.left_out.append(f"{len(comments)} comment{'s' if len(comments) != 1 else ''} of the model's ({shown})")
    unneeded: list[str] = []
    restored: list[str] = []
    for i in sorted(reverted):
        h = hunks[i]
        lines = [x for x in new[h.new[0] : h.new[1]] if x.strip() and not x.strip().startswith("#")]
        if lines:
            shown = f"`{_short(lines[0])}`" + (" …" if len(lines) > 1 else "")
            (restored if h.old[0] < h.old[1] else unneeded).append(shown)
    if unneeded:
        search.left_out.append(f"lines of the model's that the fix does not need ({', '.join(unneeded)})")
    if restored:
        search.left_out.append(
            f"the model's change of your line{'s' if len(restored) > 1 else ''} {', '.join(restored)}"
        )
    return search


# --------------------------------------------------------------------------- checking


def _checks_passed(checks: list[TestOutcome]) -> int:
    return sum(1 for c in checks if c.passed)


WHOLE = "this is the whole program that passed"
BLIND = (
    "Every line the model changed is handed over: your checks pass the program the task "
    "says is wrong too, so they cannot tell which of its changes the fix needs."
)


def checks_pass_the_wrong_program(run: Run) -> bool:
    """The task says the given program is wrong, yet it passed its checks (round 0 was
    held): a smaller form passing them says nothing of whether it still holds the fix,
    for undoing the fix passes them too."""
    given = next((it for it in run.iterations if it.index == 0), None)
    return given is not None and given.verdict.held == "given"


Recheck = Callable[[str], tuple[Verdict, list[TestOutcome], "ExecutionResult | None"]]
"""Judges a program as the run judged its candidates: (verdict, generated checks, its run)."""


def work_out_fix(run: Run, recheck: Recheck, *, search_tries: int = 0) -> Fix | None:
    """The :class:`Fix` of a passing ``run`` (None when none passed): the smallest
    version that passes the same checks as the passing program, else that program;
    then (a heal, ``search_tries`` > 0) without the lines of the model's it does not
    need; what it newly can do; and its own sandbox run, whose output the review shows."""
    final = run.final_iteration
    if final is None:
        return None
    code = final.candidate.code
    blind = checks_pass_the_wrong_program(run)
    versions = smaller_versions(run.task.initial_code, code, run.task.context, run.task.tests, keep_changed=blind)
    imports = _notebook_imports(run.task.context)
    cell = run.task.initial_code
    why_not = ""
    fix: Fix | None = None
    for v in versions:
        try:
            verdict, checks, result = recheck(v.code)
        except SelfHealError as exc:
            fix = Fix(
                code, note=f"A smaller version could not be checked ({exc}); this is the whole program that passed."
            )
            break
        if verdict.passed and _checks_passed(checks) >= _checks_passed(final.checks):
            fix = Fix(v.code, dropped=v.dropped, definitions=v.definitions, result=result)
            break
        why = "; ".join(verdict.why) if not verdict.passed else "it passed fewer of the generated checks"
        why_not = why_not or why
    if fix is None:
        note = f"A smaller version did not pass ({why_not}); {WHOLE}." if why_not else ""
        fix = Fix(code, note=note)
    if fix.result is None:
        fix.result = final.result
    if cell is not None and search_tries > 0:
        if blind:
            fix.note = " ".join(x for x in (fix.note, BLIND) if x)
        else:
            _search(run, fix, recheck, search_tries)
    fix.capabilities = capabilities(fix.code, cell, imports)
    fix.tried = unexplained_attempts(run, fix, imports)
    return fix


# the kinds of what the code shows that account for each kind of attempt the sandbox saw
_SHOWN_BY = {"network": {"network"}, "process": {"process", "threads"}, "files": {"files"}}


def unexplained_attempts(run: Run, fix: Fix, imports: dict[str, str]) -> list[Attempt]:
    """What the sandbox saw the code handed over, then the passing program it came
    from, try (``ExecutionResult.tried``) that the code handed over does not show and
    the user's cell did not do itself: each kind once, marked with whose run it was."""
    final = run.final_iteration
    if final is None:
        return []
    shown = {c.kind for c in scan(fix.code, imports)}
    given = next((it for it in run.iterations if it.index == 0), None)
    theirs = {a.kind for a in given.result.tried} if given is not None and given.result is not None else set()
    runs = [("fix", fix.result)] + ([("passing", final.result)] if final.candidate.code != fix.code else [])
    found: list[Attempt] = []
    for by, result in runs:
        for a in result.tried if result is not None else []:
            if a.kind in theirs or shown & _SHOWN_BY.get(a.kind, set()) or any(f.kind == a.kind for f in found):
                continue
            found.append(Attempt(a.kind, a.count, a.evidence, by=by))
    return found


def _search(run: Run, fix: Fix, recheck: Recheck, tries: int) -> None:
    """Leave out the model's lines ``fix`` does not need (see :func:`leave_out_unneeded`).
    Nothing checked the output of an unverified run, so there a line also stays when
    leaving it out changes what the program prints."""
    final = run.final_iteration
    assert final is not None and run.task.initial_code is not None
    base = fix.result
    verified = run.verified

    def accept(text: str) -> ExecutionResult | None:
        verdict, checks, result = recheck(text)
        if not verdict.passed or _checks_passed(checks) < _checks_passed(final.checks):
            return None
        if not verified and (result is None or base is None or result.stdout != base.stdout):
            return None
        return result

    try:
        found = leave_out_unneeded(run.task.initial_code, fix.code, accept, tries)
    except SelfHealError as exc:
        fix.note = f"The search for lines the fix does not need was cut short ({exc})."
        return
    if found.result is not None:
        fix.code, fix.result = found.code, found.result
        fix.note = fix.note.replace(WHOLE, "this is the program that passed, less the lines it does not need")
    fix.dropped.extend(found.left_out)
    fix.note = " ".join(x for x in (fix.note, found.stopped) if x)


def run_with_fix(loop: Any, task: Any, emit: Callable[[Any], None], cancel: Any, *, search_tries: int = 0) -> Run:
    """``loop.run(task)`` and, when a candidate passed, the fix it hands over: what a
    cell's run (and ``selfheal run``) does wherever it runs (in the kernel, or in the
    class service); ``search_tries``: ``SelfHeal.fix_search_tries``."""
    run = loop.run(task, on_event=emit, cancel=cancel)
    if run.final_code is not None:
        emit(CheckingFix())
        run.fix = work_out_fix(run, rechecker(loop, run, cancel), search_tries=search_tries)
    return run


def rechecker(loop: Any, run: Run, cancel: Any) -> Recheck:
    """Judges a program as ``run`` judged its candidates (``loop.recheck``)."""

    def recheck(code: str) -> tuple[Verdict, list[TestOutcome], ExecutionResult | None]:
        trial = loop.recheck(run, code, cancel=cancel)
        return trial.verdict, trial.checks, trial.result

    return recheck
