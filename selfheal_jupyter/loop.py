"""The self-healing loop: planner → developer → QA, bounded, recorded, observable.

Why it looks like this: every bound (iterations, tokens, wall clock, the user's
stop) is checked in one place; every failure of the outside world (the model
endpoint, the sandbox) ends the run with ``outcome="error"`` and a message that says
what to do — it is recorded, never raised to the caller; and everything that
happened is in the returned :class:`Run`. Observers get typed events; nothing here
knows IPython or HTML.
"""

from __future__ import annotations

import io
import keyword
import logging
import pickle
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .agents.developer import Developer, RepairContext
from .agents.planner import Planner
from .agents.qa import QA, check_tests, strip_input_overwrites
from .errors import BadInput, Cancelled, LLMError, SandboxError, SelfHealError
from .events import (
    CandidateReady,
    Event,
    EventHandler,
    ExecutionDone,
    ExecutionStarted,
    PlanReady,
    RunFinished,
    RunStarted,
    TokensStreamed,
    VerdictReady,
)
from .codeblocks import code_diff
from .context import format_context
from .feedback import failure_signature, format_feedback
from .inputs import describe_inputs
from .llm import LLMClient
from .model import (
    Candidate,
    ExecutionResult,
    InputDescription,
    ASSERT_RULES,
    Iteration,
    Limits,
    Plan,
    Run,
    Task,
    Timings,
    Totals,
    Usage,
    Verdict,
)
from .sandbox.base import Sandbox
from .spec import Spec
from .sandbox.serialize import Pickled

log = logging.getLogger(__name__)

NO_CODE_FEEDBACK = (
    "Your reply contained no program. Reply with exactly one fenced ```python block "
    "holding the complete program."
)
MAX_NO_CODE_IN_A_ROW = 2
MAX_ASSERT_CHANGES = 2
"""Rounds whose candidate changed one of the user's asserts or tests before the run ends
``failed``: a model that keeps doing so believes the assert itself is wrong, and only
the user may decide that."""
STOP_POLL_S = 0.05


def validate_task(task: Task) -> None:
    """Raise :class:`BadInput` for a task the loop cannot work on."""
    if not (task.prompt and task.prompt.strip()) and not (
        task.initial_code and task.initial_code.strip()
    ):
        raise BadInput(
            "The task is empty. Describe what the program should do, e.g. "
            "`%%agent` followed by 'plot the monthly mean of df.price', or "
            "`selfheal run \"...\"`."
        )
    for name, value in task.inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise BadInput(
                f"Input name {name!r} is not a Python variable name; the program could not "
                "refer to it. Rename the input (e.g. df or sales_2024)."
            )
        check_serialisable(name, value)
    check_tests(task.tests)


class _Discard(io.RawIOBase):
    """A sink that only counts: pickling into it checks without keeping a copy."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # noqa: ANN001 - buffer protocol
        return len(b)


def check_serialisable(name: str, value: object) -> None:
    """Raise :class:`BadInput` now (before any model call) if ``value`` cannot go to the sandbox."""
    if type(value).__name__ in ("PickleFile", "Pickled"):  # already pickled
        return
    try:
        pickle.Pickler(_Discard(), protocol=5).dump(value)
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        raise BadInput(
            f"The input {name!r} (a {type(value).__name__}) cannot be copied into the "
            f"sandbox: it cannot be pickled ({type(exc).__name__}: {exc}). Pass plain "
            "data instead (a DataFrame, array, list, dict, numbers or strings), e.g. "
            "list(a_generator), or a file's path instead of the open file."
        ) from None


def prepare_inputs(task: Task) -> dict[str, Pickled]:
    """Every value the sandbox gets, pickled once for the whole run (not per iteration):
    the ``--inputs`` and the notebook context's copies (pickled when it was resolved)."""
    prepared = {name: Pickled.of(name, value) for name, value in task.inputs.items()}
    if task.context is not None:
        for name, data in task.context.values.items():
            prepared.setdefault(name, Pickled(data))
    return prepared


class _StopSignal:
    """One event set when the user cancels OR the wall-clock budget runs out.

    The LLM client and the sandbox watch this single event, so either cause stops
    them within a fraction of a second.
    """

    def __init__(self, user: threading.Event | None, deadline: float | None) -> None:
        self.user = user
        self.deadline = deadline
        self.event = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if user is not None or deadline is not None:
            self._thread = threading.Thread(target=self._watch, daemon=True, name="selfheal-stop")
            self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self.cancelled or self.expired:
                self.event.set()
                return
            self._done.wait(STOP_POLL_S)

    @property
    def cancelled(self) -> bool:
        return self.user is not None and self.user.is_set()

    @property
    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


class _Stop(Exception):
    """Internal: leave the iteration loop with this outcome."""

    def __init__(self, outcome: str, message: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


@dataclass
class LoopLimits:
    max_iterations: int = 4
    token_budget: int = 60_000
    """0 = no limit."""
    time_budget_s: float = 900.0
    """0 = no limit."""


class Loop:
    """Runs tasks through planner → developer → QA until a candidate passes or a bound hits."""

    def __init__(
        self,
        llm: LLMClient,
        sandbox: Sandbox,
        *,
        max_iterations: int = 4,
        token_budget: int = 60_000,
        time_budget_s: float = 900.0,
        auto_plan: bool = True,
        limits: Limits | None = None,
        libraries: tuple[str, ...] | None = None,
        retry_temperature: float = 0.8,
        plan_on_heal: bool = True,
    ) -> None:
        if max_iterations < 1:
            raise BadInput(
                f"max_iterations must be at least 1 (got {max_iterations}); "
                "set `%config SelfHeal.max_iterations` or --max-iterations."
            )
        self.llm = llm
        self.sandbox = sandbox
        self.bounds = LoopLimits(max_iterations, token_budget, time_budget_s)
        self.auto_plan = auto_plan
        self.plan_on_heal = plan_on_heal
        """Whether to ask the planner when the task starts from the user's code."""
        self.limits = limits or Limits()
        self.planner = Planner(llm, libraries=libraries)
        self.developer = Developer(llm, libraries=libraries, retry_temperature=retry_temperature)
        self.qa = QA(sandbox, self.limits)

    @property
    def max_iterations(self) -> int:
        return self.bounds.max_iterations

    # ------------------------------------------------------------------ plan only
    def plan(
        self,
        task: Task,
        *,
        on_event: EventHandler | None = None,
        cancel: threading.Event | None = None,
    ) -> Plan:
        """Only the planning step (``--plan-only``). Raises the package's own errors."""
        validate_task(task)
        if task.plan is not None:
            plan = Plan(list(task.plan.steps), source="user")
        else:
            emit = _Emitter(on_event)
            plan, _ = self.planner.plan(
                task.prompt,
                describe_inputs(task.inputs),
                on_token=lambda t: emit(TokensStreamed("planner", 0, t)),
                cancel=cancel,
                context=format_context(task.context),
                data_names=sorted(task.context.data_names()) if task.context else (),
            )
        if on_event is not None:
            _Emitter(on_event)(PlanReady(plan))
        return plan

    # ------------------------------------------------------------------ run
    def run(
        self,
        task: Task,
        *,
        on_event: EventHandler | None = None,
        cancel: threading.Event | None = None,
    ) -> Run:
        """Run ``task`` to an outcome. Never raises for endpoint, sandbox or input failures."""
        started = time.monotonic()
        run = Run(
            task=task,
            model=self.llm.endpoint.model,
            base_url=self.llm.endpoint.base_url,
            started_at=time.time(),
        )
        emit = _Emitter(on_event)
        deadline = started + self.bounds.time_budget_s if self.bounds.time_budget_s > 0 else None
        stop = _StopSignal(cancel, deadline)
        state = _RunState(run=run, stop=stop, emit=emit, started=started)
        emit(RunStarted(run))
        try:
            validate_task(task)
            inputs = describe_inputs(task.inputs)
            state.sandbox_inputs = prepare_inputs(task)
            self._plan_step(task, inputs, state)
            self._iterate(task, inputs, state)
        except _Stop as s:
            run.outcome = s.outcome  # type: ignore[assignment]
            run.error = s.message
        except Cancelled:
            self._stopped(state)
        except (LLMError, SandboxError, BadInput) as exc:
            if stop.event.is_set():
                self._stopped(state)
            else:
                run.outcome, run.error = "error", str(exc)
        except SelfHealError as exc:
            run.outcome, run.error = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the caller's kernel
            log.exception("selfheal loop failed")
            run.outcome = "error"
            run.error = (
                f"Internal error ({type(exc).__name__}: {exc}). This is a bug in "
                "selfheal-jupyter; please report it together with the run record."
            )
        finally:
            stop.close()
        self._finish(state)
        emit(RunFinished(run))
        return run

    # ------------------------------------------------------------------ steps
    def _plan_step(self, task: Task, inputs: list[InputDescription], state: _RunState) -> None:
        run = state.run
        if task.plan is not None:
            run.plan = Plan(list(task.plan.steps), source="user")
        elif self.auto_plan and task.prompt.strip() and (self.plan_on_heal or not task.initial_code):
            self._check_bounds(state, before="planning")
            plan, reply = self.planner.plan(
                task.prompt,
                inputs,
                on_token=lambda t: state.emit(TokensStreamed("planner", 0, t)),
                cancel=state.stop.event,
                context=format_context(task.context),
                data_names=sorted(task.context.data_names()) if task.context else (),
            )
            run.plan = plan
            run.planning_usage = reply.usage
            state.tokens += reply.usage.total_tokens
            state.llm_s += reply.duration_s
        else:
            run.plan = Plan([], source="none")
        state.emit(PlanReady(run.plan))

    def _iterate(self, task: Task, inputs: list[InputDescription], state: _RunState) -> None:
        run = state.run
        if task.initial_code is not None and task.initial_code.strip():
            if self._iteration(task, inputs, state, index=0, given=task.initial_code):
                return
        first = 1
        for index in range(first, self.bounds.max_iterations + 1):
            if self._iteration(task, inputs, state, index=index):
                return
            if state.no_code_in_a_row >= MAX_NO_CODE_IN_A_ROW and index < self.bounds.max_iterations:
                raise _Stop(
                    "failed",
                    f"The model replied {state.no_code_in_a_row} times in a row without a "
                    "program. Try a stronger model (`%config SelfHeal.model`), or rephrase "
                    "the task.",
                )
        run.outcome = "budget_exhausted"
        run.error = (
            f"No candidate passed within max_iterations={self.bounds.max_iterations}. "
            "Raise `%config SelfHeal.max_iterations` (CLI --max-iterations), add detail "
            "to the task, or fix the last program by hand."
        )
        last = run.iterations[-1].verdict if run.iterations else None
        if last is not None and last.spec_violations:
            run.error += (
                " The last candidate was rejected because it changed your spec ("
                + ", ".join(sorted({v.rule for v in last.spec_violations})) + ")."
            )

    def _iteration(
        self,
        task: Task,
        inputs: list[InputDescription],
        state: _RunState,
        *,
        index: int,
        given: str | None = None,
    ) -> bool:
        """One developer → QA round; True when it passed."""
        run = state.run
        t0 = time.monotonic()
        usage = Usage()
        llm_s = 0.0
        reply = ""
        finish = None
        ctx = task.context
        # The user's data (inputs and copied notebook values) must never be replaced.
        data_names = dict.fromkeys([*task.inputs, *(ctx.data_names() if ctx else ())])
        if given is not None:
            code: str | None = given
        else:
            self._check_bounds(state, before=f"iteration {index}")
            proposal = self.developer.propose(
                task.prompt,
                run.plan,
                inputs,
                task.tests,
                state.repair,
                previous_codes=[it.candidate.code for it in run.iterations if it.candidate.code],
                keep_spec=state.spec is not None and not state.spec.empty,
                on_token=lambda t: state.emit(TokensStreamed("developer", index, t)),
                cancel=state.stop.event,
                context=format_context(task.context),
            )
            code, reply, usage, llm_s = (
                proposal.code, proposal.reply, proposal.usage, proposal.llm_s
            )
            if code is not None and data_names:
                code, _ = strip_input_overwrites(code, data_names)
            finish = proposal.finish_reason
            state.tokens += usage.total_tokens
        previous = state.last_code
        candidate = Candidate(code=code or "", iteration=index, reply=reply)
        result: ExecutionResult | None = None
        sandbox_s = 0.0
        diff = ""
        if code is None:
            state.no_code_in_a_row += 1
            verdict = Verdict(False, ["the reply contained no program"])
            feedback = NO_CODE_FEEDBACK
        else:
            state.no_code_in_a_row = 0
            diff = code_diff(previous, code)
            state.emit(CandidateReady(candidate, diff))
            state.emit(ExecutionStarted(index))
            result = self.qa.precheck(code, data_names, defined=ctx.names() if ctx else ())
            if result is None:
                if state.stop.event.is_set():
                    raise Cancelled("Stopped before the sandbox run.")
                s0 = time.monotonic()
                result = self.qa.run(
                    code, state.sandbox_inputs, task.tests, cancel=state.stop.event,
                    prelude=ctx.prelude if ctx else None,
                )
                sandbox_s = time.monotonic() - s0
            state.emit(ExecutionDone(index, result))
            if given is not None:
                # The user's own code is the spec, not a candidate against it.
                state.spec = self.qa.spec_for(task, result)
                violations = None
            else:
                violations = self.qa.check_spec(state.spec, code)
            verdict = self.qa.judge(result, task.tests, violations)
            feedback = format_feedback(result, verdict, limits=self.limits)
        total_s = time.monotonic() - t0
        iteration = Iteration(
            index=index,
            candidate=candidate,
            result=result,
            verdict=verdict,
            diff=diff,
            feedback=feedback,
            usage=usage,
            timings=Timings(
                llm_s=llm_s, sandbox_s=sandbox_s, overhead_s=max(0.0, total_s - llm_s - sandbox_s)
            ),
        )
        run.iterations.append(iteration)
        state.emit(VerdictReady(iteration))
        if verdict.passed:
            run.outcome = "success"
            return True
        if result is not None and result.status == "killed" and state.stop.event.is_set():
            raise Cancelled("Stopped during the sandbox run.")
        changed = [v for v in verdict.spec_violations if v.rule in ASSERT_RULES]
        if changed:
            state.assert_changes.append((index, changed[0].original or changed[0].message))
            if len(state.assert_changes) >= MAX_ASSERT_CHANGES:
                raise _Stop("failed", self._assert_change_message(state))
        # What the next round is told: the program as it stands and what went wrong.
        if code is None:
            # The program as it stands did not change: keep its feedback, ask for code.
            state.repair = RepairContext(
                code=state.last_code,
                feedback=state.repair.feedback if state.repair else "",
                no_code=True,
                truncated=finish == "length",
            )
            return False
        signature = failure_signature(result)
        state.last_code = code
        state.repair = RepairContext(
            code=state.last_code,
            feedback=feedback,
            same_failure=signature == state.last_signature,
            truncated=finish == "length",
        )
        state.last_signature = signature
        return False

    @staticmethod
    def _assert_change_message(state: _RunState) -> str:
        rounds = ", ".join(str(i) for i, _ in state.assert_changes)
        asserts = "; ".join(dict.fromkeys(f"`{what}`" for _, what in state.assert_changes))
        return (
            f"Stopped without success: in rounds {rounds} the model changed your assert(s) "
            f"{asserts} instead of making the program satisfy them. Your asserts and tests are "
            "the specification and are never weakened to reach success. If an assert itself "
            "is wrong, correct it and run again; otherwise add detail to the task or try a "
            "stronger model."
        )

    # ------------------------------------------------------------------ bounds
    def _check_bounds(self, state: _RunState, *, before: str) -> None:
        if state.stop.cancelled:
            raise Cancelled(f"Stopped before {before}.")
        if state.stop.expired:
            raise _Stop(
                "budget_exhausted",
                f"The wall-clock budget of {self.bounds.time_budget_s:g} s ran out before "
                f"{before}. Raise `%config SelfHeal.time_budget_s` (0 = no limit).",
            )
        budget = self.bounds.token_budget
        if budget > 0 and state.tokens >= budget:
            raise _Stop(
                "budget_exhausted",
                f"The token budget of {budget} tokens is used up ({state.tokens} used) "
                f"before {before}. Raise `%config SelfHeal.token_budget` (0 = no limit).",
            )

    def _stopped(self, state: _RunState) -> None:
        """Record why the stop signal fired: the user, or the wall-clock budget."""
        run = state.run
        if state.stop.cancelled or not state.stop.expired:
            run.outcome, run.error = "cancelled", "Stopped by the user."
        else:
            run.outcome = "budget_exhausted"
            run.error = (
                f"The wall-clock budget of {self.bounds.time_budget_s:g} s ran out. "
                "Raise `%config SelfHeal.time_budget_s` (0 = no limit)."
            )

    def _finish(self, state: _RunState) -> None:
        run = state.run
        if run.outcome is None:  # pragma: no cover - every path sets one
            run.outcome = "failed"
        totals = Totals(iterations=len(run.iterations))
        usage = run.planning_usage
        for it in run.iterations:
            usage = usage + it.usage
            totals.llm_s += it.timings.llm_s
            totals.sandbox_s += it.timings.sandbox_s
            totals.overhead_s += it.timings.overhead_s
        totals.llm_s += state.llm_s
        totals.prompt_tokens = usage.prompt_tokens
        totals.completion_tokens = usage.completion_tokens
        totals.duration_s = time.monotonic() - state.started
        run.totals = totals


@dataclass
class _RunState:
    run: Run
    stop: _StopSignal
    emit: Callable[[Event], None]
    started: float
    tokens: int = 0
    llm_s: float = 0.0
    last_code: str | None = None
    last_signature: tuple[str, ...] | None = None
    repair: RepairContext | None = None
    no_code_in_a_row: int = 0
    spec: Spec | None = None
    """The user's spec (set by round 0 when the task starts from their code)."""
    assert_changes: list[tuple[int, str]] = field(default_factory=list)
    """(round, the user's assert) for every round whose candidate changed an assert/test."""
    sandbox_inputs: dict[str, Pickled] = field(default_factory=dict)


class _Emitter:
    """Calls the observer; an observer that raises is logged, never steers the loop."""

    def __init__(self, handler: EventHandler | None) -> None:
        self.handler = handler
        self.failures = 0

    def __call__(self, event: Event) -> None:
        if self.handler is None:
            return
        try:
            self.handler(event)
        except Exception:  # noqa: BLE001
            self.failures += 1
            if self.failures == 1:
                log.exception("an event handler failed on %s", type(event).__name__)

