"""Runtime values along the failing path (LDB-style), without tracing the candidate.

The sandbox already reports the failing frame's locals. What a small model misses most
is the values *at the failing statement itself*: what ``average(scores)`` returned in
``assert average(scores) == 4``, which arguments a call got before it raised. Those
come from a second, ordinary sandbox run: the program up to (not including) the
top-level statement that failed, then one probe per sub-expression of that statement,
run like tests in the checker process (``assert False, repr(<expr>)``: the probe's
outcome message carries the value, or the exception evaluating it raised). Nothing is
traced or patched inside the candidate; a probe that raises is just another outcome.

For a failing ``==`` whose two sides are plain values (dicts, lists, tuples, sets,
strings, numbers), :func:`differences` says what differs, as pytest's assertion
messages do: a small model sees two long reprs as equal, but acts on "has the key
'book' that the other side lacks".
"""

from __future__ import annotations

import ast

from ..feedback import clip
from ..model import CANDIDATE_FILE, ExecutionResult, TestOutcome
from ..redact import redact_value
from ..source_lines import source_lines

MAX_PROBES = 6
PROBE_PREFIX = "assert False, repr("
REPR_CHARS = 200


def _failing_statement(code: str, result: ExecutionResult | None) -> ast.stmt | None:
    """The top-level statement a runtime error inside the program was raised in (its
    ``<module>`` frame's line); None for any other result (a pre-check refusal, a
    timeout, a failed user test) or a program that does not parse."""
    if result is None or result.status != "error" or result.error is None:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    error = result.error
    lines = [f.line for f in error.frames if f.function == "<module>" and f.file == CANDIDATE_FILE]
    line = lines[-1] if lines else error.line
    if not line:
        return None
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return stmt
    return None


_NO_VALUE_CALLS = frozenset({"print", "display"})
"""Calls whose result says nothing (None); their arguments are still probed."""


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Assert, ast.Return, ast.Delete, ast.Raise)
"""Statements that evaluate their expressions before binding anything: what they assign
holds its earlier value while they run."""


def _bound_by(stmt: ast.stmt) -> set[str]:
    """Names the statement binds before it uses them: a loop's target, a name assigned in
    a compound statement's body, a comprehension's variable, a lambda's parameter. The
    probes run before the statement, where such a name is undefined (or stale): a probe
    using one shows only a NameError that is not the program's failure."""
    bound = _scoped_names(stmt)
    if not isinstance(stmt, _SIMPLE):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
    return bound


def _scoped_names(node: ast.AST) -> set[str]:
    """Names bound by the comprehensions and lambdas inside ``node`` (their own scopes)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
    return out


def _free_names(node: ast.AST) -> set[str]:
    """Names ``node`` reads from outside itself (near enough: every name it loads, less
    those its own comprehensions and lambdas bind)."""
    loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - _scoped_names(node)


def expressions(stmt: ast.stmt, known: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Sub-expressions worth a value: call results and their arguments, compared operands,
    subscripted containers — outermost first, no constants, no duplicates, no plain name
    whose value the failing frame's locals already show (``known``), none that uses a
    name the statement itself binds (:func:`_bound_by`)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return []
    out: list[str] = []
    bound = _bound_by(stmt)

    def add(node: ast.AST) -> None:
        # A slice (``5:`` of ``values[5:]``) is an ast.expr but no expression of its own.
        if isinstance(node, (ast.Constant, ast.Lambda, ast.Slice)) or not isinstance(node, ast.expr):
            return
        if _free_names(node) & bound:
            return
        if _literal(node) is not _NOT_LITERAL:  # ``{"pen": [1.5, 15]}``: its value is its text
            return
        text = ast.unparse(node)
        if text in out or len(text) > 120:
            return
        try:
            compile(text, "<probe>", "eval")
        except SyntaxError:  # e.g. a tuple of slices (``a[1:, 0]``)
            return
        out.append(text)

    for node in ast.walk(stmt):
        if isinstance(node, ast.Compare):
            add(node.left)
            for c in node.comparators:
                add(c)
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _NO_VALUE_CALLS):
                add(node)
            for a in node.args:
                add(a)
            for k in node.keywords:
                add(k.value)
        elif isinstance(node, ast.Subscript):
            add(node.value)
            add(node.slice)
        elif isinstance(node, ast.BinOp):
            add(node.left)
            add(node.right)
    return [e for e in out if e not in known][:MAX_PROBES]


_NOT_LITERAL = object()


def _literal(node: ast.expr | str) -> object:
    """The value of a literal (an expression node, or a repr's text); else _NOT_LITERAL."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def plan_probes(code: str, result: ExecutionResult | None) -> tuple[str, list[str]] | None:
    """``(program prefix, probe statements)`` for a failed run, or None when nothing to probe.

    The prefix is the program's top-level statements before the failing one, so the
    probes see the state the failing statement saw. Only for a runtime error raised
    inside the program (not a pre-check refusal, timeout or failed user test).
    """
    stmt = _failing_statement(code, result)
    if stmt is None or result is None or result.error is None:
        return None
    exprs = expressions(stmt, set(result.error.locals))
    if not exprs:
        return None
    lines = source_lines(code)
    prefix = "\n".join(lines[: stmt.lineno - 1])
    probes = [probe_statement(e) for e in exprs]
    return prefix + "\n", probes


def probe_statement(expr: str, chars: int = REPR_CHARS) -> str:
    """A test statement whose outcome message is the value of ``expr`` (its repr, clipped
    to ``chars``), or the exception evaluating it raised; :func:`probe_values` reads it."""
    return f"{PROBE_PREFIX}{expr})[:{chars}]"


def probe_values(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """The probes' outcomes with ``source`` = the expression and ``message`` = its value
    (``passed`` True when the expression evaluated, False when it raised: what it raised,
    clipped as a value is, since an exception's text is the candidate's to make as long as
    it likes)."""
    out = []
    for t in outcomes:
        src = t.source
        expr = src[len(PROBE_PREFIX) :].rsplit(")[:", 1)[0] if src.startswith(PROBE_PREFIX) else src
        msg = t.message
        if msg.startswith("AssertionError: "):
            out.append(TestOutcome(expr, True, msg[len("AssertionError: ") :], t.line))
        elif msg.startswith("not run"):
            continue
        else:
            out.append(TestOutcome(expr, False, clip(msg, REPR_CHARS), t.line))
    return out


def failing_path_values(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """The probes' values a repair is told (:func:`probe_values`), less those whose name is
    not defined: that says nothing the program's own error does not. (What a fix changed,
    :mod:`~selfheal_jupyter.spec.behaviour`, keeps them: a name defined now and not before
    is a change.)"""
    return [v for v in probe_values(outcomes) if v.passed or not v.message.startswith("NameError")]


MAX_DIFFERENCES = 4
"""Differences named per comparison: enough to point at the bug, short enough to read."""


def differences(code: str, result: ExecutionResult | None, values: list[TestOutcome]) -> list[str]:
    """What differs between the two sides of each ``==`` in the failing statement.

    A side's value is its own text when it is a literal, else its probed value
    (``values``) or, for a plain name, the failing frame's local, when that repr is a
    literal too; a side with neither (an object, a DataFrame, a clipped repr) is not
    compared, nor one whose name or value looks like a secret.
    """
    stmt = _failing_statement(code, result)
    if stmt is None or result is None or result.error is None:
        return []
    seen = {**result.error.locals, **{v.source: v.message for v in values if v.passed}}
    # a secret is never compared: what differs would say it (the feedback redacts it)
    probed = {name: text for name, text in seen.items() if redact_value(name, text) == text}
    out: list[str] = []
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
            if not isinstance(op, ast.Eq):
                continue
            lv, rv = _value(left, probed), _value(right, probed)
            if lv is _NOT_LITERAL or rv is _NOT_LITERAL or lv == rv:
                continue
            # the expected side: a literal, or else the right one (``assert got == want``)
            swap = _literal(left) is not _NOT_LITERAL and _literal(right) is _NOT_LITERAL
            actual, expected, name = (rv, lv, right) if swap else (lv, rv, left)
            named = describe_difference(actual, expected, ast.unparse(name))
            if named:
                out.append(
                    f"`{clip(ast.unparse(left), 60)} == {clip(ast.unparse(right), 60)}` is False: {'; '.join(named)}"
                )
    return out


def _value(node: ast.expr, probed: dict[str, str]) -> object:
    value = _literal(node)
    if value is not _NOT_LITERAL:
        return value
    text = probed.get(ast.unparse(node))
    if text is None or len(text) >= REPR_CHARS:  # clipped: not the whole value
        return _NOT_LITERAL
    return _literal(text)


def _r(value: object) -> str:
    return clip(repr(value), 80)


def describe_difference(actual: object, expected: object, name: str) -> list[str]:
    """Short sentences saying how ``actual`` (the value of ``name``) must change to equal
    ``expected`` (at most MAX_DIFFERENCES)."""
    name = clip(name, 40)
    numbers = (int, float, complex)
    if (
        isinstance(actual, bool)
        or isinstance(expected, bool)
        or not (isinstance(actual, numbers) and isinstance(expected, numbers))
    ) and type(actual) is not type(expected):
        return [
            f"{name} should be a {type(expected).__name__} ({_r(expected)}), not a "
            f"{type(actual).__name__} ({_r(actual)})"
        ]
    out: list[str] = []
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in [k for k in actual if k not in expected]:
            out.append(f"{name} should not have the key {_r(key)} (it has {_r(actual[key])})")
        for key in [k for k in expected if k not in actual]:
            out.append(f"{name} should have the key {_r(key)} = {_r(expected[key])}")
        for key in [k for k in actual if k in expected and actual[k] != expected[k]]:
            out.append(f"{name}[{_r(key)}] should be {_r(expected[key])}, not {_r(actual[key])}")
    elif isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        for i, (a, b) in enumerate(zip(actual, expected, strict=False)):
            if a != b:
                out.append(f"{name}[{i}] should be {_r(b)}, not {_r(a)}")
                break
        if len(actual) > len(expected):
            out.append(
                f"{name} should have {len(expected)} items, not {len(actual)} "
                f"(first extra: {_r(actual[len(expected)])})"
            )
        elif len(actual) < len(expected):
            out.append(
                f"{name} should have {len(expected)} items, not {len(actual)} "
                f"(first missing: {_r(expected[len(actual)])})"
            )
    elif isinstance(actual, (set, frozenset)) and isinstance(expected, (set, frozenset)):
        if actual - expected:
            out.append(f"{name} should not contain {_r(sorted(actual - expected, key=repr))}")
        if expected - actual:
            out.append(f"{name} should also contain {_r(sorted(expected - actual, key=repr))}")
    elif isinstance(actual, str) and isinstance(expected, str):
        i = next(
            (i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
            min(len(actual), len(expected)),
        )
        out.append(
            f"{name} differs from position {i}: it should go on "
            f"{_r(expected[i : i + 30])}, not {_r(actual[i : i + 30])}"
        )
    elif isinstance(actual, numbers) and isinstance(expected, numbers):
        out.append(f"{name} should be {_r(expected)}, not {_r(actual)} (off by {_r(actual - expected)})")
    return out[:MAX_DIFFERENCES]
