"""Teaching mode's facts and its leak check: pure functions of a finished run.

Why the tool computes these itself: a hint must point at the right place and must not
hand over the answer, and neither may rest on the model's word. The failing line, the
lines the verified fix changes and the runtime values come from the run record; the
model's prose (``agents/hint_writer.py``) is shown only after :func:`leaks` found no
changed line of the fix in it (nor a near copy: whitespace and renamed names aside).
"""

from __future__ import annotations

import builtins
import difflib
import keyword
import re
from dataclasses import dataclass, field

from ..model import CANDIDATE_FILE, Run

LEVELS = 3
LEVEL_TITLES = {1: "Where", 2: "Why", 3: "The fix"}

PLAIN_ERRORS = {
    "TypeError": "a value of the wrong type was used (for example a float where a whole number is needed)",
    "NameError": "a name is used that was never defined (a typo, or a variable set in another place)",
    "KeyError": "a dictionary (or table) was asked for a key it does not have",
    "IndexError": "a list was asked for a position past its end",
    "ValueError": "a value has the right type but an unusable content",
    "ZeroDivisionError": "a number was divided by zero",
    "AttributeError": "an object was asked for something it does not have",
    "AssertionError": "a check (assert) found the result is not what it should be",
    "SyntaxError": "Python could not read the code as written",
    "IndentationError": "the indentation of a line does not fit its block",
    "ImportError": "a module or name could not be imported",
    "ModuleNotFoundError": "a module that is not installed (or misspelled) was imported",
    "RecursionError": "a function called itself without stopping",
    "UnboundLocalError": "a variable was used inside a function before it was given a value there",
}

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?|\*\*|//|==|!=|<=|>=|[^\sA-Za-z_\d]")
_FIXED_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins))
MIN_TOKENS = 3
"""A changed line shorter than this (``else:``, ``)``) says nothing on its own."""


@dataclass
class Facts:
    """What the tool knows for sure about a failing cell and its verified fix."""

    error_type: str = ""
    error_message: str = ""
    failing_line: int | None = None
    failing_source: str = ""
    failed_test: str = ""
    changed_lines: list[int] = field(default_factory=list)
    """Lines of the student's cell the verified fix changes (an insertion names the line
    it comes before)."""
    values: list[tuple[str, str]] = field(default_factory=list)
    """Runtime values at the failing statement: (expression, value)."""
    verified: bool = False
    fix_lines: list[str] = field(default_factory=list)
    """The lines the fix adds or changes: what a hint must never contain."""
    diff: str = ""

    def line(self, number: int, code: str) -> str:
        lines = code.splitlines()
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""


def _changed(old: str, new: str) -> tuple[list[int], list[str]]:
    a, b = old.splitlines(), new.splitlines()
    changed: list[int] = []
    added: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        changed.extend(range(i1 + 1, i2 + 1) if i2 > i1 else [min(i1 + 1, len(a))])
        added.extend(line for line in b[j1:j2] if line.strip())
    kept = {_squash(line) for line in a}
    return sorted(set(n for n in changed if n > 0)), [x for x in added if _squash(x) not in kept]


def facts_of(run: Run) -> Facts:
    """The facts of ``run`` (a ``%%heal``-style run whose round 0 is the student's cell)."""
    from ..codeblocks import code_diff

    code = run.task.initial_code or ""
    facts = Facts()
    first = run.iterations[0] if run.iterations else None
    result = first.result if first is not None else None
    if result is not None and result.error is not None:
        error = result.error
        facts.error_type, facts.error_message = error.type, error.message
        ours = [f for f in error.frames if f.file == CANDIDATE_FILE]
        facts.failing_line = ours[-1].line if ours else error.line
        facts.values = list(error.locals.items())
    elif result is not None:
        failed = [t for t in result.tests if not t.passed]
        if failed:
            facts.failed_test, facts.error_message = failed[0].source, failed[0].message
            facts.error_type = "AssertionError"
        elif result.status != "ok":
            facts.error_type, facts.error_message = result.status, result.message
    if first is not None:
        for probe in first.runtime_values:
            if probe.message and not probe.message.startswith(("TypeError", "NameError")):
                facts.values.append((probe.source, probe.message))
    if facts.failing_line:
        facts.failing_source = facts.line(facts.failing_line, code)
    fix = run.final_code
    facts.verified = fix is not None and run.verified
    if fix is not None and facts.verified:
        facts.changed_lines, facts.fix_lines = _changed(code, fix)
        facts.diff = code_diff(code, fix, old_name="your cell", new_name="fix")
    return facts


def plain_error(facts: Facts) -> str:
    """The error in plain words for a beginner."""
    if facts.failed_test:
        return f"your code runs, but the test `{facts.failed_test}` fails: the result is not what it should be."
    what = PLAIN_ERRORS.get(facts.error_type)
    said = f"{facts.error_type}: {facts.error_message}".strip(": ")
    return f"{said} — {what}." if what else f"{said}."


def where_facts(facts: Facts, code: str) -> list[str]:
    """Level 1's facts: where it failed, where the fix starts, the error in plain words."""
    lines: list[str] = []
    if facts.failing_line:
        lines.append(f"It fails on line {facts.failing_line}: `{facts.failing_source}`.")
    lines.append("What happened: " + plain_error(facts))
    changed = [n for n in facts.changed_lines if n != facts.failing_line]
    if facts.changed_lines:
        named = ", ".join(str(n) for n in facts.changed_lines)
        many = len(facts.changed_lines) > 1
        if changed and facts.failing_line:
            lines.append(
                f"But the problem starts on line{'s' if many else ''} {named}: "
                f"`{facts.line(facts.changed_lines[0], code)}`."
            )
        else:
            lines.append(f"The line{'s' if many else ''} to look at: {named}.")
    return lines


def why_facts(facts: Facts) -> list[str]:
    """Level 2's facts: the runtime values at the failing statement, and a question on
    the first of them (the model's words may add the concept; these stand without them)."""
    lines = [f"At that moment `{name}` is `{value}`." for name, value in facts.values[:4]]
    if facts.values:
        name, value = facts.values[0]
        lines.append(f"Is `{value}` what you expected `{name}` to be there? Work it out by hand for this input.")
    return lines


# ---------------------------------------------------------------- the leak check
def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is_name(token: str) -> bool:
    return (token[0].isalpha() or token[0] == "_") and token not in _FIXED_NAMES


def _same_up_to_names(line: list[str], window: list[str]) -> bool:
    """``window`` is ``line`` with names consistently renamed (keywords and builtins kept)."""
    mapping: dict[str, str] = {}
    back: dict[str, str] = {}
    for ours, theirs in zip(line, window, strict=False):
        if _is_name(ours) and _is_name(theirs):
            if mapping.setdefault(ours, theirs) != theirs or back.setdefault(theirs, ours) != ours:
                return False
        elif ours != theirs:
            return False
    return True


def leaks(text: str, fix_lines: list[str]) -> list[str]:
    """The fix's changed lines that ``text`` contains, exactly or nearly (whitespace
    aside, names renamed). A line of fewer than ``MIN_TOKENS`` tokens is not checked."""
    found: list[str] = []
    squashed = _squash(text)
    tokens = _tokens(text)
    for line in fix_lines:
        ours = _tokens(line)
        if len(ours) < MIN_TOKENS:
            continue
        if _squash(line) in squashed or any(
            _same_up_to_names(ours, tokens[i : i + len(ours)]) for i in range(len(tokens) - len(ours) + 1)
        ):
            found.append(line.strip())
    return found
