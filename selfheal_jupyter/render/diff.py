"""A unified diff between two attempts, as coloured HTML lines."""

from __future__ import annotations

from .style import BLUE, BLUE_BG, BOX, GREEN_BG, GREY, MONO, RED_BG, esc


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


def diff_html(diff: str) -> str:
    """Coloured HTML of a unified diff; each line tagged ``data-diff="add|del|..."``."""
    if not diff.strip():
        return ""
    rows = []
    for line in diff.splitlines():
        kind = diff_line_kind(line)
        rows.append(
            f'<div data-diff="{kind}" style="{_LINE_STYLE[kind]};padding:0 8px;'
            f'white-space:pre-wrap;word-break:break-word">{esc(line) or "&nbsp;"}</div>'
        )
    return f'<div class="selfheal-diff" style="{BOX};{MONO};line-height:1.45;padding:4px 0">{"".join(rows)}</div>'
