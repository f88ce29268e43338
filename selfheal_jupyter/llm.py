"""Chat with any OpenAI-compatible endpoint through the ``openai`` client.

Why this module exists: one place that streams a reply (tokens delivered as they
arrive), records token usage (the server's, or an estimate when it gives none),
leaves retry/backoff for 429 / 5xx / timeouts to the SDK itself, stops within a
second when the user cancels, and turns every SDK failure into the package's own
error with a message that says what to do.

The loop does not know whether the endpoint is OpenAI, Ollama, vLLM or the embedded
model: they are all an :class:`Endpoint`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import openai

from .codeblocks import extract_code
from .errors import (
    Cancelled,
    LLMAuthError,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnreachable,
    ModelNotFound,
)
from .model import Usage

__all__ = ["ChatReply", "Endpoint", "LLMClient", "estimate_tokens", "extract_code"]

Message = dict[str, str]
CANCEL_POLL_S = 0.05
MAX_CHARS_PER_TOKEN = 16
"""No tokenizer's tokens average more characters: a reply longer than this many
characters per requested token is past its ``max_tokens`` whatever the server counts."""
WHOLE_ANSWER_BYTES = 1 << 20
"""How much of an answer that is not an event stream is read to tell what it is."""
QUEUE_POLL_S = 1.0
"""How often a request waiting for its first token asks the server how many are ahead."""
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def server_queue(base_url: str, api_key: str = "", timeout_s: float = 2.0) -> tuple[int, int] | None:
    """(requests processing, requests deferred) of a llama.cpp server (the embedded
    model's, or one the user runs) from its ``/metrics`` (asked with ``api_key``, as a
    server with a key demands); None when it publishes none."""
    root = base_url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        request = urllib.request.Request(root + "/metrics", headers=headers)
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            text = resp.read(1 << 16).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        for key in ("requests_processing", "requests_deferred"):
            if name.endswith(key) and not line.startswith("#"):
                try:
                    found[key] = int(float(value))
                except ValueError:
                    return None
    if len(found) != 2:
        return None
    return found["requests_processing"], found["requests_deferred"]


@dataclass(frozen=True)
class Endpoint:
    """Where the model lives. ``local``: the embedded model this process started."""

    base_url: str
    api_key: str
    model: str
    local: bool = False
    log: str = ""
    """The embedded model's server log (its messages name it when the server dies)."""


@dataclass
class ChatReply:
    text: str
    usage: Usage
    finish_reason: str | None = None
    """``stop`` normally; ``length`` when the reply hit ``max_tokens`` (likely cut)."""
    duration_s: float = 0.0


def estimate_tokens(text: str) -> int:
    """About four characters per token: the usual rule for English and code."""
    return (len(text) + 3) // 4


def estimate_prompt(messages: Sequence[Message]) -> int:
    """The tokens a request's messages are about (for a server that reports none)."""
    return sum(estimate_tokens(m.get("content") or "") + 4 for m in messages)


def _received(messages: Sequence[Message], parts: list[str], chunks: int) -> Usage:
    """The usage of a reply this side ended (the server's own count never comes)."""
    return Usage(estimate_prompt(messages), max(chunks, estimate_tokens("".join(parts))), True)


class LLMClient:
    """A configured chat client for one endpoint."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout_s: float,
        max_retries: int,
        temperature: float,
        max_tokens: int,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "none",
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self.admit: Callable[[int], None] | None = None
        """Called with a request's estimated prompt tokens before it is sent; raises to
        refuse it (the loop's token budget, checked before anything is spent)."""
        self.on_wait: Callable[[int], None] | None = None
        """Called, while a request waits for its first token on a server that queues it
        behind others (a shared local server), with how many requests are ahead of it."""
        self._queue_known = urlparse(endpoint.base_url).hostname in {h.strip("[]") for h in LOOPBACK}
        """Only a server on this machine is asked for its queue (a hosted API has none to tell)."""

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ chat
    def chat(
        self,
        messages: Sequence[Message],
        *,
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        stop: Sequence[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        until: Callable[[str], bool] | None = None,
    ) -> ChatReply:
        """Stream one reply. ``on_token`` gets each text delta in the caller's thread;
        ``until``, the text so far after each delta that ends a line: when it says the
        reply holds what was asked, the stream is closed (the server stops) and the
        reply ends there (finish reason ``stop``).

        Raises :class:`~selfheal_jupyter.errors.Cancelled` within ``CANCEL_POLL_S`` of
        ``cancel`` being set, and an :class:`~selfheal_jupyter.errors.LLMError`
        subclass when the endpoint fails — also when the reply runs past the client's
        ``max_tokens`` (counted from the stream: a server that ignores the cap) or
        streams for longer than ``timeout_s``; such an error carries the ``usage``
        of what was received. ``max_tokens``: this reply's own cap, at most the client's;
        a reply past it is cut here as a server that keeps to it would cut it (finish
        reason ``length``): the caller chose that cap, and reads a cut reply.
        """
        limit = min(self.max_tokens, max_tokens) if max_tokens else self.max_tokens
        if cancel is not None and cancel.is_set():
            raise Cancelled("Stopped before the model was asked.")
        if self.admit is not None:
            self.admit(estimate_prompt(messages))
        params: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": list(messages),
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": limit,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if stop:
            params["stop"] = list(stop)
        started = time.monotonic()
        # The request runs in a worker thread so that the caller can notice a cancel
        # even while the server has not sent its first token yet.
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        abandon = threading.Event()
        worker = threading.Thread(
            target=self._stream_worker,
            args=(params, events, abandon),
            daemon=True,
            name="selfheal-llm",
        )
        worker.start()
        parts: list[str] = []
        chars = chunks = 0
        usage: Usage | None = None
        finish: str | None = None
        deadline: float | None = None  # timeout_s after the first token (the wait for
        # it is bounded by the client's own read timeout, also timeout_s)
        waiting = _QueueWatch(self) if self.on_wait is not None and self._queue_known else None
        try:
            while True:
                try:
                    kind, value = events.get(timeout=CANCEL_POLL_S)
                except queue.Empty:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("Stopped while the model was answering.") from None
                    if deadline is not None and time.monotonic() > deadline:
                        raise self._cut("timeout", messages, "".join(parts), chunks, limit) from None
                    if waiting is not None and deadline is None:
                        waiting.poll()
                    continue
                if kind == "delta":
                    if deadline is None:
                        deadline = time.monotonic() + self.timeout_s
                    parts.append(value)
                    chars, chunks = chars + len(value), chunks + 1
                    if on_token is not None:
                        on_token(value)
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("Stopped while the model was answering.")
                    if until is not None and "\n" in value and until("".join(parts)):
                        finish, usage = "stop", _received(messages, parts, chunks)
                        break
                    if chunks > limit or chars > limit * MAX_CHARS_PER_TOKEN:
                        if limit < self.max_tokens:  # this reply's own cap: cut as a server cuts
                            finish, usage = "length", _received(messages, parts, chunks)
                            break
                        raise self._cut("max_tokens", messages, "".join(parts), chunks, limit)
                    if deadline is not None and time.monotonic() > deadline:
                        raise self._cut("timeout", messages, "".join(parts), chunks, limit)
                elif kind == "finish":
                    finish = value
                elif kind == "usage":
                    usage = value
                elif kind == "foreign":
                    raise LLMError(self._foreign(value))
                elif kind == "error":
                    raise self._map_error(value, received="".join(parts)) from value
                elif kind == "end":
                    break
        finally:
            abandon.set()
        text = "".join(parts)
        if finish is None:
            raise LLMError(
                f"{self._who()} ended its reply without "
                f"saying it was complete (no finish reason, after {len(text)} characters), "
                "so the reply may be cut. Check the server's log, then run again."
            )
        if usage is None:
            usage = Usage(estimate_prompt(messages), estimate_tokens(text), estimated=True)
        return ChatReply(text, usage, finish, time.monotonic() - started)

    def _cut(self, why: str, messages: Sequence[Message], text: str, chunks: int, limit: int) -> LLMError:
        """The reply was stopped by this side: past ``max_tokens``, or streaming for longer
        than ``timeout_s``. The error carries the usage of what was received."""
        received = max(chunks, estimate_tokens(text))
        if why == "max_tokens":
            error: LLMError = LLMError(
                f"{self._who()} kept writing past the "
                f"reply's limit of {limit} tokens (max_tokens; about {received} "
                "received), so the reply was stopped. The server ignores max_tokens: check "
                "its settings; a longer reply needs a higher `%config SelfHeal.max_tokens`."
            )
        else:
            error = LLMTimeout(
                f"{self._who()} was still writing its reply "
                f"after {self.timeout_s:g} s (about {received} tokens received), so it was "
                "stopped. A slow server: raise `%config SelfHeal.llm_timeout_s`, or pick a "
                "smaller model."
            )
        error.usage = Usage(estimate_prompt(messages), received, estimated=True)
        return error

    def _who(self) -> str:
        """The endpoint as the subject of a message."""
        if self.endpoint.local:
            return "The embedded local model"
        return f"The model endpoint {self.endpoint.base_url}"

    def _foreign(self, body: str) -> str:
        return (
            f"{self._who()} answered with something "
            f"that is not an OpenAI-compatible reply: {_excerpt(body)}. Check that the "
            "base URL is the API's (it usually ends in /v1), then run again."
        )

    def _stream_worker(self, params: dict[str, Any], events: queue.Queue, abandon: threading.Event) -> None:
        try:
            stream = self._client.chat.completions.create(**params)
            try:
                if "text/event-stream" not in stream.response.headers.get("content-type", ""):
                    self._whole_answer(stream.response, events)
                    return
                for chunk in stream:
                    if abandon.is_set():
                        break  # closing the stream tells the server to stop generating
                    if chunk.usage is not None:
                        events.put(
                            (
                                "usage",
                                Usage(
                                    chunk.usage.prompt_tokens or 0,
                                    chunk.usage.completion_tokens or 0,
                                ),
                            )
                        )
                    for choice in chunk.choices or []:
                        if choice.index not in (0, None):
                            continue
                        delta = getattr(choice.delta, "content", None)
                        if delta:
                            events.put(("delta", delta))
                        if choice.finish_reason:
                            events.put(("finish", choice.finish_reason))
            finally:
                stream.close()
            events.put(("end", None))
        except BaseException as exc:
            events.put(("error", exc))

    @staticmethod
    def _whole_answer(response: Any, events: queue.Queue) -> None:
        """An answer that is not an event stream: a whole chat completion (a server that
        does not stream) is taken as the reply; anything else is reported as it is."""
        body = b""
        for block in response.iter_bytes():
            body += block
            if len(body) > WHOLE_ANSWER_BYTES:
                break
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            events.put(("foreign", body.decode("utf-8", errors="replace")))
            return
        events.put(("delta", content))
        events.put(("finish", choice.get("finish_reason") or "stop"))
        if isinstance(data.get("usage"), dict):
            events.put(
                (
                    "usage",
                    Usage(
                        int(data["usage"].get("prompt_tokens") or 0), int(data["usage"].get("completion_tokens") or 0)
                    ),
                )
            )
        events.put(("end", None))

    # ------------------------------------------------------------------ models
    def list_models(self) -> list[str]:
        """The ids of ``GET /models``, in the server's order."""
        try:
            return [m.id for m in self._client.models.list().data]
        except Exception as exc:
            raise self._map_error(exc) from exc

    # ------------------------------------------------------------------ errors
    def _map_error(self, exc: BaseException, received: str = "") -> Exception:
        url, model = self.endpoint.base_url, self.endpoint.model
        where = "the embedded local model" if self.endpoint.local else f"the model endpoint {url}"
        if isinstance(exc, (LLMError, Cancelled)):
            return exc
        exc_out = self._describe_error(exc, received, where, url, model)
        text = str(exc_out)
        return type(exc_out)(text[:1].upper() + text[1:])

    def _describe_error(self, exc: BaseException, received: str, where: str, url: str, model: str) -> Exception:
        if isinstance(exc, openai.APITimeoutError):
            return LLMTimeout(
                f"{where} did not answer within {self.timeout_s:g} s "
                f"(tried {self.max_retries + 1} times). A slow or overloaded server: raise "
                "`%config SelfHeal.llm_timeout_s`, pick a smaller model, "
                "or check that the server is not stuck."
            )
        if isinstance(exc, json.JSONDecodeError):  # an event whose data is not JSON
            return LLMError(self._foreign(exc.doc))
        if isinstance(exc, openai.APIConnectionError) and self.endpoint.local:
            log = f" Its log (until the next run replaces it) is {self.endpoint.log}." if self.endpoint.log else ""
            when = f"in the middle of a reply (after {len(received)} characters)" if received else "before it answered"
            return LLMUnreachable(
                f"The embedded model's server stopped {when}.{log} The next run starts it again: run again."
            )
        if isinstance(exc, openai.APIConnectionError):
            if received:
                return LLMError(
                    f"The connection to {where} was cut in the middle of a reply "
                    f"(after {len(received)} characters). Check the server's logs and "
                    "your network, then run again."
                )
            return LLMUnreachable(
                f"Cannot connect to {where}. Is the server running and is the URL "
                "right? Set OPENAI_BASE_URL (or `%config SelfHeal.base_url`) to an "
                "OpenAI-compatible endpoint ending in /v1, or leave it "
                "empty to use the embedded local model."
            )
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return LLMAuthError(
                f"{where} refused the API key (HTTP {exc.status_code}: {_api_message(exc)}). "
                "Set OPENAI_API_KEY to a valid key for this endpoint (it is read from the "
                "environment, never from the notebook)."
            )
        if isinstance(exc, openai.NotFoundError):
            return ModelNotFound(
                f"{where} does not know the model {model!r} (HTTP 404: "
                f"{_api_message(exc)}). Set the model with `%config SelfHeal.model = "
                "'NAME'` (or SELFHEAL_MODEL) to one the server lists at "
                "/v1/models, and check that the base URL ends in /v1."
            )
        if isinstance(exc, openai.RateLimitError):
            return LLMRateLimited(
                f"{where} kept answering 429 (rate limited) after {self.max_retries} "
                "retries with backoff. Wait a minute and run again, lower the request rate, "
                "or raise `%config SelfHeal.llm_max_retries`."
            )
        if isinstance(exc, openai.APIStatusError):
            return LLMError(
                f"{where} failed with HTTP {exc.status_code}: {_api_message(exc)} "
                f"(after {self.max_retries} retries). Check the server and the model "
                f"{model!r}, then run again."
            )
        if isinstance(exc, openai.OpenAIError):
            return LLMError(f"{where} failed: {exc}. Check the server, then run again.")
        return LLMError(
            f"Talking to {where} failed unexpectedly ({type(exc).__name__}: {exc}). "
            "Check the endpoint configuration, then run again."
        )


class _QueueWatch:
    """While a request waits for its first token: how many requests the server serves
    before it, said to ``on_wait`` whenever that number changes (and is not zero)."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self.next_at = time.monotonic() + QUEUE_POLL_S / 2
        self.said = 0

    def poll(self) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + QUEUE_POLL_S
        endpoint = self.client.endpoint
        found = server_queue(endpoint.base_url, endpoint.api_key)
        if found is None:
            self.next_at = float("inf")  # it publishes nothing: stop asking
            return
        processing, deferred = found
        ahead = processing + deferred - 1 if deferred else 0  # ours is one of them
        if ahead > 0 and ahead != self.said and self.client.on_wait is not None:
            self.said = ahead
            self.client.on_wait(ahead)


def _excerpt(text: str, size: int = 80) -> str:
    """The first ``size`` characters of an untrusted text, control characters escaped."""
    head = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip()[:size])
    return head + ("…" if len(text.strip()) > size else "")


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return body["message"]
    return exc.message
