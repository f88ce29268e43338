"""Colours and small HTML helpers shared by the renderers.

Everything is inline (``style="..."``): a saved notebook keeps its look in
JupyterLab, after ``nbconvert --to html`` and in static viewers that drop ``<style>``
blocks from untrusted outputs.
"""

from __future__ import annotations

import html

from ..safe_output import clean_text

# IPython-like colours (the "Linux" scheme as JupyterLab shows it).
RED = "#c23b22"
GREEN = "#1a7f37"
BLUE = "#0550ae"
CYAN = "#1b7c83"
GREY = "#6e7781"
AMBER = "#9a6700"
YELLOW_BG = "#fff8c5"
RED_BG = "#ffebe9"
GREEN_BG = "#e6ffec"
BLUE_BG = "#ddf4ff"
CODE_BG = "#f6f8fa"
BORDER = "#d0d7de"

MONO = "font-family:SFMono-Regular,Menlo,Consolas,'Liberation Mono',monospace;font-size:12px"
PRE = f"margin:0;padding:6px 8px;{MONO};line-height:1.45;white-space:pre-wrap;word-break:break-word"
BOX = f"border:1px solid {BORDER};border-radius:6px;margin:4px 0;overflow:auto;background:{CODE_BG}"

OUTCOME_STYLE = {
    "success": (GREEN, "✔", "success"),
    "failed": (RED, "✘", "failed"),
    "budget_exhausted": (RED, "✘", "budget exhausted"),
    "cancelled": (AMBER, "■", "stopped"),
    "error": (RED, "⚠", "error"),
    None: (GREY, "…", "running"),
}


def esc(text: object) -> str:
    """Escape user or model text for HTML (quotes too: it may land in attributes).

    Lone surrogates become U+FFFD, so the page can always be encoded as UTF-8.
    """
    return html.escape(clean_text(str(text)), quote=True)


def heading(text: str, colour: str = "#24292f") -> str:
    return f'<div style="font-weight:600;color:{colour};margin:8px 0 2px 0">{esc(text)}</div>'


def pre(text: str, *, colour: str = "#24292f", background: str = CODE_BG) -> str:
    return (
        f'<div style="{BOX};background:{background}">'
        f'<pre style="{PRE};color:{colour};background:{background}">{esc(text)}</pre></div>'
    )
