"""What the user's code computes, and what it leaves blank for the answer.

Why a module of its own: the spec guard (:mod:`selfheal_jupyter.spec.guard`) must tell a
cheat from an answer. Hard-coding is a cheat where a candidate replaces something the
user's code *computes* (an expression, a call, a loop) with the literal an assert
expects, or adds that literal where the user's code derives the value. Filling a blank
the user left — an empty right-hand side, ``...``, ``pass``, a placeholder value
(``None``, ``0``, ``""``, ``[]``, ``{}``), an empty call such as ``fruits.append()``,
``raise NotImplementedError`` — is the answer the exercise asks for. This module reads
the user's code for both: :func:`parse_with_blanks` parses a cell whose blanks make it
invalid Python, :func:`derived_names` lists the names the user's code computes and
:func:`computes` says whether a function's body computes anything at all.

Nothing here runs code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from .syntax import NO_VALUE as _NO_VALUE
from .syntax import literal

MAX_BLANKS = 30
"""Blanks filled before giving up on parsing a cell (then its asserts are read line by line)."""

_INDENT_AFTER = re.compile(r"expected an indented block after .* on line (\d+)")
_EMPTY_BEFORE_COLON = re.compile(r"(\b(?:in|if|elif|while|return|with|assert)|[=(,\[])\s*:\s*$")
_OPEN_END = re.compile(r"(=|\+=|-=|\*=|/=|//=|%=|\*\*=|\b(?:in|return|and|or|not)|[-+*/%,(\[{]|==|!=|<=|>=|<|>)\s*$")


def _code_and_comment(line: str) -> tuple[str, str]:
    """``line`` split at its comment (a ``#`` outside string quotes)."""
    quote: str | None = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch in "'\"":
            quote = line[i : i + 3] if line[i : i + 3] in ("'''", '"""') else ch
            i += len(quote)
            continue
        elif ch == "#":
            return line[:i].rstrip(), line[i:]
        i += 1
    return line.rstrip(), ""


def _fill(line: str) -> str | None:
    """``line`` with its blank filled by ``...``, or None when no blank is recognised."""
    code, comment = _code_and_comment(line.rstrip("\n"))
    tail = f"  {comment}" if comment else ""
    if _EMPTY_BEFORE_COLON.search(code):
        return code[: code.rstrip().rfind(":")].rstrip() + " ...:" + tail
    if code.strip() and _OPEN_END.search(code):
        return code + " ..." + tail
    return None


def _fill_body(line: str) -> str | None:
    """A block header whose body the user left empty (only comments): ``def f(): ...``."""
    code, comment = _code_and_comment(line.rstrip("\n"))
    if not code.endswith(":"):
        return None
    return code + " ..." + (f"  {comment}" if comment else "")


def parse_with_blanks(code: str) -> tuple[ast.Module | None, str]:
    """The cell's AST and the source it was read from, blanks filled with ``...``.

    ``IS_LEARNING_PYTHON = `` (a right-hand side left for the student) or a function
    whose body is only a ``# TODO`` comment do not parse; each such line becomes
    ``... = ...`` / ``def f(): ...`` on the same line, so line numbers stay the user's.
    (None, code) when the cell does not parse for another reason.
    """
    source = code
    for _ in range(MAX_BLANKS):
        try:
            return ast.parse(source), source
        except (SyntaxError, ValueError) as exc:
            if not isinstance(exc, SyntaxError) or not exc.lineno:
                return None, code
            lines = source.splitlines(keepends=True)
            match = _INDENT_AFTER.search(exc.msg or "")
            number = int(match.group(1)) if match else exc.lineno
            if not 0 < number <= len(lines):
                return None, code
            line = lines[number - 1]
            filled = _fill_body(line) if match else _fill(line)
            if filled is None:
                return None, code
            lines[number - 1] = filled + ("\n" if line.endswith("\n") else "")
            source = "".join(lines)
    return None, code


# ----------------------------------------------------------------------------- placeholders
def is_literal(node: ast.AST | None) -> bool:
    return literal(node) is not _NO_VALUE


def is_placeholder_value(value: Any) -> bool:
    """``...``, ``None``, ``0``, ``""`` and empty containers: what a TODO leaves to fill."""
    if value is Ellipsis or value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)) and value == 0:
        return True
    return isinstance(value, (str, bytes, list, tuple, dict, set)) and len(value) == 0


def _is_not_implemented(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _blank_statement(stmt: ast.stmt) -> bool:
    """A statement that computes nothing: ``pass``, ``...``, a docstring, a placeholder
    ``return``, ``raise NotImplementedError``, or a return of a literal."""
    if isinstance(stmt, ast.Pass) or _is_not_implemented(stmt):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    return isinstance(stmt, ast.Return) and (stmt.value is None or is_literal(stmt.value))


def computes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The function's body does more than a blank (see :func:`_blank_statement`): a
    literal-only body is data the user wrote or left to fill, not a computation."""
    return not all(_blank_statement(stmt) for stmt in func.body)


# ----------------------------------------------------------------------------- derivations
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "remove",
        "discard",
        "pop",
        "popitem",
        "clear",
        "sort",
        "reverse",
        "appendleft",
        "extendleft",
    }
)
"""Methods of the builtin containers (and deque) that change the object they are called on."""


def _names(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


def _base_name(node: ast.AST) -> str | None:
    """``counts`` of ``counts["a"]`` / ``counts.total`` / ``counts``."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def derivations(tree: ast.AST | None) -> list[tuple[str, int]]:
    """(name, line) of every place the code computes a name's value.

    A computation: an assignment of a non-literal expression (a call, an operation, a
    name) or of a literal chosen by an ``if``, a loop or a ``try`` around it, an
    augmented assignment, a loop or ``with`` target, an item or attribute set
    to a non-literal, a mutating method call (``append``...) with a non-literal argument.
    Literal data (``count = 0``, ``fruits.append("apple")``) and blanks
    (``x = ...``, ``fruits.append()``) are not computations.
    """
    out: list[tuple[str, int]] = []
    if tree is None:
        return out
    decided = _under_control_flow(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if value is None or (is_literal(value) and id(node) not in decided):
                continue
            for t in targets:
                if isinstance(t, (ast.Subscript, ast.Attribute)):
                    base = _base_name(t)
                    if base:
                        out.append((base, node.lineno))
                else:
                    out += [(n, node.lineno) for n in _names(t)]
        elif isinstance(node, ast.AugAssign):
            if not (is_literal(node.value) and is_placeholder_value(literal(node.value))):
                base = _base_name(node.target)
                if base:
                    out.append((base, node.lineno))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            line = getattr(node, "lineno", getattr(node.iter, "lineno", 0))
            out += [(n, line) for n in _names(node.target)]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    out += [(n, node.lineno) for n in _names(item.optional_vars)]
        elif isinstance(node, ast.NamedExpr):
            out.append((node.target.id, node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = _base_name(node.func.value)
            args = [*node.args, *(k.value for k in node.keywords)]
            if base and node.func.attr in MUTATORS and any(not is_literal(a) for a in args):
                out.append((base, node.lineno))
    return out


def _under_control_flow(tree: ast.AST) -> set[int]:
    """Ids of the statements inside an ``if``, a loop or a ``try``: a literal assigned
    there is chosen by what the code found (``raised = True`` in an ``except``), so the
    name's value is decided by the code, not written in."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [node.finalbody] + [h.body for h in node.handlers]
            for block in blocks:
                for stmt in block:
                    out.add(id(stmt))
    return out


def derived_names(tree: ast.AST | None) -> set[str]:
    """The names the code computes somewhere (see :func:`derivations`)."""
    return {name for name, _ in derivations(tree)}


def unread_data(tree: ast.AST | None) -> list[str]:
    """Module-level data the code defines and nothing reads (``prices = [3, 4, 5]`` under
    a TODO that was to compute something from it)."""
    if tree is None:
        return []
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    out: list[str] = []
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = literal(stmt.value)
            if value is _NO_VALUE or is_placeholder_value(value) or isinstance(value, bool):
                continue
            name = stmt.targets[0].id
            if name not in loaded and name not in out:
                out.append(name)
    return out
