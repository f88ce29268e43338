"""Turn the examples a task shows its reader into asserts.

Why: the loop's QA may use what a user would have. A docstring such as
``>>> add(2, 3)`` / ``5`` or ``add(2, 3) ==> 5`` is such a thing; the benchmark's
hidden tests are not. Only examples whose expected value is a Python literal are
kept (an ``<Axes ...>`` repr cannot be compared).
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize

_ARROW = re.compile(r"^\s*(?P<call>{name}\(.*\))\s*(?:==>|==|➞|=>|->|should\s+return|returns?|=)\s*(?P<want>.+?)\s*$")


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


# ---------------------------------------------------------------- stated values
# A task's example code often states what it prints or returns in a comment:
# ``print(loss)  # 1000.0``, ``y = f(x)`` / ``# Correct: approximately [-0.4076, ...]``,
# ``# scale -> [[7.874e-03], ...]``, ``# Z has shape (3, 1)``. Run as a smoke test only,
# such an example passes a wrong-but-quiet program; comparing the stated values (to the
# digits shown) is what the example's reader would do.

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_VALUE_CHARS = re.compile(r"""(?:True|False|None|'[^']*'|"[^"]*"|[\s\[\](),.\deE+\-])*""")
_LABEL = re.compile(
    r"^\s*(?:correct(?:\s+result)?|expected(?:\s+(?:output|result|value))?|output|result|"
    r"returns?|gives?)\s*:?\s*",
    re.I,
)
_APPROX = re.compile(r"^\s*(?:->|=>|==|=|≈|~=|is\s+approximately|approximately|is)\s*", re.I)
_WRONG = re.compile(r"^\s*(?:bug|buggy|wrong|naive|before|with\s+the\s+bug)\b", re.I)
_SUBJECT = re.compile(
    r"^\s*(?P<subject>[A-Za-z_][\w.]*(?:\[[^\]]*\])*)\s*"
    r"(?P<how>has\s+shape|->|==|≈|is\s+approximately|is)\s*(?P<rest>.*)$",
    re.I | re.S,
)


def _place(number: str) -> float:
    """Half the last place a number is written to: its tolerance (``0.4076`` → 5e-05)."""
    mantissa, _, exponent = number.lower().lstrip("-").partition("e")
    decimals = len(mantissa.partition(".")[2])
    # Never closer than 1e-4 relative: an author rounds, or leaves out a small eps.
    floor = max(1e-9, 1e-4 * abs(float(number)))
    if mantissa.endswith(".") or "." not in mantissa:
        # ``1.`` is numpy's print of a whole float; ``3`` an integer: compare closely
        return float(f"{floor:.2g}")
    return float(f"{max(floor, 0.5 * 10.0 ** (int(exponent or 0) - decimals)):.2g}")


def _leading_literal(text: str) -> tuple[str, object] | None:
    """The longest start of ``text`` that is a Python literal, with its value, numpy's
    print repaired (``array([1., 0.])`` → ``[1., 0.]``; ``[[1. 0.] [0. 1.]]`` gets its
    commas)."""
    text = re.sub(r"\barray\(", "(", text.strip())
    text = re.sub(r",\s*dtype=\w+", "", text)
    # (the pattern may match nothing, so it always matches)
    lines = [_VALUE_CHARS.match(line).group(0) for line in text.splitlines()]  # type: ignore[union-attr]
    # a value spans lines only while its brackets are open
    kept, depth = [], 0
    for line in lines:
        kept.append(line)
        depth += line.count("[") + line.count("(") - line.count("]") - line.count(")")
        if depth <= 0:
            break
    text = " ".join(kept)
    text = re.sub(r"(?<=[\d.\]])\s+(?=[-\d\[.])", ", ", text)  # numpy's print has no commas
    for end in range(len(text), 0, -1):
        candidate = text[:end].strip().rstrip(",")
        if not candidate:
            continue
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if not isinstance(value, dict):
            return candidate, value
    return None


def _numeric(value: object) -> bool:
    """A number, or a rectangular nested list of numbers (compared with a tolerance)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if not isinstance(value, (list, tuple)) or not value or not all(_numeric(v) for v in value):
        return False
    shapes = {len(v) if isinstance(v, (list, tuple)) else -1 for v in value}
    return len(shapes) == 1


def _assert(subject: str, want: str, value: object, *, shape: bool = False) -> str:
    tolerance = ast.unparse(ast.parse(_NUMBER.sub(lambda m: repr(_place(m.group(0))), want)))
    want = ast.unparse(ast.parse(want, mode="eval"))
    said = f"{subject} should be {want}" if not shape else f"{subject} should have shape {want}"
    message = f"{(said + ' (the task example states it); it is ')!r} + repr({subject})"
    if shape:
        return f"assert _np.shape({subject}) == {want}, {said!r} + ', not ' + repr(_np.shape({subject}))"
    if not _numeric(value):
        return f"assert {subject} == {want}, {message}"
    return (
        f"assert _np.shape({subject}) == _np.shape({want}) and bool(_np.all(_np.abs("
        f"_np.asarray({subject}, dtype=float) - {want}) <= {tolerance})), {message}"
    )


def _comment_groups(code: str) -> list[tuple[int, int, list[str]]]:
    """``(line, inline, texts)``: runs of comments, keyed by the line of the first
    (``inline`` = 1 when it follows code on that line)."""
    groups: list[tuple[int, int, list[str]]] = []
    lines = code.splitlines()
    for number, line in enumerate(lines, 1):
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
        if comment is None:
            continue
        text = comment.string.lstrip("#")
        inline = int(bool(line[: comment.start[1]].strip()))
        if groups and not inline and groups[-1][0] + len(groups[-1][2]) == number:
            groups[-1][2].append(text)
        else:
            groups.append((number, inline, [text]))
    return groups


def _statements_of(groups: list[tuple[int, int, list[str]]], assigned: set[str]) -> list[tuple[int, int, list[str]]]:
    """Each comment group split where a line names what it states (``# sign -> [0, 1]``
    / ``# exponent -> [...]`` are two statements)."""
    out = []
    for line, inline, texts in groups:
        start = 0
        for index in range(1, len(texts) + 1):
            if index == len(texts) or _named(texts[index], assigned):
                out.append((line + start, inline if start == 0 else 0, texts[start:index]))
                start = index
    return out


def _named(text: str, assigned: set[str]) -> re.Match[str] | None:
    """``subject -> value`` where the subject is a name the example assigns."""
    match = _SUBJECT.match(text)
    if match and match.group("subject").split(".")[0].split("[")[0] in assigned:
        return match
    return None


def _subject_of(statement: ast.stmt) -> str | None:
    """What a statement shows: ``print(x)`` → x, ``y = f()`` → y, a bare call → the call."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    if isinstance(statement, ast.Expr):
        call = statement.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
            return ast.unparse(call.args[0]) if len(call.args) == 1 else None
        return ast.unparse(call)
    return None


def _end(statement: ast.stmt) -> int:
    return statement.end_lineno or statement.lineno


_NUMPY = "import numpy as _np"
"""The import the generated asserts use (a name the example cannot clash with)."""


def with_stated_values(code: str) -> str | None:
    """The example with an assert after each statement whose comment states its value
    (where the reader would compare it: a later line may reassign the name); None when
    it states none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    assigned = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.For))
        for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        if isinstance(t, ast.Name)
    }
    after: dict[int, list[str]] = {}  # a statement's last line -> the asserts that follow it
    for line, inline, texts in _statements_of(_comment_groups(code), assigned):
        for index, text in enumerate(texts):
            if _WRONG.match(text):
                texts = texts[:index]
                break
        owner = (
            [s for s in tree.body if s.lineno <= line <= _end(s)]
            if inline
            else [s for s in tree.body if _end(s) < line][-1:]
        )
        if not texts or not owner:
            continue
        first, rest = texts[0], texts[1:]
        named = _named(first, assigned)
        subject, how = None, ""
        if named:
            subject, how, first = named.group("subject"), named.group("how").lower(), named.group("rest")
        else:
            subject = _subject_of(owner[0])
            first = _APPROX.sub("", _LABEL.sub("", first, count=1), count=1)
        if subject is None or not _expression(subject):
            continue
        text = "\n".join([first, *rest]) if first.strip() else "\n".join(rest)
        stated = _leading_literal(text)
        if stated is None or (how == "has shape" and not isinstance(stated[1], tuple)):
            continue
        after.setdefault(_end(owner[0]), []).append(_assert(subject, *stated, shape=how == "has shape"))
    if not after:
        return None
    out = [_NUMPY]
    for number, source in enumerate(code.splitlines(), 1):
        out.append(source)
        out.extend(dict.fromkeys(after.get(number, [])))
    return "\n".join(out)


_DECLARED_CLASSES = {
    "list": "list",
    "List": "list",
    "tuple": "tuple",
    "Tuple": "tuple",
    "dict": "dict",
    "Dict": "dict",
    "np.ndarray": "_np.ndarray",
    "numpy.ndarray": "_np.ndarray",
    "ndarray": "_np.ndarray",
}
"""Return annotations whose class is checked (``typing.`` prefix dropped); a scalar's
is not (a numpy float is no ``float`` to ``isinstance`` yet fine to every reader)."""


def declared_return_types(program: str) -> dict[str, tuple[str, str]]:
    """``function -> (class expression, annotation)`` for the top-level functions of
    ``program`` whose return annotation names a container class."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return {}
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            base = node.returns.value if isinstance(node.returns, ast.Subscript) else node.returns
            cls = _DECLARED_CLASSES.get(ast.unparse(base).removeprefix("typing."))
            if cls:
                out[node.name] = (cls, ast.unparse(node.returns))
    return out


def with_declared_types(code: str, program: str) -> str | None:
    """The example with an assert after each ``name = f(...)`` whose ``f`` the given
    program declares to return a container (``-> list[list[float]]``): the reader of
    the signature expects that class, and a caller may insist on it (``.tolist()``
    forgotten, an array where a list was declared). None when there is none to add."""
    declared = declared_return_types(program)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    after: dict[int, str] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, call = stmt.targets[0], stmt.value
        if not (
            isinstance(target, ast.Name)
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in declared
        ):
            continue
        name, function = target.id, call.func.id
        cls, annotation = declared[function]
        kind = cls.removeprefix("_np.")
        said = (
            f"{function}() should return {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
            f"(its signature says -> {annotation}); it returned a "
        )
        after[_end(stmt)] = f"assert isinstance({name}, {cls}), {said!r} + type({name}).__name__"
    if not after:
        return None
    lines = code.splitlines()
    numpy = any("_np." in line for line in after.values()) and _NUMPY not in lines
    out = [_NUMPY] if numpy else []
    for number, source in enumerate(lines, 1):
        out.append(source)
        if number in after:
            out.append(after[number])
    return "\n".join(out)
