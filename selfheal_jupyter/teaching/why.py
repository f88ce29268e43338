"""The "why" from two runs: which of the student's values the verified run does not have.

The student's cell and its verified fix run once more each, observed at the same places
(:mod:`.observe`): each line the fix changes (after an assignment: what it assigned; at a
loop's start: its variable; before a ``return`` or a condition: its value) and the line
where the cell fails (what it is about to use). The first name whose value differs —
at the earliest time the place is reached, the line's own names first — is what level 2
asks about: ``middle`` is ``1.5`` here; what kind of number can index a list?

Only the student's value is ever said. The verified run's value stays with the held fix
(:class:`~.facts.HeldFix`), where the prose checks find it if a model says it: "middle
should be 1" tells the change as surely as the fixed line does.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from ..source_lines import source_lines
from ..spec.probes import expressions
from .observe import VALUE, Execute, Place, Snapshot, observe, parse, place_of, statement_at

MAX_PLACES = 4
"""Changed lines observed (with the failing line): the first few tell where it goes wrong."""

KIND_WORDS = {
    "float": "a float: a number with a fraction part",
    "int": "a whole number",
    "str": "a text",
    "bool": "True or False",
    "NoneType": "None, no value at all",
    "list": "a list",
    "dict": "a dict",
    "tuple": "a tuple",
    "set": "a set",
}


@dataclass(frozen=True)
class Differs:
    """A value of the student's run that the verified run does not have at the same place
    (the student's value only)."""

    name: str
    """A name of the cell, or an expression of the cell (what its ``return`` gives, its condition)."""
    line: int
    """The cell's line where it was seen (1 = the code's first line)."""
    arrival: int
    """1: the first time the program got there."""
    value: str
    kind: str
    """The type of the student's value (``raises`` when evaluating it raised)."""
    expression: bool = False
    around: tuple[tuple[str, str], ...] = ()
    """The student's values of the names in the expression, at that moment."""
    call: tuple[tuple[str, str], ...] = ()
    """The arguments of the call it was seen in (empty: at the top level)."""
    function: str = ""
    """The function of that call."""


@dataclass(frozen=True)
class Found:
    """Every difference the two runs showed, the first chosen; the verified values of
    the names that differ (never for the student)."""

    differs: tuple[Differs, ...] = ()
    verified: tuple[str, ...] = ()

    @property
    def first(self) -> Differs | None:
        return self.differs[0] if self.differs else None


def line_map(old: str, new: str) -> dict[int, int]:
    """Each line of ``old`` (1-based) → the line of ``new`` in its place: kept lines to
    themselves, a changed block's lines to the block that replaces them."""
    a, b = source_lines(old), source_lines(new)
    out: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.update({i1 + k + 1: j1 + k + 1 for k in range(i2 - i1)})
        elif tag == "replace":
            out.update(_matched(a, b, i1, i2, j1, j2))
    return out


def _matched(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> dict[int, int]:
    """A changed block's lines paired in order with the most alike of the lines that
    replace them (a removed comment line shifts nothing)."""
    out: dict[int, int] = {}
    start = j1
    for i in range(i1, i2):
        scored = [
            (difflib.SequenceMatcher(a=a[i].strip(), b=b[j].strip(), autojunk=False).ratio(), j)
            for j in range(start, j2)
        ]
        ratio, best = max(scored, default=(0.0, -1), key=lambda x: x[0])
        if ratio >= 0.5:
            out[i + 1] = best + 1
            start = best + 1
    return out


def _targets(node: ast.stmt | None) -> list[str]:
    if node is None:
        return []
    found: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        found = [node.target]
    names = [n.id for t in found for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.If, ast.While, ast.Return)):
        names.insert(0, VALUE)
    return names


def _names(node: ast.AST | None) -> list[str]:
    if node is None:
        return []
    return list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))


@dataclass(frozen=True)
class _Pair:
    cell: Place
    fix: Place
    prefer: tuple[str, ...]


def _is_code(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith("#")


def _both(cell: str, fix: str, line: int, where: int, failing_stmt: ast.stmt | None) -> list[_Pair]:
    """The places that show what the changed ``line`` (``where`` in the fix) does; just
    before it too when the cell fails there (its "after" is never reached)."""
    a, b = place_of(cell, line), place_of(fix, where)
    if a is None or b is None:
        return []
    if a.at != b.at:  # not the same kind of statement: compare what both are about to use
        a, b = place_of(cell, line, before=True), place_of(fix, where, before=True)
        if a is None or b is None:
            return []
    tree = parse(cell)
    node = statement_at(tree, line) if tree is not None else None
    out = [_Pair(a, b, tuple(_targets(node)))]
    if failing_stmt is not None and node is failing_stmt and a.at != "before":
        before_a, before_b = place_of(cell, line, before=True), place_of(fix, where, before=True)
        if before_a is not None and before_b is not None:
            out.append(_Pair(before_a, before_b, tuple(_names(node))))
    return out


def _pairs(cell: str, fix: str, changed: list[int], failing: int | None) -> list[_Pair]:
    """The places to compare, in order: each changed line of code, then the failing line
    (a line the fix only inserts changes no value before it: what it does shows later)."""
    mapping = line_map(cell, fix)
    cell_tree = parse(cell)
    if cell_tree is None or parse(fix) is None:
        return []
    cell_lines, fix_lines = source_lines(cell), source_lines(fix)
    failing_stmt = statement_at(cell_tree, failing) if failing else None
    failing_names = tuple(_names(failing_stmt))
    out: list[_Pair] = []
    for line in [n for n in changed if 0 < n <= len(cell_lines) and _is_code(cell_lines[n - 1])][:MAX_PLACES]:
        where = mapping.get(line)
        if where is None or not _is_code(fix_lines[where - 1]) or cell_lines[line - 1] == fix_lines[where - 1]:
            continue
        out += [
            _Pair(p.cell, p.fix, tuple(dict.fromkeys([*p.prefer, *failing_names])))
            for p in _both(cell, fix, line, where, failing_stmt)
        ]
    if failing and failing_stmt is not None and failing in mapping:
        exprs = tuple((e, e) for e in expressions(failing_stmt))
        a, b = place_of(cell, failing, before=True), place_of(fix, mapping[failing], before=True)
        if a is not None and b is not None:
            a, b = Place(a.line, a.at, a.exprs + exprs), Place(b.line, b.at, b.exprs + exprs)
            out.append(_Pair(a, b, tuple(dict.fromkeys([*(e for e, _ in exprs), *failing_names]))))
    return out


def _comparable(value: tuple[str, str]) -> bool:
    """A value whose text is the value (not an object's address, which differs every run)."""
    return " at 0x" not in value[1] and not value[1].startswith("<")


def _differences(pair: _Pair, mine: list[Snapshot], theirs: list[Snapshot], cell_names: set[str]) -> list:
    """Each (difference, the verified value) at this pair of places: the student's
    snapshots in order, each against the verified run's in the same call (the same
    arguments) and the same time in it."""
    label = dict(pair.cell.exprs)
    fix_at = {(s.call, s.arrival): s.values for s in theirs}
    out = []
    for snapshot in mine:
        a, b = snapshot.values, fix_at.get((snapshot.call, snapshot.arrival))
        if b is None:
            continue
        names = [n for n in pair.prefer if n in a and n in b]
        names += [n for n in a if n in b and n not in names]
        for name in names:
            if name not in label and name not in cell_names:
                continue  # a name of the notebook's, not the cell's
            if a[name] == b[name] or not (_comparable(a[name]) and _comparable(b[name])):
                continue
            shown = label.get(name, name)
            around = tuple(
                (n, a[n][1]) for n in _expression_names(shown) if n in a and n != shown and _comparable(a[n])
            )
            differs = Differs(
                shown,
                pair.cell.line,
                snapshot.arrival,
                a[name][1],
                a[name][0],
                name in label,
                around,
                snapshot.call,
                snapshot.function,
            )
            out.append((differs, b[name][1]))
    return out


def _expression_names(text: str) -> list[str]:
    try:
        return _names(ast.parse(text, mode="eval"))
    except SyntaxError:
        return []


def find(cell: str, fix: str, changed: list[int], failing: int | None, execute: Execute) -> Found:
    """What the two runs show at the same places (two more sandbox runs)."""
    pairs = _pairs(cell, fix, changed, failing)
    if not pairs:
        return Found()
    mine = observe(cell, {str(i): p.cell for i, p in enumerate(pairs)}, execute)
    theirs = observe(fix, {str(i): p.fix for i, p in enumerate(pairs)}, execute)
    cell_names = {n.id for n in ast.walk(parse(cell) or ast.Module([], [])) if isinstance(n, ast.Name)}
    cell_names |= {a.arg for a in ast.walk(parse(cell) or ast.Module([], [])) if isinstance(a, ast.arg)}
    found: list = []
    for i, pair in enumerate(pairs):
        found += _differences(pair, mine.at(str(i)), theirs.at(str(i)), cell_names)
    seen: set[str] = set()
    unique = []
    for differs, verified in found:
        if differs.name not in seen:
            seen.add(differs.name)
            unique.append((differs, verified))
    return Found(tuple(d for d, _ in unique), tuple(v for _, v in unique))


# ---------------------------------------------------------------- the question
ORDINALS = {1: "first", 2: "second", 3: "third"}


def _when(d: Differs, shown_line: int) -> str:
    """ "The second time line 16 runs when `average` gets `grades` = `[12, 15, 9, 18]`"."""
    if not d.function and d.arrival == 1:
        return f"When line {shown_line} runs"
    where = f"The {ORDINALS.get(d.arrival, f'{d.arrival}th')} time line {shown_line} runs"
    if d.function:
        given = ", ".join(f"`{n}` = `{v}`" for n, v in d.call if (n, v) != (d.name, d.value))
        where += f" when `{d.function}` gets {given}" if given else f" in `{d.function}`"
    return where


def said(d: Differs, shown_line: int) -> str:
    """The student's value first, then where and when ("`middle` is `1.5` (a float: a
    number with a fraction part) the first time line 4 runs when `median` gets `values` =
    `[3, 1, 2]`")."""
    when = _when(d, shown_line)
    if d.kind == "raises":
        return f"Working out `{d.name}` raises {d.value} ({when[0].lower()}{when[1:]})."
    kind = KIND_WORDS.get(d.kind)
    what = f"`{d.name}` is `{d.value}`" + (f" ({kind})" if kind and not d.expression else "")
    given = dict(d.call)
    around = [f"`{n}` = `{v}`" for n, v in d.around[:2] if given.get(n) != v]
    with_ = f", with {' and '.join(around)}" if around else ""
    if not d.function and d.arrival == 1:
        return f"{what}{with_} {when[0].lower()}{when[1:]}."
    return f"{what}{with_}: {when[0].lower()}{when[1:]}."


def _uses(tree: ast.AST, name: str) -> set[str]:
    """How ``name`` is used in ``tree``: as an index, in ``range()``, in arithmetic, compared."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and name in _names(node.slice):
            out.add("index")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            if any(name in _names(a) for a in node.args):
                out.add("range")
        elif isinstance(node, ast.BinOp) and name in _names(node):
            out.add("arithmetic")
        elif isinstance(node, ast.Compare) and name in _names(node):
            out.add("compared")
    return out


def _loop_over(tree: ast.AST, d: Differs) -> str | None:
    """The list a loop's variable ``d.name`` indexes, when the loop on ``d``'s line binds it."""
    node = statement_at(tree, d.line)
    if d.expression or not isinstance(node, (ast.For, ast.AsyncFor)) or d.name not in _names(node.target):
        return None
    if not (isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"):
        return None  # a loop over items, not positions
    for inner in ast.walk(node):
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and d.name in _names(inner.slice):
            return inner.value.id
    return None


def _call_of(text: str) -> str | None:
    """The function a call expression calls (``median`` of ``median([4, 1, 3, 2])``)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def question(d: Differs, cell: str, failing: int | None, error_type: str, message: str) -> str:
    """What to ask about ``d``: what kind of value the operation that uses it needs, or
    what it should be at that moment — never what it is in the verified run."""
    tree = parse(cell)
    used: set[str] = set()
    if tree is not None and not d.expression:
        stmt = statement_at(tree, failing) if failing else None
        used = _uses(stmt, d.name) if stmt is not None else set()
        if not used:
            used = _uses(tree, d.name)
    number = d.kind in ("float", "int")
    node = statement_at(tree, d.line) if tree is not None else None
    if d.expression and isinstance(node, (ast.For, ast.AsyncFor)) and d.name == ast.unparse(node.iter):
        parts = (
            "; into how many names does the loop take each one apart?" if isinstance(node.target, ast.Tuple) else "?"
        )
        return f"What does a `for` loop over `{d.name}` give at each step{parts}"
    walked = _loop_over(tree, d) if tree is not None else None
    if walked is not None:
        return f"Which positions of `{walked}` should `{d.name}` go through, starting with the first?"
    if d.expression and d.kind == "bool":
        return "Is that what it should be for these values? Work it out by hand."
    if "index" in used and d.kind == "float":
        return "What kind of number can be used as a position in a list?"
    if "index" in used and error_type in ("IndexError", "KeyError"):
        return (
            f"Which positions (or keys) does the value it indexes have at that moment, and is `{d.name}` one of them?"
        )
    if "range" in used and d.kind == "float":
        return "What kind of number does `range()` accept?"
    if error_type == "TypeError" and ("operand" in message or "concatenate" in message):
        return f"What type must `{d.name}` be for that operation?"
    defined = (
        {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} if tree else set()
    )
    call = _call_of(d.name) if d.expression else None
    call = call if call in defined else None
    if call is not None:
        return f"Work through `{call}` by hand for these values, line by line: where does it stop doing what you meant?"
    if d.expression:
        return "What should it be at that moment? Work it out by hand for this input."
    if number or d.kind in ("list", "dict", "str", "tuple", "set"):
        return f"What should `{d.name}` be at that moment? Work it out by hand for this input."
    return f"Is that what you expected `{d.name}` to be there?"
