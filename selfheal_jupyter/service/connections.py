"""The service's connections: nobody can hold them all.

On a hub whose students are Unix users, every student can open the service's port
directly, and each open connection holds one of the service's file descriptors — which
it also needs to ask the hub who a token is, to drive the engine and to reach the model.
A student holding thousands of idle connections (tried: 19,990 from one process) left
the service unable to ask the hub about anybody's token. So connections that carry no
request of a known hub user — still sending their head, an unauthenticated body,
keep-alive idle — are the ones to go: past :attr:`Connections.most`, each new connection
closes the oldest of them. A flood then only ever pushes out the flood, a request the
hub vouched for keeps its connection to its end, and ``RESERVED_FDS`` stay free for the
service's own work.
"""

from __future__ import annotations

import resource
from collections import OrderedDict
from typing import Any

from tornado.httpserver import HTTPServer
from tornado.iostream import IOStream

RESERVED_FDS = 256
"""File descriptors kept for the service's own work (hub, engine, model, log, threads)."""
MOST = 4096
"""Connections at most, whatever the file limit (often a million): each may hold a request
head and a body not yet vouched for (up to 64 KiB each), so this bounds their memory. A
class's kernels hold one connection per request going on, the hub's proxy a few more."""


class Connections:
    """The open connections in the order they became idle, and those a known user's
    request holds."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.idle: OrderedDict[IOStream, None] = OrderedDict()
        self.held: set[IOStream] = set()

    @classmethod
    def for_this_process(cls) -> Connections:
        """As many as the process's file limit allows (raised to its hard limit), less the
        reserve, and no more than :data:`MOST`."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
            except (ValueError, OSError):
                pass
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
        return cls(max(64, min(MOST, soft - RESERVED_FDS)))

    def accepted(self, stream: IOStream) -> None:
        if len(self.idle) + len(self.held) >= self.most:
            while self.idle:
                oldest, _ = self.idle.popitem(last=False)
                if not oldest.closed():
                    oldest.close()
                    break
        self.idle[stream] = None

    def closed(self, stream: IOStream) -> None:
        self.idle.pop(stream, None)
        self.held.discard(stream)

    def hold(self, stream: Any) -> None:
        """A hub user's request is on ``stream``: it stays until the request ends."""
        if stream in self.idle:
            del self.idle[stream]
            self.held.add(stream)

    def release(self, stream: Any) -> None:
        if stream in self.held:
            self.held.discard(stream)
            if not stream.closed():
                self.idle[stream] = None


def hold(handler: Any, state: Any) -> None:
    """``handler``'s request is a known hub user's: its connection stays until it ends."""
    connections = getattr(state, "connections", None)
    if connections is not None and handler.request.connection is not None:
        connections.hold(handler.request.connection.stream)


def release(handler: Any, state: Any) -> None:
    connections = getattr(state, "connections", None)
    if connections is not None and handler.request.connection is not None:
        connections.release(handler.request.connection.stream)


class GuardedServer(HTTPServer):
    """Tornado's HTTP server, telling :class:`Connections` of each connection it opens and
    closes. Tornado bounds how long a connection may take over its head
    (``idle_connection_timeout``) and body (``body_timeout``), not how many there are."""

    connections: Connections

    def initialize(self, *args: Any, connections: Connections, **kwargs: Any) -> None:  # type: ignore[override]
        self.connections = connections
        super().initialize(*args, **kwargs)

    def handle_stream(self, stream: IOStream, address: tuple) -> None:
        self.connections.accepted(stream)
        super().handle_stream(stream, address)

    def on_close(self, server_conn: object) -> None:
        self.connections.closed(server_conn.stream)  # type: ignore[attr-defined]
        super().on_close(server_conn)
