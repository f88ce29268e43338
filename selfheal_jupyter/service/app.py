"""The service's web application: its API under the hub's prefix (``/services/selfheal/``).

``POST api/runs`` takes a request (:mod:`.wire`), asks the policy, queues it fairly
(:mod:`.queue`) and streams the run's events back as JSON lines while it lasts — the
queue position while it waits, an empty line every few seconds so that both ends can
tell a dead connection. A client that goes away cancels its run (its sandbox run is
killed, its containers go); ``POST api/runs/ID/cancel`` is the Stop button.
``GET api/packages`` (the sandbox image's packages, for the kernel's context), ``GET
api/log`` (instructors: the run log), ``GET api/health`` (no auth: is it up).
The instructor's page (:mod:`.pages`, hub login) is served under the same prefix.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError

from ..errors import BadInput
from ..loop.events import Waiting
from ..loop.task_admission import check_shape
from ..service_client import wire
from . import pages
from .auth import HubUnreachable, HubUserHandler, hub_auth
from .connections import Connections
from .queue import FairQueue, QueueFull
from .runs import Refused, Request, Service

HEARTBEAT_S = 5.0
REQUEST_MAX_BYTES = 64 << 10
"""The largest body the server reads before it knows who asks: every request but a run's
(whose body waits for the hub) is read whole before its handler runs, so a student's
connections that each send this much hold at most :data:`.connections.MOST` times it.
The instructor's forms are a few kilobytes; the API's other requests have no body."""
REFUSED_BODY_MAX_BYTES = 16 << 20
"""The largest body of a request refused as too large that is still read (and dropped) so
that its client gets the refusal; a larger one's connection is closed."""
HEADER_TIMEOUT_S = 120.0
"""A connection that sends no complete request head for this long is closed."""
BODY_TIMEOUT_S = 300.0
"""The longest a request's body may take to arrive (a run's copies, through the hub's proxy)."""
_END = object()


@dataclass
class State:
    service: Service
    queue: FairQueue
    hub_auth: Any
    instructors: str
    runs: dict[str, tuple[str, threading.Event]] = field(default_factory=dict)
    going: dict[str, int] = field(default_factory=dict)
    """Each student's run requests in flight (uploading, waiting or running)."""
    max_body: int = REQUEST_MAX_BYTES
    groups_cache: dict[str, tuple[float, set[str]]] = field(default_factory=dict)
    packages: dict[str, str] | None = None
    connections: Connections | None = None
    """The server's connections (:mod:`.connections`); None when no :class:`GuardedServer` serves the app."""
    ready: bool = False
    problem: str = ""
    """Why the service cannot run (the engine, the endpoint), said to every request."""


async def warm_up(state: State) -> None:
    """Start the service's parts after it listens; any failure is kept and said."""
    try:
        await asyncio.to_thread(state.service.start)
        state.ready = True
    except Exception as exc:  # SelfHealError and anything the engine raises
        state.problem = str(exc) or type(exc).__name__


class Health(web.RequestHandler):
    def initialize(self, state: State) -> None:
        self.state = state

    def get(self) -> None:
        state = self.state
        if not state.ready:
            self.set_status(503)
        self.finish({"ok": state.ready, "problem": state.problem})


def unready(state: State) -> str:
    """What a student is told while the service cannot serve (what went wrong, with its
    paths on the server, is on the instructor's page)."""
    if state.problem:
        return "The selfheal service cannot run now (its sandbox or its model did not start). Tell your instructor."
    return "The selfheal service is starting (its sandbox and model): try again in a moment."


class Packages(HubUserHandler):
    async def get(self) -> None:
        state = self.state
        if not state.ready:
            self.fail(503, "error", unready(state))
            return
        if state.packages is None:
            from ..sandbox.image import image_packages

            sandbox = state.service.sandbox
            state.packages = await asyncio.to_thread(image_packages, sandbox.client, sandbox.ref)
        self.finish({"packages": state.packages})


class Log(HubUserHandler):
    async def get(self) -> None:
        try:
            groups = await self.groups()
        except HubUnreachable:
            self.fail(503, "hub", "JupyterHub cannot be asked for your groups now; try again in a minute.")
            return
        if not self.is_instructor(groups):
            self.fail(403, "auth", "Only instructors (hub admins, or the instructors' group) may read the run log.")
            return
        self.finish({"entries": self.state.service.log.entries()})


class Cancel(HubUserHandler):
    def post(self, run_id: str) -> None:
        found = self.state.runs.get(run_id)
        if found is None or found[0] != self.hub_user["name"]:
            self.fail(404, "error", "No such run of yours is going on.")
            return
        found[1].set()
        self.finish({"cancelled": run_id})


@web.stream_request_body
class Counted(HubUserHandler):
    """A request with a body from a student. Its body is read only once the hub said whose
    token it is and that student has fewer than ``service_waiting`` + 1 requests in flight
    (a run's, an MCP call's), so no stranger's body and no more than that many of one
    student's are ever held; at most :meth:`body_limit` bytes each."""

    body: list[bytes] | None = None
    counted = ""
    too_large = ""
    posting = False

    def body_limit(self) -> int:
        return int(self.state.max_body)

    def most_going(self) -> int:
        """The most of its student's requests in flight this one may join: the runs the
        service works on and lets wait for them."""
        return int(self.state.queue.waiting_per_user) + 1

    def holds_a_place(self) -> bool:
        """Whether this request counts among its student's requests in flight (one without
        a body to hold may not, its body limit then 0)."""
        return True

    async def prepare(self) -> None:
        await super().prepare()
        if self._finished:
            return
        if not self.holds_a_place():
            self.request.connection.set_max_body_size(0)  # type: ignore[union-attr]
            return
        state, user = self.state, self.hub_user["name"]
        going = state.going.get(user, 0)
        if going >= self.most_going():
            self.fail(
                429,
                "quota",
                f"You already have {going} requests going on: let them finish (or stop one), then ask again.",
            )
            return
        state.going[user], self.counted = going + 1, user
        limit = self.body_limit()
        try:
            declared = int(self.request.headers.get("Content-Length") or 0)
        except ValueError:
            declared = 0  # tornado refuses it as it reads the body
        if declared > limit:
            # Refused once its body was read to its end and dropped, never held: refused now,
            # the connection would close mid-body, and the hub's proxy answer a page of its own.
            self.request.connection.set_max_body_size(min(declared, REFUSED_BODY_MAX_BYTES))  # type: ignore[union-attr]
            self.too_large = (
                f"This request is {declared:,} bytes, more than the selfheal service takes ({limit:,}): "
                "send a shorter program, or fewer or smaller inputs."
            )
            return  # counted all the same: its connection is held until its body ended
        self.request.connection.set_max_body_size(limit)  # type: ignore[union-attr]
        self.body = []

    def data_received(self, chunk: bytes) -> None:
        if self.body is not None:
            self.body.append(chunk)

    def _leave(self) -> None:
        user, self.counted = self.counted, ""
        if user:
            left = self.state.going.get(user, 1) - 1
            if left > 0:
                self.state.going[user] = left
            else:
                self.state.going.pop(user, None)

    def on_finish(self) -> None:
        self._leave()
        super().on_finish()

    def on_connection_close(self) -> None:
        if not self.posting:
            self._leave()  # it went away while sending its body

    async def holding(self, work: Callable[[], Awaitable[None]]) -> None:
        """Do the request's ``work``, counted in flight until it ends (or refuse it, too large)."""
        if self.too_large:
            self.fail(413, "too_large", self.too_large)
            return
        self.posting = True
        try:
            await work()
        finally:
            self._leave()


@web.stream_request_body
class Runs(Counted):
    """A run's request (its body: the copies, up to ``max_body``)."""

    cancel: threading.Event | None = None

    def on_connection_close(self) -> None:
        if self.cancel is not None:
            self.cancel.set()  # the kernel went away: its run stops, its containers go
        super().on_connection_close()

    async def send(self, event: Any) -> None:
        self.write(wire.event_line(event))
        await self.flush()

    async def post(self) -> None:
        await self.holding(self._post)

    async def _post(self) -> None:
        state = self.state
        service = state.service
        user = self.hub_user["name"]
        body, self.body = b"".join(self.body or ()), None
        if not state.ready:
            self.fail(503, "error", unready(state))
            return
        try:
            request = Request.parse(json.loads(body))
        except RecursionError:
            self.fail(400, "error", "The selfheal service cannot read this request (it is nested too deeply).")
            return
        except (ValueError, wire.WireError) as exc:
            self.fail(400, "error", f"The selfheal service cannot read this request ({exc}).")
            return
        del body
        try:
            # before the policy is asked: a refusal's log line and a hint session hold the cell
            check_shape(request.task, service.settings.max_code_bytes)
        except BadInput as exc:
            self.fail(400, "error", str(exc))
            return
        try:
            groups = await self.groups()
        except HubUnreachable:
            self.fail(503, "hub", "The selfheal service cannot ask JupyterHub for your groups: try again in a minute.")
            return
        policy = service.policy_for(groups, request.notebook)
        try:
            service.admit(user, policy, request)
            ticket = state.queue.submit(user)
        except Refused as refused:
            service.refused(user, request, policy, refused)
            self.fail(403, refused.kind, str(refused))
            return
        except QueueFull:
            self.fail(
                429,
                "quota",
                f"You already have {state.queue.waiting_per_user} runs waiting: let them finish (or stop "
                "one), then ask again.",
            )
            return
        run_id = secrets.token_hex(8)
        cancel = self.cancel = threading.Event()
        state.runs[run_id] = (user, cancel)
        self.set_header("Content-Type", "application/x-ndjson")
        self.set_header("Cache-Control", "no-cache")
        released = False
        try:
            await self.send(wire.Accepted(run_id))
            while not ticket.started.is_set():
                if cancel.is_set():
                    await self.send(wire.Failed("Stopped before it started.", kind="cancelled"))
                    return
                await self.send(Waiting(state.queue.ahead(ticket)))
                ticket.changed.clear()
                await _first(ticket.started, ticket.changed, timeout=HEARTBEAT_S)
            policy = service.policy_for(groups, request.notebook)  # it may have changed meanwhile
            try:
                service.admit(user, policy, request)
            except Refused as refused:
                service.refused(user, request, policy, refused)
                await self.send(wire.Failed(str(refused), kind=refused.kind))
                return
            released = True  # from here the worker thread releases the slot when it ends
            await self._serve(ticket, user, request, policy, cancel)
        except StreamClosedError:
            cancel.set()
        finally:
            if not released:
                state.queue.release(ticket)
            if state.runs.get(run_id, (None, None))[1] is cancel:
                del state.runs[run_id]

    async def _serve(self, ticket: Any, user: str, request: Request, policy: Any, cancel: threading.Event) -> None:
        state = self.state
        aloop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()

        def emit(event: Any) -> None:
            aloop.call_soon_threadsafe(events.put_nowait, event)

        def target() -> None:
            try:
                state.service.work(user, request, policy, emit, cancel)
            finally:
                aloop.call_soon_threadsafe(state.queue.release, ticket)
                aloop.call_soon_threadsafe(events.put_nowait, _END)

        threading.Thread(target=target, name=f"selfheal-run-{user}", daemon=True).start()
        while True:
            try:
                event = await asyncio.wait_for(events.get(), HEARTBEAT_S)
            except asyncio.TimeoutError:
                self.write(b"\n")
                await self.flush()
                continue
            if event is _END:
                return
            await self.send(event)


async def _first(*flags: asyncio.Event, timeout: float) -> None:
    waits = [asyncio.ensure_future(f.wait()) for f in flags]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def make_app(service: Service, *, prefix: str, instructors: str) -> web.Application:
    prefix = "/" + prefix.strip("/") + "/"
    state = State(
        service=service,
        queue=FairQueue(service.settings.service_runs, service.settings.service_waiting),
        hub_auth=hub_auth(),
        instructors=instructors,
    )
    args = {"state": state}
    app = web.Application(
        [
            (prefix + "api/health", Health, args),
            (prefix + "api/packages", Packages, args),
            (prefix + "api/runs", Runs, args),
            (prefix + r"api/runs/([0-9a-f]+)/cancel", Cancel, args),
            (prefix + "api/log", Log, args),
            *pages.routes(prefix, state, service.policy_store()),
        ],
        **pages.settings(prefix),
    )
    state.max_body = max_body_bytes(service)
    app.settings["selfheal_state"] = state
    return app


def max_body_bytes(service: Service) -> int:
    """The largest request: the copies travel as base64 (4/3 of their size)."""
    return 2 * service.settings.context_max_bytes + (16 << 20)
