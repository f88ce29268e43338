"""Which names a cell reads, and which of the notebook's names a task's words mention:
what ``context.py`` then resolves from the user's namespace. Pure reading of source text
(``ast``, ``symtable``): nothing here looks at a value.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Mapping
from typing import Any

BUILTIN_NAMES = frozenset(dir(builtins))


class _Reads(ast.NodeVisitor):
    """Names a block of module-level code reads before it binds them, in order.

    Statements are visited in evaluation order (the value of an assignment before its
    targets). The bodies of functions, classes and lambdas run later (or in their own
    scope): the globals they read are collected apart, with ``symtable``.
    """

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.reads: dict[str, None] = {}

    def _read(self, name: str) -> None:
        if name not in self.bound:
            self.reads.setdefault(name, None)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.bound.add(node.id)
        else:  # Load, and Del (which needs the name to exist)
            self._read(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.annotation)
        if node.value is not None or not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
            self.visit(node.value)
            self.bound.add(node.target.id)
        else:
            self.visit(node.target)
            self.visit(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def _loop(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_For = visit_AsyncFor = _loop

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.bound.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.bound.add(alias.asname or alias.name)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expr in node.decorator_list + node.args.defaults + node.args.kw_defaults:
            if expr is not None:
                self.visit(expr)
        self.bound.add(node.name)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        self.bound.add(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in node.args.defaults + node.args.kw_defaults:
            if expr is not None:
                self.visit(expr)

    def _comprehension(self, node: ast.AST) -> None:
        # Only the first iterable is evaluated in the enclosing scope; the rest is the
        # comprehension's own scope, whose global reads symtable reports.
        generators = getattr(node, "generators", [])
        if generators:
            self.visit(generators[0].iter)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bound.add(node.name)
        for stmt in node.body:
            self.visit(stmt)

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self.visit(node.optional_vars)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self.bound.add(node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bound.add(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self.bound.add(node.rest)


def _deferred_reads(table: symtable.SymbolTable) -> dict[str, None]:
    """Globals read inside the functions, classes, lambdas and comprehensions of a block."""
    out: dict[str, None] = {}
    for child in table.get_children():
        for sym in child.get_symbols():
            if (sym.is_global() or sym.is_declared_global()) and sym.is_referenced():
                out.setdefault(sym.get_name(), None)
        out.update(_deferred_reads(child))
    return out


def names_read(source: str) -> list[str]:
    """The global names ``source`` reads that it does not bind first, in reading order.

    Module-level reads count when they come before the code binds the name; reads
    inside the code's functions, classes, lambdas and comprehensions count when the
    code never binds the name at module level. Builtins are not removed here: a
    notebook variable may shadow one. Raises :class:`SyntaxError`.
    """
    tree = ast.parse(source)
    reads = _Reads()
    for stmt in tree.body:
        reads.visit(stmt)
    names = dict(reads.reads)
    table = symtable.symtable(source, "<cell>", "exec")
    for name in _deferred_reads(table):
        if name not in reads.bound:
            names.setdefault(name, None)
    return list(names)


_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_BRACED = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)")


def _forms(word: str) -> list[str]:
    """A word as written, and its other number (``customer`` ↔ ``customers``)."""
    forms = [word]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    elif word.endswith("s"):
        forms.append(word[:-1])
    else:
        forms.append(word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s"))
        if word.endswith("y"):
            forms.append(word[:-1] + "ies")
    return forms


def names_in_task(text: str, ns: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> list[str]:
    """Notebook variables a task written in words names: ``df``, ``{df_name}``, `sales`,
    ``customer`` for ``customers``, and a DataFrame one of whose columns it names ("the
    total amount each customer spent" reads ``orders``, whose columns hold ``amount``)."""
    out: dict[str, None] = {}
    for match in _BRACED.finditer(text):
        out.setdefault(match.group(1), None)
    words = [m.group(0) for m in _IDENT.finditer(text)]
    for word in words:
        for form in _forms(word) if len(word) >= 4 else [word]:
            if form in ns:
                out.setdefault(form, None)
                break
    found = [n for n in out if n in ns and not hidden_from_user(n, ns, hidden)]
    said = {form.casefold() for word in words if len(word) >= 4 for form in _forms(word)}
    for name, value in ns.items():
        if name in found or name.startswith("_") or hidden_from_user(name, ns, hidden) or isinstance(value, type):
            continue
        columns = getattr(value, "columns", None)
        if columns is None or getattr(value, "dtypes", None) is None:
            continue
        try:
            named = any(str(c).casefold() in said for c in list(columns)[:200])
        except Exception:
            continue
        if named:
            found.append(name)
    return found


def hidden_from_user(name: str, ns: Mapping[str, Any], hidden: Mapping[str, Any] | None) -> bool:
    """A name the shell put there itself (In, Out, get_ipython, exit...), unchanged."""
    if name.startswith("__") and name.endswith("__"):
        return True
    return hidden is not None and name in hidden and hidden[name] is ns.get(name)
