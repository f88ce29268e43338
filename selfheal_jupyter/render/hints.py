"""Teaching mode's output: the hints of a cell ("Hint 2 of 3"), static or in a panel.

Reads the model only (``Hint``); what a hint may say was decided before it got here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import ipywidgets as widgets

from ..model import Hint
from .diff import diff_html
from .style import BLUE, BLUE_BG, GREY, esc

_TICKS = re.compile(r"`([^`\n]+)`")


def _inline(text: str) -> str:
    return _TICKS.sub(r"<code>\1</code>", esc(text)).replace("\n", "<br>")


CHANGED = "What your edit changed:"


def hint_text(hint: Hint, number: int, total: int) -> str:
    change = f"{CHANGED} {hint.change}\n" if hint.change else ""
    return f"{change}Hint {number} of {total} — {hint.title}\n{hint.text}" + (f"\n{hint.diff}" if hint.diff else "")


def hint_html(hint: Hint, number: int, total: int, *, current: bool = True) -> str:
    """One hint in a box; the earlier ones of the cell greyed."""
    colour = BLUE if current else GREY
    body = _inline(hint.text) + (diff_html(hint.diff) if hint.diff else "")
    change = (
        f'<div class="selfheal-hint-change" style="margin:2px 0 4px"><b>{CHANGED}</b> {_inline(hint.change)}</div>'
        if hint.change
        else ""
    )
    return (
        change + f'<div class="selfheal-hint" data-level="{hint.level}" style="border-left:4px solid {colour};'
        f'padding:4px 10px;margin:4px 0;background:{BLUE_BG if current else "#f6f8fa"}">'
        f'<div style="font-weight:600;color:{colour}">Hint {number} of {total} — {esc(hint.title)}</div>'
        f"<div>{body}</div></div>"
    )


def note_html(note: str) -> str:
    """A calm note under the hints (a spent quota, a Stop, the policy): grey, not red."""
    return f'<div class="selfheal-hint-note" style="color:{GREY};margin:4px 0">{esc(note)}</div>'


def hints_html(hints: list[Hint], total: int) -> str:
    """The cell's hints, newest last and highlighted."""
    return "".join(hint_html(h, i, total, current=i == len(hints)) for i, h in enumerate(hints, 1))


class HintPanel:
    """The cell's hints with Stop while a hint is being found, and **Another hint**."""

    def __init__(self, on_another: Callable[[], None], on_stop: Callable[[], None]) -> None:
        self._on_another = on_another
        self._on_stop = on_stop
        self.hints = widgets.HTML()
        self.status = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", icon="stop", button_style="danger")
        self.another_button = widgets.Button(
            description="Another hint", icon="lightbulb-o", button_style="info", layout=widgets.Layout(display="none")
        )
        self.stop_button.on_click(lambda _b: self._stop())
        self.another_button.on_click(lambda _b: self._another())
        self.widget = widgets.VBox(
            [self.hints, self.status, widgets.HBox([self.stop_button, self.another_button])],
            layout=widgets.Layout(border="1px solid #d0d7de", padding="4px 8px"),
        )
        self.widget.add_class("selfheal-hints")

    def mimebundle(self) -> dict:
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = "selfheal hints (each hint is also shown as text below)"
        return bundle

    def working(self, text: str) -> None:
        self.stop_button.layout.display = ""
        self.stop_button.disabled = False
        self.stop_button.description = "Stop"
        self.another_button.layout.display = "none"
        self.status.value = f'<span style="color:{GREY}">{esc(text)}</span>'

    def show(self, hints: list[Hint], total: int, *, more: bool, note: str = "") -> None:
        self.hints.value = hints_html(hints, total)
        self.stop_button.layout.display = "none"
        self.another_button.layout.display = "" if more else "none"
        self.another_button.disabled = False
        self.status.value = f'<span style="color:{GREY}">{esc(note)}</span>' if note else ""

    def _stop(self) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self._on_stop()

    def _another(self) -> None:
        self.another_button.disabled = True
        self._on_another()
