"""Turn the examples a task shows its reader into asserts.

Why: the loop's QA may use what a user would have. A docstring such as
``>>> add(2, 3)`` / ``5`` or ``add(2, 3) ==> 5`` is such a thing; the benchmark's
hidden tests are not. Only examples whose expected value is a Python literal are
kept (an ``<Axes ...>`` repr cannot be compared).
"""

from __future__ import annotations

import ast
import builtins
import re

_ARROW = re.compile(
    r"^\s*(?P<call>{name}\(.*\))\s*(?:==>|==|➞|=>|->|should\s+return|returns?|=)\s*(?P<want>.+?)\s*$"
)


def function_docstring(source: str, name: str) -> str:
    """The docstring of function ``name`` in ``source`` ("" when absent or unparsable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.get_docstring(node) or ""
    return ""


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return True


def doctest_pairs(doc: str) -> list[tuple[str, str]]:
    """``(call, expected)`` pairs from ``>>>`` lines followed by their output line."""
    lines = doc.splitlines()
    pairs: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith(">>>"):
            continue
        call = stripped[3:].strip()
        want = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if want and not want.startswith(">>>"):
            pairs.append((call, want))
    return pairs


def arrow_pairs(doc: str, name: str) -> list[tuple[str, str]]:
    """``(call, expected)`` pairs from lines like ``f(1) ==> 2`` or ``f(1) should return 2``."""
    pattern = re.compile(_ARROW.pattern.format(name=re.escape(name)))
    pairs = []
    for line in doc.splitlines():
        m = pattern.match(line)
        if m:
            pairs.append((m.group("call"), m.group("want")))
    return pairs


def _calls_only(call: str, name: str) -> bool:
    """True when the call names nothing but ``name`` (``is_happy(a)`` names ``a``: dropped)."""
    tree = ast.parse(call, mode="eval")
    allowed = {name, *dir(builtins)}
    return all(n.id in allowed for n in ast.walk(tree) if isinstance(n, ast.Name))


def example_asserts(source: str, name: str) -> str | None:
    """Asserts for the examples of function ``name``; None when it shows none usable."""
    doc = function_docstring(source, name)
    pairs = doctest_pairs(doc) or arrow_pairs(doc, name)
    asserts = []
    seen = set()
    for call, want in pairs:
        if (call, want) in seen or not _expression(call) or not _literal(want):
            continue
        if not _calls_only(call, name):
            continue
        seen.add((call, want))
        call = ast.unparse(ast.parse(call, mode="eval"))  # drops a trailing comment
        message = f"{(call + ' returned ')!r} + repr(_got) + {(', expected ' + want)!r}"
        asserts.append(f"assert (_got := {call}) == {want}, {message}")
    return "\n".join(asserts) if asserts else None
