"""The local runner: the loop in this process (a kernel, ``selfheal run``, and the class
service for each of its requests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..config import SelfHeal
from ..llm import LLMClient
from ..loop.fix_handover import run_with_fix
from ..loop.orchestrator import Loop
from ..model import Plan, Run, Task
from ..sandbox.base import Sandbox
from ..teaching.session import HintSession
from . import hints
from .base import Emit, HintTurn, Runner, Taken


class LocalRunner(Runner):
    """Runs here, with a loop the factory builds for ``settings`` (``sandbox`` and ``llm``:
    shared ones to build it with, as the class service's)."""

    preparing = "starting the model endpoint and the sandbox…"

    def __init__(self, settings: SelfHeal, *, sandbox: Sandbox | None = None, llm: LLMClient | None = None) -> None:
        self.settings = settings
        self._sandbox, self._llm = sandbox, llm
        self._loop: Loop | None = None

    def start(self) -> None:
        """Build the loop: resolve the endpoint (the embedded model starts), warm the sandbox."""
        if self._loop is None:
            from ..factory import build_loop

            self._loop = build_loop(self.settings, sandbox=self._sandbox, llm=self._llm)

    @property
    def loop(self) -> Loop:
        self.start()
        assert self._loop is not None
        return self._loop

    def full(self, task: Task, entry: str, emit: Emit, cancel: threading.Event) -> Run:
        return run_with_fix(self.loop, task, emit, cancel, search_tries=self.settings.fix_search_tries)

    def plan(self, task: Task, emit: Emit, cancel: threading.Event) -> Plan:
        return self.loop.plan(task, on_event=emit, cancel=cancel)

    def hint(
        self,
        task: Task,
        session: HintSession,
        emit: Emit,
        cancel: threading.Event,
        *,
        taken: Taken | None = None,
        given_before: int = 0,
        keep: Callable[[Run], Run] = lambda run: run,
    ) -> HintTurn:
        """The cell's run when its session has none of the code as it is now (a new cell,
        or the student edited it: :func:`~selfheal_jupyter.runner.hints.find`), then its
        next hint (:func:`~selfheal_jupyter.runner.hints.next_turn`). The class
        service says how many hints its log counted (``given_before``) and keeps a
        lighter run (``keep``)."""
        why_no_fix = ""
        if session.needs_run(task):
            why_no_fix = hints.find(session, self.loop, task, emit, cancel, keep=keep)
        llm: Any = self.loop.llm if self.settings.hint_prose else None
        turn = hints.next_turn(session, emit, cancel, llm=llm, given_before=given_before, taken=taken)
        turn.why_no_fix = why_no_fix
        return turn

    def packages(self) -> dict[str, str] | None:
        try:
            from ..factory import shared_sandbox
            from ..sandbox.image import image_packages

            sandbox = shared_sandbox(self.settings)
            return image_packages(sandbox.client, sandbox.ref)  # type: ignore[attr-defined]
        except Exception:
            return None
