"""How deep a program nests, against the one bound every reader of code in the tool stays under.

Why a bound: the tool reads programs with recursive walkers (pyflakes in the static
pre-check, the spec guard, the diagnosis, ``ast.dump``, ``ast.unparse``), each a few
frames per level of the syntax tree. ``x = 1 + 1 + …`` of 400 terms, a 1 KB cell, nests
400 levels, and a walker met Python's recursion limit (1000 frames outside a kernel):
the run ended in an internal error. Measured here without recursion; the user's code
deeper than :data:`MAX_NESTING` is refused where a task is admitted
(:mod:`selfheal_jupyter.loop.task_admission`), a candidate is not run (the pre-check,
:mod:`selfheal_jupyter.agents.qa`), so no reader ever meets a deeper program.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_NESTING = 100
"""The most levels of its syntax tree a program may nest. Code written by hand stays far
below (a function, a loop, a condition and a call inside a call: about 20); the deepest
reader takes about four frames a level, so every reader stays under 500 frames, whoever
calls it."""


@dataclass(frozen=True)
class TooDeep:
    """Where a program first nests deeper than :data:`MAX_NESTING`."""

    line: int | None
    """The line it does (None: Python's own parser could not build a tree that deep)."""


def too_deep(code: str) -> TooDeep | None:
    """Where ``code`` nests deeper than :data:`MAX_NESTING` levels (None: it does not, or
    it does not parse, which the pre-check reports as it is)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):  # deeper than Python's own parser builds
        return TooDeep(None)
    stack: list[tuple[ast.AST, int, int | None]] = [(tree, 0, None)]
    while stack:
        node, level, line = stack.pop()
        line = getattr(node, "lineno", line)
        if level > MAX_NESTING:
            return TooDeep(line)
        stack.extend((child, level + 1, line) for child in ast.iter_child_nodes(node))
    return None


def nesting_note(found: TooDeep) -> str:
    """How deep, and where, as the end of a sentence that says what nests ("… nests ")."""
    return f"deeper than {MAX_NESTING} levels" + (f" at line {found.line}" if found.line else "")


LEVEL = (
    "each operator of a long chain such as `1 + 1 + …`, and each bracket, call or `elif` inside another, is one level"
)
"""What a level is, for a reader who sees no nesting in a long sum."""
