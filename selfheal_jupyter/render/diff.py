"""A unified diff between two attempts, as coloured HTML lines; inside a changed line
the words that changed are marked."""

from __future__ import annotations

import difflib
import re

from .style import BLUE, BLUE_BG, BOX, GREEN_BG, GREY, MONO, RED_BG, esc

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
SIMILAR = 0.5
"""A removed and an added line are one changed line (its words marked) above this likeness."""
_WORD_STYLE = {"del": "background:#ffb3ad;border-radius:2px", "add": "background:#8ceba1;border-radius:2px"}


def diff_line_kind(line: str) -> str:
    """``add`` / ``del`` / ``hunk`` / ``meta`` / ``context`` for one diff line."""
    if line.startswith(("+++", "---")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "context"


_LINE_STYLE = {
    "add": f"background:{GREEN_BG};color:#116329",
    "del": f"background:{RED_BG};color:#82071e",
    "hunk": f"background:{BLUE_BG};color:{BLUE}",
    "meta": f"color:{GREY};font-weight:600",
    "context": "color:#24292f",
}


def _marked(text: str, other: str, kind: str) -> str | None:
    """``text`` (a removed or added line, without its sign) as HTML with the words that
    differ from ``other`` marked; None when the two lines are not alike enough."""
    mine, theirs = _TOKEN.findall(text), _TOKEN.findall(other)
    a, b = (theirs, mine) if kind == "add" else (mine, theirs)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < SIMILAR:
        return None
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        chunk = "".join(b[j1:j2] if kind == "add" else a[i1:i2])
        if not chunk:
            continue
        if tag == "equal":
            out.append(esc(chunk))
        else:
            out.append(f'<span data-diff-word="{kind}" style="{_WORD_STYLE[kind]}">{esc(chunk)}</span>')
    return "".join(out)


def _pairs(lines: list[str]) -> dict[int, int]:
    """Each removed line's index → the added line it became (in a run of ``-`` lines
    right before a run of ``+`` lines, the most alike one not taken yet), and back."""
    pairs: dict[int, int] = {}
    i = 0
    while i < len(lines):
        if diff_line_kind(lines[i]) != "del":
            i += 1
            continue
        start = i
        while i < len(lines) and diff_line_kind(lines[i]) == "del":
            i += 1
        added = i
        while i < len(lines) and diff_line_kind(lines[i]) == "add":
            i += 1
        free = list(range(added, i))
        for old in range(start, added):
            if not free:
                break
            likeness = [
                difflib.SequenceMatcher(None, lines[old][1:], lines[new][1:], autojunk=False).ratio() for new in free
            ]
            best = max(range(len(free)), key=lambda k: likeness[k])
            new = free.pop(best)
            pairs[old], pairs[new] = new, old
    return pairs


def diff_html(diff: str, *, headers: bool = True) -> str:
    """Coloured HTML of a unified diff; each line tagged ``data-diff="add|del|..."``, the
    changed words of a changed line tagged ``data-diff-word="add|del"``. ``headers``
    False leaves out the ``---`` / ``+++`` lines (their file names are the tool's own,
    where a heading says what is compared)."""
    if not diff.strip():
        return ""
    lines = [line for line in diff.splitlines() if headers or diff_line_kind(line) != "meta"]
    pairs = _pairs(lines)
    rows = []
    for index, line in enumerate(lines):
        kind = diff_line_kind(line)
        body = esc(line) or "&nbsp;"
        if index in pairs:
            marked = _marked(line[1:], lines[pairs[index]][1:], kind)
            if marked is not None:
                body = esc(line[0]) + marked
        rows.append(
            f'<div data-diff="{kind}" style="{_LINE_STYLE[kind]};padding:0 8px;'
            f'white-space:pre-wrap;word-break:break-word">{body}</div>'
        )
    return f'<div class="selfheal-diff" style="{BOX};{MONO};line-height:1.45;padding:4px 0">{"".join(rows)}</div>'
