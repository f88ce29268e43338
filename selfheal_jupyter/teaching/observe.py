"""The values a program holds at chosen places, the first few times it reaches them.

Why: the "why" hint asks about the value that is wrong, and which value that is shows
only beside the verified run: ``middle`` is ``1.5`` in the student's run and something
else in the fix's, at the same line. The sandbox reports the failing frame's locals
only, so each program (the student's cell, the fix) runs once more with a probe line
put between its statements at each place: a call of a helper the run's prelude defines
(never the program), which writes the visible names' values — and those of a few
expressions, such as what a ``return`` gives or a condition — to the program's stdout
on lines of their own, marked with a token made for that run. Nothing in the runner
is traced or patched; the probes are ordinary lines of an ordinary run.

A student's program can print lines that look like a probe's: what the probes say only
steers which of the student's own values a hint asks about (the verified run's values
are never shown, see :mod:`.why`), so a forged line fools no one but its author.
"""

from __future__ import annotations

import ast
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..model import ExecutionResult
from ..source_lines import source_lines

HELPER = "__selfheal_probe__"
ARRIVALS = 8
"""Times a place is recorded (a loop's first passes tell the story; the rest is noise)."""
VALUE = "@value"
"""The key of a place's own expression (what a ``return`` gives, a condition)."""

At = Literal["before", "after", "body"]


@dataclass(frozen=True)
class Place:
    """Where a program is observed: before or after the statement that starts on
    ``line``, or at the start of its body (a ``for``'s variable is bound there), with
    expressions evaluated there by key (:data:`VALUE` for the statement's own)."""

    line: int
    at: At
    exprs: tuple[tuple[str, str], ...] = ()


Values = dict[str, tuple[str, str]]
"""Each name (or expression key) → (its type's name, its repr)."""


@dataclass(frozen=True)
class Snapshot:
    """What a place showed once: in which call of its function (the arguments it was
    called with; empty at the top level), the how-manieth time in that call, the values."""

    call: tuple[tuple[str, str], ...]
    arrival: int
    values: Values
    function: str = ""


@dataclass
class Seen:
    """Each place's snapshots, in the order the program made them."""

    places: dict[str, list[Snapshot]] = field(default_factory=dict)
    result: ExecutionResult | None = None

    def at(self, place: str) -> list[Snapshot]:
        return self.places.get(place, [])


# ---------------------------------------------------------------- where to look
_AFTER = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Delete, ast.Import, ast.ImportFrom, ast.Pass)
_BODY = (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef)
BODIES = ("body", "orelse", "handlers", "finalbody", "cases")
"""A compound statement's nested bodies."""


def parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def statement_at(tree: ast.AST, line: int) -> ast.stmt | None:
    """The innermost statement whose own lines (its header, not its nested bodies) hold
    ``line``."""
    found: ast.stmt | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        for name in BODIES:
            inner = getattr(node, name, None)
            if inner:
                first = inner[0]
                start = getattr(first, "lineno", None) or getattr(getattr(first, "pattern", None), "lineno", None)
                end = min(end, (start or end + 1) - 1)
        if node.lineno <= line <= max(end, node.lineno) and (found is None or node.lineno >= found.lineno):
            found = node
    return found


def _is_elif(lines: list[str], node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and lines[node.lineno - 1].lstrip().startswith("elif")


def _chain_top(tree: ast.AST, lines: list[str], node: ast.stmt) -> ast.stmt:
    """The ``if`` an ``elif`` belongs to (where a line can go before it)."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    while _is_elif(lines, node):
        parent = parents.get(id(node))
        if not isinstance(parent, ast.If):
            break
        node = parent
    return node


def place_of(code: str, line: int, *, before: bool = False) -> Place | None:
    """The place that shows what the statement on ``line`` does: after a simple statement
    (what it assigned), at the start of a loop's or a function's body (its variables
    bound), before a ``return``, a condition or a ``raise`` with its expression's value;
    ``before``: just before the statement (what it is about to use). None when no line
    can be put there (the statement shares its line with another)."""
    tree = parse(code)
    if tree is None:
        return None
    node = statement_at(tree, line)
    if node is None:
        return None
    exprs: tuple[tuple[str, str], ...] = ()
    if isinstance(node, (ast.If, ast.While)) and not isinstance(node.test, ast.Constant):
        exprs = ((VALUE, ast.unparse(node.test)),)
    elif isinstance(node, (ast.For, ast.AsyncFor)) and before:
        exprs = ((VALUE, ast.unparse(node.iter)),)  # what the loop goes over
    elif isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Constant):
        exprs = ((VALUE, ast.unparse(node.value)),)
    if before or exprs or not isinstance(node, (*_AFTER, *_BODY)):
        at: At = "before"
    else:
        at = "after" if isinstance(node, _AFTER) else "body"
    return Place(node.lineno, at, exprs)


# ---------------------------------------------------------------- the probe lines
def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _call(place: str, exprs: tuple[tuple[str, str], ...]) -> str:
    values = ", ".join(f"{key!r}: (lambda: ({expr}))" for key, expr in exprs)
    return f"{HELPER}({place!r}, locals(), {{{values}}})"


ENTRY = ""
"""The place name of a function's first line: it only notes the call (its arguments as
they came in, before the function changes any), which every later place names."""


def _function_of(tree: ast.AST, node: ast.stmt) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body holds ``node``."""
    holding = [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and fn is not node
        and fn.body[0].lineno <= node.lineno <= (fn.end_lineno or fn.lineno)
    ]
    return max(holding, key=lambda fn: fn.lineno, default=None)


def _entry(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt | None:
    """The statement a line at the function's start goes before (after its docstring)."""
    body = fn.body
    first = (
        body[1]
        if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        else body[0]
    )
    return None if first.lineno == fn.lineno else first


def instrument(code: str, places: Mapping[str, Place]) -> str | None:
    """``code`` with a probe line at each place, and one at the start of each function that
    holds a place (None when it does not parse, or a place cannot take a line: the
    statement shares its line with another)."""
    tree = parse(code)
    if tree is None:
        return None
    lines = source_lines(code, keepends=True)
    plain = source_lines(code)
    inserts: list[tuple[int, int, str]] = []  # (index of the line it goes before, order, text)
    entries: set[int] = set()
    for order, (name, place) in enumerate(places.items()):
        node = statement_at(tree, place.line)
        if node is None:
            return None
        if place.at == "body":
            body = getattr(node, "body", None)
            if not body or body[0].lineno == node.lineno:
                return None
            target = body[0]
            index = target.lineno - 1
        else:
            target = _chain_top(tree, plain, node) if place.at == "before" else node
            index = target.lineno - 1 if place.at == "before" else (target.end_lineno or target.lineno)
        indent = _indent(plain[target.lineno - 1])
        if len(indent) != target.col_offset and len(indent.expandtabs()) != target.col_offset:
            return None  # ``if x: y = 1``, ``a = 1; b = 2``: no line of its own
        inserts.append((index, order, indent + _call(name, place.exprs) + "\n"))
        fn = _function_of(tree, target)
        first = _entry(fn) if fn is not None else None
        if first is not None and first.lineno not in entries:
            entries.add(first.lineno)
            inserts.append((first.lineno - 1, -1, _indent(plain[first.lineno - 1]) + _call(ENTRY, ()) + "\n"))
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    for index, _, text in sorted(inserts, reverse=True):
        lines.insert(index, text)
    out = "".join(lines)
    return out if parse(out) is not None else None


def helper(token: str, arrivals: int = ARRIVALS) -> str:
    """The prelude that defines the probe: a line of JSON per arrival, after ``token``.
    A call of a function is told apart by its frame (the last one seen is held, so its
    identity cannot be reused) and named by its arguments' values when first probed."""
    return f"""
def {HELPER}(place, scope, exprs, _state={{"busy": False, "frames": {{}}, "counts": {{}}, "total": {{}}}}):
    import json as _json, os as _os, reprlib as _reprlib, sys as _sys, types as _types
    if _state["busy"]:
        return
    _state["busy"] = True
    try:
        short = _reprlib.Repr()
        short.maxlevel, short.maxstring, short.maxother = 2, 60, 60
        short.maxlist = short.maxtuple = short.maxset = short.maxdict = 8
        skip = (_types.ModuleType, _types.FunctionType, _types.BuiltinFunctionType, type)

        def said(value):
            try:
                return [type(value).__name__, short.repr(value)]
            except Exception as exc:
                return [type(value).__name__, "<repr failed: " + type(exc).__name__ + ">"]

        frame = _sys._getframe(1)
        code = frame.f_code
        call, function = [], ""
        if code.co_name != "<module>":
            function = code.co_name
            held = _state["frames"].get(code)
            if held is None or held[0] is not frame:
                count = code.co_argcount + code.co_kwonlyargcount
                args = [[n, said(frame.f_locals.get(n))[1]] for n in code.co_varnames[:count]]
                held = _state["frames"][code] = (frame, args, {{}})
            call = held[1]
            counts = held[2]
        else:
            counts = _state["counts"]
        if place == "":
            return
        arrival = counts[place] = counts.get(place, 0) + 1
        total = _state["total"][place] = _state["total"].get(place, 0) + 1
        if arrival > {arrivals} or total > 4 * {arrivals}:
            return
        out = {{}}
        for name, value in list(scope.items()):
            if not name.startswith("__") and not isinstance(value, skip) and len(out) < 24:
                out[name] = said(value)
        for key, get in exprs.items():
            try:
                out[key] = said(get())
            except Exception as exc:
                out[key] = ["raises", type(exc).__name__]
        line = "\\n{token}" + _json.dumps([place, function, call, arrival, out]) + "\\n"
        _os.write(1, line.encode("utf-8", "replace"))
    except Exception:
        pass
    finally:
        _state["busy"] = False
"""


def read(stdout: str, token: str) -> dict[str, list[Snapshot]]:
    """The snapshots the probe lines of a run with ``token`` wrote, per place, in order."""
    out: dict[str, list[Snapshot]] = {}
    for line in stdout.splitlines():
        if not line.startswith(token):
            continue
        try:
            place, function, call, arrival, values = json.loads(line[len(token) :])
            snapshot = Snapshot(
                tuple((str(n), str(v)) for n, v in call),
                int(arrival),
                {str(k): (str(v[0]), str(v[1])) for k, v in values.items() if isinstance(v, list) and len(v) == 2},
                str(function),
            )
        except (ValueError, TypeError, AttributeError):
            continue
        out.setdefault(str(place), []).append(snapshot)
    return out


Execute = Callable[[str, str], ExecutionResult]
"""Runs a program (its text, a prelude to run after the notebook's) as the verified run's
programs ran: the same inputs, notebook prelude and tests."""


def observe(code: str, places: Mapping[str, Place], execute: Execute) -> Seen:
    """Run ``code`` with a probe at each place; what each showed (empty when the program
    could not take the probes)."""
    if not places:
        return Seen()
    probed = instrument(code, places)
    if probed is None:
        return Seen()
    token = f"@@selfheal-{secrets.token_hex(8)}@@"
    result = execute(probed, helper(token))
    return Seen(read(result.stdout, token), result)
