"""The service runner: every operation sent to the class service (``selfheal service``).

This process then needs no Docker engine, no model endpoint and no key; the events
that come back are handed out as a local loop's are (:mod:`~selfheal_jupyter.service_client`
holds the transport and the wire form). In hints mode only hints come back.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from ..config import SelfHeal
from ..errors import Cancelled, ServiceError
from ..loop.events import RunFinished, RunStarted, Waiting
from ..model import Plan, Run, Task
from ..service_client import wire
from ..service_client.client import ServiceClient
from ..teaching.policy import PolicyBlocked
from ..teaching.session import HintSession
from .base import Emit, HintTurn, Runner, Taken


def error_of(end: wire.Failed) -> Exception:
    """What a request that ended without a record raises here."""
    if end.kind in ("policy", "quota"):
        return PolicyBlocked(end.message)
    if end.kind == "cancelled":
        return Cancelled(end.message)
    return ServiceError(end.message)


class ServiceRunner(Runner):
    """Runs in the class service, as this kernel's hub user (raises ``ServiceError`` when
    the kernel has no hub token); ``client``: as another user (a benchmark's students)."""

    def __init__(self, settings: SelfHeal, client: ServiceClient | None = None) -> None:
        self.settings = settings
        self.client = client or ServiceClient.from_settings(settings)

    def full(self, task: Task, entry: str, emit: Emit, cancel: threading.Event) -> Run:
        def on_event(event: Any) -> None:
            if isinstance(event, RunStarted):
                emit(RunStarted(replace(event.run, task=task)))
            elif not isinstance(event, (wire.Finished, wire.Failed, RunFinished, wire.HintsFinished)):
                emit(event)  # the loop's events, and Waiting (the service's queue)

        end = self.client.stream(self.client.request(entry, task, self.settings), on_event, cancel)
        if isinstance(end, wire.Failed):
            if end.kind == "cancelled":
                return Run(task=task, outcome="cancelled", error=end.message)
            raise error_of(end)
        if not isinstance(end, wire.Finished):
            raise ServiceError("The selfheal service ended this run without its record; run the cell again.")
        return replace(end.run, task=task)  # the user's own task, with the values as they are here

    def plan(self, task: Task, emit: Emit, cancel: threading.Event) -> Plan:
        request = self.client.request("agent", task, self.settings, plan_only=True)
        end = self.client.stream(request, lambda _event: None, cancel)
        if isinstance(end, wire.Failed):
            raise error_of(end)
        if not isinstance(end, wire.Finished) or end.run.plan is None:
            raise ServiceError("The selfheal service ended this plan without one; run the cell again.")
        return end.run.plan

    def hint(
        self, task: Task, session: HintSession, emit: Emit, cancel: threading.Event, *, taken: Taken | None = None
    ) -> HintTurn:
        """The service decides and builds the hint (and counts it: ``taken`` is not
        called); its progress comes in words, and the cell's hints are mirrored into
        ``session`` (their lines counted from its offset, as the student's editor shows them;
        the cell known by the id its front end gives it, so they follow the student's edits)."""

        def progress(event: Any) -> None:
            if isinstance(event, Waiting):
                emit(f"Queued: {event.text()}")
            elif isinstance(event, wire.Working):
                emit(event.text)

        request = self.client.request(
            "hint", task, self.settings, line_offset=session.lines.offset, cell_id=session.cell_id
        )
        end = self.client.stream(request, progress, cancel)
        if isinstance(end, wire.Failed):
            raise error_of(end)
        if not isinstance(end, wire.HintsFinished):
            raise ServiceError("The selfheal service ended this hint without one; run the cell again.")
        record = replace(end.record, task=task) if end.record is not None else None
        session.hints = list(end.hints)
        new = end.hints[-1] if end.hints and not end.note else None
        return HintTurn(list(end.hints), end.total, end.more, end.note, record, new=new)

    def packages(self) -> dict[str, str] | None:
        return self.client.packages()
