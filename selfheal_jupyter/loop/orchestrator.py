"""The self-healing loop: planner → developer → QA, bounded, recorded, observable.

Why it looks like this: every bound (iterations, tokens, wall clock, the user's
stop) is checked in one place; every failure of the outside world (the model
endpoint, the sandbox) ends the run with ``outcome="error"`` and a message that says
what to do — it is recorded, never raised to the caller; and everything that
happened is in the returned :class:`Run`. Observers get typed events; nothing here
knows IPython or HTML.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..agents.checks import CheckDesigner
from ..agents.data_checks import run_checks
from ..agents.developer import Developer, Proposal, RepairContext
from ..agents.inputs import describe_inputs, format_context
from ..agents.planner import Planner
from ..agents.qa import (
    QA,
    hold_known_wrong,
    hold_same_behaviour,
    same_program,
    strip_input_overwrites,
)
from ..codeblocks import code_diff
from ..diagnosis import apply_edits, explain
from ..errors import BadInput, Cancelled, LLMError, SandboxError, SelfHealError
from ..feedback import check_lines, failure_signature, format_feedback, runtime_value_lines
from ..llm import LLMClient
from ..model import (
    ASSERT_RULES,
    Candidate,
    ExecutionResult,
    Explanation,
    InputDescription,
    Iteration,
    Limits,
    Plan,
    Run,
    Task,
    TestOutcome,
    Timings,
    Totals,
    Usage,
    Verdict,
    has_assert,
)
from ..sandbox.base import Sandbox
from ..sandbox.serialize import Pickled
from ..spec.behaviour import Observation
from ..spec.guard import Spec
from ..spec.notebook_data import redefined
from ..spec.probes import differences, plan_probes, probe_values
from .advice import HOPELESS_SAME_FAILURE, MAX_REPEATS, next_step
from .choice import Trial, choose
from .events import (
    CandidateReady,
    Event,
    EventHandler,
    ExecutionDone,
    ExecutionStarted,
    FailureExplained,
    ModelWaiting,
    PlanReady,
    RunFinished,
    RunStarted,
    TokensStreamed,
    VerdictReady,
)
from .task_admission import prepare_inputs, validate_task

log = logging.getLogger(__name__)

NO_CODE_FEEDBACK = (
    "Your reply contained no program. Reply with exactly one fenced ```python block holding the complete program."
)
EDIT_FAILED_FEEDBACK = (
    "Your reply's SEARCH/REPLACE blocks could not be applied to the current program: "
    "{failure}. The program was not changed and not run. Reply with the whole corrected "
    "program in one fenced ```python block."
)
REPEAT_FEEDBACK = (
    "Your reply was the program of round {round} again, which already failed; it was not "
    "run again. Change the code: take another approach to what went wrong below."
)
MAX_NO_CODE_IN_A_ROW = 2
MAX_QUICK_FIXES = 3
"""Most of the tool's own edits tried in one run (each is one sandbox run, no model)."""
MAX_ASSERT_CHANGES = 2
"""Rounds whose candidate changed one of the user's asserts or tests before the run ends
``failed``: a model that keeps doing so believes the assert itself is wrong, and only
the user may decide that."""
STOP_POLL_S = 0.05
FRESH_FROM_SAMPLE = 3
"""From this sample of a repair round on (``SelfHeal.candidates`` ≥ 3), a sample starts
over from the task (for a heal: from the user's code) instead of repairing the last
program: asked to repair, a small model often copies the failing program, also at the
retry temperature (figures: docs/measurements.md)."""


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
    max_iterations: int
    token_budget: int
    """0 = no limit."""
    time_budget_s: float
    """0 = no limit."""
    max_code_bytes: int = 0
    """The largest program, task text or tests a run takes; 0 = any."""


@dataclass
class Strategies:
    """What the loop does beyond write → run → repair (the defaults live in ``SelfHeal``)."""

    generated_checks: int
    """How many soft checks QA writes from the task before any code (0 = none)."""
    candidates: int
    """Programs sampled per repair round (round 2 on); one is chosen by execution
    (:mod:`~selfheal_jupyter.loop.choice`)."""
    runtime_values: bool
    """Show the values of the failing statement's sub-expressions (:mod:`~selfheal_jupyter.spec.probes`)."""
    explain_first: bool
    """Ask the model to explain the bug before each repair."""
    restart_after: int
    """Start over after this many failed repairs in a row (0 = never)."""
    intent_checks: int = 0
    """Like ``generated_checks``, for a heal of a cell without asserts or tests: checks
    from the cell's intent (used when ``generated_checks`` is 0)."""
    quick_fixes: bool = False
    """Try the edit a failure's own diagnosis implies before asking the model."""


class Loop:
    """Runs tasks through planner → developer → QA until a candidate passes or a bound hits.

    Every value comes from the caller (``factory.build_loop`` turns ``SelfHeal`` into
    them); ``libraries`` None means the sandbox image's usual ones."""

    def __init__(
        self,
        llm: LLMClient,
        sandbox: Sandbox,
        *,
        bounds: LoopLimits,
        auto_plan: bool,
        plan_on_heal: bool,
        limits: Limits,
        plan_min_words: int = 0,
        retry_temperature: float,
        repair_format: str,
        strategies: Strategies,
        libraries: tuple[str, ...] | None = None,
    ) -> None:
        self.llm = llm
        self.sandbox = sandbox
        self.bounds = bounds
        self.auto_plan = auto_plan
        self.plan_on_heal = plan_on_heal
        """Whether to ask the planner when the task starts from the user's code."""
        self.plan_min_words = plan_min_words
        """The planner is asked only for a task of at least this many words."""
        self.limits = limits
        self.planner = Planner(llm, libraries=libraries)
        self.developer = Developer(
            llm, libraries=libraries, retry_temperature=retry_temperature, repair_format=repair_format
        )
        self.qa = QA(sandbox, self.limits)
        self.strategies = strategies
        self.designer = CheckDesigner(llm)

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
        self.llm.admit = functools.partial(self._admit, state)
        self.llm.on_wait = lambda ahead: emit(ModelWaiting(ahead))
        try:
            validate_task(task, max_code_bytes=self.bounds.max_code_bytes)
            inputs = describe_inputs(task.inputs)
            state.sandbox_inputs = prepare_inputs(task)
            self._plan_step(task, inputs, state)
            self._design_checks(task, inputs, state)
            self._iterate(task, inputs, state)
        except _Stop as s:
            self._keep_round(state, s)
            run.outcome = s.outcome  # type: ignore[assignment]
            run.error = s.message
        except Cancelled:
            self._stopped(state)
        except (LLMError, SandboxError, BadInput) as exc:
            self._keep_round(state, exc)
            if stop.event.is_set():
                self._stopped(state)
            else:
                run.outcome, run.error = "error", str(exc)
        except SelfHealError as exc:
            self._keep_round(state, exc)
            run.outcome, run.error = "error", str(exc)
        except Exception as exc:
            log.exception("selfheal loop failed")
            run.outcome = "error"
            run.error = (
                f"Internal error ({type(exc).__name__}: {exc}). This is a bug in "
                "selfheal-jupyter; please report it together with the run record."
            )
        finally:
            stop.close()
            self.llm.admit = None
            self.llm.on_wait = None
        if state.soft_from is not None and run.outcome in ("budget_exhausted", "failed", "error"):
            # A candidate had passed the user's tests; only the soft round after it failed.
            run.outcome, run.error = "success", ""
        self._finish(state)
        emit(RunFinished(run))
        return run

    def recheck(self, run: Run, code: str, *, cancel: threading.Event | None = None) -> Trial:
        """Judge ``code`` as ``run`` judged its candidates: the same inputs, notebook
        prelude, tests, spec of the user's code, generated checks, and, when the task says
        the given program is wrong, the same comparison with what it showed. For a smaller
        form of the passing program (what a notebook hands over). Raises ``SandboxError``
        and ``Cancelled``."""
        task = run.task
        stop = _StopSignal(cancel, None)
        state = _RunState(run=run, stop=stop, emit=_Emitter(None), started=time.monotonic())
        ctx = task.context
        prelude = ctx.prelude if ctx else None
        try:
            state.sandbox_inputs = prepare_inputs(task)
            given = next((it for it in run.iterations if it.index == 0), None)
            if task.initial_code is not None and given is not None:
                state.spec = self.qa.spec_for(task, given.result)
                if given.verdict.held == "given":
                    state.given_seen = self.qa.observe(
                        task.initial_code, state.sandbox_inputs, task.tests, cancel=stop.event, prelude=prelude
                    )
            data_names = dict.fromkeys([*task.inputs, *(ctx.data_names() if ctx else ())])
            trial, _ = self._evaluate(task, state, 0, code, data_names, given=False, announce=None, show=False)
        finally:
            stop.close()
        return trial

    # ------------------------------------------------------------------ steps
    def _plan_step(self, task: Task, inputs: list[InputDescription], state: _RunState) -> None:
        run = state.run
        if task.plan is not None:
            run.plan = Plan(list(task.plan.steps), source="user")
        elif (
            self.auto_plan
            and task.prompt.strip()
            and (self.plan_on_heal or not task.initial_code)
            and len(task.prompt.split()) >= self.plan_min_words
        ):
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

    def _design_checks(self, task: Task, inputs: list[InputDescription], state: _RunState) -> None:
        """QA's soft checks, from the task alone (and a repair's comments/docstrings)."""
        count = self.strategies.generated_checks
        if count <= 0 and task.initial_code and not task.tests and not has_assert(task.initial_code):
            count = self.strategies.intent_checks
        if count <= 0:
            return
        self._check_bounds(state, before="writing the generated checks")
        checks = self.designer.design(
            task.prompt,
            inputs,
            count=count,
            initial_code=task.initial_code,
            user_tests=task.tests,
            cancel=state.stop.event,
        )
        state.run.checks = checks
        state.tokens += checks.usage.total_tokens
        state.llm_s += checks.llm_s
        state.run.planning_usage = state.run.planning_usage + checks.usage

    def _iterate(self, task: Task, inputs: list[InputDescription], state: _RunState) -> None:
        run = state.run
        if (
            task.initial_code is not None
            and task.initial_code.strip()
            and self._iteration(task, inputs, state, index=0, given=task.initial_code)
        ):
            return
        index, last = 1, self.bounds.max_iterations
        while index <= last:
            quick = state.quick_fix is not None
            if self._iteration(task, inputs, state, index=index):
                return
            if quick:
                last += 1  # the tool's own edit did not pass: the model still gets its rounds
            index += 1
            if state.no_code_in_a_row >= MAX_NO_CODE_IN_A_ROW and index <= last:
                raise _Stop(
                    "failed",
                    f"The model replied {state.no_code_in_a_row} times in a row without a "
                    "program. Try a stronger model (`%config SelfHeal.model`), or rephrase "
                    "the task.",
                )
        run.outcome = "budget_exhausted"
        run.error = f"No candidate passed within max_iterations={self.bounds.max_iterations}. {next_step(run)}"
        final = run.iterations[-1].verdict if run.iterations else None
        if final is not None and final.spec_violations:
            run.error += (
                " The last candidate was rejected because it changed your spec ("
                + ", ".join(sorted({v.rule for v in final.spec_violations}))
                + ")."
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
        """One developer → QA round, in steps: write (one program, or samples), run and
        judge each, choose, say what went wrong, record; True when the run ends with
        success."""
        t0 = time.monotonic()
        ctx = task.context
        # The user's data (inputs and copied notebook values) must never be replaced.
        data_names = dict.fromkeys([*task.inputs, *(ctx.data_names() if ctx else ())])
        state.round = _RoundSoFar(index, code=given)
        written = self._write(task, inputs, state, index, given, data_names)
        previous = state.last_code
        trials, sandbox_s = self._run_and_judge(task, state, index, written, given, data_names, previous)
        best, samples = (0, []) if len(trials) == 1 else choose(trials)
        trial, chosen = trials[best], written.proposals[best]
        repeat_of = written.repeat_of.get(best)
        if repeat_of is not None:
            chosen = replace(chosen, code=None)
        code = chosen.code
        result, verdict, checks = trial.result, trial.verdict, trial.checks
        candidate = Candidate(code=code or "", iteration=index, reply=chosen.reply)
        diff = "" if code is None else code_diff(previous, code)
        if len(trials) > 1 and code is not None:
            state.emit(CandidateReady(candidate, diff))
            state.emit(ExecutionStarted(index))
            if result is not None:
                state.emit(ExecutionDone(index, result))
            if trial.explanation is not None:
                state.emit(FailureExplained(index, trial.explanation))
        explanation = trial.explanation
        feedback, values, failing_checks, probe_s = self._explain(
            task, state, chosen, result, verdict, checks, explanation, repeat_of
        )
        sandbox_s += probe_s
        soft = (
            bool(failing_checks) and verdict.passed and state.soft_from is None and (index < self.bounds.max_iterations)
        )
        if soft:
            feedback = "\n".join(failing_checks)
        total_s = time.monotonic() - t0
        iteration = Iteration(
            index=index,
            candidate=candidate,
            result=result,
            verdict=verdict,
            diff=diff,
            feedback=feedback if (soft or not verdict.passed) else "",
            usage=written.usage,
            timings=Timings(
                llm_s=written.llm_s, sandbox_s=sandbox_s, overhead_s=max(0.0, total_s - written.llm_s - sandbox_s)
            ),
            checks=checks,
            runtime_values=values,
            samples=samples,
            diagnosis=written.diagnosis,
            restarted=written.restarted,
            edited=chosen.edited,
            edit_failure=chosen.edit_failure,
            explanation=explanation,
            quick_fix=written.quick_fix,
            repeat_of=repeat_of,
        )
        state.run.iterations.append(iteration)
        state.quick_fix = self._quick_fix(state, code, explanation) if not verdict.passed else None
        state.round = None
        state.emit(VerdictReady(iteration))
        return self._after_round(
            state,
            iteration,
            written,
            chosen,
            given=given,
            soft=soft,
            failing_checks=failing_checks,
            repeat_of=repeat_of,
        )

    def _write(
        self,
        task: Task,
        inputs: list[InputDescription],
        state: _RunState,
        index: int,
        given: str | None,
        data_names: dict[str, None],
    ) -> _Written:
        """The round's program(s): the given one, or the developer's reply — one greedy
        program in round 1, ``candidates`` samples from round 2 on (from the third on,
        starting over instead of repairing)."""
        written = _Written(repair=state.repair)
        so_far = state.round
        assert so_far is not None
        if given is not None:
            written.proposals.append(Proposal(code=given, reply=""))
            return written
        self._check_bounds(state, before=f"iteration {index}")
        if state.quick_fix is not None:
            # The failure's own diagnosis implied one edit: its program runs first, no model.
            fixed, what = state.quick_fix
            state.quick_fixes_tried += 1
            written.quick_fix = True
            written.proposals.append(Proposal(code=fixed, reply=what))
            so_far.code, so_far.reply = fixed, what
            return written
        st = self.strategies
        if st.restart_after > 0 and state.failed_repairs >= st.restart_after:
            written.repair, written.restarted = state.origin, True
            state.failed_repairs = 0
        repair = written.repair
        if (
            st.explain_first
            and not written.restarted
            and state.soft_from is None
            and repair is not None
            and repair.code is not None
            and repair.feedback
            and not repair.no_code
        ):
            diagnosis, used, secs = self.developer.explain(
                task.prompt,
                repair,
                on_token=lambda t: state.emit(TokensStreamed("developer", index, t)),
                cancel=state.stop.event,
            )
            written.diagnosis = diagnosis
            written.repair = replace(repair, diagnosis=diagnosis)
            written.add(used, secs, so_far)
            state.tokens += used.total_tokens
        # The first program is one greedy reply: most tasks pass there, and it is the
        # single pass the eval compares against. Samples are spent once it failed.
        sampled = st.candidates if index >= 2 else 1
        for k in range(sampled):
            fresh = written.starts_over(k, given)
            if k and (
                state.stop.event.is_set() or (self.bounds.token_budget > 0 and state.tokens >= self.bounds.token_budget)
            ):
                break
            if k:
                state.emit(TokensStreamed("developer", index, f"\n\n[sample {k + 1} of {sampled}]\n\n"))
            proposal = self.developer.propose(
                task.prompt,
                state.run.plan,
                inputs,
                task.tests,
                state.origin if fresh else written.repair,
                previous_codes=[it.candidate.code for it in state.run.iterations if it.candidate.code],
                keep_spec=state.spec is not None and not state.spec.empty,
                on_token=lambda t: state.emit(TokensStreamed("developer", index, t)),
                cancel=state.stop.event,
                context=format_context(task.context),
                restart=written.restarted or fresh,
                temperature=self.developer.retry_temperature if k else None,
            )
            code = proposal.code
            if code is not None and data_names:
                code, _ = strip_input_overwrites(code, data_names)
            earlier = self._repeat_of(state, code, written)
            if earlier is not None:
                # Never run an identical program twice: this one is recorded as a repeat.
                written.repeat_of[len(written.proposals)] = earlier
            written.proposals.append(replace(proposal, code=code))
            written.add(proposal.usage, proposal.llm_s, so_far)
            if so_far.code is None:
                so_far.code, so_far.reply = code, proposal.reply
            state.tokens += proposal.usage.total_tokens
        return written

    @staticmethod
    def _repeat_of(state: _RunState, code: str | None, written: _Written) -> int | None:
        """The round whose program ``code`` is again (layout and comments aside), or None."""
        if code is None:
            return None
        for it in reversed(state.run.iterations):
            if it.candidate.code and same_program(it.candidate.code, code):
                return it.index
        for i, proposal in enumerate(written.proposals):
            if proposal.code is not None and i not in written.repeat_of and same_program(proposal.code, code):
                return state.round.index if state.round is not None else 0
        return None

    def _run_and_judge(
        self,
        task: Task,
        state: _RunState,
        index: int,
        written: _Written,
        given: str | None,
        data_names: dict[str, None],
        previous: str | None,
    ) -> tuple[list[Trial], float]:
        """Each program run in the sandbox and judged (a single one is shown as it runs)."""
        single = len(written.proposals) == 1
        trials: list[Trial] = []
        sandbox_s = 0.0
        for i, proposal in enumerate(written.proposals):
            if i in written.repeat_of:
                why = f"the same program as round {written.repeat_of[i]}: not run again"
                trials.append(Trial(None, None, Verdict(False, [why]), fresh=written.starts_over(i, given)))
                continue
            trial, secs = self._evaluate(
                task,
                state,
                index,
                proposal.code,
                data_names,
                given=given is not None,
                announce=previous if single else None,
                show=single,
            )
            if proposal.code is None and proposal.edit_failure:
                trial = replace(
                    trial,
                    verdict=Verdict(
                        False, [f"the reply's SEARCH/REPLACE blocks did not apply: {proposal.edit_failure}"]
                    ),
                )
            trials.append(replace(trial, fresh=written.starts_over(i, given)))
            sandbox_s += secs
        return trials, sandbox_s

    def _explain(
        self,
        task: Task,
        state: _RunState,
        chosen: Proposal,
        result: ExecutionResult | None,
        verdict: Verdict,
        checks: list[TestOutcome],
        explanation: Explanation | None = None,
        repeat_of: int | None = None,
    ) -> tuple[str, list[TestOutcome], list[str], float]:
        """What the next round is told went wrong (with the failing statement's values),
        the values, the generated checks that failed, and the seconds the probes took."""
        code = chosen.code
        values: list[TestOutcome] = []
        probe_s = 0.0
        if repeat_of is not None:
            state.no_code_in_a_row = 0
            told = state.repair.feedback if state.repair else ""
            feedback = REPEAT_FEEDBACK.format(round=repeat_of) + (f"\n{told}" if told else "")
        elif code is None and chosen.edit_failure:
            state.no_code_in_a_row = 0
            feedback = EDIT_FAILED_FEEDBACK.format(failure=chosen.edit_failure)
        elif code is None:
            state.no_code_in_a_row += 1
            feedback = NO_CODE_FEEDBACK
        else:
            state.no_code_in_a_row = 0
            feedback = format_feedback(result, verdict, limits=self.limits, explanation=explanation)
            if not verdict.passed and self.strategies.runtime_values:
                values, probe_s = self._runtime_values(code, result, task, state)
                feedback = "\n".join([feedback, *runtime_value_lines(values, differences(code, result, values))])
        failing_checks = check_lines(checks, passed=verdict.passed)
        if failing_checks and not verdict.passed:
            feedback = "\n".join([feedback, *failing_checks])
        return feedback, values, failing_checks, probe_s

    def _after_round(
        self,
        state: _RunState,
        iteration: Iteration,
        written: _Written,
        chosen: Proposal,
        *,
        given: str | None,
        soft: bool,
        failing_checks: list[str],
        repeat_of: int | None = None,
    ) -> bool:
        """Whether the run ends here (True: success), and what the next round is told."""
        run, index, verdict, result = state.run, iteration.index, iteration.verdict, iteration.result
        code, finish, feedback = chosen.code, chosen.finish_reason, iteration.feedback
        if state.soft_from is not None:
            # The round after a pass with failing generated checks ends the run with
            # success: a new pass replaces the earlier one only if it passes more of the
            # generated checks; otherwise (no code, an explanation, a worse program) the
            # earlier pass stands.
            earlier = next(it for it in run.iterations if it.index == state.soft_from)
            better = verdict.passed and _passed(iteration.checks) > _passed(earlier.checks)
            run.final_index = index if better else state.soft_from
            run.outcome = "success"
            return True
        if verdict.passed and not soft:
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
        if repeat_of is not None:
            state.repeats += 1
            if state.repeats >= MAX_REPEATS:
                raise _Stop(
                    "failed",
                    f"Stopped after round {index}: the model wrote a program it had already written "
                    f"({state.repeats} times), after being told it failed, so the rounds left would "
                    f"likely end the same way. {next_step(run)}",
                )
            state.repair = RepairContext(
                code=state.last_code,
                feedback=iteration.feedback,
                same_failure=True,  # asks again at the retry temperature, saying the fix did not work
                soft_checks=state.repair.soft_checks if state.repair else False,
            )
            return False
        if code is None:
            # The program as it stands did not change: keep its feedback, ask for code
            # (the whole program, saying which block failed, when the edits did not apply).
            state.repair = RepairContext(
                code=state.last_code,
                feedback=state.repair.feedback if state.repair else "",
                no_code=not chosen.edit_failure,
                edit_failure=chosen.edit_failure,
                truncated=finish == "length",
                soft_checks=state.repair.soft_checks if state.repair else False,
            )
            return False
        repair = written.repair
        if soft:
            state.soft_from = index
        elif given is None and repair is not None and repair.code is not None and not written.restarted:
            state.failed_repairs += 1
        signature = failure_signature(result)
        state.same_failures = state.same_failures + 1 if signature == state.last_signature and index >= 2 else 1
        if (
            given is None
            and not soft
            and state.same_failures >= HOPELESS_SAME_FAILURE
            and index < self.bounds.max_iterations
        ):
            failed = [t.source for t in result.tests if not t.passed] if result is not None else []
            what = (
                f"{result.error.type}: {result.error.message[:120]}"
                if result is not None and result.error is not None
                else f"failed check `{failed[0][:120]}`"
                if failed
                else (result.status if result is not None else "no program")
            )
            raise _Stop(
                "failed",
                f"Stopped after round {index}: {state.same_failures} rounds in a row failed the same way "
                f"({what}), so the rounds left would likely too. {next_step(run)}",
            )
        state.last_code = code
        state.repair = RepairContext(
            code=state.last_code,
            feedback=feedback,
            same_failure=signature == state.last_signature and not soft,
            truncated=finish == "length",
            soft_checks=bool(failing_checks),
        )
        if given is not None:
            state.origin = state.repair
        state.last_signature = signature
        return False

    def _evaluate(
        self,
        task: Task,
        state: _RunState,
        index: int,
        code: str | None,
        data_names: dict[str, None],
        *,
        given: bool,
        announce: str | None,
        show: bool,
    ) -> tuple[Trial, float]:
        """Pre-check, run, spec-check and judge one program, then run the generated checks.

        ``show``: emit the candidate and execution events (the single program of a round)."""
        if code is None:
            return Trial(None, None, Verdict(False, ["the reply contained no program"])), 0.0
        ctx = task.context
        if show:
            state.emit(CandidateReady(Candidate(code=code, iteration=index), code_diff(announce, code)))
            state.emit(ExecutionStarted(index))
        sandbox_s = 0.0
        result = self.qa.precheck(code, data_names, defined=ctx.names() if ctx else ())
        if result is None:
            if state.stop.event.is_set():
                raise Cancelled("Stopped before the sandbox run.")
            s0 = time.monotonic()
            result = self.qa.run(
                code,
                state.sandbox_inputs,
                task.tests,
                cancel=state.stop.event,
                prelude=ctx.prelude if ctx else None,
                asserts=None if given else self.qa.spec_asserts(state.spec, code),
            )
            sandbox_s = time.monotonic() - s0
        explanation = explain(result, code, ctx) if result.error is not None else None
        if show:
            state.emit(ExecutionDone(index, result))
            if explanation is not None:
                state.emit(FailureExplained(index, explanation))
        if given:
            # The user's own code is the spec, not a candidate against it.
            state.spec = self.qa.spec_for(task, result)
            violations = None
        else:
            violations = self.qa.check_spec(state.spec, code, ctx)
        verdict = hold_known_wrong(self.qa.judge(result, task.tests, violations), task, code, given=given)
        if not given and task.initial_code:
            verdict = replace(verdict, notebook_changes=redefined(ctx, task.initial_code, code))
        # What the given program, known wrong yet passing its checks, shows on them; a
        # candidate that shows the same fixed nothing they can see.
        if (given and verdict.held == "given") or (verdict.passed and state.given_seen is not None):
            s0 = time.monotonic()
            seen = self.qa.observe(
                code, state.sandbox_inputs, task.tests, cancel=state.stop.event, prelude=ctx.prelude if ctx else None
            )
            sandbox_s += time.monotonic() - s0
            if given:
                state.given_seen = seen
            else:
                verdict = hold_same_behaviour(verdict, seen, state.given_seen)
        checks: list[TestOutcome] = []
        generated = state.run.checks
        if (
            generated is not None
            and generated.statements
            and result.status == "ok"
            and result.error is None
            and not state.stop.event.is_set()
        ):
            s0 = time.monotonic()
            checked = self.qa.run(
                code,
                state.sandbox_inputs,
                generated.source,
                cancel=state.stop.event,
                prelude=ctx.prelude if ctx else None,
            )
            sandbox_s += time.monotonic() - s0
            checks = list(checked.tests)
        if task.data_checks and result.clean and not given:
            checks += run_checks(task.data_checks, result.stdout)
        return Trial(code, result, verdict, checks, explanation=explanation), sandbox_s

    def _quick_fix(self, state: _RunState, code: str | None, explanation: Explanation | None) -> tuple[str, str] | None:
        """The program the failure's own diagnosis implies, to run before the model is
        asked (None: none, quick fixes off, or that program was already tried)."""
        if (
            not self.strategies.quick_fixes
            or code is None
            or explanation is None
            or not explanation.edits
            or state.quick_fixes_tried >= MAX_QUICK_FIXES
        ):
            return None
        fixed = apply_edits(code, explanation.edits)
        if fixed is None or any(it.candidate.code == fixed for it in state.run.iterations):
            return None
        changes = "; ".join(f"`{e.old}` → `{e.new}`" for e in explanation.edits if e.old)
        return fixed, f"line {explanation.line}: {changes}"

    def _runtime_values(
        self, code: str, result: ExecutionResult | None, task: Task, state: _RunState
    ) -> tuple[list[TestOutcome], float]:
        """The failing statement's sub-expression values (see :mod:`selfheal_jupyter.spec.probes`)
        and the seconds of the sandbox run that found them (0 when nothing was run)."""
        planned = plan_probes(code, result)
        if planned is None or state.stop.event.is_set():
            return [], 0.0
        prefix, probes = planned
        ctx = task.context
        s0 = time.monotonic()
        probed = self.qa.run(
            prefix,
            state.sandbox_inputs,
            "\n".join(probes),
            cancel=state.stop.event,
            prelude=ctx.prelude if ctx else None,
        )
        seconds = time.monotonic() - s0
        return (probe_values(probed.tests) if probed.status == "ok" else []), seconds

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
                f"{before}. {next_step(state.run)} (`%config SelfHeal.time_budget_s` sets the budget; 0 = no limit.)",
            )
        budget = self.bounds.token_budget
        if budget > 0 and state.tokens >= budget:
            raise _Stop(
                "budget_exhausted",
                f"The token budget of {budget} tokens is used up ({state.tokens} used) "
                f"before {before}. Raise `%config SelfHeal.token_budget` (0 = no limit).",
            )

    @staticmethod
    def _keep_round(state: _RunState, exc: Exception) -> None:
        """A failure ended the run in the middle of a round: what that round wrote and
        spent is kept in the record (an iteration without a sandbox result), and the
        tokens of a request that failed (a reply stopped at its cap) are counted."""
        spent = getattr(exc, "usage", None) or Usage()
        so_far, state.round = state.round, None
        if so_far is None:  # the planner's or the check designer's request
            state.run.planning_usage = state.run.planning_usage + spent
            return
        usage = so_far.usage + spent
        if not usage.total_tokens and so_far.code is None:
            return
        state.run.iterations.append(
            Iteration(
                index=so_far.index,
                candidate=Candidate(code=so_far.code or "", iteration=so_far.index, reply=so_far.reply),
                result=None,
                verdict=Verdict(False, ["not finished: the run ended during this round"]),
                usage=usage,
                timings=Timings(llm_s=so_far.llm_s),
            )
        )

    def _admit(self, state: _RunState, size: int) -> None:
        """Before each request: one whose prompt cannot fit in what is left of the token
        budget ends the run, before it is sent."""
        budget = self.bounds.token_budget
        if budget > 0 and state.tokens + size > budget:
            raise _Stop(
                "budget_exhausted",
                f"The next request to the model is about {size:,} tokens (estimated from its "
                f"size) and only {max(budget - state.tokens, 0):,} of the token budget of "
                f"{budget:,} are left, so it was not sent. Raise `%config "
                "SelfHeal.token_budget` (0 = no limit), or give a smaller program, task or "
                "tests.",
            )

    def _stopped(self, state: _RunState) -> None:
        """Record why the stop signal fired: the user, or the wall-clock budget."""
        run = state.run
        if state.stop.cancelled or not state.stop.expired:
            run.outcome, run.error = "cancelled", "Stopped by the user."
        else:
            run.outcome = "budget_exhausted"
            run.error = (
                f"The wall-clock budget of {self.bounds.time_budget_s:g} s ran out. {next_step(run)} "
                "(`%config SelfHeal.time_budget_s` sets the budget; 0 = no limit.)"
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


def _passed(outcomes: list[TestOutcome]) -> int:
    return sum(1 for t in outcomes if t.passed)


@dataclass
class _Written:
    """What a round's writing step produced: the programs, what they cost, and how the
    round began (a restart, a diagnosis, the repair context it wrote from)."""

    repair: RepairContext | None
    proposals: list[Proposal] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0
    diagnosis: str = ""
    restarted: bool = False
    quick_fix: bool = False
    """The round's program is the tool's own edit (no model call)."""
    repeat_of: dict[int, int] = field(default_factory=dict)
    """Proposals (by position) that repeat an earlier round's program → that round."""

    def add(self, used: Usage, secs: float, so_far: _RoundSoFar) -> None:
        self.usage, self.llm_s = self.usage + used, self.llm_s + secs
        so_far.usage, so_far.llm_s = self.usage, self.llm_s

    def starts_over(self, k: int, given: str | None) -> bool:
        """Sample ``k`` (from 0) writes the program again rather than repairing it."""
        return given is None and not self.restarted and k + 1 >= FRESH_FROM_SAMPLE


@dataclass
class _RoundSoFar:
    """The round in progress: what it spent and the first program it got."""

    index: int
    code: str | None = None
    reply: str = ""
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0


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
    soft_from: int | None = None
    """The round that passed the user's tests but failed generated checks (one soft round)."""
    failed_repairs: int = 0
    """Failed repairs in a row since the start or the last restart."""
    origin: RepairContext | None = None
    """Where a restart begins: the user's code and its feedback (None: from the task)."""
    given_seen: Observation | None = None
    """What the given program showed on its checks, when the task says it is wrong and it
    passed them anyway (None: nothing to compare a candidate with)."""
    round: _RoundSoFar | None = None
    """The round in progress (None between rounds)."""
    repeats: int = 0
    """Rounds whose every program was one already run (never run again)."""
    same_failures: int = 0
    """Model rounds in a row that failed the same way (the last one included)."""
    quick_fix: tuple[str, str] | None = None
    """The program the last failure's diagnosis implies and what changed (the next round runs it)."""
    quick_fixes_tried: int = 0


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
        except Exception:
            self.failures += 1
            if self.failures == 1:
                log.exception("an event handler failed on %s", type(event).__name__)
