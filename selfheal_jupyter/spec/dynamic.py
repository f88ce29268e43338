"""Names bound where no reading of the code can follow them: ``globals()``, ``vars()``,
a module's attributes, ``sys.modules``, ``exec`` / ``eval``.

Why a rule of the spec guard, and why it rejects without knowing the value: the guard
judges a candidate's assignments against the user's asserts and stated expectations
(``hard_coded``: ``total = 18`` where the user's code computes ``total``). A program that
keeps the wrong computation and then runs ``globals().update({"to" + "tal": 18})`` binds
the same name with the same answer, but the name and the value are computed at run time,
so no static reading can tell what it binds — and the other way, having the checker read
``total`` where the user's code assigned it, would need a record of assignments made in
the candidate's own process, which the candidate can forge. So a candidate that binds
names dynamically where the user's code did not is judged as a written-in answer would
be: rejected, for asserts and stated expectations alike, with how to comply. What the
user's own code already does this way is theirs and stays allowed (counted by site).
"""

from __future__ import annotations

import ast
from collections import Counter

from .syntax import key, walk

WRITERS = frozenset({"globals", "vars", "locals"})
"""Calls that hand out a namespace to write into."""
RUNNERS = frozenset({"exec", "eval", "compile", "__import__"})
"""Calls that run text as code (``eval("(total := 18)")`` binds a name too)."""
FRAME_ATTRIBUTES = frozenset({"__globals__", "f_globals", "f_locals", "f_builtins", "__builtins__"})
MODULE_MAKERS = frozenset({"import_module", "reload", "__import__", "ModuleType", "module_from_spec"})
READ_ONLY_METHODS = frozenset({"get", "keys", "items", "values", "copy", "__contains__"})


NAMESPACES = frozenset({"__main__", "builtins", "__builtins__"})
"""Modules whose attributes are names the program's code reads (``sys`` or ``math`` are not)."""


def _module_names(tree: ast.AST) -> set[str]:
    """Names bound to the program's own namespaces (``import __main__ as m``)."""
    names = set(NAMESPACES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name for a in node.names if a.name in NAMESPACES)
    return names


def _is_module(node: ast.AST, modules: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in modules
    if isinstance(node, ast.Subscript):  # sys.modules[...]
        return isinstance(node.value, ast.Attribute) and node.value.attr == "modules"
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in MODULE_MAKERS
    return False


def _read_only(node: ast.Call, parents: tuple[ast.AST, ...]) -> bool:
    """``x in globals()``, ``globals().get(x)``, ``globals()[x]`` read and bind nothing."""
    parent = parents[-1] if parents else None
    if isinstance(parent, ast.Compare) and node in parent.comparators:
        return all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
    if isinstance(parent, ast.Attribute) and parent.attr in READ_ONLY_METHODS:
        return True
    return isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load)


def sites(tree: ast.AST) -> list[tuple[str, int, str]]:
    """Every place ``tree`` may bind a name dynamically: (AST key, line, what)."""
    modules = _module_names(tree)
    out: list[tuple[str, int, str]] = []
    for node, parents in walk(tree):
        line = getattr(node, "lineno", 0)
        at_top = not any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for p in parents)
        what = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in WRITERS and not _read_only(node, parents):
                if name == "globals" or (not node.args and at_top) or (node.args and _is_module(node.args[0], modules)):
                    what = f"`{name}()`"
            elif name in RUNNERS:
                what = f"`{name}()`"
            elif name in ("setattr", "delattr") and node.args and _is_module(node.args[0], modules):
                what = f"`{name}` on a module"
        elif isinstance(node, ast.Attribute):
            if node.attr in FRAME_ATTRIBUTES:
                what = f"`.{node.attr}`"
            elif node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                what = "`sys.modules`"
            elif _is_module(node.value, modules) and (
                node.attr == "__dict__" or isinstance(node.ctx, (ast.Store, ast.Del))
            ):
                what = "a module's attribute"
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__main__"):
            what = f"`{node.id}`"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if "__main__" in mods:
                what = "`import __main__`"
        if what:
            out.append((key(node), line, what))
    return out


def new_sites(original: ast.AST | None, tree: ast.AST) -> list[tuple[int, str]]:
    """The candidate's dynamic bindings that the user's code does not have (line, what)."""
    allowed = Counter(k for k, _, _ in sites(original)) if original is not None else Counter()
    out = []
    for k, line, what in sites(tree):
        if allowed[k] > 0:
            allowed[k] -= 1
            continue
        out.append((line, what))
    return out
