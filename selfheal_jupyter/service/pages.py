"""The instructor's page: the class's policy, the class at a glance, a student's log, exports.

Served by the service under the hub (``/services/selfheal/``), behind the hub's own
login: :class:`jupyterhub.services.auth.HubOAuth` (the hub registers the service's
OAuth client; ``oauth_callback`` sets the service's cookie). Only hub admins and members
of ``SelfHeal.service_instructors`` (a hub group, default ``instructors``) get past
:meth:`Page.prepare`; everyone else gets 403. Forms post with the hub's XSRF token
(the hub's cookie-and-token check; a post without it is refused before it reaches a
handler) and answer with a redirect.

Plain server-rendered HTML from tornado templates (autoescape on: every text from a
student or a model is escaped where it is written), one stylesheet, no script; the
``Content-Security-Policy`` forbids script, inline styles, plugins and framing, so even a
text that escaped escaping could not run.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated, UserNotAllowed
from jupyterhub.utils import url_path_join
from tornado import web
from tornado.escape import url_escape
from tornado.httpclient import AsyncHTTPClient, HTTPClientError
from tornado.httputil import url_concat

from ..teaching.policy import MODES
from . import classview, export
from .connections import hold, release
from .policy_form import section
from .policy_store import PolicyEditError, PolicyStore

HERE = Path(__file__).resolve().parent
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
ROSTER_PAGE = 200


@dataclass
class PageState:
    """What the pages share: the API's state, the hub login, the policy file's writer."""

    api: Any
    """The service's :class:`~.app.State` (its service, log, hub token, instructors' group)."""
    prefix: str
    store: PolicyStore
    _oauth: HubOAuth | None = field(default=None, repr=False)

    @property
    def oauth(self) -> HubOAuth | None:
        """The hub login (None when the hub registered no OAuth client for this service)."""
        if self._oauth is None and os.environ.get("JUPYTERHUB_CLIENT_ID"):
            self._oauth = HubOAuth(cache_max_age=10)
        return self._oauth

    def down(self) -> str:
        """Why students cannot be served now ("" when they can): the engine, the endpoint."""
        if getattr(self.api, "problem", ""):
            return f"Students cannot be served: {self.api.problem}"
        if not getattr(self.api, "ready", True):
            return "The service is still starting its sandbox and model: students' requests wait for it."
        return ""

    @property
    def instructors(self) -> str:
        return str(self.api.instructors)

    async def roster(self) -> tuple[dict[str, set[str]], list[str], str]:
        """Every hub group but the instructors' (the courses) with its members, asked with
        the service's own token: (student → courses, courses, a problem to show or "")."""
        hub = self.api.hub_auth
        url = url_path_join(hub.api_url, "groups")
        headers = {
            "Authorization": f"token {hub.api_token}",
            "Accept": "application/jupyterhub-pagination+json",
        }
        students: dict[str, set[str]] = {}
        courses: list[str] = []
        offset = 0
        try:
            while True:
                response = await AsyncHTTPClient().fetch(
                    url_concat(url, {"offset": str(offset), "limit": str(ROSTER_PAGE)}),
                    headers=headers,
                    request_timeout=10,
                )
                body = json.loads(response.body)
                for group in body.get("items", []):
                    name = str(group.get("name", ""))
                    if not name or name == self.instructors:
                        continue
                    courses.append(name)
                    for user in group.get("users") or []:
                        students.setdefault(str(user), set()).add(name)
                following = (body.get("_pagination") or {}).get("next")
                if not following:
                    break
                offset = int(following.get("offset", offset + ROSTER_PAGE))
        except (HTTPClientError, OSError, ValueError) as exc:
            problem = (
                f"JupyterHub could not be asked for its groups ({exc}): the rows show the students of the run log only."
            )
            return students, courses, problem
        return students, sorted(courses), ""


class Page(HubOAuthenticated, web.RequestHandler):
    """A page for instructors (hub admins or the instructors' group); 403 for anyone else."""

    user: dict[str, Any]

    def initialize(self, page: PageState) -> None:
        self.page = page
        if page.oauth is not None:
            self.hub_auth = page.oauth

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self) -> None:
        if self.page.oauth is None:
            raise web.HTTPError(503, "The selfheal service has no hub login (no OAuth client).")
        super().check_xsrf_cookie()

    async def prepare(self) -> None:
        auth = self.page.oauth
        if auth is None:
            raise web.HTTPError(
                503,
                "The selfheal service has no hub login: run it as a hub-managed service (the block "
                "`selfheal service --hub-config` prints), so that the hub registers its OAuth client.",
            )
        try:
            model = await auth.get_user(self, sync=False)
        except web.HTTPError:
            raise web.HTTPError(
                503, "JupyterHub cannot be reached to check who you are: try again in a minute."
            ) from None
        if not model:
            if self.request.method in ("GET", "HEAD"):
                self.redirect(self.get_login_url())
                return
            raise web.HTTPError(403, "Your sign-in expired or this form is stale: reload the page, then try again.")
        try:
            allowed = self.check_hub_user(model)
        except UserNotAllowed:
            allowed = None
        if not allowed or model.get("kind", "user") != "user":
            raise web.HTTPError(403, "Your hub account may not use the selfheal service. Ask your hub's admin.")
        self._hub_auth_user_cache = allowed
        groups = set(model.get("groups") or [])
        if not (model.get("admin") or self.page.instructors in groups):
            raise web.HTTPError(
                403,
                f"This page is for the class's instructors (hub admins and the hub group "
                f"“{self.page.instructors}”). You are signed in as {model['name']}.",
            )
        self.user = model
        hold(self, self.page.api)

    def on_finish(self) -> None:
        release(self, self.page.api)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or self._reason
        self.render("error.html", status=status_code, reason=self._reason, message=message, user=None)

    def get_template_namespace(self) -> dict[str, Any]:
        namespace = super().get_template_namespace()
        oauth = self.page.oauth
        hub_home = url_path_join(oauth.hub_prefix, "home") if oauth is not None else "/hub/home"
        namespace.update(prefix=self.page.prefix, when=when, user=getattr(self, "user", None), hub_home=hub_home)
        namespace.setdefault("current", "")
        return namespace

    @property
    def log(self) -> Any:
        return self.page.api.service.log

    def back(self, path: str, **query: str) -> None:
        """After a post: see the page again (303, so a reload does not post twice)."""
        self.redirect(url_concat(self.page.prefix + path, query), status=303)


def _of(data: dict[str, Any], key: str, kind: type) -> Any:
    """``data[key]`` when it is of ``kind`` (a hand-edited file may hold anything), else empty."""
    value = data.get(key)
    return value if isinstance(value, kind) else kind()


def when(stamp: str) -> str:
    """A log time as people read it (``2026-11-27 16:05``)."""
    return stamp.replace("T", " ")[:16]


class ClassPage(Page):
    async def get(self) -> None:
        roster, courses, problem = await self.page.roster()
        course = self.get_argument("course", "")
        service = self.page.api.service
        policy = service.policy_file.current()
        entries = self.log.entries()
        if course:
            members = {n for n, groups in roster.items() if course in groups}
            roster = {n: g for n, g in roster.items() if n in members}
            entries = [e for e in entries if e.get("user") in members]
        rows = classview.rows(entries, roster, policy, self.log.used_today, datetime.now())
        now = datetime.now()
        in_effect = [(c, policy.resolve({c}, "", now)) for c in courses] or [("the whole class", policy.default)]
        self.render(
            "class.html",
            current="class",
            rows=rows,
            courses=courses,
            course=course,
            problem=problem,
            in_effect=in_effect,
            reset=self.get_argument("reset", ""),
            down=self.page.down(),
        )


class StudentPage(Page):
    async def get(self, name: str) -> None:
        views = classview.student_log(self.log.entries(), name)
        self.render("student.html", name=name, views=views, reset=self.get_argument("reset", ""))


class ResetQuota(Page):
    async def post(self, name: str) -> None:
        self.log.reset_today(name, by=self.user["name"])
        to = self.get_body_argument("back", "")
        if to == "student":
            self.back("students/" + url_escape(name, plus=False), reset=name)
        else:
            self.back("", reset=name)


class PolicyPage(Page):
    async def get(self) -> None:
        await self.show()

    async def show(self, error: str = "", saved: str = "") -> None:
        _, courses, problem = await self.page.roster()
        store = self.page.store
        service = self.page.api.service
        try:
            data = store.read()
            unreadable = ""
        except PolicyEditError as exc:
            data, unreadable = {}, str(exc)
        in_use = service.policy_file.current().default
        groups = _of(data, "groups", dict)
        notebooks = _of(data, "notebooks", dict)
        windows = _of(data, "windows", list)
        endpoint = getattr(service, "endpoint", None)
        default_model = getattr(endpoint, "model", "") or service.settings.model or "the service's"
        self.render(
            "policy.html",
            current="policy",
            data=data,
            courses=sorted({*courses, *groups}),
            groups=groups,
            notebooks=notebooks,
            windows=[w for w in windows if isinstance(w, dict)],
            problem=problem,
            unreadable=unreadable or in_use.problem,
            path=str(store.path),
            error=error,
            saved=saved or self.get_argument("saved", ""),
            modes=MODES,
            default_model=default_model,
            changes=store.changes(),
        )

    async def post(self) -> None:
        form = {k: self.get_body_argument(k) for k in self.request.body_arguments if k != "_xsrf"}
        try:
            edit = section(form)
            said = self.page.store.edit(self.user["name"], edit.what, edit.edit, edit.at)
        except PolicyEditError as exc:
            self.set_status(400)
            await self.show(error=str(exc))
            return
        self.back("policy", saved=said or "Nothing changed.")


class Export(Page):
    async def get(self, kind: str) -> None:
        course = self.get_argument("course", "")
        users = None
        if course:
            roster, _, _ = await self.page.roster()
            users = {n for n, groups in roster.items() if course in groups}
        found = export.requests(self.log.entries(), users)
        stamp = datetime.now().strftime("%Y%m%d-%H%M")
        name = f"selfheal-log-{course + '-' if course else ''}{stamp}"
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        if kind == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            body = export.to_csv(found)
        else:
            self.set_header("Content-Type", "application/x-ndjson; charset=utf-8")
            body = export.to_json_lines(found)
        self.set_header("Content-Disposition", f'attachment; filename="{name}.{kind}"')
        self.finish(body.encode("utf-8"))


class Callback(HubOAuthCallbackHandler):
    """The end of the hub login: the hub sends the browser here with a code; the service's
    cookie is set and the browser goes back to the page it asked for."""

    def initialize(self, page: PageState) -> None:
        if page.oauth is None:
            raise web.HTTPError(503, "The selfheal service has no hub login (no OAuth client).")
        self.hub_auth = page.oauth

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", CSP)


def routes(prefix: str, api: Any, store: PolicyStore) -> list[tuple[Any, ...]]:
    """The page's URLs under the service's prefix."""
    page = PageState(api=api, prefix=prefix, store=store)
    args = {"page": page}
    return [
        (prefix, ClassPage, args),
        (prefix + "oauth_callback", Callback, args),
        (prefix + "policy", PolicyPage, args),
        (prefix + r"students/([^/]+)", StudentPage, args),
        (prefix + r"students/([^/]+)/reset", ResetQuota, args),
        (prefix + r"export\.(csv|jsonl)", Export, args),
    ]


def settings(prefix: str) -> dict[str, Any]:
    """The application settings the pages need (templates, stylesheet, cookies, XSRF)."""
    return {
        "template_path": str(HERE / "templates"),
        "autoescape": "xhtml_escape",
        "static_path": str(HERE / "static"),
        "static_url_prefix": prefix + "static/",
        # the login cookie lives as long as this process: after a restart the hub signs the
        # instructor in again without a question (the service's OAuth client needs no consent)
        "cookie_secret": secrets.token_bytes(32),
        "xsrf_cookies": True,
    }
