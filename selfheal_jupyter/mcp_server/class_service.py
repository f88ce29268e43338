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
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from mcp.server.transport_security import TransportSecuritySettings
from tornado import web
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
REFUSED = -32000
"""The JSON-RPC error code (implementation-defined server error) of a request the service refused."""
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

    def initialize(self, state: Any, apps: Any = None, max_body: int = 0) -> None:  # type: ignore[override]
        super().initialize(state)
        self.apps: StudentApps = apps
        self.max_body = max_body
        self.gone = asyncio.Event()

    def body_limit(self) -> int:
        return self.max_body

    def most_going(self) -> int:
        """The calls the service lets run or wait, and beside them one more request per
        session the student may hold (an agent's next opening, or the tool list it reads
        after a call, sent before its call's request has ended): a call beyond those is
        refused by the queue, saying so, and a call that ran never loses its follow-up."""
        return super().most_going() + self.apps.most

    def holds_a_place(self) -> bool:
        """Only a POST (a call, or a session's opening) holds one of the student's places in
        flight. A GET is a session's standing stream (one a session, sessions capped by
        ``service_mcp_sessions``) and a DELETE ends a session; neither has a body. Counted,
        their agents' streams took the places of the student's calls, whenever they opened."""
        return self.request.method == "POST"

    def fail(self, status: int, kind: str, message: str) -> None:
        """End the request with a JSON-RPC error (no id: its body was never read) beside the
        service's own two keys: an agent's MCP client shows an HTTP error's message only so."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        error = {"code": REFUSED, "message": message}
        self.finish(json.dumps({"jsonrpc": "2.0", "id": None, "error": error, "kind": kind, "message": message}))

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
        await self.holding(self._asgi)

    async def _asgi(self) -> None:
        request = self.request
        body, self.body = b"".join(self.body or ()), None
        user = self.hub_user["name"]
        asgi = await self.apps.of(user)
        opening = MCP_SESSION_ID_HEADER not in request.headers
        refused = False
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
            USER_KEY: (user, set(self.groups_of)),
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
            nonlocal refused
            if self.gone.is_set() or refused:
                return
            if message["type"] == "http.response.start":
                if opening and message["status"] == 503:  # the SDK's answer at the student's max_sessions
                    refused = True
                    self.fail(
                        429,
                        "quota",
                        f"You already hold {self.apps.most} MCP sessions with the selfheal service (agents "
                        "connected): quit one of your agents, or wait until one has been idle for "
                        f"{self.apps.idle_s // 60:.0f} minutes, then connect again.",
                    )
                    return
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

        await asgi(scope, receive, send)
        if not self._finished and not self.gone.is_set():
            self.finish()


class StudentApps:
    """Each student's own MCP sessions: the SDK's streamable HTTP app, with its session
    manager, per hub user. A session id is then only ever looked up among its owner's
    sessions (another student who learns it finds nothing there), and a student holds at
    most ``most`` sessions at once: the SDK's one limit would count the whole class's, so
    one student's agent opening sessions in a loop would shut every other student out
    for as long as idle sessions stay."""

    def __init__(self, server: MCPServer, most: int) -> None:
        self.server = server
        self.most = most
        self.idle_s = DEFAULT_SESSION_IDLE_TIMEOUT
        self.apps: dict[str, asyncio.Future[Any]] = {}
        self.running: set[asyncio.Task[None]] = set()

    async def of(self, user: str) -> Any:
        """``user``'s app, its session manager running (started on their first request)."""
        app = self.apps.get(user)
        if app is None:
            app = self.apps[user] = asyncio.ensure_future(self._start())
        return await asyncio.shield(app)

    async def _start(self) -> Any:
        # Auth is the hub's bearer token, never a cookie: a page another site serves cannot
        # use it, so the Host check against DNS rebinding has nothing to guard (and the hub's
        # proxy forwards the public host name).
        app = self.server.streamable_http_app(
            streamable_http_path="/" + PATH,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_sessions=self.most,
            session_idle_timeout=self.idle_s,
        )
        manager = self.server.session_manager  # the one that app was made with
        started = asyncio.Event()

        async def run() -> None:
            async with manager.run():
                started.set()
                await asyncio.Event().wait()

        task = asyncio.ensure_future(run())
        self.running.add(task)
        await started.wait()
        return stopping_when_gone(app)

    async def close(self) -> None:
        """End every session manager, and with it its sessions' calls. A call's worker
        thread (anyio's, not a daemon) stops only once the manager's task is done: left
        running, it kept the stopping service's process alive until the hub killed it."""
        for task in self.running:
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        self.running.clear()


def mount(app: web.Application, prefix: str) -> StudentApps:
    """Serve the MCP tools at ``{prefix}mcp`` of the service's ``app`` (its state holds the
    service); :meth:`StudentApps.close` them when the service stops."""
    state: State = app.settings["selfheal_state"]
    settings = state.service.settings
    apps = StudentApps(build_server(ServiceHost(state)), settings.service_mcp_sessions)
    max_body = 4 * settings.max_code_bytes + BODY_SLACK if settings.max_code_bytes else 64 << 20
    route = "/" + prefix.strip("/") + "/" + PATH
    app.add_handlers(r".*", [(route, McpHandler, {"state": state, "apps": apps, "max_body": max_body})])
    return apps
