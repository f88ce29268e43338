"""One class on one JupyterHub for the lane: the hub, its proxy, the selfheal service and the
scripted model they reach are started once per session and shared by every test whose
subject is not the hub's or the service's own start, stop or crash.

A test takes ``classroom`` and gets what a fresh hub would give it: two students nobody
has used (quotas and hints are counted per student), the policy it writes, the script and
model name it gives the model, and the run log from where it began. The hub's settings are
those every sharing test can live with: the instructor's page signs in with ``PASSWORD``
(the instructors' group holds ``TA``), the hint writer's prose is on, and the hub (so the
service) has ``NOFILE`` open files. A test whose subject is the hub or the service going
away starts its own with :func:`tests.class_hub.class_hub`.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from tests.class_hub import INSTRUCTOR, MODEL_KEY, Hub, class_hub, ensure_student_venv, ensure_user
from tests.scripted_server import ScriptedServer, ScriptItem

PASSWORD = "class-" + secrets.token_hex(6)
"""Every user's password on the shared hub's login form (the dummy authenticator's)."""
TA = "selfheal-ta"
"""A teaching assistant: in the instructors' group, no hub admin."""
NOFILE = 1024
"""The shared hub's (so the service's) open-file limit: a flood past it stays small."""
PAIRS = 20
"""Pairs of students the shared hub knows: one pair for each test that shares it."""
STUDENT_POOL = tuple(f"selfheal-c{i:02}" for i in range(1, 2 * PAIRS + 1))
MORE_CONFIG = f"""
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users.add({TA!r})
c.JupyterHub.load_groups["instructors"] = {{"users": [{TA!r}]}}
"""


@dataclass
class SharedClass:
    hub: Hub
    model: ScriptedServer
    pairs: Iterator[int] = field(default_factory=count)


@dataclass
class Classroom:
    """One test's view of the shared class."""

    hub: Hub
    model: ScriptedServer
    students: tuple[str, str]
    log_start: int

    def policy(self, policy: dict[str, Any]) -> None:
        """A new policy file in place of the old (the service sees the change by its inode)."""
        path = self.hub.folder / "policy.json"
        path.with_suffix(".new").write_text(json.dumps(policy))
        os.replace(path.with_suffix(".new"), path)

    def script(self, *replies: ScriptItem, model: str = "scripted-model") -> None:
        self.model.reset(replies, model=model)

    @property
    def log_path(self) -> Path:
        return self.hub.folder / "service-log.jsonl"

    def log(self) -> list[dict[str, Any]]:
        """The service's log lines written since this test began."""
        with self.log_path.open("rb") as fh:
            fh.seek(self.log_start)
            return [json.loads(line) for line in fh.read().splitlines()]


@pytest.fixture(scope="session")
def shared_class(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[SharedClass]:
    for user in (*STUDENT_POOL, INSTRUCTOR, TA):
        ensure_user(user)
    ensure_student_venv()
    folder = tmp_path_factory.mktemp("shared-class")
    with (
        ScriptedServer(api_key=MODEL_KEY) as model,
        class_hub(
            folder / "hub",
            {"mode": "full"},
            model.base_url,
            "--SelfHeal.hint_prose=True",
            more_config=MORE_CONFIG,
            nofile=NOFILE,
            students=STUDENT_POOL,
        ) as hub,
    ):
        yield SharedClass(hub, model)


@pytest.fixture()
def classroom(shared_class: SharedClass) -> Classroom:
    """The shared class for one test: two unused students, the policy ``{"mode": "full"}``,
    an empty script (``classroom.script(...)`` gives one), the log from here."""
    pair = next(shared_class.pairs)
    if pair >= PAIRS:
        pytest.fail(f"the shared hub knows {PAIRS} pairs of students: raise PAIRS in tests/hub/conftest.py")
    students = (STUDENT_POOL[2 * pair], STUDENT_POOL[2 * pair + 1])
    room = Classroom(shared_class.hub, shared_class.model, students, 0)
    room.policy({"mode": "full"})
    room.script()
    room.log_start = room.log_path.stat().st_size if room.log_path.exists() else 0
    return room
