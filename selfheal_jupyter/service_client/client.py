"""The kernel side of the class service: requests and their streams of events.

The kernel sends the task and its context (the cell, the prelude's imports and
notebook sources, the copies already pickled here: bytes the service passes to the
sandbox unopened) with the user's own hub token (``$JUPYTERHUB_API_TOKEN``), and reads
the run's events back as they come (:mod:`.wire`), handing them to the same renderers
as a local loop's. This process then needs no Docker engine, no model endpoint and no
key; what it gets in hints mode is hints, because nothing else leaves the service.
Every failure on the way is a :class:`~selfheal_jupyter.errors.ServiceError` (or the
policy's own ``PolicyBlocked``) in one line that says what to do.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any

import requests

from ..config import SelfHeal
from ..errors import ServiceError
from ..model import Task
from ..teaching.policy import PolicyBlocked
from . import wire

TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
NOTEBOOK_ENV = "JPY_SESSION_NAME"
"""The notebook's path, as Jupyter Server tells its kernels (the policy's notebook globs)."""
CONNECT_TIMEOUT_S = 10.0
SILENCE_S = 90.0
"""Longest the stream may say nothing (the service says something every few seconds)."""

OPTIONS = ("max_iterations", "auto_plan", "timeout_s", "memory")
"""The options a request may carry; the service holds each to its own value at most."""


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ServiceClient:
    """Requests to one service, as one hub user."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.token = token
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"

    @classmethod
    def from_settings(cls, settings: SelfHeal) -> ServiceClient:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            raise ServiceError(
                f"SelfHeal.service_url is {settings.service_url!r} but ${TOKEN_ENV} is not set: "
                "start this kernel from your JupyterHub server (it sets the token), or unset "
                "SELFHEAL_SERVICE_URL to run here."
            )
        return cls(settings.service_url, token)

    # ------------------------------------------------------------------ requests
    def _refused(self, response: requests.Response) -> ServiceError | PolicyBlocked:
        """What a response that is no stream means, in one line."""
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        message = body.get("message") if isinstance(body, dict) else None
        if isinstance(body, dict) and body.get("kind") in ("policy", "quota") and message:
            return PolicyBlocked(_one_line(message, 400))
        if message:
            return ServiceError(_one_line(message, 400))
        if status == 401:
            return ServiceError(
                "The selfheal service refused your token (HTTP 401): JupyterHub does not know it or it "
                "expired. Restart your server from the hub's control panel to get a fresh one."
            )
        if status == 403:
            return ServiceError(
                "The selfheal service does not let your token in (HTTP 403): it lacks the role "
                "access:services!service=selfheal. Ask your hub's admin."
            )
        if status in (502, 503, 504):
            return ServiceError(
                f"The selfheal service does not answer (HTTP {status} from the hub's proxy at {self.url}): "
                "the service or JupyterHub is down or restarting. Try again in a minute; if it lasts, "
                "tell your instructor."
            )
        return ServiceError(f"The selfheal service answered HTTP {status} at {self.url}: {_one_line(response.text)}")

    def _unreachable(self, exc: Exception) -> ServiceError:
        return ServiceError(
            f"The selfheal service at {self.url} cannot be reached ({type(exc).__name__}): JupyterHub "
            "or the service is down. Try again in a minute; if it lasts, tell your instructor."
        )

    def get(self, path: str) -> Any:
        try:
            response = self.session.get(self.url + path, timeout=(CONNECT_TIMEOUT_S, SILENCE_S))
        except requests.RequestException as exc:
            raise self._unreachable(exc) from None
        if response.status_code != 200:
            raise self._refused(response)
        return response.json()

    def packages(self) -> dict[str, str] | None:
        """The sandbox image's packages (what the notebook context may import there)."""
        try:
            found = self.get("api/packages").get("packages")
        except (ServiceError, PolicyBlocked, ValueError, AttributeError):
            return None
        return found if isinstance(found, dict) else None

    def stream(
        self, body: dict[str, Any], on_event: Callable[[Any], None], cancel: threading.Event | None = None
    ) -> Any:
        """POST a request and hand each event of its stream to ``on_event``; return the
        last one. ``cancel`` set: the service is asked to stop the run (then the stream
        goes on to its end), and if it cannot be asked, the connection is closed."""
        try:
            response = self.session.post(
                self.url + "api/runs", json=body, stream=True, timeout=(CONNECT_TIMEOUT_S, SILENCE_S)
            )
        except requests.RequestException as exc:
            raise self._unreachable(exc) from None
        if response.status_code != 200:
            with response:
                raise self._refused(response)
        run_id: list[str] = []
        done = threading.Event()
        if cancel is not None:
            threading.Thread(
                target=self._stop_when, args=(cancel, done, run_id, response), daemon=True, name="selfheal-stop"
            ).start()
        try:
            for event in self._events(response):
                if isinstance(event, wire.Accepted):
                    run_id.append(event.run_id)
                    continue
                on_event(event)
                if isinstance(event, (wire.Finished, wire.HintsFinished, wire.Failed)):
                    return event
        finally:
            done.set()
            response.close()
        if cancel is not None and cancel.is_set() and not run_id:
            return wire.Failed("Stopped before the service started the run.", kind="cancelled")
        raise ServiceError(
            "The selfheal service stopped during this run (it was restarted, or the connection "
            "dropped); nothing in your notebook changed. Run the cell again."
        )

    def _events(self, response: requests.Response) -> Iterator[Any]:
        lines = response.iter_lines(chunk_size=None)  # type: ignore[call-overload]  # as it arrives
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except (requests.RequestException, OSError, ValueError):
                return  # the connection dropped: the caller says so
            if not line.strip():
                continue  # the service's heartbeat
            try:
                yield wire.read_event(line)
            except wire.WireError as exc:
                raise ServiceError(f"The selfheal service sent something this kernel cannot read ({exc}).") from None

    def _stop_when(self, cancel: threading.Event, done: threading.Event, run_id: list[str], response: Any) -> None:
        while not done.is_set():
            if cancel.wait(0.2):
                break
        if done.is_set():
            return
        try:
            if run_id:
                self.session.post(self.url + f"api/runs/{run_id[0]}/cancel", timeout=CONNECT_TIMEOUT_S)
                return
        except requests.RequestException:
            pass
        with suppress(Exception):
            response.close()

    # ------------------------------------------------------------------ entry points
    def request(
        self,
        entry: str,
        task: Task,
        settings: SelfHeal,
        *,
        plan_only: bool = False,
        line_offset: int = 0,
        cell_id: str = "",
    ) -> dict[str, Any]:
        """The body of a request: the entry point, the task (copies as bytes), options and
        (for a hint) how many lines of the cell sit above the code (1: the ``%%hint`` line)
        and the id the front end gives the cell (its hints follow it across edits)."""
        options: dict[str, Any] = {name: getattr(settings, name) for name in OPTIONS if settings.is_set(name)}
        if plan_only:
            options["plan_only"] = True
        try:
            encoded = wire.encode(task)
        except wire.WireError as exc:
            raise ServiceError(f"This task cannot be sent to the selfheal service: {exc}.") from None
        body = {
            "entry": entry,
            "task": encoded,
            "options": options,
            "notebook": os.environ.get(NOTEBOOK_ENV, ""),
        }
        if entry == "hint":
            body["line_offset"] = line_offset
            if cell_id:
                body["cell_id"] = cell_id
        return body
