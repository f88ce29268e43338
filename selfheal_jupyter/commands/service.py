"""``selfheal service``: the class service, a JupyterHub service (hub-managed or external).

It owns the sandbox engine, the model endpoint and its key (its own
``$OPENAI_API_KEY``), the instructor's policy (``--policy FILE``, read again when the
file changes), per-student budgets and the run log, and runs the loop for the students'
kernels (``SelfHeal.service_url``). Options: ``--SelfHeal.OPTION=VALUE`` (endpoint,
model, limits, engine, ``service_*``). It listens where the hub says
(``$JUPYTERHUB_SERVICE_URL``) or on ``--listen HOST:PORT`` for an external service.

``--hub-config`` prints lines for ``jupyterhub_config.py`` instead (exec them after the
config's own lines): they register the hub-managed service ``selfheal`` with the same
options, forward ``OPENAI_API_KEY`` from the hub's environment to the service only,
and give every user's tokens (a kernel's ``$JUPYTERHUB_API_TOKEN`` and the token page's)
the role ``access:services!service=selfheal``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from urllib.parse import urlparse

from . import trait_overrides

SERVICE_NAME = "selfheal"
ACCESS_SCOPE = f"access:services!service={SERVICE_NAME}"
DEFAULT_PORT = 10101


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "service",
        help="the class service for a JupyterHub (sandbox, model key, policy, quotas, run log)",
        description="Run the selfheal service for a JupyterHub class, or print its hub config block.",
    )
    p.add_argument("--policy", metavar="FILE", help="the instructor's policy (JSON; read again when it changes)")
    p.add_argument(
        "--hub-config",
        action="store_true",
        help="print the lines to exec in jupyterhub_config.py (a hub-managed service with these options)",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"where to listen (default: $JUPYTERHUB_SERVICE_URL's; --hub-config: 127.0.0.1:{DEFAULT_PORT})",
    )
    p.set_defaults(handler=handle, flags=())


def _listen(args: argparse.Namespace) -> tuple[str, int]:
    where = args.listen or ""
    if not where and os.environ.get("JUPYTERHUB_SERVICE_URL"):
        url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
        return url.hostname or "127.0.0.1", url.port or 80
    host, _, port = (where or f"127.0.0.1:{DEFAULT_PORT}").rpartition(":")
    return host or "127.0.0.1", int(port)


def hub_config(args: argparse.Namespace, argv: list[str]) -> str:
    """The block for ``jupyterhub_config.py`` (appends; safe after the config's own lines)."""
    host, port = _listen(args)
    command = [sys.executable, "-m", "selfheal_jupyter.cli", "service", *argv]
    # the Kubernetes backend's cluster: a kubeconfig, or the pod's in-cluster service account
    forward = ["OPENAI_API_KEY", "DOCKER_HOST", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]
    return f'''# --- selfheal: the class service (printed by `selfheal service --hub-config`) ---
import os as _selfheal_os

c.JupyterHub.services.append(
    {{
        "name": {SERVICE_NAME!r},
        "url": "http://{host}:{port}",
        "command": {command!r},
        # the model key (and the engine's or cluster's address) go to the service only, never to a student's server
        "environment": {{k: _selfheal_os.environ[k] for k in {forward!r} if _selfheal_os.environ.get(k)}},
        "oauth_no_confirm": True,
    }}
)


def _selfheal_roles(config):
    """Every user, and every server's token, may reach the service; the service may read groups
    (the instructor's page signs in through the hub: its OAuth client comes with the url)."""
    found = config.JupyterHub.get("load_roles", [])
    roles = list(found.get_value([]) if hasattr(found, "get_value") else found)
    defaults = {{"user": ["self"], "server": ["users:activity!user", "access:servers!server"]}}
    for name, scopes in defaults.items():
        role = next((r for r in roles if r.get("name") == name), None)
        if role is None:
            role = {{"name": name, "scopes": list(scopes)}}
            roles.append(role)
        role["scopes"] = list(dict.fromkeys([*role.get("scopes", scopes), {ACCESS_SCOPE!r}]))
    # groups: a student's course; the groups and their members: the instructor's page lists the class
    service_scopes = ["read:users:groups", "read:users:name", "list:groups", "read:groups"]
    roles.append({{"name": "selfheal-service", "scopes": service_scopes, "services": [{SERVICE_NAME!r}]}})
    config.JupyterHub.load_roles = roles


_selfheal_roles(c)
# --- end of selfheal ---
'''


def handle(args: argparse.Namespace) -> int:
    if args.hub_config:
        argv = ["--policy", os.path.abspath(args.policy)] if args.policy else []
        argv += [f"--SelfHeal.{name}={value}" for name, value in trait_overrides(args).items()]
        print(hub_config(args, argv), end="")
        return 0
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    from tornado.ioloop import IOLoop

    from ..service.app import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, REQUEST_MAX_BYTES, make_app, warm_up
    from ..service.connections import Connections, GuardedServer
    from ..service.log import RunLog
    from ..service.runs import Service, log_path
    from . import command_settings

    settings = command_settings(args, ())
    policy = os.path.abspath(args.policy) if args.policy else None
    service = Service(settings, policy=policy, log=RunLog(log_path(settings)))
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE_NAME}/")
    app = make_app(service, prefix=prefix, instructors=settings.service_instructors)
    from ..mcp_server.class_service import mount

    mcp = mount(app, prefix)  # the same tools an agent gets from `selfheal mcp`, at {prefix}mcp
    host, port = _listen(args)
    connections = app.settings["selfheal_state"].connections = Connections.for_this_process()
    server = GuardedServer(
        app,
        connections=connections,
        max_body_size=REQUEST_MAX_BYTES,  # a run's request raises its own once the hub said who asks
        idle_connection_timeout=HEADER_TIMEOUT_S,
        body_timeout=BODY_TIMEOUT_S,
    )
    server.listen(port, host)
    loop = IOLoop.current()
    loop.add_callback(warm_up, app.settings["selfheal_state"])

    def stop(*_: object) -> None:
        loop.add_callback_from_signal(loop.stop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(
        f"selfheal service: listening on http://{host}:{port}{prefix} "
        f"(policy: {policy or 'none'}; log: {service.log.path})",
        file=sys.stderr,
        flush=True,
    )
    try:
        loop.start()
    finally:
        server.stop()
        loop.run_sync(mcp.close)
        service.close()
    return 0
