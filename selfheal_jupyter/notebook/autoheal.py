"""``%agent_autoheal on``: an "Ask the agent to fix this" button on a failing cell.

IPython's custom exception hook shows the button first, then the traceback with the
frames inside libraries folded into one line (``%tb`` shows it whole); a handler that
was installed before ours (which we chain to and restore on ``off``) shows its own.
Nothing changes by itself: pressing the button (it then reads "Fixing…" and cannot be
pressed again) runs ``%%heal`` on the failing cell's source through the controller
(``controller.CellRun``), inside the button's own area; on success the decision offers
**Accept (Replace this cell)** for the failing cell. When the instructor's policy allows
hints only, the button reads **Give me a hint** ("Finding a hint…" once pressed) and
gives one (teaching mode), and is not offered when no hint is left for the cell; every
press asks the policy first.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from ..errors import SelfHealError
from ..render.html import message_html
from ..teaching.policy import Gate
from . import controller
from .cells import FrontCells

BUTTON_TEXT = "Ask the agent to fix this"
BUSY_TEXT = "Fixing…"
HINT_TEXT = "Give me a hint"
HINT_BUSY_TEXT = "Finding a hint…"


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs.update(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: "")()
    if user:
        dirs.add(user)
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _in_library(frame: types.FrameType, libraries: tuple[str, ...]) -> bool:
    name = frame.f_code.co_filename
    return name.startswith("<frozen") or os.path.realpath(name).startswith(libraries)


def folded_traceback(
    shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: int | None = None
) -> list[str] | None:
    """IPython's traceback of the user's own frames only, a line saying how many frames
    inside which libraries were folded, and the error; None when nothing would fold
    (every frame is the user's and no earlier exception is chained)."""
    libraries = _library_dirs()
    for _ in range(tb_offset if tb_offset is not None else 1):  # IPython's own frame(s)
        if tb is not None:
            tb = tb.tb_next
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    mine = [e for e in entries if not _in_library(e.tb_frame, libraries)]
    chained = evalue.__cause__ is not None or (evalue.__context__ is not None and not evalue.__suppress_context__)
    folded = len(entries) - len(mine)
    if not mine or (not folded and not chained):
        return None
    rebuilt = None
    for e in reversed(mine):
        rebuilt = types.TracebackType(rebuilt, e.tb_frame, e.tb_lasti, e.tb_lineno)
    try:
        alone = copy.copy(evalue)  # the error without its chain, for the view only
        alone.__cause__ = alone.__context__ = None
        stb = shell.InteractiveTB.structured_traceback(etype, alone, rebuilt, tb_offset=0)
    except Exception:
        return None
    where = sorted({(e.tb_frame.f_globals.get("__name__") or "?").split(".")[0] for e in entries if e not in mine})
    what = f"{folded} frame{'' if folded == 1 else 's'} inside {', '.join(where)}" if folded else ""
    chain = "the exception it came from" if chained else ""
    note = " and ".join(x for x in (what, chain) if x)
    return [*stb[:-1], f"\x1b[2m… {note} folded: %tb shows the whole traceback\x1b[0m", stb[-1]]


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

    def __init__(
        self,
        shell: Any,
        heal_job: Callable[[str, str], tuple],
        finished: Callable[[Any], None],
        *,
        gate: Gate,
        give_hint: Callable[[str], None],
        can_hint: Callable[[str], bool] = lambda _source: True,
    ) -> None:
        self.shell = shell
        self.gate = gate
        self.give_hint = give_hint
        self.can_hint = can_hint
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
        types_, previous = self.previous
        theirs = bool(types_) and isinstance(evalue, types_)  # the earlier handler's error
        if theirs:
            previous(etype, evalue, tb, tb_offset=tb_offset)
        source = _failing_source(shell)
        if (
            isinstance(evalue, Exception)
            and source.strip()
            and not source.lstrip().startswith(("%%agent", "%%heal", "%%hint"))
        ):
            try:
                self._offer(source, FrontCells(shell))  # the failing cell, for Replace
            except Exception:  # never hide the user's own error behind ours
                pass
        if not theirs:
            self._show(shell, etype, evalue, tb, tb_offset)
        return None

    @staticmethod
    def _show(shell: Any, etype: type, evalue: BaseException, tb: Any, tb_offset: Any) -> None:
        """The traceback under the button, library frames folded (``%tb``: all of it)."""
        sys.last_type, sys.last_value, sys.last_traceback = etype, evalue, tb
        try:
            stb = folded_traceback(shell, etype, evalue, tb, tb_offset)
        except Exception:
            stb = None
        if stb is None:
            shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
        else:
            shell._showtraceback(etype, evalue, stb)

    def _offer(self, source: str, cells: FrontCells) -> None:
        hints_only = self.gate.policy.mode == "hints"
        if hints_only and not self.can_hint(source):
            return  # no hint is left for this cell: no button that cannot give one
        label = HINT_TEXT if hints_only else BUTTON_TEXT
        button = widgets.Button(
            description=label,
            icon="lightbulb-o" if hints_only else "medkit",
            button_style="warning",
            layout=widgets.Layout(width="auto", align_self="flex-start"),
        )  # the whole label
        out = widgets.Output()

        def ask(_b: Any) -> None:
            if button.disabled:
                return
            button.disabled = True
            button.description = HINT_BUSY_TEXT if hints_only else BUSY_TEXT
            with out:
                try:
                    if hints_only:
                        self.give_hint(source)
                        return
                    self.gate.admit("autoheal", run=False)
                    settings, task = self.heal_job("", source)
                    self.gate.admit("autoheal")  # counted once the cell was admitted
                    task.origin = "autoheal"
                    self.finished(
                        controller.CellRun(self.shell, settings, task, cells=cells, entry="autoheal").run_sync()
                    )
                except (SelfHealError, Exception) as exc:  # UsageError too: a short line, not a traceback
                    display({"text/html": message_html(str(exc)), "text/plain": str(exc)}, raw=True)
                finally:
                    button.layout.display = "none"  # the run's record and decision are below

        button.on_click(ask)
        box = widgets.VBox([button, out])
        bundle = box._repr_mimebundle_()
        bundle["text/plain"] = f"[{label}: %agent_autoheal is on]"
        display(bundle, raw=True)
