"""When the model found no verified fix: try the small changes a beginner's bug usually is.

Why: teaching exercises fail by one token far more often than by a wrong design (a range
that starts at 1, ``/`` for ``//``, ``<`` for ``<=``, ``total = x`` for ``total += x``, a
``return`` inside the loop), and a small model can spend its rounds rewriting the
student's assert instead. Each change below is made in the student's own text (one
expression or statement replaced, the rest of the cell as it was), never inside an
assert or a test function, and is judged exactly as the loop judges its candidates
(``Loop.recheck``: the same sandbox, the student's asserts and tests, the spec guard).
The first that passes and whose result something checked becomes the run's verified
fix, recorded as one more round whose reply says where it came from.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..model import Candidate, Iteration, Run, Timings

MAX_TRIES = 80
REPLY = "(no model: a one-token change the tool tried, judged like every round)"

_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Div: (ast.FloorDiv,),
    ast.FloorDiv: (ast.Div,),
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.And: (ast.Or,),
    ast.Or: (ast.And,),
}


def _protected(tree: ast.AST) -> set[int]:
    """Lines of asserts and test functions: the student's spec, never changed."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1].encode()[:col].decode(errors="ignore"))


def _replaced(code: str, node: ast.AST, text: str) -> str:
    lines = code.splitlines(keepends=True)
    start = _offset(lines, node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = _offset(lines, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return code[:start] + text + code[end:]


def _mutable_constant(node: ast.AST, parent: ast.AST | None) -> bool:
    """A number the code computes with (an operand, an index, a range bound), not data
    (an item of a list, a value assigned): changing data to meet an assert is a cheat."""
    if not (isinstance(node, ast.Constant) and type(node.value) is int and -10 <= node.value <= 100):
        return False
    if isinstance(parent, (ast.BinOp, ast.Compare, ast.Subscript, ast.Slice, ast.UnaryOp)):
        return True
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range"


def _expression_changes(node: ast.AST, parent: ast.AST | None) -> Iterator[ast.AST]:
    """Each one-token change of ``node`` (a new node; ``node`` is left as it was)."""
    if isinstance(node, ast.BinOp):
        for op in _SWAPS.get(type(node.op), ()):
            yield ast.BinOp(node.left, op(), node.right)
        for side, other in ((node.right, node.left), (node.left, node.right)):
            if isinstance(node.op, (ast.Add, ast.Sub)) and isinstance(side, ast.Constant) and side.value == 1:
                yield other  # x + 1 -> x
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        for op in _SWAPS.get(type(node.ops[0]), ()):
            yield ast.Compare(node.left, [op()], node.comparators)
    elif isinstance(node, ast.BoolOp):
        for op in _SWAPS.get(type(node.op), ()):
            yield ast.BoolOp(op(), node.values)
    elif _mutable_constant(node, parent):
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        number: int = node.value
        for value in dict.fromkeys((number - 1, number + 1, 0)):
            if value != number:
                yield ast.Constant(value)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and len(node.args) == 2
        and not node.keywords
    ):
        yield ast.Call(node.func, [node.args[1]], [])  # range(1, n) -> range(n)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node.operand


def mutants(code: str) -> Iterator[str]:
    """Programs that differ from ``code`` by one small change, nearest the start first
    (at most :data:`MAX_TRIES`); none touches an assert or a test function."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return
    protected = _protected(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    seen = {code}
    found = 0
    nodes = sorted(
        (n for n in ast.walk(tree) if hasattr(n, "lineno") and n.lineno not in protected),  # type: ignore[attr-defined]
        key=lambda n: (n.lineno, n.col_offset),  # type: ignore[attr-defined]
    )
    for node in nodes:
        changes: list[str] = []
        if isinstance(node, ast.expr):
            changes = [
                _replaced(code, node, ast.unparse(new)) for new in _expression_changes(node, parents.get(id(node)))
            ]
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id not in {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        ):
            target = node.targets[0].id
            changes = [_replaced(code, node, f"{target} += {ast.unparse(node.value)}")]  # total = x -> total += x
        elif isinstance(node, (ast.For, ast.While)) and isinstance(node.body[-1], ast.Return) and len(node.body) > 1:
            ret = node.body[-1]
            lines = code.splitlines(keepends=True)
            moved = " " * node.col_offset + lines[ret.lineno - 1].lstrip()
            end = node.end_lineno or ret.lineno
            kept = lines[: ret.lineno - 1] + lines[ret.lineno : end]
            changes = ["".join(kept + [moved] + lines[end:])]  # a return inside the loop, moved after it
        for changed in changes:
            if changed in seen:
                continue
            seen.add(changed)
            try:
                ast.parse(changed)
            except (SyntaxError, ValueError):
                continue
            yield changed
            found += 1
            if found >= MAX_TRIES:
                return


def search(
    run: Run,
    judge: Callable[[str], object],
    *,
    cancel: threading.Event | None = None,
) -> Run:
    """``run`` with a verified fix from :func:`mutants` of the student's code, when it had
    none and one passes ``judge`` (``Loop.recheck`` bound to the run); else ``run``."""
    code = run.task.initial_code
    if not code or run.verified or run.outcome in ("cancelled", "error") or not run.iterations:
        return run
    for changed in mutants(code):
        if cancel is not None and cancel.is_set():
            break
        trial = judge(changed)
        verdict, result, checks = trial.verdict, trial.result, trial.checks  # type: ignore[attr-defined]
        if not verdict.passed or not verdict.verified_by:  # judged and verified as a round is
            continue
        index = max(it.index for it in run.iterations) + 1
        found = Iteration(
            index=index,
            candidate=Candidate(code=changed, iteration=index, reply=REPLY),
            result=result,
            verdict=verdict,
            checks=checks,
            timings=Timings(sandbox_s=getattr(result, "duration_s", 0.0)),
        )
        return replace(run, iterations=[*run.iterations, found], outcome="success", final_index=index, error="")
    return run
