"""Runtime values along the failing path (LDB-style), without tracing the candidate.

The sandbox already reports the failing frame's locals. What a small model misses most
is the values *at the failing statement itself*: what ``average(scores)`` returned in
``assert average(scores) == 4``, which arguments a call got before it raised. Those
come from a second, ordinary sandbox run: the program up to (not including) the
top-level statement that failed, then one probe per sub-expression of that statement,
run like tests in the checker process (``assert False, repr(<expr>)``: the probe's
outcome message carries the value, or the exception evaluating it raised). Nothing is
traced or patched inside the candidate; a probe that raises is just another outcome.
"""

from __future__ import annotations

import ast

from .model import ExecutionResult, TestOutcome

MAX_PROBES = 6
PROBE_PREFIX = "assert False, repr("
REPR_CHARS = 200


def _failing_statement(tree: ast.Module, result: ExecutionResult) -> ast.stmt | None:
    """The top-level statement the run failed in (its ``<module>`` frame's line)."""
    error = result.error
    if error is None:
        return None
    lines = [f.line for f in error.frames if f.function == "<module>" and f.file == "candidate.py"]
    line = lines[-1] if lines else error.line
    if not line:
        return None
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return stmt
    return None


_NO_VALUE_CALLS = frozenset({"print", "display"})
"""Calls whose result says nothing (None); their arguments are still probed."""


def _expressions(stmt: ast.stmt, known: "set[str] | frozenset[str]" = frozenset()) -> list[str]:
    """Sub-expressions worth a value: call results and their arguments, compared operands,
    subscripted containers — outermost first, no constants, no duplicates, no plain name
    whose value the failing frame's locals already show (``known``)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                         ast.ImportFrom)):
        return []
    out: list[str] = []

    def add(node: ast.AST) -> None:
        # A slice (``5:`` of ``values[5:]``) is an ast.expr but no expression of its own.
        if isinstance(node, (ast.Constant, ast.Lambda, ast.Slice)) or not isinstance(node, ast.expr):
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


def plan_probes(code: str, result: ExecutionResult | None) -> tuple[str, list[str]] | None:
    """``(program prefix, probe statements)`` for a failed run, or None when nothing to probe.

    The prefix is the program's top-level statements before the failing one, so the
    probes see the state the failing statement saw. Only for a runtime error raised
    inside the program (not a pre-check refusal, timeout or failed user test).
    """
    if result is None or result.status != "error" or result.error is None:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    stmt = _failing_statement(tree, result)
    if stmt is None:
        return None
    exprs = _expressions(stmt, set(result.error.locals))
    if not exprs:
        return None
    lines = code.splitlines()
    prefix = "\n".join(lines[: stmt.lineno - 1])
    probes = [f"{PROBE_PREFIX}{e})[:{REPR_CHARS}]" for e in exprs]
    return prefix + "\n", probes


def probe_values(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """The probes' outcomes with ``source`` = the expression and ``message`` = its value
    (``passed`` True when the expression evaluated, False when it raised)."""
    out = []
    for t in outcomes:
        src = t.source
        if src.startswith(PROBE_PREFIX):
            expr = src[len(PROBE_PREFIX):].rsplit(")[:", 1)[0]
        else:
            expr = src
        msg = t.message
        if msg.startswith("AssertionError: "):
            out.append(TestOutcome(expr, True, msg[len("AssertionError: "):], t.line))
        elif msg.startswith("not run"):
            continue
        else:
            out.append(TestOutcome(expr, False, msg, t.line))
    return out
