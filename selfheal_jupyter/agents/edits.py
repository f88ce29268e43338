"""Apply a reply's SEARCH/REPLACE blocks to the program being repaired.

Why: a repair mostly leaves the program as it is; a reply of a few changed lines costs
a fraction of the tokens of the whole program again (``SelfHeal.repair_format = "edit"``).
The format is Aider's, any number of blocks, inside a fenced block or not::

    <<<<<<< SEARCH
    exact lines of the current program
    =======
    the lines that replace them
    >>>>>>> REPLACE

Each block is applied in order to the program as the blocks before it left it, whole
lines only: first an exact match, then one that forgives trailing spaces and an
indentation that is off by the same amount on every line (the replacement is then
re-indented by that amount). Blank lines around the SEARCH part are not matched. A
block whose SEARCH part is not found, or found more than once, fails the whole reply
with a reason that names the block and what was wrong; nothing is half-applied.

(The small search/replace packages on PyPI were looked at: all were months old, at
version 0.x, with one author, and matched fuzzily — a near miss applied somewhere else
would be worse than asking again.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..codeblocks import extract_code

_HEAD = re.compile(r"^\s*<{5,9}(?:\s*\w+)?\s*>?\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_TAIL = re.compile(r"^\s*>{5,9}(?:\s*\w+)?\s*$")
_SHOWN = 60
"""Characters of a line quoted in a failure reason."""


@dataclass(frozen=True)
class EditBlock:
    """One SEARCH/REPLACE block: lines to find, lines to put in their place."""

    search: list[str]
    replace: list[str]


@dataclass(frozen=True)
class EditOutcome:
    """What applying a reply's blocks gave: the whole new program, or why not."""

    code: str | None
    """The complete program after every block (None when a block failed)."""
    blocks: int
    """How many blocks the reply held."""
    failure: str = ""
    """Which block failed and why ("" when all applied)."""

    @property
    def ok(self) -> bool:
        return self.code is not None


def has_blocks(reply: str) -> bool:
    """True when ``reply`` holds a SEARCH/REPLACE marker line (so it is an edit reply)."""
    return any(_HEAD.match(line) or _TAIL.match(line) for line in reply.splitlines())


def parse_blocks(reply: str) -> tuple[list[EditBlock], str]:
    """The blocks of ``reply`` in order, and "" — or the blocks so far and why the rest
    cannot be read (a block left open, a marker out of place)."""
    blocks: list[EditBlock] = []
    search: list[str] = []
    replace: list[str] = []
    part = "outside"
    for line in reply.replace("\r\n", "\n").split("\n"):
        number = len(blocks) + 1
        if _HEAD.match(line):
            if part != "outside":
                return blocks, (f"block {number} has a second <<<<<<< SEARCH line before its >>>>>>> REPLACE line")
            part, search, replace = "search", [], []
        elif part == "search" and _DIVIDER.match(line):
            part = "replace"
        elif _TAIL.match(line):
            if part == "outside":
                return blocks, (f"a >>>>>>> REPLACE line after block {number - 1} has no <<<<<<< SEARCH line before it")
            if part == "search":
                return blocks, f"block {number} has no ======= line between SEARCH and REPLACE"
            blocks.append(EditBlock(search, replace))
            part = "outside"
        elif part == "search":
            search.append(line)
        elif part == "replace":
            replace.append(line)
    if part != "outside":
        missing = "======= and >>>>>>> REPLACE lines" if part == "search" else ">>>>>>> REPLACE line"
        return blocks, f"block {len(blocks) + 1} is cut off: it has no {missing}"
    return blocks, ""


def apply_edits(code: str, reply: str) -> EditOutcome | None:
    """``code`` with the blocks of ``reply`` applied; None when the reply has no blocks
    (it may hold a whole program instead)."""
    if not has_blocks(reply):
        return None
    blocks, problem = parse_blocks(reply)
    count = len(blocks) + (1 if problem else 0)
    if problem:
        return EditOutcome(None, count, problem)
    if not blocks:  # pragma: no cover - has_blocks saw a marker, so parsing read a block or failed
        return EditOutcome(None, 0, "the reply has no complete SEARCH/REPLACE block")
    lines = code.replace("\r\n", "\n").split("\n")
    for number, block in enumerate(blocks, 1):
        result = apply_block(lines, block)
        if isinstance(result, str):
            return EditOutcome(None, count, f"block {number} {result}")
        lines = result
    return EditOutcome("\n".join(lines).strip("\n") + "\n", count)


def apply_block(lines: list[str], block: EditBlock) -> list[str] | str:
    """``lines`` with ``block`` applied, or what is wrong with the block (a phrase that
    follows "block N")."""
    search = _trim_blank(block.search)
    replace = _trim_blank(block.replace)
    if not search:
        return "has an empty SEARCH part: copy the lines to change from the current program into it"
    exact = [i for i in range(len(lines) - len(search) + 1) if lines[i : i + len(search)] == search]
    if len(exact) == 1:
        return _splice(lines, exact[0], len(search), replace)
    if len(exact) > 1:
        return _ambiguous(search, exact)
    loose = [
        (i, shift)
        for i in range(len(lines) - len(search) + 1)
        if (shift := _shift(lines[i : i + len(search)], search)) is not None
    ]
    if len(loose) > 1:
        return _ambiguous(search, [i for i, _ in loose])
    if not loose:
        return _not_found(lines, search)
    start, shift = loose[0]
    moved = _reindent(replace, shift)
    if moved is None:
        return (
            "matches only with its indentation moved, and its REPLACE lines cannot be "
            "moved the same way: copy the lines with their indentation"
        )
    return _splice(lines, start, len(search), moved)


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _splice(lines: list[str], start: int, length: int, replace: list[str]) -> list[str]:
    return lines[:start] + replace + lines[start + length :]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _shift(window: list[str], search: list[str]) -> tuple[str, str] | None:
    """How the program's lines differ from the SEARCH lines when they are the same text
    up to trailing spaces and one indentation change applied to every line: ``(removed,
    added)`` — the SEARCH lines' leading ``removed`` becomes ``added`` (one of them is
    empty) — or None when they differ otherwise."""
    found: tuple[str, str] | None = None
    for have, want in zip(window, search, strict=False):
        if not want.strip():
            if have.strip():
                return None
            continue
        if have.strip() != want.strip():
            return None
        a, b = _indent(have), _indent(want)
        if a.endswith(b):
            change = ("", a[: len(a) - len(b)])
        elif b.endswith(a):
            change = (b[: len(b) - len(a)], "")
        else:
            return None
        if found is None:
            found = change
        elif found != change:
            return None
    return found


def _reindent(lines: list[str], shift: tuple[str, str]) -> list[str] | None:
    removed, added = shift
    out = []
    for line in lines:
        if not line.strip():
            out.append(line.rstrip())
        elif removed and not line.startswith(removed):
            return None
        else:
            out.append(added + line[len(removed) :])
    return out


def _quote(line: str) -> str:
    text = line.strip()
    return f"`{text[:_SHOWN]}{'…' if len(text) > _SHOWN else ''}`"


def _ambiguous(search: list[str], starts: list[int]) -> str:
    at = ", ".join(str(i + 1) for i in starts[:5])
    return (
        f"(SEARCH starting {_quote(search[0])}) matches {len(starts)} places in the current "
        f"program (lines {at}): copy more lines around the change so that it matches once"
    )


def _not_found(lines: list[str], search: list[str]) -> str:
    have = {line.strip() for line in lines}
    missing = next((s for s in search if s.strip() and s.strip() not in have), None)
    head = f"(SEARCH starting {_quote(search[0])}) was not found in the current program"
    if missing is not None:
        return f"{head}: its line {_quote(missing)} is not in it; copy the lines exactly"
    return (
        f"{head}: its lines are there, but not one after the other as in SEARCH; copy "
        "one run of consecutive lines exactly"
    )


# ------------------------------------------------------------------ the format in a repair turn
# The developer asks for blocks (:func:`asks_for_edits`, :data:`EDIT_INSTRUCTION`) and reads
# the reply (:func:`read_reply`); a reply whose blocks did not apply has no program, and the
# next turn asks for the whole program (:data:`EDIT_FAILED_FEEDBACK`, :data:`EDIT_FAILED_NOTE`).

EDIT_INSTRUCTION = """\
Fix the program by editing it; do not write the whole program again. Reply with ONE \
fenced ```python block holding only SEARCH/REPLACE blocks, one per change. SEARCH copies \
lines of the current program exactly (enough of them to match one place only); \
REPLACE gives the lines that take their place. Example:
```python
<<<<<<< SEARCH
    return total / (len(values) + 1)
=======
    return total / len(values)
>>>>>>> REPLACE
```"""
EDIT_FAILED_NOTE = (
    "Your previous reply's SEARCH/REPLACE blocks could not be applied to the current "
    "program: {failure}. This time write the whole program."
)
EDIT_FAILED_FEEDBACK = (
    "Your reply's SEARCH/REPLACE blocks could not be applied to the current program: "
    "{failure}. The program was not changed and not run. Reply with the whole corrected "
    "program in one fenced ```python block."
)


def asks_for_edits(
    repair_format: str,
    program: str | None,
    *,
    restart: bool = False,
    after_no_code: bool = False,
    after_failed_edits: bool = False,
) -> bool:
    """True when a turn asks for SEARCH/REPLACE blocks: edit mode, a ``program`` to repair,
    and not a start-over, a turn after a reply without code, or the turn after blocks that
    did not apply."""
    return (
        repair_format == "edit" and program is not None and not restart and not after_no_code and not after_failed_edits
    )


def read_reply(text: str, program: str | None) -> tuple[str | None, bool, str]:
    """(program, came from edits, why the edits did not apply) of a reply.

    ``program``: the program being repaired when edits are on (None: only a whole program
    is read). Blocks are read whenever edits are on, also from a turn that asked for the
    whole program: applied, they beat running a program made of conflict markers. A reply
    with blocks gives ``program`` with the blocks applied (or, when one does not apply, no
    program and why); a reply without them, the program it holds."""
    if program is not None:
        outcome = apply_edits(program, text)
        if outcome is not None:
            return outcome.code, outcome.ok, outcome.failure
    return extract_code(text), False, ""
