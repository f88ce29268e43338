"""What the candidate reports about itself: its error (restricted to its own frames),
summaries of values, rich outputs and figures. Description only, never the verdict."""

import base64
import io
import linecache
import reprlib
import sys
import types
from typing import Any

from .layout import NOTEBOOK_FILE

MAX_FIGURES = 20
MAX_LOCALS = 20
MAX_TEXT_REPR = 10_000

_short = reprlib.Repr()
_short.maxlevel = 2
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 8
_short.maxstring = 80
_short.maxother = 120


def short_repr(value: Any) -> str:
    """A one-line summary of a value, never long, never raising."""
    try:
        cls = type(value)
        mod = cls.__module__ or ""
        if mod.startswith("pandas") and cls.__name__ == "DataFrame":
            cols = list(value.columns)
            more = f" +{len(cols) - 10} more" if len(cols) > 10 else ""
            return f"DataFrame shape={value.shape} columns={cols[:10]!r}{more}"
        if mod.startswith("pandas") and cls.__name__ == "Series":
            return f"Series name={value.name!r} len={len(value)} dtype={value.dtype}"
        if mod.startswith("numpy") and cls.__name__ == "ndarray":
            return f"ndarray shape={value.shape} dtype={value.dtype} {_short.repr(value)}"[:160]
        text = _short.repr(value)
    except Exception as exc:  # a user __repr__ may raise anything
        text = f"<{type(value).__name__}: repr failed with {type(exc).__name__}>"
    return text if len(text) <= 160 else text[:157] + "..."


def safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:
        return f"<str() of the {type(exc).__name__} failed>"


def summarize_locals(frame_locals: dict) -> dict:
    out: dict = {}
    for name, value in frame_locals.items():
        if name.startswith("__") or isinstance(
            value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
        ):
            continue
        out[name] = short_repr(value)
        if len(out) >= MAX_LOCALS:
            break
    return out


def _source_line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


def error_info(exc: BaseException, own_files: "tuple[str, ...]", shown: str) -> dict:
    """Structured exception restricted to the program's own frames (and the notebook's)."""
    frames = []
    last_frame = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in own_files:
            name = shown if code.co_filename != NOTEBOOK_FILE else NOTEBOOK_FILE
            frames.append(
                {
                    "file": name,
                    "line": tb.tb_lineno,
                    "function": code.co_name,
                    "source": _source_line(code.co_filename, tb.tb_lineno),
                }
            )
            last_frame = tb.tb_frame
        tb = tb.tb_next
    # the program's own line, even when the failure is inside a notebook function
    line = next((f["line"] for f in reversed(frames) if f["file"] == shown), None)
    if isinstance(exc, SyntaxError) and exc.filename in own_files and exc.lineno:
        line = exc.lineno
        src = (exc.text or "").strip() or _source_line(exc.filename, exc.lineno)
        name = shown if exc.filename != NOTEBOOK_FILE else NOTEBOOK_FILE
        frames.append({"file": name, "line": line, "function": "<module>", "source": src})
    message = exc.msg or safe_str(exc) if isinstance(exc, SyntaxError) else safe_str(exc)
    return {
        "type": type(exc).__name__,
        "message": message,
        "line": line,
        "frames": frames,
        "locals": summarize_locals(last_frame.f_locals) if last_frame is not None else {},
    }


def rich_value(value: Any) -> list:
    """What a notebook would display for the value of the last expression."""
    out = []
    html = getattr(value, "_repr_html_", None)
    if callable(html) and not isinstance(value, type):
        try:
            text = html()
            if isinstance(text, str) and text:
                out.append({"mime": "text/html", "data": text})
        except Exception:
            pass
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    if len(text) > MAX_TEXT_REPR:
        text = text[:MAX_TEXT_REPR] + "\n...[truncated]"
    out.append({"mime": "text/plain", "data": text})
    return out


def collect_figures() -> list:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    try:
        numbers = plt.get_fignums()[:MAX_FIGURES]
    except Exception:
        return []
    for num in numbers:
        try:
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            out.append({"mime": "image/png", "data": base64.b64encode(buf.getvalue()).decode()})
        except Exception as exc:
            sys.stderr.write(f"[selfheal] figure {num} could not be rendered: {exc!r}\n")
    return out
