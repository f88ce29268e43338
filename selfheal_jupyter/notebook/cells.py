"""Edit notebook cells on the user's click: insert code below a cell, replace a cell.

A kernel cannot change a notebook by itself once a cell has ended (a
``set_next_input`` payload only travels with an execute reply). The labextension
shipped in the wheel (``share/jupyter/labextensions/selfheal-jupyter``, plain
JavaScript, no build step; JupyterLab 4 and Notebook 7) registers the comm target
``selfheal-jupyter`` on every notebook's kernel. When a run starts, the kernel opens
that comm with ``{"action": "hello"}``; the extension answers, and from then on the
panel's **Insert below** / **Replace this cell** send ``{"action", "cell_id", "code"}``
and the extension edits the cell with that id (the id the front end sent with the
execute request), whichever cell is active by then. A replace may also ask it to drop
the cell's error outputs (the traceback of the code just replaced) and, for **Accept
and run**, to run the cell; it runs nothing otherwise. When a run ends,
``{"action": "reveal"}`` asks it to scroll the run's decision into view, which it does
only while the user is at that cell or the one below.

Where nothing answers (nbclient, other clients, the extension not installed), the
caller falls back to ``set_next_input`` at the end of the cell and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

TARGET = "selfheal-jupyter"

Done = Callable[[bool, str], None]
"""Called with (ok, reason) once the front end has applied (or refused) a request."""


def current_cell_id(shell: Any) -> str:
    """The id of the notebook cell being executed ("" outside a notebook front end)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return ""
    try:
        parent = kernel.get_parent()
    except Exception:
        return ""
    metadata = (parent or {}).get("metadata") or {}
    return str(metadata.get("cellId") or "")


class FrontCells:
    """The front end's cell commands for one notebook cell (see the module docstring)."""

    def __init__(self, shell: Any, cell_id: str | None = None) -> None:
        self.shell = shell
        self.cell_id = current_cell_id(shell) if cell_id is None else cell_id
        self.ready = False
        """True once the labextension answered: insert / replace will work."""
        self.asking = False
        """True while the hello is out and neither answered nor refused."""
        self.asked_at = 0.0
        self._comm: Any = None
        self._pending: dict[str, Done] = {}
        self._open()

    def _open(self) -> None:
        if getattr(self.shell, "kernel", None) is None or not self.cell_id:
            return
        try:
            from comm import create_comm

            self._comm = create_comm(target_name=TARGET, data={"action": "hello", "cell_id": self.cell_id})
        except Exception:
            self._comm = None
            return
        self.asking = True
        self.asked_at = time.monotonic()
        self._comm.on_msg(self._on_msg)
        self._comm.on_close(self._on_close)

    def _on_msg(self, msg: dict) -> None:
        data = msg.get("content", {}).get("data") or {}
        if data.get("action") == "hello":
            self.ready = bool(data.get("ok"))
            self.asking = False
            return
        done = self._pending.pop(str(data.get("request")), None)
        if done is not None:
            done(bool(data.get("ok")), str(data.get("reason") or ""))

    def _on_close(self, _msg: dict) -> None:
        """A front end without the target closes the comm at once."""
        self.ready = self.asking = False
        self._comm = None

    async def answered(self, timeout_s: float) -> bool:
        """Wait (in an awaiting cell, where comm messages are dispatched) until the
        hello is answered or refused, at most until ``timeout_s`` after it was sent
        (a front end answers in milliseconds; where none is attached, e.g. nbclient,
        a run longer than that does not wait at all); True if it is ready."""
        deadline = self.asked_at + timeout_s
        while self.asking and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return self.ready

    def send(self, action: str, code: str, done: Done, **options: bool) -> bool:
        """Ask the front end to ``insert`` ``code`` below the cell or ``replace`` the
        cell's source with it; False when no front end can (nothing was sent).
        ``options`` of a replace: ``clear_errors`` (the cell's error outputs go: they
        are the old code's), ``run`` (the front end runs the cell afterwards)."""
        if not self.ready or self._comm is None:
            return False
        request = uuid.uuid4().hex
        self._pending[request] = done
        self._comm.send({"action": action, "cell_id": self.cell_id, "code": code, "request": request, **options})
        return True

    def reveal(self) -> bool:
        """Ask the front end to bring the run's decision into view, if the user is still
        at this cell or the one below it (never pulls the view from elsewhere)."""
        return self.send("reveal", "", lambda _ok, _reason: None)

    def close(self) -> None:
        if self._comm is not None:
            with contextlib.suppress(Exception):
                self._comm.close()
            self._comm = None
