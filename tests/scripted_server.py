"""A real OpenAI-compatible HTTP server on loopback that answers from a script.

Why: the loop must be tested end to end through the real ``openai`` client (its
streaming, usage, retries and error mapping), deterministically and offline. The
server speaks just enough of the API: ``POST /v1/chat/completions`` (plain JSON with
``usage``, or SSE ``chat.completion.chunk`` events ending with a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``) and ``GET /v1/models``.

Script items are consumed in order, one per request (planner and developer calls
alike). A :class:`Reply` with ``match`` is only served to a request whose messages
contain that substring, so a script can be robust to call order. A :class:`Fault`
makes the server misbehave on cue (an HTTP status, a hang, a stream cut mid-way).
When the script is exhausted the server answers HTTP 500 "script exhausted" so that
a test fails loudly.

As a process (for notebooks and the browser test)::

    python -m tests.scripted_server --script FILE.json [--port N] [--model NAME]

prints ``READY <base_url>`` on stdout and serves until killed. The JSON script is a
list whose items are strings, ``{"content": ..., "match": ...}`` or
``{"fault": "status", "status": 429, "times": 1}`` / ``{"fault": "hang", "seconds": 5}``
/ ``{"fault": "truncated", "content": "..."}`` / ``{"fault": "endless"}`` /
``{"fault": "not_json", "content": "<html>..."}`` / ``{"fault": "garbled", "content": "..."}``.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

_STATUS_BODIES: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("permission_error", None, "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("rate_limit_exceeded", "rate_limit_exceeded", "Rate limit reached; retry later."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The server is overloaded."),
}


def count_tokens(text: str) -> int:
    """A deterministic, roughly realistic token count (words and punctuation)."""
    return len(_TOKEN_RE.findall(text))


@dataclass
class Reply:
    """One assistant reply. ``match``: only for a request whose messages contain it."""

    content: str
    match: str | None = None
    chunk_delay_s: float | None = None
    """Pause between streamed chunks (to test cancel during streaming)."""
    finish_reason: str = "stop"
    """``length`` pretends the reply hit ``max_tokens``."""
    whole: bool = False
    """Answer a streaming request with one whole chat completion (a server that does
    not stream)."""
    hold: threading.Event | None = None
    """Say nothing until the test sets this event (the request has arrived: ``held`` is
    set): to see what a client shows while its model has not answered yet."""
    held: threading.Event = field(default_factory=threading.Event)
    """Set when a request that this reply answers arrived and is being held."""


@dataclass
class Fault:
    """Misbehave on cue.

    ``status``: answer HTTP ``status`` with an OpenAI-style error body.
    ``hang``: say nothing for ``seconds`` (longer than the client's timeout).
    ``truncated``: stream part of ``content`` then cut the connection (no final
    chunk, no ``[DONE]``); for a non-streaming request, a body shorter than announced.
    ``endless``: stream ``content`` chunk after chunk, never finishing, until the client
    hangs up (a server that ignores ``max_tokens``); ``chunk_delay_s`` between chunks;
    ``seconds``: then cut the connection anyway, so that a client without a cap fails
    instead of reading for ever.
    ``not_json``: a complete HTTP 200 whose body is ``content`` as ``text/html``.
    ``garbled``: an event stream whose one event's data is ``content`` (not JSON).
    ``times``: how many requests in a row this fault answers before it is consumed.
    """

    kind: Literal["status", "hang", "truncated", "endless", "not_json", "garbled"]
    status: int = 500
    times: int = 1
    seconds: float = 60.0
    content: str = "```python\nprint('this reply was cut'"
    message: str = ""
    match: str | None = None
    retry_after_s: float | None = 0.05
    """Sent as ``retry-after-ms`` with a status fault, so the SDK's own retry is quick."""
    chunk_delay_s: float = 0.0
    """``endless``: pause between chunks."""
    chunks_sent: int = 0
    """``endless``: how many chunks went out before the client hung up."""
    hung_up: threading.Event = field(default_factory=threading.Event)
    """``endless``, ``hang``: set when the client hung up first."""


ScriptItem = str | Reply | Fault


def _normalise(item: ScriptItem) -> Reply | Fault:
    if isinstance(item, (Reply, Fault)):
        return item
    if isinstance(item, str):
        return Reply(item)
    raise TypeError(f"a script item must be str, Reply or Fault, not {type(item).__name__}")


def item_from_json(obj: Any) -> Reply | Fault:
    """One script item from its JSON form (see the module docstring)."""
    if isinstance(obj, str):
        return Reply(obj)
    if isinstance(obj, dict) and "fault" in obj:
        fields = {k: v for k, v in obj.items() if k != "fault"}
        return Fault(kind=obj["fault"], **fields)
    if isinstance(obj, dict) and "content" in obj:
        return Reply(**obj)
    raise ValueError(f"cannot read script item {obj!r}")


def _messages_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a cancel, a timeout, ``close()``) is not an error."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """A scripted OpenAI-compatible endpoint; a context manager (also ``start``/``stop``)."""

    def __init__(
        self,
        replies: Iterable[ScriptItem] = (),
        *,
        model: str = "scripted-model",
        report_usage: bool = True,
        api_key: str | None = None,
        chunk_size: int = 12,
        chunk_delay_s: float = 0.0,
        port: int = 0,
    ) -> None:
        self.model = model
        self.report_usage = report_usage
        self.api_key = api_key
        """When set, requests without ``Authorization: Bearer <api_key>`` get HTTP 401."""
        self.chunk_size = chunk_size
        self.chunk_delay_s = chunk_delay_s
        self.requests: list[dict[str, Any]] = []
        self.asked = threading.Event()
        """Set when the first request arrives: wait on it instead of polling ``requests``."""
        self.hung_up = threading.Event()
        """Set when a client hung up before its reply ended (a cancel, a timeout, a cap
        on the reply): what a test that something was stopped, not waited out, checks."""
        self.slots = 2
        """Requests served at once; more are deferred (as llama.cpp's ``/metrics`` says)."""
        self.others = 0
        """Requests of other clients the server pretends to be busy with (``/metrics``)."""
        self.in_flight = 0
        self._script: list[Reply | Fault] = [_normalise(r) for r in replies]
        self._fault_uses: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------
    def start(self) -> ScriptedServer:
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self._httpd = _QuietServer(("127.0.0.1", self._port), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- script -----------------------------------------------------------------
    def reset(self, replies: Iterable[ScriptItem] = (), *, model: str = "scripted-model") -> None:
        """A new script and model name, as a fresh server would have: for one server
        shared by tests (its address is baked into a hub's configuration)."""
        with self._lock:
            self.model = model
            self._script = [_normalise(r) for r in replies]
            self._fault_uses.clear()
            self.requests.clear()
            self.asked.clear()
            self.hung_up.clear()

    def add(self, *replies: ScriptItem) -> None:
        with self._lock:
            self._script.extend(_normalise(r) for r in replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat completion bodies received (``requests`` also holds nothing else today)."""
        return [r for r in self.requests if "messages" in r]

    def _next(self, body: dict[str, Any]) -> Reply | Fault | None:
        text = _messages_text(body)
        with self._lock:
            for i, item in enumerate(self._script):
                if item.match is not None and item.match not in text:
                    continue
                if isinstance(item, Fault):
                    used = self._fault_uses.get(id(item), 0) + 1
                    if used >= item.times:
                        self._fault_uses.pop(id(item), None)
                        del self._script[i]
                    else:
                        self._fault_uses[id(item)] = used
                else:
                    del self._script[i]
                return item
        return None


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


class _Handler(BaseHTTPRequestHandler):
    server_ref: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # --- helpers ----------------------------------------------------------------
    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(
        self,
        status: int,
        message: str = "",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        etype, default_code, default_message = _STATUS_BODIES.get(status, ("server_error", None, f"HTTP {status}"))
        self._send_json(
            status,
            {
                "error": {
                    "message": message or default_message,
                    "type": etype,
                    "param": None,
                    "code": code or default_code,
                }
            },
            headers,
        )

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse(self, payload: dict[str, Any] | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._write_chunk(f"data: {text}\n\n".encode())

    # --- routes -----------------------------------------------------------------
    def do_GET(self) -> None:
        srv = self.server_ref
        if not self._authorised():
            return
        if self.path.rstrip("/") == "/metrics":
            busy = srv.in_flight + srv.others
            text = (
                f"llamacpp:requests_processing {min(busy, srv.slots)}\n"
                f"llamacpp:requests_deferred {max(0, busy - srv.slots)}\n"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": srv.model, "object": "model", "created": 0, "owned_by": "scripted"}],
                },
            )
        else:
            self._send_error(404, f"no route {self.path}", code="not_found")

    def do_POST(self) -> None:
        srv = self.server_ref
        with srv._lock:
            srv.in_flight += 1
        try:
            self._post()
        finally:
            with srv._lock:
                srv.in_flight -= 1

    def _post(self) -> None:
        srv = self.server_ref
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_error(400, "request body is not JSON")
            return
        srv.requests.append(body)
        srv.asked.set()
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route {self.path}", code="not_found")
            return
        if not self._authorised():
            return
        if body.get("model") != srv.model:
            self._send_error(
                404,
                f"The model `{body.get('model')}` does not exist or you do not have access to it.",
            )
            return
        item = srv._next(body)
        if item is None:
            self._send_error(500, "script exhausted: the test's script has no reply left")
            return
        stream = bool(body.get("stream"))
        if isinstance(item, Fault):
            self._fault(item, body, stream)
            return
        if item.hold is not None:
            item.held.set()
            while not item.hold.wait(0.05):
                if srv._stopping.is_set():
                    return
        if stream and not item.whole:
            self._stream(item.content, body, item.chunk_delay_s, item.finish_reason)
        else:
            self._complete(item.content, body, item.finish_reason)

    def _authorised(self) -> bool:
        srv = self.server_ref
        if srv.api_key is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {srv.api_key}":
            return True
        self._send_error(401)
        return False

    def _usage(self, body: dict[str, Any], content: str) -> dict[str, int]:
        prompt = count_tokens(_messages_text(body)) + 4 * len(body.get("messages") or [])
        completion = count_tokens(content)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _complete(self, content: str, body: dict[str, Any], finish: str = "stop") -> None:
        payload: dict[str, Any] = {
            "id": _completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server_ref.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
        }
        if self.server_ref.report_usage:
            payload["usage"] = self._usage(body, content)
        self._send_json(200, payload)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, cid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.server_ref.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _stream_pieces(self, content: str) -> list[str]:
        size = max(1, self.server_ref.chunk_size)
        return [content[i : i + size] for i in range(0, len(content), size)]

    def _stream(self, content: str, body: dict[str, Any], delay: float | None, finish: str = "stop") -> None:
        srv = self.server_ref
        delay = srv.chunk_delay_s if delay is None else delay
        cid = _completion_id()
        self._start_stream()
        try:
            self._sse(self._chunk(cid, {"role": "assistant", "content": ""}))
            for piece in self._stream_pieces(content):
                if delay and srv._stopping.wait(delay):
                    return
                self._sse(self._chunk(cid, {"content": piece}))
        except OSError:
            srv.hung_up.set()
            raise
        self._sse(self._chunk(cid, {}, finish=finish))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if srv.report_usage and include_usage:
            self._sse(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": srv.model,
                    "choices": [],
                    "usage": self._usage(body, content),
                }
            )
        self._sse("[DONE]")
        self._write_chunk(b"")  # the terminating zero-length chunk

    def _client_leaves_within(self, seconds: float) -> bool:
        """Say nothing for ``seconds`` (or until the server stops); True as soon as the
        client closes its end of the connection first."""
        srv = self.server_ref
        end = time.monotonic() + seconds
        while not srv._stopping.is_set() and time.monotonic() < end:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if not readable:
                continue
            try:
                if not self.connection.recv(1, socket.MSG_PEEK):
                    return True  # end of stream: the client is gone
            except OSError:
                return True
            srv._stopping.wait(0.05)  # a byte of a next request: keep hanging
        return False

    def _fault(self, fault: Fault, body: dict[str, Any], stream: bool) -> None:
        srv = self.server_ref
        if fault.kind == "status":
            headers = {}
            if fault.retry_after_s is not None:
                headers["retry-after-ms"] = str(int(fault.retry_after_s * 1000))
            self._send_error(fault.status, fault.message, headers=headers)
        elif fault.kind == "hang":
            if self._client_leaves_within(fault.seconds):
                fault.hung_up.set()
                srv.hung_up.set()
            self.close_connection = True
        elif fault.kind == "truncated":
            if stream:
                cid = _completion_id()
                self._start_stream()
                self._sse(self._chunk(cid, {"role": "assistant", "content": ""}))
                for piece in self._stream_pieces(fault.content):
                    self._sse(self._chunk(cid, {"content": piece}))
            else:
                data = json.dumps({"id": _completion_id(), "choices": [{"message": {"content": fault.content}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) + 500))
                self.end_headers()
                self.wfile.write(data.encode()[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            # Cut the connection abruptly: no final chunk, no [DONE].
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif fault.kind == "endless":
            cid = _completion_id()
            self._start_stream()
            try:
                end = time.monotonic() + fault.seconds
                while not srv._stopping.is_set() and time.monotonic() < end:
                    for piece in self._stream_pieces(fault.content):
                        self._sse(self._chunk(cid, {"content": piece}))
                        fault.chunks_sent += 1
                    if fault.chunk_delay_s:
                        srv._stopping.wait(fault.chunk_delay_s)
            except OSError:  # the client hung up: what a cap must do
                fault.hung_up.set()
                srv.hung_up.set()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif fault.kind == "not_json":
            data = fault.content.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif fault.kind == "garbled":
            self._start_stream()
            self._sse(fault.content)
            self._sse("[DONE]")
            self._write_chunk(b"")
        else:  # pragma: no cover - guarded by the dataclass type
            self._send_error(500, f"unknown fault kind {fault.kind!r}")


def load_script(path: str) -> list[Reply | Fault]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError("the script file must hold a JSON list")
    return [item_from_json(obj) for obj in data]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.scripted_server")
    parser.add_argument("--script", required=True, help="JSON list of replies / faults")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="scripted-model")
    parser.add_argument("--no-usage", action="store_true", help="report no token usage")
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = ScriptedServer(
        load_script(args.script),
        model=args.model,
        report_usage=not args.no_usage,
        chunk_delay_s=args.chunk_delay,
        port=args.port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        print(f"READY {server.base_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
