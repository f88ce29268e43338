"""Who is asking: JupyterHub's own service auth, nothing home-made.

Every API request carries a hub token (a kernel's ``$JUPYTERHUB_API_TOKEN``, or one the
user made on the hub's token page); :class:`jupyterhub.services.auth.HubAuth` asks the
hub whose it is and whether it holds ``access:services!service=selfheal`` (the role
that ``selfheal service --hub-config`` grants every user). The user's hub groups (for
the policy's course overrides) are read with the service's own token, so a token
scoped down to the service still gets its student's course rules. A browser page for
instructors (the next step) subclasses :class:`HubUserHandler` with ``HubOAuth``.
Each refusal is JSON in one line: 401 (no token, or one the hub does not know), 403
(a token without the role), 503 (the hub cannot be asked).
"""

from __future__ import annotations

import json
import time
from typing import Any

from jupyterhub.services.auth import HubAuth, HubAuthenticated, UserNotAllowed
from jupyterhub.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

GROUPS_TTL_S = 30.0
TOKEN_CACHE_S = 10
"""How long the hub's answer on a token is kept: a revoked or expired token stops
working within this."""


def hub_auth() -> HubAuth:
    """The service's HubAuth, configured from the hub's environment (``JUPYTERHUB_*``)."""
    return HubAuth(cache_max_age=TOKEN_CACHE_S)


class HubUnreachable(Exception):
    pass


class HubUserHandler(HubAuthenticated, web.RequestHandler):
    """A request from a hub user, identified before the handler runs."""

    hub_user: dict[str, Any]

    def initialize(self, state: Any) -> None:
        self.state = state
        self.hub_auth = state.hub_auth

    def fail(self, status: int, kind: str, message: str) -> None:
        """End the request with one JSON line (what happened, what to do)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"kind": kind, "message": message}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"kind": "error", "message": f"The selfheal service: {message}"}))

    def check_xsrf_cookie(self) -> None:
        """API requests carry a token, never a cookie: there is nothing to forge across sites."""

    async def prepare(self) -> None:
        try:
            model = await self.hub_auth.get_user(self, sync=False)
        except web.HTTPError:
            self.fail(
                503,
                "hub",
                "The selfheal service cannot reach JupyterHub to check your token: the hub is down "
                "or restarting. Try again in a minute; if it lasts, tell your instructor.",
            )
            return
        if not model:
            self.fail(
                401,
                "auth",
                "The selfheal service refused your token (HTTP 401): JupyterHub does not know it, or it "
                "expired. Restart your server from the hub's control panel to get a fresh one.",
            )
            return
        try:
            allowed = self.check_hub_user(model)
        except UserNotAllowed:
            allowed = None
        if not allowed or model.get("kind", "user") != "user":
            self.fail(
                403,
                "auth",
                "The selfheal service does not let this token in (HTTP 403): it lacks "
                f"{', '.join(sorted(self.hub_auth.access_scopes))}. Ask your hub's admin.",
            )
            return
        self.hub_user = model

    async def groups(self) -> set[str]:
        """The user's hub groups (asked with the service's own token, kept a little)."""
        name = self.hub_user["name"]
        cache = self.state.groups_cache
        found = cache.get(name)
        if found is not None and time.monotonic() - found[0] < GROUPS_TTL_S:
            return found[1]
        url = url_path_join(self.hub_auth.api_url, "users", name)
        try:
            response = await AsyncHTTPClient().fetch(
                url, headers={"Authorization": f"token {self.hub_auth.api_token}"}, request_timeout=10
            )
            groups = set(json.loads(response.body).get("groups") or [])
        except (HTTPClientError, OSError, ValueError) as exc:
            raise HubUnreachable(str(exc)) from None
        cache[name] = (time.monotonic(), groups)
        return groups

    def is_instructor(self, groups: set[str]) -> bool:
        return bool(self.hub_user.get("admin")) or self.state.instructors in groups
