"""Reach the Docker engine, or say in one paragraph how to make it answer.

Everything that talks to Docker (the sandbox, the image build, ``selfheal sandbox
doctor``) gets its client here, so the "engine is not there" case is explained the
same way everywhere instead of surfacing as a ``requests`` traceback.
"""

from __future__ import annotations

import os
import shutil

import docker
import docker.errors
import requests.exceptions

from ..errors import EngineLost, EngineUnavailable

#: Seconds one API call may take once connected (docker-py's own default).
OPERATION_TIMEOUT_S = 60.0

DEFAULT_SOCKET = "/var/run/docker.sock"


def connect(timeout: float = 5) -> docker.DockerClient:
    """A client for the engine named by ``DOCKER_HOST`` (else the local socket).

    ``timeout`` bounds the reachability check (version negotiation and a ping);
    the returned client uses :data:`OPERATION_TIMEOUT_S` for later calls. Raises
    :class:`EngineUnavailable` with the fix when nothing answers.
    """
    try:
        client = docker.from_env(timeout=max(1, int(round(timeout))))
        client.ping()
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(explain(exc)) from exc
    except OSError as exc:  # raised directly by some transports (e.g. ssh://)
        raise EngineUnavailable(explain(exc)) from exc
    client.api.timeout = OPERATION_TIMEOUT_S
    return client


def explain(exc: BaseException) -> str:
    """One paragraph: why the engine did not answer and what to do about it."""
    detail = _root_cause(exc)
    host = os.environ.get("DOCKER_HOST", "")
    if "permission denied" in detail.lower():
        where = host or DEFAULT_SOCKET
        return (
            f"The Docker engine's socket ({where}) exists but this user may not use it "
            f"({detail}). Run as root, or add yourself to the 'docker' group "
            "(sudo usermod -aG docker $USER, then log in again)."
        )
    if host:
        return (
            f"DOCKER_HOST is set to {host!r} but no Docker engine answers there ({detail}). "
            "Start the engine on that host, correct DOCKER_HOST, or unset it to use the "
            f"local engine at {DEFAULT_SOCKET}."
        )
    if shutil.which("dockerd") is None:
        return (
            f"No Docker engine is installed here ({detail}). On Debian/Ubuntu, as root: "
            "apt-get install -y docker.io, then start it with systemctl start docker, or "
            "where there is no systemd: setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null & "
            "(sandbox/setup-engine.sh in the repository does both)."
        )
    return (
        f"The Docker engine is installed but does not answer at {DEFAULT_SOCKET} ({detail}). "
        f"{START_LOCAL} — then check with docker info."
    )


START_LOCAL = (
    "Start it as root: systemctl start docker, or where there is no systemd: "
    "setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null &"
)


def gone(exc: BaseException) -> bool:
    """True when ``exc`` says the engine did not answer at all (refused, reset, timed
    out) — not an answer that refused the request (docker-py's ``APIError``, which is a
    ``requests`` error too)."""
    return isinstance(exc, requests.exceptions.RequestException) and not isinstance(exc, docker.errors.APIError)


def lost(
    client: docker.DockerClient,
    exc: BaseException | None = None,
    *,
    during: str = "the run",
    again: str = "run again: new sandbox containers are started by themselves",
) -> EngineLost:
    """The engine stopped answering (``exc``), or stopped our container from outside
    (``exc`` None), while it was in use: what happened and what to do."""
    where = address(client)
    local = where in (f"unix://{DEFAULT_SOCKET}", f"unix:{DEFAULT_SOCKET}")
    start = START_LOCAL if local else "Start the engine at that address again"
    what = (
        f"stopped answering during {during} ({_root_cause(exc)})"
        if exc is not None
        else f"stopped the sandbox container during {during} (it was killed from "
        "outside: the engine is shutting down or restarting, or a docker command "
        "stopped it)"
    )
    return EngineLost(f"The Docker engine at {where} {what}. {start} if it is not running, then {again}.")


def _root_cause(exc: BaseException) -> str:
    """The innermost useful message of a chained exception, kept short."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    for candidate in reversed(seen):
        text = str(candidate).strip()
        if text:
            return text if len(text) <= 200 else text[:197] + "..."
    return type(exc).__name__


def address(client: docker.DockerClient) -> str:
    """Where ``client`` talks to, as a user would write it in ``DOCKER_HOST``."""
    base = str(getattr(client.api, "base_url", ""))
    if base.startswith("http+docker://"):  # docker-py's name for a unix socket or ssh
        socket_path = getattr(getattr(client.api, "_custom_adapter", None), "socket_path", "")
        if socket_path:
            return f"unix://{socket_path}"
        return os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    for scheme in ("http://", "https://"):
        if base.startswith(scheme):
            return "tcp://" + base[len(scheme) :]
    return base or os.environ.get("DOCKER_HOST", "") or f"unix://{DEFAULT_SOCKET}"


def describe(client: docker.DockerClient) -> str:
    """``Docker 20.10.24 at unix:///var/run/docker.sock`` / ``Podman 4.3.1 at tcp://...``."""
    try:
        version = client.version()
    except Exception:  # the engine went away: say where it was
        return f"the engine at {address(client)}"
    for part in version.get("Components") or []:
        if "podman" in str(part.get("Name", "")).lower():
            return f"Podman {part.get('Version', '?')} at {address(client)}"
    return f"Docker {version.get('Version', '?')} at {address(client)}"
