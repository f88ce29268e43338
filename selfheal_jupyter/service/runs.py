"""What the service does for one request, in a worker thread: the policy's answer, then
the run (``full``) or the hint (``hints``), its events handed out, its line in the log.

The service owns the parts a student must not hold: one sandbox engine (its warm pool
capped by ``SelfHeal.pool_size``), the model endpoint and its key (requests to it capped
by ``SelfHeal.service_model_requests`` across all runs), the instructor's policy (read
again when the file changes) and the run log. The loop is built by the factory as in a
kernel; only its sandbox and model client are the service's shared ones.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import SelfHeal, size_bytes
from ..errors import Cancelled, SandboxError, SelfHealError
from ..factory import build_llm, resolve_endpoint, shared_sandbox
from ..llm import LLMClient
from ..loop import events as loop_events
from ..model import Run, Task
from ..runner.hints import words as hint_words
from ..runner.local import LocalRunner
from ..service_client import wire
from ..teaching import policy as policies
from .hints import HintSessions, cell_key, kept, light
from .log import RunLog
from .policy_store import CHANGES_FILE, PolicyStore

Emit = Callable[[Any], None]
ENTRIES = ("agent", "heal", "hint", "autoheal", "run")
REFUSALS_LOGGED = 100
"""Refused requests logged per student and day; more are refused alike, unlogged."""
NOTEBOOK_MAX_CHARS = 4096
"""The longest notebook path a request may say (Linux's PATH_MAX): every request's log line holds it."""


class Refused(Exception):
    """The policy (or a quota) says no; ``kind`` is ``policy`` or ``quota``."""

    def __init__(self, message: str, kind: str = "policy") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Request:
    """One request as the service reads it (the task's copies are bytes it never opens)."""

    entry: str
    task: Task
    notebook: str
    options: dict[str, Any]
    line_offset: int = 0
    """Lines above the code in the student's cell (1: the ``%%hint`` line); hints count
    lines as the student's editor shows them."""
    cell_id: str = ""
    """The id the student's front end gives the cell ("" none): a hint session follows it
    across the student's edits. The student's word, like the notebook's path: it only
    finds a session; the hints a cell may get count over every key it was known by."""

    @classmethod
    def parse(cls, body: object) -> Request:
        if not isinstance(body, dict):
            raise wire.WireError("the request should be an object")
        unknown = sorted(set(body) - {"entry", "task", "notebook", "options", "line_offset", "cell_id"})
        if unknown:
            raise wire.WireError(f"unknown key {unknown[0]!r}")
        entry = body.get("entry")
        if entry not in ENTRIES:
            raise wire.WireError(f"entry should be one of {', '.join(ENTRIES)}")
        notebook = body.get("notebook", "")
        options = body.get("options", {})
        if not isinstance(notebook, str) or not isinstance(options, dict):
            raise wire.WireError("notebook should be text and options an object")
        if len(notebook) > NOTEBOOK_MAX_CHARS:
            raise wire.WireError(f"notebook should be a path of at most {NOTEBOOK_MAX_CHARS} characters")
        task = wire.decode(Task, body.get("task"), "task")
        return cls(
            entry, task, notebook, options, wire.read_line_offset(body.get("line_offset")), wire.read_cell_id(body)
        )


class SharedLLM(LLMClient):
    """The service's model client: at most ``slots`` requests at once across every run."""

    slots: threading.BoundedSemaphore

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        cancel: threading.Event | None = kwargs.get("cancel")
        while not self.slots.acquire(timeout=0.2):
            if cancel is not None and cancel.is_set():
                raise Cancelled("Stopped while waiting for the model.")
        try:
            return super().chat(messages, **kwargs)
        finally:
            self.slots.release()


class PolicyFile:
    """The instructor's policy, read again whenever its file changes (stat per request).

    ``where`` is the file it reads (``path``, else ``$SELFHEAL_POLICY``, else the default
    path): the instructor's page writes there."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.where = path or os.environ.get(policies.ENV_VAR) or policies.DEFAULT_PATH
        self._lock = threading.Lock()
        self._seen = self._stamp()  # before the read: a change in between is read again
        self._policy = policies.read_class(path)

    def _stamp(self) -> tuple[float, int, int] | None:
        try:
            st = os.stat(self.where)
        except OSError:
            return (0.0, 0, 0)
        return (st.st_mtime, st.st_size, st.st_ino)

    def current(self) -> policies.ClassPolicy:
        with self._lock:
            stamp = self._stamp()
            if stamp != self._seen:
                self._policy = policies.read_class(self.path)
                self._seen = stamp
            return self._policy


class Service:
    """The parts a class shares, and the work of one request."""

    def __init__(self, settings: SelfHeal, *, policy: str | None, log: RunLog) -> None:
        self.settings = settings
        self.policy_file = PolicyFile(policy)
        self.log = log
        self.model_slots = threading.BoundedSemaphore(settings.service_model_requests)
        self.hints = HintSessions()
        self.endpoint: Any = None
        self.sandbox: Any = None

    def start(self) -> None:
        """Resolve the model endpoint and warm the sandbox (slow: the service listens
        first, so the hub sees it up, and answers 503 saying so until this is done);
        raises the package's own error when the engine or the endpoint cannot be used."""
        self.endpoint = resolve_endpoint(self.settings)
        self.sandbox = shared_sandbox(self.settings)

    # ------------------------------------------------------------------ policy
    def policy_for(self, groups: set[str], notebook: str) -> policies.Policy:
        return self.policy_file.current().resolve(groups, notebook, datetime.now())

    def admit(self, user: str, policy: policies.Policy, request: Request) -> None:
        """Raise :class:`Refused` in one line naming the rule that says no, or pass. What is
        wrong with a broken policy file (and where it is) is the instructor's to read, on
        the page: the student is told the rules, never a path on the server."""
        if policy.problem:
            raise Refused(f"selfheal is off: {policy.source} cannot be used now. Ask your instructor.")
        if policy.mode == "off":
            raise Refused(f"selfheal is off in this notebook now ({policy.source}).")
        if policy.mode == "hints" and request.entry not in policies.HINT_ENTRIES:
            raise Refused(f"Only hints are allowed here ({policy.source}): use %%hint on your cell.")
        used, quota = self.log.used_today(user), policy.quota
        runs = run_limit(policy)
        needs_run = request.entry != "hint" or self.hints.needs_run(user, request.task, request.cell_id)
        if needs_run and runs is not None and used.runs >= runs:
            raise Refused(f"You have used all {runs} runs of today's quota ({policy.source}).", "quota")
        if request.entry == "hint" and quota.hints is not None and used.hints >= quota.hints:
            raise Refused(f"You have used all {quota.hints} hints of today's quota ({policy.source}).", "quota")
        if quota.tokens is not None and used.tokens >= quota.tokens:
            raise Refused(
                f"You have used all {quota.tokens:,} model tokens of today's quota ({policy.source}).", "quota"
            )
        if request.entry == "hint" and policy.max_hints is not None:
            given = self.given(user, request)
            if given >= policy.max_hints:
                raise Refused(
                    f"You have had all {policy.max_hints} hints this cell may get ({policy.source}). "
                    "Try a change of your own, then run it.",
                    "quota",
                )

    def given(self, user: str, request: Request) -> int:
        """Hints this student had for the cell, by the log: under the session's key (the
        cell's id, across edits) or the code's, whichever counts more — a new id on old
        code, or an edit, starts no fresh count."""
        key = self.hints.key(user, request.task, request.cell_id)
        return max(self.log.hints_for(user, key), self.log.hints_for(user, cell_key(request.task)))

    def refused(self, user: str, request: Request, policy: policies.Policy, refused: Refused) -> None:
        """Log a refused request (the instructor sees who asked during an exam, and why not),
        the first :data:`REFUSALS_LOGGED` of each student's day: a refusal costs the student
        nothing, so without a bound one in a loop would grow the log (and the page's copy)
        without end."""
        if self.log.refused_today(user) >= REFUSALS_LOGGED:
            return
        self.log.write(
            {
                "user": user,
                "entry": request.entry,
                "notebook": request.notebook,
                "mode": policy.mode,
                "cell": cell_key(request.task),
                "runs": 0,
                "outcome": "refused",
                "result": "refused",
                "error": str(refused),
            }
        )

    def policy_store(self) -> PolicyStore:
        """Where the instructor's page writes the policy (the file this service reads)."""
        return PolicyStore(self.policy_file.where, self.log.path.with_name(CHANGES_FILE))

    # ------------------------------------------------------------------ settings
    def settings_for(self, request: Request, policy: policies.Policy, user: str) -> SelfHeal:
        """The service's settings; a request may lower (never raise) a few of them, a
        token quota bounds the run's token budget, and the policy may name the model."""
        own = self.settings
        values: dict[str, Any] = {}
        opts = request.options
        if isinstance(opts.get("max_iterations"), int) and 1 <= opts["max_iterations"] < own.max_iterations:
            values["max_iterations"] = opts["max_iterations"]
        if opts.get("auto_plan") is False:
            values["auto_plan"] = False
        timeout = opts.get("timeout_s")
        if isinstance(timeout, (int, float)) and 0 < timeout < own.timeout_s:
            values["timeout_s"] = float(timeout)
        memory = opts.get("memory")
        try:
            if isinstance(memory, str) and 6 << 20 <= size_bytes(memory) < size_bytes(own.memory):
                values["memory"] = memory
        except ValueError:
            pass
        if policy.model:
            values["model"] = policy.model
        if policy.quota.tokens is not None:
            left = max(1, policy.quota.tokens - self.log.used_today(user).tokens)
            values["token_budget"] = min(own.token_budget or left, left)
        return own.with_values(**values) if values else own

    def _llm(self, settings: SelfHeal) -> LLMClient:
        """The shared model client, asking for the policy's model when it names one
        (:meth:`settings_for` puts it in ``settings.model``)."""
        endpoint = self.endpoint
        if settings.model and settings.model != endpoint.model:
            endpoint = replace(endpoint, model=settings.model)
        llm = build_llm(settings, endpoint, kind=SharedLLM)
        llm.slots = self.model_slots  # type: ignore[attr-defined]
        return llm

    # ------------------------------------------------------------------ work
    def work(self, user: str, request: Request, policy: policies.Policy, emit: Emit, cancel: threading.Event) -> None:
        """Serve one admitted request (in a worker thread): events to ``emit``, a log line."""
        settings = self.settings_for(request, policy, user)
        entry = {
            "user": user,
            "entry": request.entry,
            "notebook": request.notebook,
            "mode": policy.mode,
            "model": policy.model or self.endpoint.model,
        }
        try:
            if request.entry == "hint":
                self._hint(user, request, policy, settings, emit, cancel, entry)
            elif request.options.get("plan_only") is True:
                self._plan(request, settings, emit, cancel, entry)
            else:
                self._full(request, settings, emit, cancel, entry)
        except SelfHealError as exc:
            entry.update(outcome="error", error=str(exc))
            emit(wire.Failed(to_student(exc)))
        finally:
            self.log.write(entry)

    def _runner(self, settings: SelfHeal) -> LocalRunner:
        """The loop here, on the service's shared sandbox and model client."""
        runner = LocalRunner(settings, sandbox=self.sandbox, llm=self._llm(settings))
        runner.start()
        return runner

    def _full(self, request: Request, settings: SelfHeal, emit: Emit, cancel: threading.Event, entry: dict) -> None:
        task = request.task

        def forward(event: Any) -> None:
            if isinstance(event, loop_events.RunStarted):
                emit(
                    loop_events.RunStarted(
                        Run(task=light(task), model=event.run.model, started_at=event.run.started_at)
                    )
                )
            elif not isinstance(event, loop_events.RunFinished):
                emit(event)

        run = self._runner(settings).full(task, request.entry, forward, cancel)
        entry.update(
            runs=1,
            outcome=run.outcome,
            result=result_of(run),
            tokens=_tokens(run),
            cell=cell_key(task),
            rounds=len(run.iterations),
        )
        if run.fix is not None and run.fix.code:  # full mode: the student was handed the fix
            entry["fix"] = run.fix.code
        emit(wire.Finished(replace(run, task=light(task))))

    def _plan(self, request: Request, settings: SelfHeal, emit: Emit, cancel: threading.Event, entry: dict) -> None:
        """``%%agent --plan-only``: the planner's steps, nothing run."""
        plan = self._runner(settings).plan(request.task, lambda _event: None, cancel)
        entry.update(runs=0, outcome="planned")
        emit(wire.Finished(Run(task=light(request.task), plan=plan)))

    def _hint(
        self,
        user: str,
        request: Request,
        policy: policies.Policy,
        settings: SelfHeal,
        emit: Emit,
        cancel: threading.Event,
        entry: dict,
    ) -> None:
        """The runner's hint flow, as in a kernel, on this student's session; only words
        and the hints leave, and the log counts the run, its tokens and the hint."""
        task = request.task
        session = self.hints.session(user, task, policy, line_offset=request.line_offset, cell_id=request.cell_id)
        entry.update(cell=cell_key(task), session=session.key, runs=0, tokens=0)

        said: list[str] = []

        def progress(event: Any) -> None:  # only words leave: nothing of a candidate
            if isinstance(event, loop_events.RunFinished):
                entry.update(runs=1, tokens=_tokens(event.run), outcome=event.run.outcome)
                return
            words = hint_words(event)
            if words is not None and said[-1:] != [words]:  # each change of words once, not per token
                said.append(words)
                emit(wire.Working(words))

        given = self.given(user, request)
        try:
            turn = self._runner(settings).hint(task, session, progress, cancel, given_before=given, keep=kept)
        except Cancelled:  # the run's own words may name the server's engine: not the student's
            stopped = cancel.is_set() or entry.get("outcome") == "cancelled"
            why = "the run was stopped." if stopped else SERVICE_FAILED
            emit(wire.Failed(f"No hint this time: {why} Run %%hint again.", kind="cancelled"))
            return
        assert session.run is not None
        entry.update(outcome=session.run.outcome, result=result_of(session.run) if session.failed else "runs")
        entry["tokens"] += turn.tokens
        if turn.new is not None:
            # what the student was shown, word for word; the fix only when a hint revealed it
            entry.update(
                hints=[turn.new.text], titles=[turn.new.title], level=turn.new.level, revealed=bool(turn.new.diff)
            )
            if turn.new.change:
                entry["change"] = turn.new.change
            if turn.new.diff:
                entry["fix"] = turn.new.diff
        elif turn.note:
            entry["note"] = turn.note
        record = replace(turn.record, task=light(turn.record.task)) if turn.record is not None else None
        emit(wire.HintsFinished(hints=turn.hints, total=turn.total, more=turn.more, note=turn.note, record=record))

    def close(self) -> None:
        from ..factory import close_shared_sandboxes

        close_shared_sandboxes()
        self.log.close()


SERVICE_FAILED = "the service's sandbox or model failed on this run (tell your instructor if it keeps happening)."


def to_student(exc: SelfHealError) -> str:
    """What a student is told of a failure on the service: the engine's own words (its
    paths, its socket) are the instructor's, in the run log; the rest says what to do."""
    if isinstance(exc, SandboxError):
        return "The selfheal service could not run this: " + SERVICE_FAILED
    return str(exc)


def run_limit(policy: policies.Policy) -> int | None:
    """Runs a student may make per day: the lower of the quota's and ``max_runs`` (None: no limit)."""
    limits = [x for x in (policy.quota.runs, policy.max_runs) if x is not None]
    return min(limits) if limits else None


def result_of(run: Run) -> str:
    """The request's result as an instructor reads it: ``runs`` (the student's own cell
    passed), ``fixed`` (a verified fix was found), ``not fixed``, ``cancelled`` or ``error``."""
    first = run.iterations[0] if run.iterations else None
    if first is not None and first.index == 0 and first.verdict.passed:
        return "runs"
    if run.outcome == "success":
        return "fixed"
    if run.outcome in ("cancelled", "error"):
        return run.outcome
    return "not fixed"


def _tokens(run: Run) -> int:
    totals = run.totals
    return int(totals.prompt_tokens + totals.completion_tokens)


def log_path(settings: SelfHeal) -> Path:
    from .log import default_path

    return Path(settings.service_log) if settings.service_log else default_path()
