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

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

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


@dataclass(frozen=True)
class Endpoint:
    """Where the model lives. ``local``: the embedded model this process started."""

    base_url: str
    api_key: str
    model: str
    local: bool = False


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


def _estimate_prompt(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m.get("content") or "") + 4 for m in messages)


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
    ) -> ChatReply:
        """Stream one reply. ``on_token`` gets each text delta in the caller's thread.

        Raises :class:`~selfheal_jupyter.errors.Cancelled` within ``CANCEL_POLL_S`` of
        ``cancel`` being set, and an :class:`~selfheal_jupyter.errors.LLMError`
        subclass when the endpoint fails.
        """
        if cancel is not None and cancel.is_set():
            raise Cancelled("Stopped before the model was asked.")
        params: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": list(messages),
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": self.max_tokens,
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
            target=self._stream_worker, args=(params, events, abandon), daemon=True,
            name="selfheal-llm",
        )
        worker.start()
        parts: list[str] = []
        usage: Usage | None = None
        finish: str | None = None
        try:
            while True:
                try:
                    kind, value = events.get(timeout=CANCEL_POLL_S)
                except queue.Empty:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("Stopped while the model was answering.") from None
                    continue
                if kind == "delta":
                    parts.append(value)
                    if on_token is not None:
                        on_token(value)
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("Stopped while the model was answering.")
                elif kind == "finish":
                    finish = value
                elif kind == "usage":
                    usage = value
                elif kind == "error":
                    raise self._map_error(value, received="".join(parts)) from value
                elif kind == "end":
                    break
        finally:
            abandon.set()
        text = "".join(parts)
        if finish is None:
            raise LLMError(
                f"The model endpoint {self.endpoint.base_url} ended its reply early "
                f"(after {len(text)} characters, with no finish reason). The server may "
                "have crashed or cut the connection: check its logs, then run again."
            )
        if usage is None:
            usage = Usage(_estimate_prompt(messages), estimate_tokens(text), estimated=True)
        return ChatReply(text, usage, finish, time.monotonic() - started)

    def _stream_worker(
        self, params: dict[str, Any], events: queue.Queue, abandon: threading.Event
    ) -> None:
        try:
            stream = self._client.chat.completions.create(**params)
            try:
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
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            events.put(("error", exc))

    # ------------------------------------------------------------------ models
    def list_models(self) -> list[str]:
        """The ids of ``GET /models``, in the server's order."""
        try:
            return [m.id for m in self._client.models.list().data]
        except Exception as exc:  # noqa: BLE001 - mapped below
            raise self._map_error(exc) from exc

    # ------------------------------------------------------------------ errors
    def _map_error(self, exc: BaseException, received: str = "") -> Exception:
        url, model = self.endpoint.base_url, self.endpoint.model
        where = (
            "the embedded local model"
            if self.endpoint.local
            else f"the model endpoint {url}"
        )
        if isinstance(exc, (LLMError, Cancelled)):
            return exc
        exc_out = self._describe_error(exc, received, where, url, model)
        text = str(exc_out)
        return type(exc_out)(text[:1].upper() + text[1:])

    def _describe_error(
        self, exc: BaseException, received: str, where: str, url: str, model: str
    ) -> Exception:
        if isinstance(exc, openai.APITimeoutError):
            return LLMTimeout(
                f"{where} did not answer within {self.timeout_s:g} s "
                f"(tried {self.max_retries + 1} times). A slow or overloaded server: raise "
                "`%config SelfHeal.llm_timeout_s`, pick a smaller model, "
                "or check that the server is not stuck."
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


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return body["message"]
    return exc.message
