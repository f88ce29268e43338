"""The pump: a blocking run in a worker thread, its events handed to the waiting thread.

Written once, with two adapters that wait for it (nbclient's pattern):
:meth:`Pump.run_sync` (a terminal, an in-process shell, the CLI, a widget callback) and
:meth:`Pump.run_async` (a kernel cell awaiting, so comm messages — Stop — are
dispatched meanwhile). Either way an interrupt (Ctrl-C, a kernel interrupt, the Stop
button) sets the cancel event, the runner stops the run, and the caller still gets
its record. Every front waits for a :class:`~selfheal_jupyter.runner.base.Runner`
this way.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

TICK_S = 0.1
"""How often a waiting adapter wakes up (bounds how late an interrupt is seen)."""


@dataclass
class _Finished:
    value: Any
    error: BaseException | None


class Pump(Generic[T]):
    """``work(emit, cancel)`` in a worker thread; each ``emit(event)`` is delivered to
    ``on_event`` on the thread that waits (comm and display messages need the cell's
    parent header, so they must be sent from there)."""

    def __init__(
        self,
        work: Callable[[Callable[[Any], None], threading.Event], T],
        on_event: Callable[[Any], None] | None = None,
        cancel: threading.Event | None = None,
        on_interrupt: Callable[[], None] | None = None,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.work = work
        self.on_event = on_event
        self.on_interrupt = on_interrupt
        self.on_tick = on_tick
        """Called on the waiting thread whenever a tick passed without an event."""
        self.cancel = cancel or threading.Event()
        self.interrupted = False

    def _start(self, put: Callable[[Any], None]) -> None:
        def target() -> None:
            value: Any = None
            error: BaseException | None = None
            try:
                value = self.work(put, self.cancel)
            except BaseException as exc:  # re-raised on the waiting thread
                error = exc
            put(_Finished(value, error))

        threading.Thread(target=target, name="selfheal-pump", daemon=True).start()

    def _deliver(self, item: Any) -> _Finished | None:
        if isinstance(item, _Finished):
            return item
        if self.on_event is not None:
            self.on_event(item)
        return None

    def _interrupt(self) -> None:
        self.interrupted = True
        self.cancel.set()
        if self.on_interrupt is not None:
            self.on_interrupt()

    def _tick(self) -> None:
        if self.on_tick is not None:
            self.on_tick()

    @staticmethod
    def _result(end: _Finished) -> T:
        if end.error is not None:
            raise end.error
        return end.value

    def run_sync(self) -> T:
        """Wait on this thread; Ctrl-C / a kernel interrupt cancels and keeps draining."""
        items: queue.Queue[Any] = queue.Queue()
        self._start(items.put)
        while True:
            try:
                try:
                    item = items.get(timeout=TICK_S)
                except queue.Empty:
                    self._tick()
                    continue
                end = self._deliver(item)
            except KeyboardInterrupt:
                self._interrupt()
                continue
            if end is not None:
                return self._result(end)

    async def run_async(self) -> T:
        """Await on the running loop (comm messages are dispatched meanwhile)."""
        aloop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            aloop.call_soon_threadsafe(items.put_nowait, item)

        self._start(put)
        getter = asyncio.ensure_future(items.get())
        while True:
            try:
                # Wake up every tick: ipykernel schedules an interrupt's cancellation
                # with a plain call_soon, which runs only once the loop wakes up.
                done, _ = await asyncio.wait({getter}, timeout=TICK_S)
            except (asyncio.CancelledError, KeyboardInterrupt):
                self._interrupt()
                continue
            if not done:
                self._tick()
                continue
            end = self._deliver(getter.result())
            if end is not None:
                return self._result(end)
            getter = asyncio.ensure_future(items.get())


@dataclass(frozen=True)
class Wait:
    """How a front waits for a pump: blocking this thread, or awaiting (a kernel cell,
    so comm messages are dispatched meanwhile). An operation is written once, as a
    coroutine that waits only through a ``Wait``; :func:`run_sync` runs it with
    :data:`BLOCKING`."""

    awaits: bool

    async def __call__(self, pump: Pump[T]) -> T:
        return await pump.run_async() if self.awaits else pump.run_sync()


BLOCKING = Wait(awaits=False)
AWAITING = Wait(awaits=True)


def run_sync(operation: Coroutine[Any, Any, T]) -> T:
    """The one-line sync adapter (nbclient's ``run_sync``): an operation run with
    :data:`BLOCKING` waits never suspends, so one step on this thread runs it to its end."""
    try:
        operation.send(None)
    except StopIteration as done:
        return done.value
    operation.close()
    raise RuntimeError("an operation run with BLOCKING waits suspended")
