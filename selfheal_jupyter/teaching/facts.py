"""What the tool knows for sure about a failing cell and its verified fix, in two parts.

:class:`Facts` is what a hint may be built from and what the hint writer is told: where
the cell fails, the error, the values at that moment, which lines of the cell the fix
changes and the *kind* of each change (read from the syntax trees of the cell and the
fix: an operator, a name, a constant...). It has no field that could hold the fix's
text, so nothing built from it can carry the fix.

:class:`HeldFix` is the fix itself as the checks of :mod:`.prose` need it (its lines,
the tokens it introduces and removes on the changed lines, its diff). It stays with the
hint session; it reaches the student only when level 3 reveals it.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field

from ..model import CANDIDATE_FILE, Run
from ..redact import redact_value
from ..source_lines import source_lines
from .observe import BODIES, parse, statement_at
from .why import Differs

LEVELS = 3
LEVEL_TITLES = {1: "Where", 2: "Why", 3: "The fix"}

PLAIN_ERRORS = {
    "TypeError": "a value of the wrong type was used (for example a float where a whole number is needed)",
    "NameError": "a name is used that was never defined (a typo, or a variable set in another place)",
    "KeyError": "a dictionary (or table) was asked for a key it does not have",
    "IndexError": "a list was asked for a position past its end",
    "ValueError": "a value has the right type but an unusable content",
    "ZeroDivisionError": "a number was divided by zero",
    "AttributeError": "an object was asked for something it does not have",
    "AssertionError": "a check (assert) found the result is not what it should be",
    "SyntaxError": "Python could not read the code as written",
    "IndentationError": "the indentation of a line does not fit its block",
    "ImportError": "a module or name could not be imported",
    "ModuleNotFoundError": "a module that is not installed (or misspelled) was imported",
    "RecursionError": "a function called itself without stopping",
    "UnboundLocalError": "a variable was used inside a function before it was given a value there",
    "timeout": "the program did not finish in time (a loop that never ends, or far too much work)",
}

CHANGE_WORDS = {
    "operator": "an operator",
    "name": "a name",
    "constant": "a constant (a number or a text)",
    "call": "a call (the function called or its arguments)",
    "expression": "an expression",
    "missing": "a line is missing here",
    "missing_after": "a line is missing after it",
    "extra": "a line here should not be there",
    "statement": "the statement",
    "syntax": "the way the line is written",
}
"""Each kind of change in the words a hint uses."""


@dataclass(frozen=True)
class Change:
    """One line of the student's cell that the verified fix changes, and how (a key of
    :data:`CHANGE_WORDS`), in the cell's own numbering (1 = the code's first line)."""

    line: int
    kind: str


@dataclass
class Facts:
    """What the tool knows for sure about a failing cell: no field holds the fix's text."""

    cell: str = ""
    """The student's code (theirs; a hint may quote it)."""
    error_type: str = ""
    error_message: str = ""
    failing_line: int | None = None
    failing_source: str = ""
    failed_test: str = ""
    changes: list[Change] = field(default_factory=list)
    """The lines the verified fix changes (an insertion names the line it comes before)."""
    values: list[tuple[str, str]] = field(default_factory=list)
    """Runtime values at the failing statement: (expression, value), secrets redacted."""
    verified: bool = False
    """A fix passed and something checked its output (the student's asserts, tests...)."""
    found_unchecked: bool = False
    """A program passed only by running (nothing checked its output): no verified fix."""
    found_blind: bool = False
    """A program passed only checks the student's own cell passes too (the student said it
    is wrong): they cannot tell it from the cell, so it is no verified fix."""
    differs: Differs | None = None
    """The student's value that the verified run does not have at the same place (the
    student's value only; :mod:`.why`)."""

    @property
    def changed_lines(self) -> list[int]:
        return sorted({c.line for c in self.changes})

    def line(self, number: int) -> str:
        lines = source_lines(self.cell)
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""

    @property
    def failed(self) -> bool:
        return bool(self.error_type or self.failed_test)


@dataclass(frozen=True)
class HeldFix:
    """The verified fix, as only the checks and level 3 see it."""

    code: str
    diff: str
    lines: tuple[str, ...]
    """The lines the fix adds or changes (not in the student's cell)."""
    introduced: frozenset[str]
    """Tokens (names, operators, literals) on the fix's changed lines that the cell's
    changed lines do not have."""
    removed: frozenset[str]
    """Tokens of the cell's changed lines that the fix's lines no longer have."""
    moved: frozenset[str] = frozenset()
    """Tokens both have that the fix puts elsewhere on its lines: ``9 / 5`` for ``5 / 9``
    introduces and removes nothing, and says the fix as well."""
    verified_values: tuple[tuple[str, str], ...] = ()
    """(name, value) the verified run holds where the student's value differs (:mod:`.why`):
    saying one tells the change (``middle`` is ``1`` there)."""


# ---------------------------------------------------------------- tokens of a line
_TOKEN = re.compile(
    r"""[rbfuRBFU]{0,2}(?:'[^'\n]*'|"[^"\n]*")"""  # a string literal (one line)
    r"|[A-Za-z_]\w*"
    r"|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
    r"|\*\*=?|//=?|>>=?|<<=?|==|!=|<=|>=|->|:=|[-+*/%@&|^~<>]=?|="
    r"|[^\sA-Za-z_\d]"
)
PUNCTUATION = frozenset("()[]{},:.;")
"""Tokens that say nothing on their own (a comma, a bracket)."""


def tokens(text: str) -> list[str]:
    """Python-like tokens of ``text`` (a line that need not parse on its own)."""
    return _TOKEN.findall(text)


def _is_name(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#[^'\"]*$", "", line)


# ---------------------------------------------------------------- kinds of change
_OPS = (ast.operator, ast.cmpop, ast.boolop, ast.unaryop)


def _kinds(a: ast.AST, b: ast.AST) -> set[str]:
    """How node ``a`` (the cell's) differs from ``b`` (the fix's), nested bodies aside."""
    if type(a) is not type(b):
        if isinstance(a, ast.Call) or isinstance(b, ast.Call):
            return {"call"}
        if isinstance(a, _OPS) and isinstance(b, _OPS):
            return {"operator"}
        if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
            return {"constant"}
        if isinstance(a, ast.expr) and isinstance(b, ast.expr):
            return {"expression"}
        return {"statement"}
    if isinstance(a, _OPS):
        return set()
    if isinstance(a, ast.Constant):
        return {"constant"} if (type(a.value), a.value) != (type(b.value), b.value) else set()  # type: ignore[attr-defined]
    out: set[str] = set()
    if isinstance(a, ast.Name) and a.id != b.id:  # type: ignore[attr-defined]
        out.add("name")
    if isinstance(a, ast.Attribute) and a.attr != b.attr:  # type: ignore[attr-defined]
        out.add("name")
    for name, value in ast.iter_fields(a):
        if name in BODIES or name == "ctx":
            continue
        other = getattr(b, name, None)
        if isinstance(value, list):
            if len(value) != len(other or []):
                out.add("call" if isinstance(a, ast.Call) else "expression")
            for x, y in zip(value, other or [], strict=False):
                if isinstance(x, ast.AST) and isinstance(y, ast.AST):
                    out |= _kinds(x, y)
        elif isinstance(value, ast.AST) and isinstance(other, ast.AST):
            out |= _kinds(value, other)
        elif isinstance(value, ast.AST) or isinstance(other, ast.AST):
            out.add("expression")
        elif value != other and name in ("id", "attr", "arg", "name", "module"):
            out.add("name")
        elif value != other and name not in ("lineno", "col_offset", "end_lineno", "end_col_offset", "type_comment"):
            out.add("expression")
    return out


def _line_kind(old_tree: ast.AST | None, new_tree: ast.AST | None, old_line: int, new_line: int) -> str:
    if old_tree is None or new_tree is None:
        return "syntax"
    a, b = statement_at(old_tree, old_line), statement_at(new_tree, new_line)
    if a is None or b is None:
        return "statement"
    kinds = _kinds(a, b)
    for kind in ("operator", "constant", "call", "name", "expression", "statement"):
        if kind in kinds:
            return kind
    return "statement"


def changes_of(
    old: str, new: str
) -> tuple[list[Change], tuple[str, ...], frozenset[str], frozenset[str], frozenset[str]]:
    """The cell's lines the fix changes with the kind of each change, the fix's added or
    changed lines, and the tokens the fix introduces, removes and moves on those lines."""
    a, b = source_lines(old), source_lines(new)
    old_tree, new_tree = parse(old), parse(new)
    cell_names = {t for t in tokens(old) if _is_name(t)}
    changes: list[Change] = []
    added: list[str] = []
    old_tokens: list[str] = []
    new_tokens: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        added.extend(line for line in b[j1:j2] if line.strip())
        for line in a[i1:i2]:
            old_tokens += tokens(_without_comment(line))
        for line in b[j1:j2]:
            # A line the fix inserts uses the cell's names as it must: only what is new
            # to the whole cell (a name, and every operator and literal) is its change.
            new_tokens += [
                t for t in tokens(_without_comment(line)) if tag != "insert" or not _is_name(t) or t not in cell_names
            ]
        if tag == "insert":
            changes.append(Change(i1 + 1, "missing") if i1 < len(a) else Change(max(len(a), 1), "missing_after"))
        elif tag == "delete":
            changes.extend(Change(n, "extra") for n in range(i1 + 1, i2 + 1) if a[n - 1].strip())
        else:
            for offset, n in enumerate(range(i1 + 1, i2 + 1)):
                if not a[n - 1].strip():
                    continue
                changes.append(Change(n, _line_kind(old_tree, new_tree, n, min(j1 + 1 + offset, j2))))
    kept = {re.sub(r"\s+", "", line) for line in a}
    lines = tuple(x for x in added if re.sub(r"\s+", "", x) not in kept)
    introduced = frozenset(t for t in new_tokens if t not in old_tokens and t not in PUNCTUATION)
    removed = frozenset(t for t in old_tokens if t not in new_tokens and t not in PUNCTUATION)
    moved = _moved(old_tokens, new_tokens) - introduced - removed
    unique: dict[int, Change] = {}
    for change in changes:
        unique.setdefault(change.line, change)
    return sorted(unique.values(), key=lambda c: c.line), lines, introduced, removed, moved


def _moved(old: list[str], new: list[str]) -> frozenset[str]:
    """Tokens outside what the two token sequences keep in order (those in place), read
    from both ends: ``5 / 9`` → ``9 / 5`` keeps either number in place, so both moved."""
    out: set[str] = set()
    for a, b in ((old, new), (old[::-1], new[::-1])):
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag != "equal":
                out.update(a[i1:i2], b[j1:j2])
    return frozenset(t for t in out if t not in PUNCTUATION)


# ---------------------------------------------------------------- from a run
def facts_of(run: Run) -> tuple[Facts, HeldFix | None]:
    """The facts of ``run`` (a ``%%heal``-style run whose round 0 is the student's cell)
    and its verified fix (None when no fix was verified)."""
    from ..codeblocks import code_diff

    code = run.task.initial_code or ""
    facts = Facts(cell=code)
    first = run.iterations[0] if run.iterations else None
    result = first.result if first is not None else None
    if result is not None and result.error is not None:
        error = result.error
        facts.error_type, facts.error_message = error.type, error.message
        ours = [f for f in error.frames if f.file == CANDIDATE_FILE]
        facts.failing_line = ours[-1].line if ours else error.line
        facts.values = [(name, redact_value(name, value)) for name, value in error.locals.items()]
    elif result is not None:
        failed = [t for t in result.tests if not t.passed]
        if failed:
            facts.failed_test, facts.error_message = failed[0].source, failed[0].message
            facts.error_type = "AssertionError"
        elif result.status != "ok":
            facts.error_type, facts.error_message = result.status, result.message
    if first is not None:
        for probe in first.runtime_values:
            if probe.message and not probe.message.startswith(("TypeError", "NameError")):
                facts.values.append((probe.source, redact_value(probe.source, probe.message)))
    if facts.failing_line:
        facts.failing_source = facts.line(facts.failing_line)
    fix = run.final_code
    facts.verified = fix is not None and run.verified
    facts.found_unchecked = fix is not None and not run.verified
    facts.found_blind = facts.found_unchecked and bool(run.blind_checks)
    if fix is None or not facts.verified:
        return facts, None
    facts.changes, lines, introduced, removed, moved = changes_of(code, fix)
    held = HeldFix(
        code=fix,
        diff=code_diff(code, fix, old_name="your cell", new_name="fix"),
        lines=lines,
        introduced=introduced,
        removed=removed,
        moved=moved,
    )
    return facts, held


def plain_error(facts: Facts) -> str:
    """The error in plain words for a beginner."""
    if facts.failed_test:
        return f"your code runs, but the check `{facts.failed_test}` fails: the result is not what it should be."
    what = PLAIN_ERRORS.get(facts.error_type)
    said = f"{facts.error_type}: {facts.error_message}".strip(": ")
    return f"{said} — {what}." if what else f"{said}."
