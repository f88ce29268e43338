"""A structured error (built inside the sandbox) shown the way IPython shows one.

The frames come from the container as data; nothing here parses traceback text.
The failing line of the candidate is marked with IPython's ``---->`` arrow.
"""

from __future__ import annotations

from ..model import NOTEBOOK_FILE, ErrorInfo, Frame
from .style import BOX, CODE_BG, CYAN, GREEN, GREY, MONO, RED, RED_BG, esc

CONTEXT_LINES = 2


def is_candidate_frame(frame: Frame) -> bool:
    """Frames of the candidate itself (not of a library, not of the notebook's
    definitions run before it, file ``<notebook>``) carry a pseudo file name."""
    name = frame.file or ""
    if name == NOTEBOOK_FILE:
        return False
    return name.startswith("<") or "candidate" in name or name in ("", "main.py", "cell")


def failing_frame(error: ErrorInfo) -> Frame | None:
    """The innermost frame in the candidate's own code."""
    for frame in reversed(error.frames):
        if is_candidate_frame(frame):
            return frame
    return None


def failing_line(error: ErrorInfo) -> int | None:
    """The candidate line that raised (1-based), if known."""
    if error.line:
        return error.line
    frame = failing_frame(error)
    return frame.line if frame else None


def _context_rows(code: str, line: int, marked: bool) -> list[str]:
    lines = code.splitlines()
    start = max(1, line - CONTEXT_LINES)
    stop = min(len(lines), line + CONTEXT_LINES)
    rows = []
    for number in range(start, stop + 1):
        src = esc(lines[number - 1])
        if number == line:
            rows.append(
                f'<div data-failing-line="{number}" style="background:{RED_BG}">'
                f'<span style="color:{GREEN};font-weight:700">----&gt; {number:<4}</span>'
                f'<span style="font-weight:600">{src}</span></div>'
            )
        elif marked:
            rows.append(f'<div><span style="color:{GREEN}">      {number:<4}</span>{src}</div>')
    return rows


def shown_file(frame: Frame, name: str = "") -> str:
    """The file a frame is shown under: ``name`` (e.g. "your cell") for the program's
    own frames, "your notebook" for the definitions the notebook brought, else its file."""
    if frame.file == NOTEBOOK_FILE:
        return "your notebook"
    return name if name and is_candidate_frame(frame) else frame.file


def traceback_html(error: ErrorInfo, code: str | None = None, *, name: str = "") -> str:
    """IPython-like HTML of ``error``; ``code`` (the candidate) gives context lines;
    ``name`` is what the candidate's own frames are called (its file otherwise)."""
    parts: list[str] = [
        f'<div style="color:{RED};font-weight:700">{esc(error.type)}'
        f'<span style="font-weight:400;color:#24292f">: {esc(error.message)}</span></div>'
    ]
    marked_any = False
    target = failing_frame(error)
    for frame in error.frames:
        head = (
            f'<div style="margin-top:4px"><span style="color:{CYAN}">{esc(shown_file(frame, name))}</span>'
            f'<span style="color:{GREY}">, line </span><span style="color:{GREEN}">{frame.line}</span>'
            f'<span style="color:{GREY}">, in </span><span style="color:{CYAN}">{esc(frame.function)}</span></div>'
        )
        parts.append(head)
        if frame is target and code and 0 < frame.line <= len(code.splitlines()):
            parts.extend(_context_rows(code, frame.line, marked=True))
            marked_any = True
        elif frame.source:
            marker = "----&gt; " if frame is target else "      "
            style = f' style="background:{RED_BG}"' if frame is target else ""
            attr = f' data-failing-line="{frame.line}"' if frame is target else ""
            parts.append(
                f'<div{attr}{style}><span style="color:{GREEN}">{marker}{frame.line:<4}</span>'
                f"{esc(frame.source.strip())}</div>"
            )
            marked_any = marked_any or frame is target
    line = failing_line(error)
    if not marked_any and code and line and 0 < line <= len(code.splitlines()):
        parts.extend(_context_rows(code, line, marked=True))
    if error.locals:
        cells = "".join(
            f'<div><span style="color:{CYAN}">{esc(k)}</span> = {esc(v)}</div>'
            for k, v in list(error.locals.items())[:20]
        )
        parts.append(f'<div style="margin-top:6px;color:{GREY}">locals of the failing frame:</div>{cells}')
    body = "".join(parts)
    return (
        f'<div class="selfheal-traceback" style="{BOX};background:{CODE_BG};{MONO};'
        f'line-height:1.45;padding:6px 8px;white-space:pre-wrap">{body}</div>'
    )


def traceback_text(error: ErrorInfo, code: str | None = None) -> str:
    """The same traceback as plain text (exports, text/plain fallbacks)."""
    out = ["Traceback (most recent call last):"]
    target = failing_frame(error)
    for frame in error.frames:
        out.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
        src = frame.source.strip()
        if not src and code and 0 < frame.line <= len(code.splitlines()):
            src = code.splitlines()[frame.line - 1].strip()
        if src:
            out.append(("----> " if frame is target else "    ") + src)
    out.append(f"{error.type}: {error.message}")
    return "\n".join(out)
