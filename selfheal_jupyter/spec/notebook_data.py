"""No invented data in a heal: the notebook's values are the user's, not the model's.

Why: a cell healed against copies of its notebook's values (``notebook/context.py``) can
be made to "pass" by feeding those values made-up data — ``stats.add(1)`` … ``stats.add(6)``
on the user's ``RunningStats`` — or by replacing them (``df = pd.DataFrame({...})``). The
run then prints numbers about data the user never had. Two rules, static like the rest
of the spec guard (the candidate is never asked about itself):

- ``data_added``: the candidate changes a copied notebook value the cell only reads,
  with data written into the program: a mutating call (``append``, ``update``, a method
  of a notebook class that assigns to ``self``...) whose arguments are literals, or an
  item / attribute set to a literal, that the user's cell does not make;
- ``data_replaced``: the candidate assigns literal data (a literal, or a ``DataFrame``,
  ``Series``, array or instance of the value's class built from literals) to the name of
  a copied notebook value, where the user's cell does not.

- ``data_ignored`` (a task in words, ``%%agent``): the task names notebook data, and
  the candidate never reads any of it and answers from a table of its own written into
  the program (``customer_spending = {"Alice": ...}`` for a question about ``orders``).

A redefinition of a notebook function or class that the prelude already brings is not
refused: the fix may be inside it. :func:`redefined` names the ones whose source differs
from the notebook's, so the record and the page show them as changes to that other cell
(never a silent shadow). :func:`changes` names what the code does to a notebook value
when it runs in the user's kernel (a new column, a converted dtype, ``inplace=True``,
``.append``, a new binding), so the review says it before the user inserts the code.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Iterator

from ..model import NotebookContext, SpecViolation
from .answer_blanks import MUTATORS, is_literal

FIX = {
    "data_added": (
        "Do not add values to the user's notebook data: it already holds their real data. "
        "Remove the calls that feed it literal values and compute the result from the "
        "data as it is."
    ),
    "data_replaced": (
        "Do not replace the user's notebook data with example values: remove that "
        "assignment and use the value as it is (it already exists when the program starts)."
    ),
    "data_ignored": (
        "Compute the answer from the user's data named in the task (it exists when the "
        "program starts); remove the data written into the program."
    ),
}

DATA_CONSTRUCTORS = frozenset(
    {"DataFrame", "Series", "array", "asarray", "Counter", "deque", "OrderedDict", "defaultdict"}
)
"""Calls that build a data value from their (literal) arguments."""


def _key(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _self_mutating_methods(source: str) -> set[str]:
    """Methods of a notebook class (its source) that change the instance."""
    tree = _parse(source)
    out: set[str] = set()
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] if tree else []:
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
                continue
            me = method.args.args[0].arg
            for node in ast.walk(method):
                targets: list[ast.AST] = []
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                    targets = [node.func.value]
                if any(_root(t) == me and isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                    out.add(method.name)
                    break
    return out


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _made_up(node: ast.AST | None, literal_names: set[str], classes: set[str]) -> bool:
    """Data written into the program: a literal, a name bound to one by a ``for`` over a
    literal, or a data constructor / notebook class called with only such arguments."""
    if node is None:
        return False
    if is_literal(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in literal_names
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        args = [*node.args, *(k.value for k in node.keywords)]
        return (
            (name in DATA_CONSTRUCTORS or name in classes)
            and bool(args)
            and all(_made_up(a, literal_names, classes) for a in args)
        )
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts) and all(_made_up(e, literal_names, classes) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(_made_up(v, literal_names, classes) for v in node.values)
    return False


def _contains_made_up(node: ast.AST, literal_names: set[str], classes: set[str]) -> bool:
    return any(
        _made_up(sub, literal_names, classes) and not isinstance(sub, ast.Constant) for sub in ast.walk(node)
    ) or _made_up(node, literal_names, classes)


def _literal_loop_names(tree: ast.AST) -> set[str]:
    """Names a ``for`` binds from a literal (``for v in [1, 2, 3]``, ``range(6)``)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)):
            it = node.iter
            from_range = (
                isinstance(it, ast.Call)
                and isinstance(it.func, ast.Name)
                and it.func.id == "range"
                and all(is_literal(a) for a in it.args)
            )
            if is_literal(it) or from_range:
                out |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return out


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node


def check(context: NotebookContext | None, original: str, candidate: str) -> list[SpecViolation]:
    """Every way ``candidate`` feeds or replaces the notebook's copied values with data of
    its own that the user's cell (``original``) does not."""
    if context is None:
        return []
    values = {e.name: e for e in context.available if e.kind == "value"}
    tree = _parse(candidate)
    if not values or tree is None:
        return []
    before = _parse(original)
    own = Counter(_key(s) for s in _statements(before)) if before is not None else Counter()
    classes = {e.name for e in context.available if e.kind == "class"}
    mutating: dict[str, set[str]] = {}
    for e in context.available:
        if e.kind == "class":
            mutating[e.name] = _self_mutating_methods(e.source)
    literal_names = _literal_loop_names(tree)
    out: list[SpecViolation] = []
    if not original.strip():
        out += _ignored(values, tree, literal_names, classes)
    seen: set[tuple[str, str]] = set()
    for stmt in _statements(tree):
        key = _key(stmt)
        if own[key] > 0:
            own[key] -= 1
            continue
        found = _added(stmt, values, mutating, literal_names, classes) or _replaced(
            stmt, values, literal_names, classes
        )
        if found is None or found[:2] in seen:
            continue
        rule, name, source = found
        seen.add((rule, name))
        label = values[name].type or "value"
        if rule == "data_added":
            message = (
                f"line {stmt.lineno} `{source}` adds made-up data to `{name}` ({label}), "
                "the user's data copied from the notebook, which this cell only reads"
            )
        else:
            message = (
                f"line {stmt.lineno} `{source}` replaces `{name}` ({label}), the user's "
                "data copied from the notebook, with values written into the program"
            )
        out.append(
            SpecViolation(
                rule=rule,  # type: ignore[arg-type]
                message=message,
                fix=FIX[rule],
                line=stmt.lineno,
                original=name,
            )
        )
    return out


def _table(node: ast.AST | None, literal_names: set[str], classes: set[str]) -> bool:
    """A table written into the program: a collection of two or more made-up items, or a
    data constructor given only made-up data."""
    if node is None or not _made_up(node, literal_names, classes):
        return False
    if isinstance(node, ast.Call):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return len(node.elts) >= 2
    if isinstance(node, ast.Dict):
        return len(node.values) >= 2
    return False


def _ignored(values: dict, tree: ast.Module, literal_names: set[str], classes: set[str]) -> list[SpecViolation]:
    """``data_ignored``: none of ``values`` is ever read, and a table is made up instead."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if read & set(values):
        return []
    for stmt in _statements(tree):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and _table(stmt.value, literal_names, classes):
            names = ", ".join(f"`{n}`" for n in values)
            return [
                SpecViolation(
                    rule="data_ignored",
                    message=(
                        f"the task asks about {names}, the user's data from the notebook, and the program "
                        f"never reads it: line {stmt.lineno} `{_short(stmt)}` makes up a table of its own"
                    ),
                    fix=FIX["data_ignored"],
                    line=stmt.lineno,
                    original=next(iter(values)),
                )
            ]
    return []


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:79] + "…"


def _added(
    stmt: ast.stmt, values: dict, mutating: dict[str, set[str]], literal_names: set[str], classes: set[str]
) -> tuple[str, str, str] | None:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        name = _root(call.func.value)
        if name is None or name not in values:
            return None
        type_name = (values[name].type or "").split(" ")[0]
        methods = mutating.get(type_name, set()) | set(MUTATORS)
        args = [*call.args, *(k.value for k in call.keywords)]
        if call.func.attr in methods and args and all(_made_up(a, literal_names, classes) for a in args):
            return "data_added", name, _short(stmt)
        return None
    if isinstance(stmt, (ast.Assign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            name = _root(t)
            if (
                isinstance(t, (ast.Subscript, ast.Attribute))
                and name is not None
                and name in values
                and _made_up(stmt.value, literal_names, classes)
            ):
                return "data_added", name, _short(stmt)
    return None


def _replaced(stmt: ast.stmt, values: dict, literal_names: set[str], classes: set[str]) -> tuple[str, str, str] | None:
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
        return None
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for t in targets:
        if (
            isinstance(t, ast.Name)
            and t.id in values
            and not _is_none(stmt.value)
            and _contains_made_up(stmt.value, literal_names, classes)
        ):
            return "data_replaced", t.id, _short(stmt)
    return None


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def redefined(context: NotebookContext | None, original: str, candidate: str) -> list[str]:
    """Notebook functions and classes the candidate defines again, differently from the
    notebook's source, when the user's cell did not define them: a fix made inside another
    cell's definition, to be shown as such."""
    if context is None:
        return []
    tree, before = _parse(candidate), _parse(original)
    if tree is None:
        return []
    defined_by_cell = {n.name for n in _top_definitions(before)} if before is not None else set()
    notebook = {e.name: e.source for e in context.available if e.kind in ("function", "class")}
    out = []
    for node in _top_definitions(tree):
        source = notebook.get(node.name)
        if source is None or node.name in defined_by_cell:
            continue
        theirs = _parse(source)
        mine = next((n for n in _top_definitions(theirs) if n.name == node.name), None) if theirs else None
        if mine is None or _key(mine) != _key(node):
            out.append(node.name)
    return out


def _top_definitions(tree: ast.Module | None) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt


# --------------------------------------------------------------------------- changes
CONVERTERS = frozenset({"to_datetime", "to_numeric", "to_timedelta", "astype", "infer_objects", "convert_dtypes"})
"""Calls whose result put back in a column converts that column (``df['d'] = pd.to_datetime(df['d'])``)."""


def _column_key(node: ast.AST) -> str | None:
    """``'date'`` in ``df['date']`` / ``df.loc[:, 'date']``."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Tuple) and len(key.elts) == 2:
            key = key.elts[1]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _converts(value: ast.AST, name: str, column: str) -> bool:
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in CONVERTERS and any(
                _root(sub) == name and _column_key(sub) == column for sub in ast.walk(node) if sub is not node
            ):
                return True
    return False


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements that run at the program's top level (in loops, ifs, withs, trys; not in defs)."""
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield stmt
        for field_name in ("body", "orelse", "finalbody"):
            todo.extend(getattr(stmt, field_name, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            todo.extend(handler.body)


def changes(context: NotebookContext | None, original: str, candidate: str) -> dict[str, list[str]]:
    """What running ``candidate`` in the user's kernel does to each notebook value it
    takes from the context, beyond what the user's own cell (``original``) does:
    ``{"df": ["converts `date`", "adds `weekday`"]}``. Read from the code, not run."""
    if context is None:
        return {}
    values = {e.name: e for e in context.available if e.kind == "value"}
    tree = _parse(candidate)
    if not values or tree is None:
        return {}
    before = _parse(original)
    own = Counter(_key(s) for s in _statements(before)) if before is not None else Counter()
    out: dict[str, dict[str, None]] = {}

    def note(name: str, what: str) -> None:
        out.setdefault(name, {})[what] = None

    for stmt in _top_level(tree):
        key = _key(stmt)
        if own[key] > 0:
            own[key] -= 1
            continue
        for name, what in _what_it_changes(stmt, values):
            note(name, what)
    return {name: list(found) for name, found in out.items()}


def _what_it_changes(stmt: ast.stmt, values: dict) -> Iterator[tuple[str, str]]:
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                yield from _assigned(t, stmt, values)
    elif isinstance(stmt, ast.Delete):
        for t in stmt.targets:
            name = _root(t)
            if name is not None and name in values:
                column = _column_key(t)
                yield name, f"removes `{column}`" if column else f"deletes `{ast.unparse(t)}`"
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = _root(node.func.value)
            if name is None or name not in values:
                continue
            method = node.func.attr
            in_place = any(
                k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            column = _column_key(node.func.value)
            on = f" on `{column}`" if column else ""
            if in_place:
                yield name, f"`{method}(inplace=True)`{on}"
            elif method in MUTATORS and (values[name].columns == [] or method in ("insert", "pop", "update")):
                yield name, f"`{method}`{on}"


def _assigned(target: ast.AST, stmt: ast.stmt, values: dict) -> Iterator[tuple[str, str]]:
    name = _root(target)
    if name is None or name not in values:
        return
    if isinstance(target, ast.Name):
        if isinstance(stmt, ast.AugAssign):
            yield name, f"changes it (`{_short(stmt)}`)"
        else:
            yield name, f"binds it to a new value (`{_short(stmt)}`)"
        return
    entry = values[name]
    column = _column_key(target)
    if column is not None and isinstance(target, ast.Subscript) and _root(target.value) == name:
        existing = {c.name for c in entry.columns}
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.AugAssign):
            yield name, f"changes `{column}`"
        elif column not in existing and entry.columns:
            yield name, f"adds `{column}`"
        elif value is not None and _converts(value, name, column):
            yield name, f"converts `{column}`"
        else:
            yield name, f"replaces `{column}`"
        return
    if isinstance(target, ast.Attribute) and _root(target.value) == name and isinstance(target.value, ast.Name):
        yield name, f"sets `{target.attr}`"
        return
    yield name, f"changes values (`{_short(stmt)}`)"
