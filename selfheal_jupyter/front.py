"""Run one loop for a notebook cell without blocking the widgets.

The loop runs in a worker thread; its events are forwarded to the kernel's main
thread, where the renderer updates the outputs (comm and display messages need the
cell's parent header). Two ways to wait:

* ``run_async`` (in a kernel: the magic's cell is turned into an awaited call, see
  ``magics.py``). While the cell awaits, ipykernel (≥ 7) dispatches widget comm
  messages, so **Stop** and **Insert** work, and a kernel interrupt cancels the
  awaiting task.
* ``run_sync`` (terminal IPython, an in-process shell, ``%autoawait off``): the main
  thread waits on a queue; Ctrl-C / a kernel interrupt raises ``KeyboardInterrupt``
  there.

Either way an interrupt sets the cancel event, the loop kills the sandbox run, and
the cell still ends with the run's record and a "stopped" summary.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .events import RunFinished, RunStarted
from .model import Run, Task

TICK_S = 0.1
"""How often an awaiting cell wakes up (bounds how late a kernel interrupt is seen)."""

DRAIN_TIMEOUT_S = 30.0
"""After a cancel, how long to wait for the loop to wind down before giving up on it."""


@dataclass
class _Finished:
    run: Run | None
    error: BaseException | None


class CellRun:
    """One run of ``loop`` on ``task``, observed by ``renderer``."""

    def __init__(self, loop: Any, task: Task, renderer: Any) -> None:
        self.loop = loop
        self.task = task
        self.renderer = renderer
        self.cancel = threading.Event()
        self.interrupted = False
        self.cells: Any = None
        """The front end's cell commands (``cells.FrontCells``) for Insert / Replace."""
        self._started = False
        self._finished = False
        self._run: Run | None = None

    # ------------------------------------------------------------------ worker
    def _start_worker(self, emit: Callable[[Any], None]) -> threading.Thread:
        def work() -> None:
            run: Run | None = None
            error: BaseException | None = None
            try:
                run = self.loop.run(self.task, on_event=emit, cancel=self.cancel)
            except BaseException as exc:  # surfaced on the main thread
                error = exc
            emit(_Finished(run, error))

        thread = threading.Thread(target=work, name="selfheal-loop", daemon=True)
        thread.start()
        return thread

    def _deliver(self, item: Any) -> _Finished | None:
        """Render one event on the main thread; return the end marker when it comes."""
        if isinstance(item, _Finished):
            return item
        if isinstance(item, RunStarted):
            self._started = True
            self.renderer.start(item.run)
        elif isinstance(item, RunFinished):
            self._finished = True
            return None  # rendered once, from the final record, in _finish
        self.renderer.handle(item)
        return None

    def _finish(self, end: _Finished) -> Run:
        if end.error is not None:
            raise end.error
        assert end.run is not None
        run = self._run = end.run
        if not self._started:
            self.renderer.start(run)
        self.renderer.finish(run)
        return run

    def stop(self) -> None:
        """Ask the loop to stop (the Stop button, an interrupt)."""
        self.cancel.set()

    @property
    def run(self) -> Run | None:
        """The finished run's record (None while it lasts)."""
        return self._run

    # ------------------------------------------------------------------ sync
    def run_sync(self) -> Run:
        events: queue.Queue[Any] = queue.Queue()
        thread = self._start_worker(events.put)
        while True:
            try:
                end = self._deliver(events.get(timeout=0.1))
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                self.interrupted = True
                self.stop()
                continue
            if end is not None:
                thread.join(timeout=DRAIN_TIMEOUT_S)
                return self._finish(end)

    # ------------------------------------------------------------------ async
    async def run_async(self) -> Run:
        aloop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()

        def emit(item: Any) -> None:
            aloop.call_soon_threadsafe(events.put_nowait, item)

        self._start_worker(emit)
        getter = asyncio.ensure_future(events.get())
        while True:
            try:
                # Wake up every tick: ipykernel's SIGINT handler schedules the cell's
                # cancellation with a plain call_soon, which only runs once the event
                # loop wakes up, so a long wait would delay an interrupt.
                done, _ = await asyncio.wait({getter}, timeout=TICK_S)
            except (asyncio.CancelledError, KeyboardInterrupt):
                # A kernel interrupt cancels the awaiting cell: stop the loop, keep
                # draining so the record and the "stopped" summary are still shown.
                self.interrupted = True
                self.stop()
                continue
            if not done:
                continue
            item = getter.result()
            getter = asyncio.ensure_future(events.get())
            end = self._deliver(item)
            if end is not None:
                getter.cancel()
                return self._finish(end)


def call_sync(func: Callable[[], Any], cancel: threading.Event) -> Any:
    """``func()`` in a worker thread; Ctrl-C sets ``cancel`` (func must honour it)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="selfheal-call", daemon=True)
    thread.start()
    while thread.is_alive():
        try:
            thread.join(TICK_S)
        except KeyboardInterrupt:
            cancel.set()
    if "error" in box:
        raise box["error"]
    return box.get("value")


async def call_async(func: Callable[[], Any], cancel: threading.Event) -> Any:
    """The awaited form of :func:`call_sync` (a kernel interrupt sets ``cancel``)."""
    future = asyncio.get_running_loop().run_in_executor(None, func)
    while True:
        try:
            done, _ = await asyncio.wait({future}, timeout=TICK_S)
        except (asyncio.CancelledError, KeyboardInterrupt):
            cancel.set()
            continue
        if done:
            return future.result()
