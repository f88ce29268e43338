"""A program's lines as Python numbers them.

Why: ``str.splitlines`` also breaks at a form feed, U+2028 and other separators inside a
line or a string, so every line after one is numbered unlike the AST's ``lineno`` and a
traceback's line: an edit, a probe or a hint would point at the wrong line (the red team
moved a failing ``print`` into a string this way). One function, used wherever a line
number from Python meets the text.
"""

from __future__ import annotations


def source_lines(code: str, *, keepends: bool = False) -> list[str]:
    """``code``'s lines, broken at LF, CRLF and CR only."""
    out: list[str] = []
    for piece in code.splitlines(keepends=True):
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += piece
        else:
            out.append(piece)
    return out if keepends else [line.rstrip("\r\n") for line in out]
