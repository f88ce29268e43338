"""The spec guard's reading of code: small questions asked of a syntax tree (what a
node says, which names a function reads, where a statement stands, which handlers
swallow a failure). No rule lives here: :mod:`.spec` says what the user's spec is,
:mod:`.spec_rules` how a candidate breaks it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import operator
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

NO_VALUE = object()
WRITTEN_IN = object()
"""The value of a constant no fold reads (``int("4")``, ``math.pi * 4``): fixed where it is
written, but never the same as any other value."""
ASSERT_LINE = re.compile(r"^\s*assert\b")
EXIT_CALLS = {("sys", "exit"), ("os", "_exit"), (None, "exit"), (None, "quit")}
BROAD = {"Exception", "BaseException", "AssertionError"}
LOGGERS = {"print", "log", "debug", "info", "warning", "warn", "error", "exception", "pprint"}

# ----------------------------------------------------------------------------- helpers


def key(node: ast.AST) -> str:
    """An AST's identity without positions (so formatting and line moves do not count)."""
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def source(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return "?"


def literal(node: ast.AST | None) -> Any:
    """The value of a literal, or of arithmetic over number literals (``27 / 2``: a
    constant written in is an answer written in, whatever its spelling), else NO_VALUE."""
    if node is None:
        return NO_VALUE
    try:
        return ast.literal_eval(node)
    except Exception:
        pass
    try:
        return ast.literal_eval(_Folded().visit(copy.deepcopy(node)))
    except Exception:  # not arithmetic over numbers; too deep, too large, a division by zero
        return NO_VALUE


class _Folded(ast.NodeTransformer):
    """Each arithmetic over number literals worked out, also inside a list, tuple, set or
    dict (``if values == [1 + 2, 4, 5]`` names the asserted input as surely as ``[3, 4, 5]``)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        return self._fold(node, node.left, node.right)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        return self._fold(node, node.operand)

    @staticmethod
    def _fold(node: ast.expr, *operands: ast.expr) -> ast.expr:
        """Bottom up, once: an operation is worked out only when its operands already are."""
        if not all(isinstance(o, ast.Constant) for o in operands):
            return node
        try:
            return ast.Constant(_arithmetic(node))
        except (ArithmeticError, ValueError):
            return node


BUILTINS = frozenset(dir(builtins))
"""The names a program reads without binding them."""


def imported_modules(tree: ast.AST | None) -> set[str]:
    """The names ``import`` binds (``math`` of ``import math``): modules, not the program's data."""
    return {
        (a.asname or a.name).split(".")[0]
        for node in (ast.walk(tree) if tree is not None else ())
        if isinstance(node, ast.Import)
        for a in node.names
    }


def reads_nothing(node: ast.AST, modules: Iterable[str] = ()) -> bool:
    """The expression reads no variable of the program: only builtins, ``modules`` and
    names it binds itself (a lambda's parameters, a comprehension's targets). Its value is
    fixed where it is written (``int("4")``, ``[4][0]``), whatever its spelling."""
    bound = set(BUILTINS) | set(modules)
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
    return all(n.id in bound for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
LARGEST_FOLDED_BITS = 4096
"""An integer constant larger than this is not worked out (``9 ** 9 ** 9`` must not hang
the guard); no assert of a beginner's compares with one."""


def _arithmetic(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        huge_power = (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and max(1, left.bit_length()) * right > LARGEST_FOLDED_BITS
        )
        if huge_power:
            raise OverflowError("too large to work out")
        result = _ARITHMETIC[type(node.op)](left, right)
        if type(result) not in (int, float):  # a negative base to a fractional power: complex
            raise ValueError("not a real number")
        if isinstance(result, int) and result.bit_length() > LARGEST_FOLDED_BITS:
            raise OverflowError("too large to work out")
        return result
    raise ValueError("not arithmetic over numbers")


def same_value(a: Any, b: Any) -> bool:
    if a is NO_VALUE or b is NO_VALUE:
        return False
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, numbers) and isinstance(b, numbers):
        return a == b
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def walk(tree: ast.AST) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """Every node with its ancestors (outermost first)."""
    stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(tree, ())]
    while stack:
        node, parents = stack.pop()
        yield node, parents
        for child in reversed(list(ast.iter_child_nodes(node))):
            stack.append((child, parents + (node,)))


def call_name(call: ast.Call) -> tuple[str | None, str]:
    f = call.func
    if isinstance(f, ast.Name):
        return None, f.id
    if isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else ""
        return base, f.attr
    return None, ""


def reraises(handler: ast.ExceptHandler) -> bool:
    return any(isinstance(n, ast.Raise) for n in ast.walk(handler))


def catches_assertion(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
        if name in BROAD:
            return True
    return False


def trivial_body(body: list[ast.stmt]) -> bool:
    """A handler that only passes, continues, breaks or reports (prints, logs)."""
    for stmt in body:
        if isinstance(stmt, (ast.Pass, ast.Continue, ast.Break)):
            continue
        if isinstance(stmt, ast.Return) and (stmt.value is None or literal(stmt.value) is None):
            continue
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                continue
            if isinstance(stmt.value, ast.Call) and call_name(stmt.value)[1] in LOGGERS:
                continue
        return False
    return True


def swallowing_guard(
    node: ast.AST, parents: tuple[ast.AST, ...], *, any_handler: bool
) -> ast.Try | ast.With | ast.AsyncWith | None:
    """The ``try`` (or ``with suppress``) around ``node`` that would hide its failure."""
    chain = parents + (node,)
    for i, parent in enumerate(parents):
        child = chain[i + 1]
        if isinstance(parent, ast.Try) and child in parent.body:
            for h in parent.handlers:
                if reraises(h):
                    continue
                if catches_assertion(h) or (any_handler and trivial_body(h.body)):
                    return parent
        if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body:
            for item in parent.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and call_name(expr)[1] == "suppress":
                    return parent
    return None


def statement_at(tree: ast.AST, line: int) -> ast.stmt | None:
    """The innermost simple statement that spans ``line``."""
    best: ast.stmt | None = None
    for node, _ in walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            if node.lineno <= line <= end and (best is None or node.lineno >= best.lineno):
                best = node
    return best


def functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node, _ in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
    return out


def own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = func.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return set(names)


def exit_calls(tree: ast.AST) -> list[ast.Call | ast.Raise]:
    out: list[ast.Call | ast.Raise] = []
    for node, _ in walk(tree):
        if isinstance(node, ast.Call) and call_name(node) in EXIT_CALLS:
            out.append(node)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "SystemExit":
                out.append(node)
    return out


def swallowing_handlers(tree: ast.AST) -> list[ast.ExceptHandler]:
    return [
        h
        for node, _ in walk(tree)
        if isinstance(node, ast.Try)
        for h in node.handlers
        if (h.type is None or (isinstance(h.type, ast.Name) and h.type.id in {"Exception", "BaseException"}))
        and all(
            isinstance(s, (ast.Pass, ast.Continue)) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            for s in h.body
        )
    ]


def runnable_tests(tree: ast.AST, called: Iterable[str]) -> dict[str, str]:
    """The user's top-level test functions, called at top level, that take nothing and
    have no decorator: the checker can run them itself."""
    wanted = set(called)
    out: dict[str, str] = {}
    for stmt in getattr(tree, "body", []):
        if (
            isinstance(stmt, ast.FunctionDef)
            and stmt.name in wanted
            and not stmt.decorator_list
            and not (
                stmt.args.args or stmt.args.posonlyargs or stmt.args.kwonlyargs or stmt.args.vararg or stmt.args.kwarg
            )
        ):
            out[stmt.name] = source(stmt)
    return out


def top_level_test_calls(tree: ast.AST, names: Iterable[str]) -> Counter:
    wanted = set(names)
    calls: Counter = Counter()
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = call_name(stmt.value)[1]
            if name in wanted and call_name(stmt.value)[0] is None:
                calls[name] += 1
    return calls
