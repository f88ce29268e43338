"""An expectation the user states in words, read into a check.

Why: ``%%heal the total should be 42`` says what "right" means as plainly as an assert
does. Left as prose, a fix that runs but prints 41 would pass; read into
``assert total == 42`` it is checked like the user's own tests, and a passing run can
say what verified it. Only plain statements are read — a name (or a backticked
expression) the cell uses, a verb of equality, a Python literal — so nothing is
guessed: "the total should be about 42" or "the plot should look right" state no
check and stay prose for the model.
"""

from __future__ import annotations

import ast
import re

_VERBS = (
    r"should\s+(?:be\s+equal\s+to|be|equal|come\s+to|give|return)|must\s+(?:be|equal)"
    r"|is\s+expected\s+to\s+be|ought\s+to\s+be|==|="
)
_STATEMENT = re.compile(
    rf"(?P<subject>`[^`]+`|[A-Za-z_][\w.\[\]'\"]*(?:\s+[A-Za-z_][\w.]*)*?)\s+(?P<verb>{_VERBS})\s+"
    r"(?P<value>.+?)\s*(?=$|[;,]\s|\s+(?:and|but|not|instead|rather)\b|\.\s|\.$)",
    re.I,
)
_ARTICLES = {"the", "a", "an", "my", "our", "its", "this", "that", "value", "of"}


def _names(code: str) -> set[str]:
    """Names the cell assigns or reads (the subjects a statement may be about)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # read before the code's depth is checked
        return set(re.findall(r"[A-Za-z_]\w*", code))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _subject(text: str, names: set[str]) -> str | None:
    """The Python expression a subject phrase means, when the cell has it."""
    text = text.strip()
    if text.startswith("`") and text.endswith("`"):
        expr = text[1:-1].strip()
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError:
            return None
        read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        return expr if read and read <= names | {"len", "round", "sum", "abs"} else None
    words = [w for w in text.split() if w.lower() not in _ARTICLES]
    for start in range(len(words)):  # the longest phrase first: "mean price" -> mean_price
        candidate = "_".join(words[start:])
        try:
            tree = ast.parse(candidate, mode="eval")
        except SyntaxError:
            continue
        root = tree.body
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id in names:
            return candidate
    return None


def _value(text: str) -> tuple[str, object] | None:
    text = text.strip().rstrip(".")
    for end in range(len(text), 0, -1):
        source = text[:end].strip()
        try:
            value = ast.literal_eval(source)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return source, value
    return None


def _check(subject: str, source: str, value: object) -> str:
    said = f"you said {subject} should be {source}"
    message = f"{said + '; it is '!r} + repr({subject})"
    if isinstance(value, float):
        places = len(source.split(".")[1]) if "." in source and "e" not in source.lower() else 0
        tolerance = 0.5 * 10**-places if places else 1e-9 * max(1.0, abs(value))
        return f"assert abs({subject} - {source}) <= {tolerance!r}, {message}"
    if value is None or isinstance(value, bool):
        return f"assert {subject} is {source}, {message}"
    return f"assert {subject} == {source}, {message}"


def stated_checks(text: str, code: str) -> list[str]:
    """``assert`` statements for the expectations ``text`` states about ``code``'s names.

    >>> stated_checks("the total should be 42", "total = sum(prices)")
    ["assert total == 42, 'you said total should be 42; it is ' + repr(total)"]
    """
    names = _names(code)
    out: list[str] = []
    for match in _STATEMENT.finditer(text or ""):
        subject = _subject(match.group("subject"), names)
        value = _value(match.group("value"))
        if subject is None or value is None:
            continue
        check = _check(subject, *value)
        try:
            ast.parse(check)
        except SyntaxError:
            continue
        if check not in out:
            out.append(check)
    return out


def with_stated(tests: str | None, stated: list[str]) -> str | None:
    """The user's tests followed by the stated checks (run and judged together)."""
    parts = [t for t in [(tests or "").strip(), "\n".join(stated)] if t]
    return "\n".join(parts) if parts else None
