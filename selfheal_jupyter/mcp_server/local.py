"""``selfheal mcp`` on this machine: one asker (the user whose agent started it, or who
reaches its loopback port), this process's policy (``SELFHEAL_POLICY``, read once, as a
kernel reads it), this machine's Docker engine and the configured model."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings

from ..config import SelfHeal
from ..errors import BadInput
from ..factory import shared_sandbox
from ..service.queue import FairQueue
from ..teaching.policy import kernel_gate
from . import admission, work
from .server import HealRequest, Principal, Records, stopping_when_gone

ASKER = "local"


class LocalHost:
    """The tools' work on this machine: ``SelfHeal.service_runs`` calls at once, the next
    ``service_waiting`` in the order they came, any further one refused."""

    def __init__(self, settings: SelfHeal) -> None:
        self.settings = settings
        self.gate = kernel_gate()
        self.queue = FairQueue(settings.service_runs, 1)
        self.calls = itertools.count()
        self.me = Principal(
            name=ASKER,
            policy=self.gate.policy,
            bench=work.Workbench(
                settings, sandbox=lambda: shared_sandbox(settings), heal_sandbox=work.own_sandbox(settings)
            ),
            records=Records(),
            gate=self.gate,
        )

    async def principal(self, ctx: Context) -> Principal:
        return self.me

    @contextlib.asynccontextmanager
    async def turn(self, principal: Principal) -> AsyncIterator[None]:
        if self.queue.queued >= self.settings.service_waiting:
            raise BadInput(
                f"This server already has {self.queue.queued} calls waiting beside the "
                f"{self.queue.slots} it works on: let them finish (or cancel one), then call again."
            )
        ticket = self.queue.submit(f"{principal.name}-{next(self.calls)}")  # one asker: calls in turn
        try:
            await ticket.started.wait()
            yield
        finally:
            self.queue.release(ticket)

    def heal(self, principal: Principal, request: HealRequest, emit: work.Emit, cancel: threading.Event) -> Any:
        admission.admit("heal", principal.policy)  # the policy first: a closed tool reads nothing
        settings = work.heal_settings(self.settings, request.max_iterations)
        task = work.heal_task(settings, request.code, request.tests, request.task)
        admission.admit("heal", principal.policy, principal.gate)  # counted once the task was admitted
        return work.heal(principal.bench, settings, task, emit, cancel)


def serve_http(server: MCPServer, host: str, port: int, path: str) -> None:
    """``server`` over streamable HTTP at ``http://host:port/path`` until SIGTERM or Ctrl-C,
    a call whose client went away stopped (:func:`~.server.stopping_when_gone`)."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, transport_security=rebinding_guard(host))
    uvicorn.run(stopping_when_gone(app), host=host, port=port, log_level="warning")


def rebinding_guard(host: str) -> TransportSecuritySettings:
    """Requests must name this server as it listens (``host``) or by a loopback name, and a
    browser's ``Origin`` must be one of those. The SDK guards only 127.0.0.1, localhost and
    ::1 this way: on 127.0.0.2, or 0.0.0.0 (loopback too), a page in the user's browser
    whose name was rebound to this machine could drive the tools with the user's model."""
    names = list(dict.fromkeys([f"[{host}]" if ":" in host else host, "127.0.0.1", "localhost", "[::1]"]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )
