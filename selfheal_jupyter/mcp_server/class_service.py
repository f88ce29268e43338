"""The MCP tools behind the class service: ``/services/selfheal/mcp``, the hub's token as
bearer auth, so a student's agent gets exactly what the student may get.

Who asks is the hub's answer on the token (:class:`~selfheal_jupyter.service.auth.HubUserHandler`,
before a byte of the body is read), never anything the client says; the policy is the
service's for that student's groups (no notebook rule can widen it); a heal is admitted,
queued, run and logged by :class:`~selfheal_jupyter.service.runs.Service` as a kernel's
``%%heal`` is (quotas, the shared model, the run log), and every call takes a turn of the
service's fair queue, shared with the kernels' runs. Each student's run records are their
own. The SDK's streamable HTTP app (ASGI) is served from the service's own Tornado
server: one process, one port, the hub's proxy in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from tornado import web
from tornado.ioloop import IOLoop
from tornado.iostream import StreamClosedError

from ..errors import BadInput
from ..service.app import Counted, State, unready
from ..service.auth import HubUnreachable
from ..service.queue import QueueFull
from ..service.runs import Refused, Request
from ..service_client import wire
from ..teaching.policy import PolicyBlocked
from . import admission, work
from .server import HealRequest, Principal, Records, build_server, stopping_when_gone

USER_KEY = "selfheal.user"
"""Where the ASGI scope carries the hub user (put there by :class:`McpHandler`, after the hub vouched)."""
PATH = "mcp"
BODY_SLACK = 64 << 10
"""Bytes a call's body may have beside its code, tests and inputs (JSON framing, escapes)."""


class ServiceHost:
    """The tools' work in the class service, for the student the hub named."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.service = state.service
        self.settings = state.service.settings
        self.records: dict[str, Records] = {}

    async def principal(self, ctx: Context) -> Principal:
        request = ctx.request_context.request
        scope = getattr(request, "scope", None) or {}
        user, groups = scope.get(USER_KEY, (None, None))
        if not user:  # only McpHandler reaches the app, and it always says who
            raise BadInput("This MCP endpoint serves hub users only: send your hub token as bearer auth.")
        if not self.state.ready:
            raise BadInput(unready(self.state))
        service = self.service
        settings = self.settings
        bench = work.Workbench(
            settings,
            sandbox=lambda: service.sandbox,
            heal_sandbox=lambda: contextlib.nullcontext(service.sandbox),
            llm=lambda: service._llm(settings),
        )
        records = self.records.setdefault(user, Records())
        return Principal(name=user, policy=service.policy_for(groups, ""), bench=bench, records=records)

    @contextlib.asynccontextmanager
    async def turn(self, principal: Principal) -> AsyncIterator[None]:
        queue = self.state.queue
        try:
            ticket = queue.submit(principal.name)
        except QueueFull:
            raise BadInput(
                f"You already have {queue.waiting_per_user} requests waiting: let them finish "
                "(or cancel one), then call again."
            ) from None
        try:
            await ticket.started.wait()
            yield
        finally:
            queue.release(ticket)

    def heal(self, principal: Principal, request: HealRequest, emit: work.Emit, cancel: threading.Event) -> Any:
        admission.admit("heal", principal.policy)  # the mode, named as the tools name it
        task = work.heal_task(self.settings, request.code, request.tests, request.task)
        options = {"max_iterations": request.max_iterations} if request.max_iterations else {}
        ask = Request(entry="heal", task=task, notebook="", options=options)
        try:
            self.service.admit(principal.name, principal.policy, ask)  # quotas, as for a kernel's %%heal
        except Refused as refused:
            self.service.refused(principal.name, ask, principal.policy, refused)
            raise PolicyBlocked(str(refused)) from None
        ended: list[Any] = []

        def forward(event: Any) -> None:
            if isinstance(event, (wire.Finished, wire.Failed)):
                ended.append(event)
            else:
                emit(event)

        self.service.work(principal.name, ask, principal.policy, forward, cancel)
        end = ended[-1] if ended else wire.Failed("The run ended without a record.")
        if isinstance(end, wire.Failed):
            raise BadInput(end.message)
        return end.run


@web.stream_request_body
class McpHandler(Counted):
    """One MCP request, from a hub user: handed to the SDK's ASGI app. Counted with the
    student's other requests in flight, its body read only once the hub said who asks."""

    def initialize(self, state: Any, app: Any = None, max_body: int = 0) -> None:  # type: ignore[override]
        super().initialize(state)
        self.asgi = app
        self.max_body = max_body
        self.gone = asyncio.Event()

    def body_limit(self) -> int:
        return self.max_body

    async def prepare(self) -> None:
        await super().prepare()
        if self._finished:
            return
        try:
            self.groups_of = await self.groups()
        except HubUnreachable:
            self.fail(503, "hub", "The selfheal service cannot ask JupyterHub for your groups: try again in a minute.")

    def on_connection_close(self) -> None:
        self.gone.set()  # the client went away: the SDK cancels its call, the run stops
        super().on_connection_close()

    async def post(self) -> None:
        await self._serve()

    async def get(self) -> None:
        await self._serve()

    async def delete(self) -> None:
        await self._serve()

    async def _serve(self) -> None:
        await self.holding(self._asgi())

    async def _asgi(self) -> None:
        request = self.request
        body, self.body = b"".join(self.body or ()), None
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": "/" + PATH,
            "raw_path": ("/" + PATH).encode(),
            "root_path": "",
            "query_string": request.query.encode("latin-1"),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.get_all()],
            "client": (request.remote_ip or "", 0),
            "server": ("127.0.0.1", 0),
            USER_KEY: (self.hub_user["name"], set(self.groups_of)),
            "state": {},
        }
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if self.gone.is_set():
                return
            if message["type"] == "http.response.start":
                self.set_status(message["status"])
                self.clear_header("Content-Type")
                for key, value in message.get("headers", []):
                    self.add_header(key.decode("latin-1"), value.decode("latin-1"))
            elif message["type"] == "http.response.body":
                self.write(message.get("body", b""))
                try:
                    await self.flush()
                except StreamClosedError:
                    self.gone.set()

        await self.asgi(scope, receive, send)
        if not self._finished and not self.gone.is_set():
            self.finish()


def mount(app: web.Application, prefix: str) -> None:
    """Serve the MCP tools at ``{prefix}mcp`` of the service's ``app`` (its state holds the service)."""
    state: State = app.settings["selfheal_state"]
    server = build_server(ServiceHost(state))
    # Auth is the hub's bearer token, never a cookie: a page another site serves cannot use
    # it, so the Host check against DNS rebinding has nothing to guard (and the hub's proxy
    # forwards the public host name).
    asgi = stopping_when_gone(
        server.streamable_http_app(
            streamable_http_path="/" + PATH,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
    )
    settings = state.service.settings
    max_body = 4 * settings.max_code_bytes + BODY_SLACK if settings.max_code_bytes else 64 << 20
    route = "/" + prefix.strip("/") + "/" + PATH
    app.add_handlers(r".*", [(route, McpHandler, {"state": state, "app": asgi, "max_body": max_body})])

    async def run_sessions() -> None:
        async with server.session_manager.run():
            await asyncio.Event().wait()

    IOLoop.current().spawn_callback(run_sessions)
