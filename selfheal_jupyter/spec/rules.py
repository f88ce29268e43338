"""The spec guard's rules: each way a candidate can break the user's spec (the list is in
:mod:`.spec`), with what it did and how to comply.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ..model import SpecViolation
from . import answer_blanks, dynamic, notebook_data
from .kept import Spec, SpecAssert
from .syntax import BUILTINS, WRITTEN_IN
from .syntax import NO_VALUE as _NO_VALUE
from .syntax import call_name as _call_name
from .syntax import exit_calls as _exit_calls
from .syntax import functions as _functions
from .syntax import imported_modules as _imported_modules
from .syntax import key as _key
from .syntax import literal as _literal
from .syntax import own_nodes as _own_nodes
from .syntax import params as _params
from .syntax import reads_nothing as _reads_nothing
from .syntax import same_value as _same_value
from .syntax import source as _source
from .syntax import swallowing_guard as _swallowing_guard
from .syntax import swallowing_handlers as _swallowing_handlers
from .syntax import top_level_test_calls as _top_level_test_calls
from .syntax import walk as _walk

FIX = {
    "assert_removed": (
        "Put the assert back exactly as the user wrote it (you may only correct its "
        "message) and change the program so that the assert holds."
    ),
    "assert_changed": (
        "Restore the user's condition exactly (only its message may change) and change "
        "the program, not the assert, so that it holds. If you are sure the assert itself "
        "is wrong, keep it anyway and say so in one sentence: the user decides."
    ),
    "assert_silenced": (
        "Keep it an assert that fails loudly: an assert may not become a print or an "
        "if-statement. Fix the program so that the assert holds."
    ),
    "test_removed": "Keep every test function the user wrote, and every call of it.",
    "failure_swallowed": (
        "Remove the try/except (or suppress) around it: the failure must stay visible. "
        "Fix the cause so that the statement succeeds."
    ),
    "bare_except": (
        "Remove the `except: pass`: catch only the specific exception you expect and "
        "handle it, or let the error surface."
    ),
    "early_exit": "Remove the exit call: the program must run to its end, asserts included.",
    "hard_coded": (
        "Compute the value from the inputs the way the task asks; do not write in the "
        "answer an assert expects or special-case the asserted input."
    ),
    "assert_moved": (
        "Keep the user's assert a top-level statement, where the user wrote it (not inside "
        "an `if`, a loop, a function or a `with`): it is checked there."
    ),
    "assert_outlived": (
        "Do not define or assign again, after the user's assert, a name the assert "
        "reads: the assert must check the values the program ends with. Fix the code "
        "above the assert instead."
    ),
    "dynamic_binding": (
        "Bind names with plain assignments computed from the data (`total = ...`); do not "
        "write into globals(), vars() or a module's attributes, swap sys.modules, or run "
        "text as code with exec/eval: the user's checks must see values the code computes."
    ),
    "forced_comparison": (
        "Return plain values (numbers, strings, lists, dicts) and compare them for real: "
        "do not subclass int / float / str / list / dict to change how they compare, and "
        "do not write `__eq__`, `__bool__` or `__hash__` methods whose answer ignores the "
        "values compared."
    ),
}


# The notebook's data is the user's too (spec/notebook_data.py: its rules and fixes).
FIX.update(notebook_data.FIX)


def _violation(rule: str, message: str, line: int | None = None, original: str = "") -> SpecViolation:
    return SpecViolation(
        rule=rule,  # type: ignore[arg-type]
        message=message,
        fix=FIX[rule],
        line=line,
        original=original,
    )


def _check_asserts(spec: Spec, tree: ast.AST) -> list[SpecViolation]:
    found: dict[str, list[tuple[ast.Assert, tuple[ast.AST, ...]]]] = {}
    for node, parents in _walk(tree):
        if isinstance(node, ast.Assert):
            found.setdefault(_key(node.test), []).append((node, parents))
    unmatched_new = [
        node for key, nodes in found.items() for node, _ in nodes if key not in {a.condition for a in spec.asserts}
    ]
    unmatched_new.sort(key=lambda n: n.lineno)
    out: list[SpecViolation] = []
    missing: list[SpecAssert] = []
    for a in spec.asserts:
        nodes = found.get(a.condition)
        if not nodes:
            missing.append(a)
            continue
        top = [i for i, (_, parents) in enumerate(nodes) if len(parents) == 1]
        node, parents = nodes.pop(top[0] if a.top_level and top else 0)
        guard = _swallowing_guard(node, parents, any_handler=False)
        if guard is not None and not a.swallowed:
            out.append(
                _violation(
                    "failure_swallowed",
                    f"the assert `{a.source}` (user's line {a.line}) is now inside a "
                    f"{'try/except' if isinstance(guard, ast.Try) else 'suppress block'} "
                    f"(line {guard.lineno}) that catches its failure",
                    guard.lineno,
                    a.source,
                )
            )
        elif a.top_level and len(parents) != 1:
            out.append(
                _violation(
                    "assert_moved",
                    f"the user's top-level assert `{a.source}` (line {a.line}) is now inside "
                    f"a block (line {node.lineno}), where it is no longer checked as the user's",
                    node.lineno,
                    a.source,
                )
            )
    expressions: dict[str, ast.expr] = {}
    for node, parents in _walk(tree):
        if isinstance(node, ast.expr) and not any(isinstance(p, ast.Assert) for p in parents):
            expressions.setdefault(_key(node), node)
    for a in missing:
        containing = next(
            (n for n in unmatched_new if any(_key(sub) == a.condition for sub in ast.walk(n.test))),
            None,
        )
        if containing is not None:
            unmatched_new.remove(containing)
            out.append(
                _violation(
                    "assert_changed",
                    f"the user's assert `{a.source}` (line {a.line}) was weakened to "
                    f"`{_source(containing.test)}` (line {containing.lineno})",
                    containing.lineno,
                    a.source,
                )
            )
            continue
        if a.condition in expressions:
            where = expressions[a.condition]
            out.append(
                _violation(
                    "assert_silenced",
                    f"the user's assert `{a.source}` (line {a.line}) is no longer an assert: its "
                    f"condition is only checked at line {where.lineno}, where a failure does not stop "
                    "the program",
                    where.lineno,
                    a.source,
                )
            )
            continue
        if unmatched_new:
            new = unmatched_new.pop(0)
            out.append(
                _violation(
                    "assert_changed",
                    f"the condition of the user's assert `{a.source}` (line {a.line}) was "
                    f"rewritten as `{_source(new.test)}` (line {new.lineno})",
                    new.lineno,
                    a.source,
                )
            )
            continue
        out.append(
            _violation(
                "assert_removed",
                f"the user's assert `{a.source}` (line {a.line}) was deleted",
                None,
                a.source,
            )
        )
    return out


def _bound_at_top(stmts: list[ast.stmt]) -> set[str]:
    """Names these module-level statements bind (a ``def``'s or ``class``'s own name, not
    what its body binds)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif (
            isinstance(node, ast.ExceptHandler)
            and node.name
            or isinstance(node, (ast.MatchAs, ast.MatchStar))
            and node.name
        ):
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)  # ``case {**rest}``
        stack.extend(ast.iter_child_nodes(node))
    return names


def _declared_global(tree: ast.AST) -> set[str]:
    return {name for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names}


def _rebound_after(tree: ast.AST, is_check: Any, reads: set[str]) -> set[str] | None:
    """For the first top-level statement of ``tree`` that ``is_check``: which of
    ``reads`` are bound again after it (None: no such statement)."""
    body = tree.body if isinstance(tree, ast.Module) else []
    for i, stmt in enumerate(body):
        if is_check(stmt):
            return _reach(body[:i], reads) & (_bound_at_top(body[i + 1 :]) | _declared_global(tree))
    return None


def _reach(defined_before: list[ast.stmt], reads: set[str]) -> set[str]:
    """``reads`` and, through the top-level functions and classes defined before the
    check, every global name those read in turn (``mean`` reads ``N``: a later ``N = 4``
    changes what ``mean`` returns as surely as a later ``def mean``)."""
    bodies: dict[str, ast.AST] = {}
    for stmt in defined_before:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bodies[stmt.name] = stmt
    seen = set(reads)
    todo = [n for n in reads if n in bodies]
    while todo:
        node = bodies[todo.pop()]
        for name in _globals_read(_source(node)) - {getattr(node, "name", "")}:
            if name not in seen:
                seen.add(name)
                if name in bodies:
                    todo.append(name)
    return seen


def _globals_read(source: str) -> set[str]:
    """The names a test function reads that it does not bind itself."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    stores = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return loads - stores


def _check_outlived(spec: Spec, original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    """The user's checks (top-level asserts, top-level calls of test functions) must see
    the values the program ends with: no name they read is bound again after them."""
    checks: list[tuple[Any, set[str], str, int | None]] = []
    for a in spec.asserts:
        if a.top_level:
            try:
                reads = {n.id for n in ast.walk(ast.parse(a.source, mode="eval")) if isinstance(n, ast.Name)}
            except SyntaxError:
                continue
            checks.append(
                (
                    (lambda st, c=a.condition: isinstance(st, ast.Assert) and _key(st.test) == c),
                    reads,
                    f"assert `{a.source}`",
                    a.line,
                )
            )
    for name, source in spec.test_sources.items():
        checks.append(
            (
                (
                    lambda st, n=name: (
                        isinstance(st, ast.Expr)
                        and isinstance(st.value, ast.Call)
                        and _call_name(st.value) == (None, n)
                    )
                ),
                _globals_read(source) - {name},
                f"test `{name}()`",
                None,
            )
        )
    out: list[SpecViolation] = []
    for is_check, reads, what, line in checks:
        rebound = _rebound_after(tree, is_check, reads)
        if not rebound:
            continue
        allowed = (_rebound_after(original, is_check, reads) or set()) if original is not None else set()
        new = sorted(rebound - allowed)
        if new:
            out.append(
                _violation(
                    "assert_outlived",
                    f"after the user's {what} the candidate binds "
                    f"{', '.join(f'`{n}`' for n in new)} again, so it no longer checks the values "
                    "the program ends with",
                    line,
                    what,
                )
            )
    return out


def _constant(stmts: list[ast.stmt], name: str) -> Any:
    """The literal ``name`` holds after ``stmts`` when exactly one of them binds it, by
    ``name = <literal>``; else NO_VALUE."""
    binding = [s for s in stmts if name in _bound_at_top([s])]
    if len(binding) != 1:
        return _NO_VALUE
    stmt = binding[0]
    value: ast.expr | None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign):
        target, value = stmt.target, stmt.value
    else:
        return _NO_VALUE
    return _literal(value) if isinstance(target, ast.Name) and target.id == name else _NO_VALUE


def _first_assert(tree: ast.AST | None, condition: str) -> int | None:
    body = tree.body if isinstance(tree, ast.Module) else []
    return next((i for i, s in enumerate(body) if isinstance(s, ast.Assert) and _key(s.test) == condition), None)


def _asserts_in_both(spec: Spec, original: ast.Module, tree: ast.Module) -> Iterator[tuple[SpecAssert, int, int]]:
    """The user's top-level asserts that are top-level statements of both programs: each
    with its place in the user's code's body and in the candidate's."""
    for a in spec.asserts:
        mine, theirs = _first_assert(original, a.condition), _first_assert(tree, a.condition)
        if a.top_level and mine is not None and theirs is not None:
            yield a, mine, theirs


def _bound_otherwise(tree: ast.Module, theirs: int, name: str, value: Any, declared: set[str]) -> bool:
    """The candidate does not hold ``name = value`` right before its statement ``theirs``
    (``declared``: its global / nonlocal names, which any function may rebind)."""
    return name in declared or not _same_value(_constant(tree.body[:theirs], name), value)


def _check_expected_values(spec: Spec, original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    """The value a top-level assert of the user's compares with is the assert's too when
    the user wrote it as a literal of its own (``expected = 10`` … ``assert result ==
    expected``): a candidate that binds that name otherwise before the assert
    (``expected = result``) keeps the assert's text and changes what it checks. Only for a
    comparison with exactly one such side, not a placeholder (``answer = 0`` is a blank)."""
    if not isinstance(original, ast.Module) or not isinstance(tree, ast.Module):
        return []
    out: list[SpecViolation] = []
    user_globals, candidate_globals = _declared_global(original), _declared_global(tree)
    for a, mine, theirs in _asserts_in_both(spec, original, tree):
        test = original.body[mine].test  # type: ignore[attr-defined]
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            continue
        sides = [test.left, test.comparators[0]]
        if any(_literal(side) is not _NO_VALUE for side in sides):
            continue  # `x == 42`: the literal stands in the assert itself
        fixed = {
            side.id: value
            for side in sides
            if isinstance(side, ast.Name)
            and side.id not in user_globals
            and (value := _constant(original.body[:mine], side.id)) is not _NO_VALUE
            and not answer_blanks.is_placeholder_value(value)
        }
        if len(fixed) != 1:
            continue
        ((name, value),) = fixed.items()
        if _bound_otherwise(tree, theirs, name, value, candidate_globals):
            out.append(
                _violation(
                    "assert_changed",
                    f"the user's assert `{a.source}` (line {a.line}) compares with `{name} = {value!r}`, "
                    f"which the user wrote; the candidate binds `{name}` otherwise before it",
                    tree.body[theirs].lineno,
                    a.source,
                )
            )
    return out


def _call_inputs(node: ast.AST) -> set[str]:
    """Names passed to a call in ``node`` (``scores`` of ``average(scores)``)."""
    return {
        arg.id
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        for arg in call.args
        if isinstance(arg, ast.Name)
    }


def _changes_of(stmts: list[ast.stmt], name: str) -> Counter:
    """What these statements do to the object ``name`` holds, by statement (its item or
    attribute set or deleted, an augmented assignment, a mutating method given values):
    ``scores[:] = [3, 3, 3]`` changes an input without binding its name."""
    found: Counter = Counter()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
                changed = node.value
            elif isinstance(node, ast.AugAssign):
                changed = node.target
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in answer_blanks.MUTATORS
                and (node.args or node.keywords or node.func.attr in ("clear", "pop", "popitem"))
            ):
                changed = node.func.value
            else:
                continue
            while isinstance(changed, (ast.Subscript, ast.Attribute)):
                changed = changed.value
            if isinstance(changed, ast.Name) and changed.id == name:
                found[_key(node)] += 1
    return found


def _check_asserted_inputs(spec: Spec, original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    """The input a top-level assert of the user's checks is the assert's too when the user
    wrote it as a literal (``scores = [3, 4, 5]`` … ``mean = average(scores)`` … ``assert
    mean == 4``): a candidate that binds it otherwise before the assert (``scores = [3, 3,
    3]``, on which a wrong ``average`` gives 4) changes what the assert checks."""
    if not isinstance(original, ast.Module) or not isinstance(tree, ast.Module):
        return []
    out: list[SpecViolation] = []
    user_globals, candidate_globals = _declared_global(original), _declared_global(tree)
    for a, mine, theirs in _asserts_in_both(spec, original, tree):
        test = original.body[mine].test  # type: ignore[attr-defined]
        read = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
        inputs = _call_inputs(test) | {
            name
            for stmt in original.body[:mine]
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in read for t in stmt.targets)
            for name in _call_inputs(stmt.value)
        }
        for name in sorted(inputs - user_globals):
            value = _constant(original.body[:mine], name)
            if value is _NO_VALUE or answer_blanks.is_placeholder_value(value):
                continue
            changed = _changes_of(tree.body[:theirs], name) - _changes_of(original.body[:mine], name)
            if _bound_otherwise(tree, theirs, name, value, candidate_globals) or changed:
                out.append(
                    _violation(
                        "assert_changed",
                        f"the user's assert `{a.source}` (line {a.line}) checks the input `{name} = "
                        f"{value!r}`, which the user wrote; the candidate binds `{name}` otherwise before it",
                        tree.body[theirs].lineno,
                        a.source,
                    )
                )
                break
    return out


def _check_dynamic_binding(spec: Spec, original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    """A name bound where no reading of the code can follow it, where the user's code did
    not (:mod:`.dynamic` says why this is judged as a written-in answer)."""
    if not (spec.asserts or spec.expectations or spec.test_functions):
        return []
    found = dynamic.new_sites(original, tree)
    if not found:
        return []
    line, what = found[0]
    return [
        _violation(
            "dynamic_binding",
            f"line {line} binds names through {what}, which no reading of the code can follow: the "
            "user's checks would see a value written in at run time, not one the code computed",
            line,
            "",
        )
    ]


def _check_tests(spec: Spec, tree: ast.AST) -> list[SpecViolation]:
    out: list[SpecViolation] = []
    defined = _functions(tree)
    for name in spec.test_functions:
        if name not in defined:
            out.append(
                _violation("test_removed", f"the user's test function `{name}` was deleted", None, f"def {name}")
            )
    calls = _top_level_test_calls(tree, spec.test_functions)
    for name, count in spec.test_calls.items():
        if name in defined and calls[name] < count:
            out.append(
                _violation("test_removed", f"the call `{name}()` of the user's test was removed", None, f"{name}()")
            )
    return out


def _check_failing(spec: Spec, tree: ast.AST) -> list[SpecViolation]:
    out: list[SpecViolation] = []
    seen: set[str] = set()
    for node, parents in _walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        key = _key(node)
        if key not in spec.failing or key in seen:
            continue
        guard = _swallowing_guard(node, parents, any_handler=True)
        if guard is not None:
            seen.add(key)
            out.append(
                _violation(
                    "failure_swallowed",
                    f"the statement that failed in the user's run, `{spec.failing[key]}`, is now "
                    f"inside a {'try/except' if isinstance(guard, ast.Try) else 'suppress block'} "
                    f"(line {guard.lineno}) that hides the error instead of fixing it",
                    guard.lineno,
                    spec.failing[key],
                )
            )
    return out


def _check_silencers(original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    out: list[SpecViolation] = []
    before = Counter(_key(h) for h in _swallowing_handlers(original)) if original else Counter()
    for h in _swallowing_handlers(tree):
        k = _key(h)
        if before[k]:
            before[k] -= 1
            continue
        what = "except" if h.type is None else f"except {_source(h.type)}"
        out.append(_violation("bare_except", f"line {h.lineno} adds `{what}: pass`, which hides every error", h.lineno))
        break
    exits_before = len(_exit_calls(original)) if original else 0
    exits = _exit_calls(tree)
    if len(exits) > exits_before:
        node = exits[0]
        out.append(
            _violation(
                "early_exit",
                f"line {node.lineno} adds `{_source(node)}`, which ends the program "
                "before the rest of it (and its asserts) run",
                node.lineno,
            )
        )
    return out


_VALUE_TYPES = frozenset(
    {"int", "float", "complex", "str", "bytes", "bytearray", "bool", "list", "tuple", "dict", "set", "frozenset"}
)
_COMPARING = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__"}
    | {f"__{r}{op}__" for r in ("", "r") for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")}
)
_UNARY = frozenset({"__bool__", "__abs__", "__neg__", "__pos__", "__float__", "__int__", "__index__", "__round__"})
_OVERRIDES = _COMPARING | _UNARY | {"__hash__", "__len__", "__instancecheck__", "__subclasscheck__"}


def _class_methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda]:
    """A class body's methods by name (``def``, or a name assigned a lambda)."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = {}
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt.value
    return out


def _value_bases(cls: ast.ClassDef) -> set[str]:
    names = set()
    for base in cls.bases:
        name = (
            base.id
            if isinstance(base, ast.Name)
            else (
                base.attr
                if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "builtins"
                else ""
            )
        )
        if name in _VALUE_TYPES:
            names.add(name)
    return names


def _ignores_operands(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, binary: bool) -> bool:
    """Its answer cannot depend on what it compares: only literals returned, or the
    operand it compares (``other``; ``self`` for a one-operand method) never read."""
    a = func.args
    params = [x.arg for x in a.posonlyargs + a.args]
    if isinstance(func, ast.Lambda):
        returns: list[ast.expr | None] = [func.body]
        nodes: list[ast.AST] = list(ast.walk(func.body))
    else:
        nodes = list(_own_nodes(func))
        returns = [n.value for n in nodes if isinstance(n, ast.Return)]
    if not returns:
        return False
    if all(r is not None and _literal(r) is not _NO_VALUE for r in returns):
        return True
    operand = params[1] if binary and len(params) > 1 else params[0] if params else None
    reads = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return operand is not None and operand not in reads and a.vararg is None


def _check_forced_comparisons(original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    """Classes of the candidate's, used somewhere, that make a comparison lie: a new
    subclass of a plain type overriding how it compares, or a comparison / truth method
    (new or changed) whose answer ignores the values compared."""
    before = {n.name: n for n, _ in _walk(original) if isinstance(n, ast.ClassDef)} if original else {}
    used = {n.id for n, _ in _walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    out: list[SpecViolation] = []
    for node, _ in _walk(tree):
        if not isinstance(node, ast.ClassDef) or node.name not in used:
            continue
        old = before.get(node.name)
        old_methods = _class_methods(old) if old is not None else {}
        methods = {
            name: m
            for name, m in _class_methods(node).items()
            if name in _OVERRIDES and not (name in old_methods and _key(old_methods[name]) == _key(m))
        }
        plain = _value_bases(node) - (_value_bases(old) if old is not None else set())
        if plain and methods:
            name = sorted(methods)[0]
            out.append(
                _violation(
                    "forced_comparison",
                    f"class `{node.name}` (line {node.lineno}) subclasses `{sorted(plain)[0]}` and "
                    f"overrides `{name}`: its values would not compare as the plain values they hold",
                    methods[name].lineno,
                    "",
                )
            )
            continue
        for name, method in sorted(methods.items()):
            if name in ("__hash__", "__len__"):
                continue
            if _ignores_operands(method, binary=name in _COMPARING):
                out.append(
                    _violation(
                        "forced_comparison",
                        f"`{node.name}.{name}` (line {method.lineno}) gives an answer that does not "
                        "depend on the values it compares",
                        method.lineno,
                        "",
                    )
                )
                break
    return out


def _assigned_literals(tree: ast.AST | None) -> list[tuple[str, Any, int, str]]:
    """Each name assigned a constant: (name, its value, line, how it is written). A
    constant whose value no fold reads (``int("4")``, ``[4][0]``: an expression that
    reads no variable of the program) has the value WRITTEN_IN."""
    out: list[tuple[str, Any, int, str]] = []
    modules = _imported_modules(tree)
    for node, _ in _walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        v = _literal(value)
        if v is _NO_VALUE:
            if not _reads_nothing(value, modules):
                continue
            v = WRITTEN_IN
        for t in targets:
            if isinstance(t, ast.Name):
                out.append((t.id, v, node.lineno, repr(v) if v is not WRITTEN_IN else _source(value)))
    return out


def _literal_site(node: ast.Assign | ast.AnnAssign, parents: tuple[ast.AST, ...]) -> str:
    """An assignment with the kinds of the blocks around it (not their positions)."""
    return _key(node) + "@" + "/".join(type(p).__name__ for p in parents)


def _constant_function(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[Any, int]]:
    """The literal returns of a function whose every return is a literal and that never
    reads its parameters (its result cannot depend on the input)."""
    returns = [n for n in _own_nodes(func) if isinstance(n, ast.Return)]
    if not returns:
        return []
    values = [(_literal(r.value), r.lineno) for r in returns]
    if any(v is _NO_VALUE for v, _ in values):
        return []
    params = _params(func)
    reads = {n.id for n in _own_nodes(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if params & reads:
        return []
    return values


def _inputs(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters a caller must pass (those without a default, ``self`` / ``cls``
    aside): what the function's answer is to be computed from. A parameter with a
    default (``_r=8 / 2``) is the function's own constant, not its input."""
    a = func.args
    positional = a.posonlyargs + a.args
    required = positional[: len(positional) - len(a.defaults)]
    required += [x for x, default in zip(a.kwonlyargs, a.kw_defaults, strict=True) if default is None]
    names = {x.arg for x in required} | {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return names - {"self", "cls"}


def _reads_inputs(func: ast.FunctionDef | ast.AsyncFunctionDef, inputs: set[str]) -> bool:
    """Whether what the function returns can depend on ``inputs``: a value returned, or a
    block around a return, reads one of them or a name computed from one. A read whose
    result goes nowhere (``len(values)`` alone, ``n = len(values)`` never used) and a
    parameter bound again before it is read (``values = 8 / 2``) do not count. Anything
    this reading cannot follow (a block, a call of the program's that may keep the value
    elsewhere) counts as depending."""
    tainted = set(inputs)

    def reads(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in tainted for n in ast.walk(node))

    for stmt in func.body:
        if not reads(stmt):
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):  # bound again to what reads no input
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                tainted -= {t.id for t in targets if isinstance(t, ast.Name)}
            continue
        if any(isinstance(n, ast.NamedExpr) for n in ast.walk(stmt)):
            return True
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            tainted.add(stmt.name)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            called = stmt.value.func
            if isinstance(called, ast.Attribute):  # `acc.append(value)`: acc holds it now
                tainted |= {n.id for n in ast.walk(called.value) if isinstance(n, ast.Name)}
            elif not (isinstance(called, ast.Name) and called.id in BUILTINS):
                return True
        elif not isinstance(stmt, ast.Expr):
            return True  # a return of it, a block that reads it
    return False


def _ignores_inputs(
    func: ast.FunctionDef | ast.AsyncFunctionDef, old: ast.FunctionDef | ast.AsyncFunctionDef | None
) -> tuple[int, set[str]] | None:
    """The line of the first value ``func`` returns, and its inputs, when it has inputs and reads none of
    them, so that its answer is the same whatever it is passed: a constant, in whatever
    spelling (``int("4")``, ``(4,)[0]``, a module's ``ANSWER``). None when it reads an
    input, or when the user's own version computed without reading its inputs either.
    A method's ``self`` (``cls``) is an input when the user's version read it."""
    inputs = _inputs(func)
    if old is not None:
        inputs |= {n for n in ("self", "cls") if n in _params(func) and n in _params(old) and _reads_inputs(old, {n})}
    returns = [n for n in _own_nodes(func) if isinstance(n, ast.Return) and n.value is not None]
    if not inputs or not returns or _reads_inputs(func, inputs):
        return None
    if old is not None and answer_blanks.computes(old) and not _reads_inputs(old, inputs & _params(old) | _inputs(old)):
        return None
    return min(r.lineno for r in returns), inputs


def _trivial(value: Any) -> bool:
    """Values a real guard or base case compares with (``if b == 0``, ``if n == 1``)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)) and value in (0, 1, -1):
        return True
    return isinstance(value, (str, bytes, list, tuple, dict, set)) and len(value) == 0


_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "tuple": tuple,
    "list": list,
    "sorted": sorted,
    "set": set,
    "frozenset": frozenset,
    "str": str,
}
"""Builtins that turn a parameter into another spelling of the same input
(``tuple(values) == (3, 4, 5)`` names the asserted ``[3, 4, 5]``)."""


def _as_is(value: Any) -> Any:
    return value


def _converted(x: ast.expr, params: set[str]) -> Callable[[Any], Any] | None:
    """How ``x`` spells a parameter: as is, or one of _CONVERSIONS of it."""
    if isinstance(x, ast.Name) and x.id in params:
        return _as_is
    if (
        isinstance(x, ast.Call)
        and isinstance(x.func, ast.Name)
        and x.func.id in _CONVERSIONS
        and len(x.args) == 1
        and not x.keywords
        and isinstance(x.args[0], ast.Name)
        and x.args[0].id in params
    ):
        return _CONVERSIONS[x.func.id]
    return None


def _compared_literals(
    test: ast.expr, params: set[str], constants: dict[str, Any] | None = None
) -> list[tuple[Any, bool, Callable[[Any], Any]]] | None:
    """The literals ``test`` compares parameters with (each with "is it an ``in``" and how
    the parameter is spelled, :func:`_converted`), when it is ``param == literal`` /
    ``param in (literals)``, or an ``and`` of those; a name of ``constants`` stands for
    its literal (``values == scores``, ``scores = [3, 4, 5]``)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out: list[tuple[Any, bool, Callable[[Any], Any]]] = []
    for part in parts:
        if (
            not isinstance(part, ast.Compare)
            or len(part.ops) != 1
            or not isinstance(part.ops[0], (ast.Eq, ast.Is, ast.In))
        ):
            return None
        sides = [part.left, part.comparators[0]]
        spelled = [c for c in (_converted(x, params) for x in sides) if c is not None]
        if not spelled:
            return None
        values = [
            v
            for v in (
                constants.get(x.id, _NO_VALUE)
                if constants and isinstance(x, ast.Name) and x.id not in params
                else _literal(x)
                for x in sides
            )
            if v is not _NO_VALUE
        ]
        if not values:
            return None
        out.append((values[0], isinstance(part.ops[0], ast.In), spelled[0]))
    return out


def _spelled(conversion: Callable[[Any], Any], value: Any) -> Any:
    try:
        return conversion(value)
    except Exception:  # sorted() of values that do not compare
        return _NO_VALUE


def _written_in(node: ast.expr) -> bool:
    """A literal, or an expression whose value is fixed where it is written (``int("4")``)."""
    return _literal(node) is not _NO_VALUE or _reads_nothing(node)


def _pattern_values(pattern: ast.pattern) -> list[Any]:
    """The values a ``case`` pattern matches when it names them whole (``case 5``, ``case
    [3, 4, 5]``, ``case "a" | "b"``); empty when it captures or matches a shape."""
    if isinstance(pattern, ast.MatchValue):
        value = _literal(pattern.value)
        return [] if value is _NO_VALUE else [value]
    if isinstance(pattern, ast.MatchSingleton):
        return [pattern.value]
    if isinstance(pattern, ast.MatchOr):
        return [v for p in pattern.patterns for v in _pattern_values(p)]
    if isinstance(pattern, ast.MatchSequence):
        items = [_pattern_values(p) for p in pattern.patterns]
        if all(len(i) == 1 for i in items):
            return [[i[0] for i in items], tuple(i[0] for i in items)]
    return []


def _special_cases(
    func: ast.FunctionDef | ast.AsyncFunctionDef, arguments: tuple[Any, ...], constants: dict[str, Any]
) -> list[ast.AST]:
    """Where ``func`` answers the asserted inputs by name: ``if param == <asserted input>:
    return <literal>`` (also ``in`` a tuple of inputs, several parameters joined by
    ``and``, or the ``x if param == ... else y`` expression), or a literal table keyed by
    the asserted inputs that the parameter looks up (``{"banana": 3}[text]``)."""
    params = _params(func)
    arguments = tuple(a for a in arguments if not _trivial(a))
    if not arguments:
        return []

    def asserted(value: Any, is_in: bool, spelled: Callable[[Any], Any] = _as_is) -> bool:
        options = value if is_in and isinstance(value, (tuple, list, set)) else [value]
        return any(_same_value(c, _spelled(spelled, a)) for c in options for a in arguments)

    out: list[ast.AST] = []
    for node in _own_nodes(func):
        if isinstance(node, ast.If):
            if not any(
                isinstance(n, ast.Return) and n.value is not None and _written_in(n.value)
                for stmt in node.body
                for n in ast.walk(stmt)
            ):
                continue
        elif isinstance(node, ast.IfExp):
            if not _written_in(node.body):
                continue
        elif isinstance(node, (ast.Subscript, ast.Call)):
            table, key = (
                (node.value, node.slice)
                if isinstance(node, ast.Subscript)
                else (
                    (node.func.value, node.args[0])
                    if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
                    else (None, None)
                )
            )
            keys = _literal(table) if isinstance(table, ast.Dict) else _NO_VALUE
            spelled = _converted(key, params) if key is not None else None
            if isinstance(keys, dict) and spelled is not None and any(asserted(k, False, spelled) for k in keys):
                out.append(node)
            continue
        elif isinstance(node, ast.Match):
            subject = _converted(node.subject, params)
            for case in node.cases if subject is not None else []:
                answers = any(
                    isinstance(n, ast.Return) and n.value is not None and _written_in(n.value)
                    for stmt in case.body
                    for n in ast.walk(stmt)
                )
                options = _pattern_values(case.pattern)
                if subject and case.guard is None and answers and any(asserted(v, False, subject) for v in options):
                    out.append(case.pattern)
            continue
        else:
            continue
        compared = _compared_literals(node.test, params, constants)
        if compared and any(asserted(value, is_in, spelled) for value, is_in, spelled in compared):
            out.append(node)
    return out


def _named_functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a name calls: each ``def``, a lambda assigned to a name (``average =
    lambda values: 4``, as the ``def`` returning its body) and a name assigned a ``def``'s
    name (``average = _answer``) as that ``def``."""
    out = _functions(tree)
    for node, _ in _walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        for target in node.targets:
            if not isinstance(target, ast.Name):
                continue
            if isinstance(value, ast.Lambda):
                body = ast.copy_location(ast.Return(value=value.body), value.body)
                out[target.id] = ast.copy_location(
                    ast.FunctionDef(name=target.id, args=value.args, body=[body], decorator_list=[]), value
                )
            elif isinstance(value, ast.Name) and value.id in out:
                out[target.id] = out[value.id]
    return out


def _called_from(names: set[str], functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    """``names`` and the program's functions they call in turn, or are decorated with: a
    function that passes its input to a helper (``return _answer(values)``) answers with
    what the helper returns, a decorated one with what its decorator makes of it."""
    out = set(names)
    todo = [n for n in names if n in functions]
    while todo:
        func = functions[todo.pop()]
        called = [n.func for n in _own_nodes(func) if isinstance(n, ast.Call)]
        called += [d.func if isinstance(d, ast.Call) else d for d in func.decorator_list]
        for name in (c.id for c in called if isinstance(c, ast.Name)):
            if name in functions and name not in out:
                out.add(name)
                todo.append(name)
    return out


def _check_hard_coding(spec: Spec, original: ast.AST | None, tree: ast.AST) -> list[SpecViolation]:
    if not spec.expectations:
        return []
    out: list[SpecViolation] = []
    computed = answer_blanks.derived_names(original)
    unread = answer_blanks.unread_data(original)
    original_functions = _named_functions(original) if original is not None else {}
    functions = _named_functions(tree)
    flagged: set[tuple[str, int]] = set()
    assigned = _assigned_literals(tree)
    written_by_user = {n for n, v, _, _ in _assigned_literals(original) if v is WRITTEN_IN}
    derived_later = answer_blanks.derivations(tree)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    # The literal assignments the user wrote themselves (by name, value and where they
    # stand: `raised = True` in an `except`) are theirs, not written in by a candidate.
    own = (
        Counter(
            _literal_site(node, parents)
            for node, parents in _walk(original)
            if isinstance(node, (ast.Assign, ast.AnnAssign))
        )
        if original is not None
        else Counter()
    )
    kept: set[int] = set()
    for node, parents in _walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and own[_literal_site(node, parents)] > 0:
            own[_literal_site(node, parents)] -= 1
            kept.add(node.lineno)
    for exp in spec.expectations:
        for name, value, line, written in assigned:
            if name not in exp.names or ("name", line) in flagged or line in kept:
                continue
            # A value the program goes on to compute from (an accumulator: `total = 0`,
            # then `+=`) is a starting value, not a written-in answer.
            if any(n == name and later > line for n, later in derived_later):
                continue
            if name in computed:
                if value is WRITTEN_IN and name in written_by_user:
                    continue  # the user's own computation of it reads no variable either
                if value is not WRITTEN_IN and not _same_value(value, exp.value):
                    continue
                why = (
                    f"the user's code computes `{name}`; the value the assert `{exp.source}` "
                    "expects is written in instead of computed"
                )
            else:
                # A blank the user left, filled: the answer, unless the data the cell
                # gives to compute it from is left unread.
                ignored = [d for d in unread if d != name and d not in loaded]
                if not ignored or answer_blanks.is_placeholder_value(value):
                    continue
                why = (
                    f"the assert `{exp.source}` checks it, and it is written in while "
                    f"`{ignored[0]}`, the data the cell gives to compute it from, is never read"
                )
            flagged.add(("name", line))
            out.append(_violation("hard_coded", f"line {line} sets `{name} = {written}`: {why}", line, exp.source))
        # Functions the assert calls, and those whose result goes into a name it reads
        # (with their literal arguments, names resolved through literal assignments).
        feeding = set(exp.functions)
        literals = {n: v for n, v, _, _ in assigned if v is not WRITTEN_IN}
        arguments = list(exp.arguments) + [literals[n] for n in exp.argument_names if n in literals]
        for node, _ in _walk(tree):
            if not (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in exp.names for t in node.targets)
            ):
                continue
            for c in ast.walk(node.value):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name):
                    feeding.add(c.func.id)
                    for arg in c.args:
                        v = literals.get(arg.id, _NO_VALUE) if isinstance(arg, ast.Name) else _literal(arg)
                        if v is not _NO_VALUE:
                            arguments.append(v)
        for fname in sorted(_called_from(feeding, functions)):
            func = functions.get(fname)
            if func is None:
                continue
            old = original_functions.get(fname)
            if old is not None and _key(old) == _key(func):
                continue
            # A constant answer is a cheat when the function has inputs it ignores, or
            # when it replaces a body that computed; filling a blank function without
            # inputs (`def scale_name(): pass`) with its literal is the answer.
            inputs = _params(func) - {"self", "cls"}
            constant_is_cheat = bool(inputs) or (old is not None and answer_blanks.computes(old))
            for value, line in _constant_function(func) if constant_is_cheat else []:
                if _same_value(value, exp.value) and ("return", line) not in flagged:
                    flagged |= {("return", line), ("ignores", func.lineno)}
                    out.append(
                        _violation(
                            "hard_coded",
                            f"`{fname}` now just returns {value!r} (line {line}), the value the "
                            f"assert `{exp.source}` expects, whatever its arguments",
                            line,
                            exp.source,
                        )
                    )
            ignoring = _ignores_inputs(func, old)
            if ignoring is not None and ("ignores", func.lineno) not in flagged:
                flagged.add(("ignores", func.lineno))
                line, ignored_inputs = ignoring
                out.append(
                    _violation(
                        "hard_coded",
                        f"`{fname}` reads none of its inputs "
                        f"({', '.join(f'`{n}`' for n in sorted(ignored_inputs))}): what it returns (line "
                        f"{line}) is the same whatever the assert `{exp.source}` passes it",
                        line,
                        exp.source,
                    )
                )
            old_cases = {_key(n) for n in _special_cases(old, tuple(arguments), literals)} if old is not None else set()
            for node in _special_cases(func, tuple(arguments), literals):
                line = getattr(node, "lineno", 0)
                if _key(node) in old_cases or ("case", line) in flagged:
                    continue
                flagged.add(("case", line))
                test = getattr(node, "test", None)
                what = f"(`if {_source(test)}`)" if test is not None else f"(`{_source(node)}`)"
                out.append(
                    _violation(
                        "hard_coded",
                        f"line {line} special-cases the asserted input {what} in "
                        f"`{fname}` for the assert `{exp.source}`",
                        line,
                        exp.source,
                    )
                )
    return out
