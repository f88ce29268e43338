"""``%agent_autoheal on``: an "Ask the agent to fix this" button under a failing cell.

IPython's custom exception hook shows the usual traceback first, then the button.
Nothing changes by itself: pressing the button runs ``%%heal`` on the failing cell's
source, with its output (and Insert / Run buttons) inside the button's own area.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
from IPython.display import display

from .cells import FrontCells
from .errors import SelfHealError
from .render.html import message_html

BUTTON_TEXT = "Ask the agent to fix this"


def _failing_source(shell: Any) -> str:
    raw = shell.history_manager.input_hist_raw
    return raw[-1] if raw else ""


def _offer(magics: Any, source: str, cells: FrontCells) -> None:
    button = widgets.Button(description=BUTTON_TEXT, icon="medkit", button_style="warning")
    out = widgets.Output()

    def ask(_b: Any) -> None:
        button.disabled = True
        with out:
            try:
                settings, task = magics._heal_job("", source)
                magics._run_sync(settings, task, cells)
            except SelfHealError as exc:
                display({"text/html": message_html(str(exc)), "text/plain": str(exc)}, raw=True)
            except Exception as exc:  # UsageError and friends: a short line, not a traceback
                display({"text/html": message_html(str(exc)), "text/plain": str(exc)}, raw=True)

    button.on_click(ask)
    box = widgets.VBox([button, out])
    bundle = box._repr_mimebundle_()
    bundle["text/plain"] = f"[{BUTTON_TEXT}: %agent_autoheal is on]"
    display(bundle, raw=True)


def enable(magics: Any) -> None:
    shell = magics.shell

    def handler(shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: Any = None) -> Any:
        shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
        source = _failing_source(shell)
        if source.strip() and not source.lstrip().startswith(("%%agent", "%%heal")):
            try:
                _offer(magics, source, FrontCells(shell))  # the failing cell, for Replace
            except Exception:  # never hide the user's own error behind ours
                pass
        return None

    shell.set_custom_exc((Exception,), handler)


def disable(magics: Any) -> None:
    magics.shell.set_custom_exc((), None)
