"""What the student's edit changed in the run, said before the next hint.

Why: a student who edits after a hint and asks again needs to know what their change
did before they read on — the failure moved, a value changed, a check now passes —
or the next hint reads as if nothing had happened. Everything said here is of the
student's own two versions (the one before the edit and the one now), so both values
may be shown: nothing of the verified fix is in it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ..model import Run
from ..source_lines import source_lines
from . import why
from .facts import Facts, facts_of
from .observe import Execute

Shown = Callable[[int], int]
"""The cell's line number → the number the student sees."""


def edited_lines(old: str, new: str) -> tuple[list[int], list[int]]:
    """The lines of ``old`` the edit changed or removed, and those of ``new`` it changed or
    added (1-based)."""
    before: list[int] = []
    after: list[int] = []
    a, b = source_lines(old), source_lines(new)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            before += [n + 1 for n in range(i1, i2) if a[n].strip()]
            after += [n + 1 for n in range(j1, j2) if b[n].strip()]
    return before, after


def _many(numbers: list[int], shown: Shown) -> str:
    said = [str(shown(n)) for n in numbers]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def _failure(facts: Facts, shown: Shown) -> str:
    if facts.failed_test:
        return f"the check `{facts.failed_test}` fails"
    if facts.error_type == "AssertionError" and facts.failing_line:
        return f"the assert on line {shown(facts.failing_line)} fails"
    if facts.failing_line:
        return f"it fails on line {shown(facts.failing_line)} ({facts.error_type})"
    return f"it fails ({facts.error_type})"


def outcome(old: Facts, new: Facts, mapping: dict[int, int], shown: Shown) -> str:
    """How the run ends now, against how it ended before."""
    if not new.failed:
        return "Now your cell runs and passes its checks."
    moved = mapping.get(old.failing_line or 0)
    same_place = old.failing_line and moved == new.failing_line
    if same_place and old.error_type == new.error_type and old.failed_test == new.failed_test:
        return f"It still fails in the same place: {_failure(new, shown)}."
    both_asserts = old.error_type == new.error_type == "AssertionError"
    if both_asserts and moved and new.failing_line and new.failing_line > moved:
        return f"The assert on line {shown(moved)} now passes; {_failure(new, shown)}."
    if old.failed_test and new.failed_test and old.failed_test != new.failed_test:
        return f"The check `{old.failed_test}` now passes; {_failure(new, shown)}."
    if old.error_type and old.error_type != "AssertionError" and old.error_type != new.error_type:
        where = f" on line {shown(moved)}" if moved else ""
        return f"The {old.error_type}{where} is gone; now {_failure(new, shown)}."
    return f"Now {_failure(new, shown)}."


def what_changed(old: Run, new: Run, shown: Shown, execute: Execute | None = None) -> list[str]:
    """Sentences on what the edit from ``old``'s cell to ``new``'s changed in the run:
    the lines it changed, a value there (both runs are the student's), how the run ends."""
    old_code, new_code = old.task.initial_code or "", new.task.initial_code or ""
    removed, changed = edited_lines(old_code, new_code)
    if not removed and not changed:
        return []
    out = [f"Your edit changed line{'s' if len(changed) > 1 else ''} {_many(changed, shown)}." if changed else ""]
    if not changed:
        out = [f"Your edit removed line{'s' if len(removed) > 1 else ''} {_many(removed, shown)}."]
    mapping = why.line_map(old_code, new_code)
    if execute is not None and removed:
        found = why.find(old_code, new_code, removed, None, execute)
        for differs, now in list(zip(found.differs, found.verified, strict=True))[:2]:
            line = mapping.get(differs.line)
            if differs.expression or line is None or differs.kind == "raises":
                continue
            out.append(f"On line {shown(line)}, `{differs.name}` is now `{now}`; it was `{differs.value}`.")
    old_facts, new_facts = facts_of(old)[0], facts_of(new)[0]
    out.append(outcome(old_facts, new_facts, mapping, shown))
    return out
