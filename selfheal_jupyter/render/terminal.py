"""What a terminal is given: text with its control characters made visible, at most so much.

A candidate's output, a model's reply and anything derived from them (error messages,
programs, file names) may carry escape sequences that a terminal would obey: clear the
screen, move the cursor over an earlier line to forge an ``outcome: success``, write the
clipboard (OSC 52). Everything the CLI prints of such text passes :func:`printable`, so
those bytes are shown, never obeyed (as ``cat -v`` does). JSON output is exact and does
not pass here: JSON escapes control characters itself.
"""

from __future__ import annotations

import re

MAX_LINES = 200
MAX_CHARS = 20_000
"""A program, diff or output longer than this is cut on a terminal (never in --json)."""

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and
# isolates that reorder what a line shows ("Trojan source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab written as an escape
    (``\\x1b``, ``\\x9b``, ``\\u202e``); a carriage return too, so no line can be
    overwritten."""
    return _CONTROL.sub(_escape, text)


def clip(text: str, max_lines: int, max_chars: int, pointer: str) -> str:
    """``text`` cut to its first ``max_lines`` lines and ``max_chars`` characters, with a
    line saying how much was left out and where the whole is (``pointer``)."""
    lines = text.split("\n")
    kept = "\n".join(lines[:max_lines])
    if len(kept) > max_chars:
        kept = kept[:max_chars]
    if kept == text:
        return text
    left = len(text) - len(kept)
    lines_left = len(lines) - kept.count("\n") - 1
    return f"{kept}\n… {left:,} more characters ({lines_left:,} more lines) not shown; {pointer}"
