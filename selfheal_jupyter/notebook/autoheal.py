"""``%agent_autoheal on``: an "Ask the agent to fix this" button under a failing cell.

IPython's custom exception hook shows the usual traceback first (or the handler that
was installed before ours, which we chain to and restore on ``off``), then the button.
Nothing changes by itself: pressing the button runs ``%%heal`` on the failing cell's
source through the controller (``controller.CellRun``), inside the button's own area; on
success the panel offers **Replace this cell** for the failing cell. When the
instructor's policy allows hints only, the button reads **Give me a hint** and gives one
(teaching mode); every press asks the policy first.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable

import ipywidgets as widgets
from IPython.display import display

from . import controller
from .cells import FrontCells
from .policy import Gate
from ..errors import SelfHealError
from ..render.html import message_html

BUTTON_TEXT = "Ask the agent to fix this"
HINT_TEXT = "Give me a hint"


def _failing_source(shell: Any) -> str:
    raw = shell.history_manager.input_hist_raw
    return raw[-1] if raw else ""


def _let_trio_go_first(shell: Any) -> None:
    """trio installs its own IPython exception handler when it is first imported, and
    warns (red, under the next failing cell) if one is installed already. Import it
    now, while there is none, so it installs its handler and ours chains to it."""
    if shell.custom_exceptions == () and "trio" not in sys.modules and importlib.util.find_spec("trio"):
        import trio  # noqa: F401


class Autoheal:
    """The installed hook; :meth:`remove` puts the previous handler back."""

    def __init__(self, shell: Any, heal_job: Callable[[str, str], tuple], finished: Callable[[Any], None], *,
                 gate: Gate, give_hint: Callable[[str], None]) -> None:
        self.shell = shell
        self.gate = gate
        self.give_hint = give_hint
        self.heal_job = heal_job
        self.finished = finished
        _let_trio_go_first(shell)
        self.previous = (shell.custom_exceptions, shell.CustomTB)
        handled = tuple(dict.fromkeys((*shell.custom_exceptions, Exception)))
        shell.set_custom_exc(handled, self._handler)
        self._installed = shell.CustomTB

    def remove(self) -> None:
        if self.shell.CustomTB is self._installed:  # nobody replaced us meanwhile
            self.shell.custom_exceptions, self.shell.CustomTB = self.previous

    def _handler(self, shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: Any = None) -> Any:
        types, previous = self.previous
        if types and isinstance(evalue, types):
            previous(etype, evalue, tb, tb_offset=tb_offset)
        else:
            shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
        source = _failing_source(shell)
        if isinstance(evalue, Exception) and source.strip() and not source.lstrip().startswith(
                ("%%agent", "%%heal", "%%hint")):
            try:
                self._offer(source, FrontCells(shell))  # the failing cell, for Replace
            except Exception:  # never hide the user's own error behind ours
                pass
        return None

    def _offer(self, source: str, cells: FrontCells) -> None:
        hints_only = self.gate.policy.mode == "hints"
        label = HINT_TEXT if hints_only else BUTTON_TEXT
        button = widgets.Button(description=label, icon="lightbulb-o" if hints_only else "medkit",
                                button_style="warning")
        out = widgets.Output()

        def ask(_b: Any) -> None:
            button.disabled = True
            with out:
                try:
                    if hints_only:
                        self.give_hint(source)
                        return
                    self.gate.admit("autoheal")
                    settings, task = self.heal_job("", source)
                    self.finished(controller.CellRun(self.shell, settings, task, cells=cells).run_sync())
                except (SelfHealError, Exception) as exc:  # UsageError too: a short line, not a traceback
                    display({"text/html": message_html(str(exc)), "text/plain": str(exc)}, raw=True)

        button.on_click(ask)
        box = widgets.VBox([button, out])
        bundle = box._repr_mimebundle_()
        bundle["text/plain"] = f"[{label}: %agent_autoheal is on]"
        display(bundle, raw=True)
