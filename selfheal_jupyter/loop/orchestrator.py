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

from .. import diagnosis
from ..agents import explain_first
from ..agents.checks import CheckDesigner
from ..agents.data_checks import run_checks
from ..agents.developer import Developer, Proposal, RepairContext
from ..agents.inputs import describe_inputs, format_context
from ..agents.planner import Planner
from ..agents.qa import QA, strip_input_overwrites
from ..codeblocks import code_diff
from ..errors import BadInput, Cancelled, LLMError, SandboxError, SelfHealError
from ..feedback import check_lines, format_feedback, runtime_value_lines
from ..llm import LLMClient
from ..model import (
    Candidate,
    ExecutionResult,
    Explanation,
    InputDescription,
    Iteration,
    Limits,
    Plan,
    Run,
    Sample,
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
from ..spec.probes import differences, plan_probes, probe_values
from . import rounds
from . import verdict as judging
from .advice import advise
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
class LoopBudget:
    """What one run may spend: rounds, tokens, wall clock, and the size of what it takes."""

    max_iterations: int
    token_budget: int
    """0 = no limit."""
    time_budget_s: float
    """0 = no limit."""
    max_code_bytes: int = 0
    """The largest program, task text or tests a run takes; 0 = any."""


@dataclass
class Strategies:
    """What the loop does beyond write → run → repair (the defaults live in ``SelfHeal``, the
    figures behind them in docs/measurements.md). Each is reached at one place: the checks in
    ``_design_checks`` (their soft round: :mod:`~selfheal_jupyter.loop.verdict`), samples and
    runtime values in a round's steps, explain-first in ``_write``, restarts and quick fixes
    in :func:`~selfheal_jupyter.loop.rounds.next_step`."""

    generated_checks: int
    """How many soft checks QA writes from the task before any code (0 = none)."""
    candidates: int
    """Programs sampled per repair round (round 2 on); one is chosen by execution
    (:mod:`~selfheal_jupyter.loop.choice`)."""
    runtime_values: bool
    """Show the values of the failing statement's sub-expressions (:mod:`~selfheal_jupyter.spec.probes`)."""
    explain_first: bool
    """Ask the model to explain the bug before each repair (:mod:`~selfheal_jupyter.agents.explain_first`)."""
    restart_after: int
    """Start over after this many failed repairs in a row (0 = never; :class:`~selfheal_jupyter.loop.rounds.Rules`)."""
    intent_checks: int = 0
    """Like ``generated_checks``, for a heal of a cell without asserts or tests: checks
    from the cell's intent (used when ``generated_checks`` is 0)."""
    quick_fixes: bool = False
    """Run the edit a failure's own explanation implies (:mod:`~selfheal_jupyter.diagnosis`)
    before asking the model (:class:`~selfheal_jupyter.loop.rounds.Rules`)."""


class Loop:
    """Runs tasks through planner → developer → QA until a candidate passes or a bound hits.

    Every value comes from the caller (``factory.build_loop`` turns ``SelfHeal`` into
    them); ``libraries`` None means the sandbox image's usual ones."""

    def __init__(
        self,
        llm: LLMClient,
        sandbox: Sandbox,
        *,
        budget: LoopBudget,
        auto_plan: bool,
        plan_on_heal: bool,
        sandbox_limits: Limits,
        plan_min_words: int = 0,
        retry_temperature: float,
        repair_format: str,
        strategies: Strategies,
        libraries: tuple[str, ...] | None = None,
    ) -> None:
        self.llm = llm
        self.sandbox = sandbox
        self.budget = budget
        self.auto_plan = auto_plan
        self.plan_on_heal = plan_on_heal
        """Whether to ask the planner when the task starts from the user's code."""
        self.plan_min_words = plan_min_words
        """The planner is asked only for a task of at least this many words."""
        self.sandbox_limits = sandbox_limits
        """The limits of each sandbox run (memory, CPU, time, output)."""
        self.planner = Planner(llm, libraries=libraries)
        self.developer = Developer(
            llm, libraries=libraries, retry_temperature=retry_temperature, repair_format=repair_format
        )
        self.qa = QA(sandbox, sandbox_limits)
        self.strategies = strategies
        self.designer = CheckDesigner(llm)

    @property
    def max_iterations(self) -> int:
        return self.budget.max_iterations

    @property
    def rules(self) -> rounds.Rules:
        """What decides the next round (:func:`~selfheal_jupyter.loop.rounds.next_step`)."""
        return rounds.Rules(self.budget.max_iterations, self.strategies.restart_after, self.strategies.quick_fixes)

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
        deadline = started + self.budget.time_budget_s if self.budget.time_budget_s > 0 else None
        stop = _StopSignal(cancel, deadline)
        state = _RunState(run=run, stop=stop, emit=emit, started=started)
        emit(RunStarted(run))
        self.llm.admit = functools.partial(self._admit, state)
        self.llm.on_wait = lambda ahead: emit(ModelWaiting(ahead))
        try:
            validate_task(task, max_code_bytes=self.budget.max_code_bytes)
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
        if judging.soft_pass_stands(state.progress.soft_pass, run.outcome):
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
        try:
            state.sandbox_inputs = prepare_inputs(task)
            given = next((it for it in run.iterations if it.index == 0), None)
            if task.initial_code is not None and given is not None:
                seen = None
                if judging.observes_given(given.verdict):
                    seen, _ = self._observe(task, state, task.initial_code)
                state.baseline = _Baseline(spec=self.qa.spec_for(task, given.result), seen=seen)
            trial, _ = self._judge_candidate(task, state, 0, code, announce=None, show=False)
        finally:
            stop.close()
        return trial

    def execute(
        self, run: Run, code: str, *, prelude: str = "", cancel: threading.Event | None = None
    ) -> ExecutionResult:
        """Run ``code`` as ``run``'s programs ran (its inputs, the notebook's prelude then
        ``prelude``, the user's tests), judged by nothing: teaching's look at the values
        a program holds along the way. Raises ``SandboxError``."""
        task = run.task
        ctx = task.context
        first = ctx.prelude if ctx is not None else ""
        return self.qa.run(
            code,
            prepare_inputs(task),
            task.tests,
            cancel=cancel,
            prelude="\n".join(p for p in (first, prelude) if p) or None,
        )

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
            self._check_budget(state, before="planning")
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
        self._check_budget(state, before="writing the generated checks")
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
        """Round 0 (the user's own program, when the task starts from it), then the
        developer's rounds, each followed by :func:`~selfheal_jupyter.loop.rounds.next_step`
        (which also says when a round of the tool's own edit adds one: :meth:`~selfheal_jupyter.loop.rounds.Rules.last_round`)."""
        index = 0 if task.initial_code is not None and task.initial_code.strip() else 1
        while index <= self.rules.last_round(state.progress):
            end = self._round_zero(task, state) if index == 0 else self._round(task, inputs, state, index)
            step, state.progress = rounds.next_step(state.progress, end, self.rules, stopping=state.stop.event.is_set())
            if isinstance(step, rounds.Success):
                state.run.outcome, state.run.final_index = "success", step.final_index
                return
            if isinstance(step, rounds.Stop):
                raise _Stop(step.outcome, step.message)
            if isinstance(step, rounds.Stopped):
                raise Cancelled(step.message)
            index += 1
        raise _Stop(
            "budget_exhausted", rounds.out_of_rounds_message(self.budget.max_iterations, None, advise(state.run))
        )

    def _round_zero(self, task: Task, state: _RunState) -> rounds.RoundEnd:
        """Round 0: the user's own program, run as it is (no model call). It is the spec the
        repairs keep, and, when the task says it is wrong yet it passes its checks, what it
        shows on them; its failure is what round 1 is told."""
        t0 = time.monotonic()
        code = task.initial_code or ""
        state.round = _RoundSoFar(0, code=code)
        result, explanation, sandbox_s = self._execute(task, state, 0, code, asserts=None, announce=None)
        verdict = judging.judge_given(result, task)
        seen = None
        if judging.observes_given(verdict):
            seen, secs = self._observe(task, state, code)
            sandbox_s += secs
        state.baseline = _Baseline(spec=self.qa.spec_for(task, result), seen=seen)
        checks, secs = self._generated_checks(task, state, code, result)
        trial = Trial(code, result, judging.with_verified_by(verdict, checks, task), checks, explanation=explanation)
        return self._close_round(
            task, state, 0, trial, Proposal(code=code, reply=""), _Written(), [], sandbox_s + secs, t0
        )

    def _round(self, task: Task, inputs: list[InputDescription], state: _RunState, index: int) -> rounds.RoundEnd:
        """One developer → QA round, in steps: write (one program, or samples), run and
        judge each, choose, then close the round (say what went wrong, record)."""
        t0 = time.monotonic()
        state.round = _RoundSoFar(index)
        written = self._write(task, inputs, state, index)
        previous = state.progress.last_code
        trials, sandbox_s = self._run_and_judge(task, state, index, written, previous)
        best, samples = (0, []) if len(trials) == 1 else choose(trials)
        trial, chosen = trials[best], written.proposals[best]
        repeat_of = written.repeat_of.get(best)
        if repeat_of is not None:
            chosen = replace(chosen, code=None)  # not run again: the round has no new program
        if len(trials) > 1 and chosen.code is not None:
            state.emit(CandidateReady(Candidate(chosen.code, index, chosen.reply), code_diff(previous, chosen.code)))
            state.emit(ExecutionStarted(index))
            if trial.result is not None:
                state.emit(ExecutionDone(index, trial.result))
            if trial.explanation is not None:
                state.emit(FailureExplained(index, trial.explanation))
        return self._close_round(task, state, index, trial, chosen, written, samples, sandbox_s, t0, repeat_of)

    def _close_round(
        self,
        task: Task,
        state: _RunState,
        index: int,
        trial: Trial,
        chosen: Proposal,
        written: _Written,
        samples: list[Sample],
        sandbox_s: float,
        t0: float,
        repeat_of: int | None = None,
    ) -> rounds.RoundEnd:
        """Say what went wrong (with the tool's own explanation and the failing statement's
        values), record the round and announce it; what
        :func:`~selfheal_jupyter.loop.rounds.next_step` reads of it. ``repeat_of``: the
        round whose program the chosen one repeats (it was not run)."""
        code, result, verdict, checks = chosen.code, trial.result, trial.verdict, trial.checks
        explanation = trial.explanation
        feedback, values, failing_checks, probe_s = self._explain(
            task, state, chosen, result, verdict, checks, explanation, repeat_of
        )
        soft = judging.opens_soft_round(
            verdict,
            failing_checks,
            index=index,
            max_iterations=self.budget.max_iterations,
            soft_pass=state.progress.soft_pass,
        )
        if soft:
            feedback = "\n".join(failing_checks)
        sandbox_s += probe_s
        total_s = time.monotonic() - t0
        iteration = Iteration(
            index=index,
            candidate=Candidate(code=code or "", iteration=index, reply=chosen.reply),
            result=result,
            verdict=verdict,
            diff="" if code is None else code_diff(state.progress.last_code, code),
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
            answer=written.answer,
            repeat_of=repeat_of,
        )
        state.run.iterations.append(iteration)
        state.round = None
        state.emit(VerdictReady(iteration))
        repair = written.repair
        return rounds.RoundEnd(
            iteration,
            code,
            finish_reason=chosen.finish_reason,
            soft=soft,
            failing_checks=bool(failing_checks),
            repaired=repair is not None and repair.code is not None and not written.restarted,
            quick_fix=None if verdict.passed else self._quick_fix(task, code, explanation, state),
            advice=advise(state.run),
        )

    @staticmethod
    def _quick_fix(
        task: Task, code: str | None, explanation: Explanation | None, state: _RunState
    ) -> tuple[str, str] | None:
        """The tool's own next program after a failed round: for a question about the
        notebook's data, its program for the question as the check from that data reads
        it (known to pass that check); else the edit the failure's explanation implies."""
        earlier = _programs(state)
        return rounds.data_answer(task.data_checks, earlier) or rounds.quick_fix(code, explanation, earlier)

    def _write(self, task: Task, inputs: list[InputDescription], state: _RunState, index: int) -> _Written:
        """The round's program(s): the developer's reply — one greedy program in round 1,
        ``candidates`` samples from round 2 on (from the third on, starting over instead
        of repairing)."""
        progress = state.progress
        written = _Written(repair=progress.repair)
        so_far = state.round
        assert so_far is not None
        # the tool's own edit asks no model: only the clock and the user's Stop hold it
        self._check_budget(state, before=f"iteration {index}", tokens=progress.quick_fix is None)
        if progress.quick_fix is not None:
            # The last failure's own explanation implied one edit: its program runs, no model.
            fixed, what = progress.quick_fix
            written.quick_fix = True
            written.answer = any(c.program == fixed for c in task.data_checks)
            written.proposals.append(Proposal(code=fixed, reply=what))
            so_far.code, so_far.reply = fixed, what
            return written
        st = self.strategies
        if progress.restart:
            written.repair, written.restarted = progress.origin, True
        repair = written.repair
        if (
            st.explain_first
            and repair is not None
            and explain_first.wanted(repair, restarted=written.restarted, soft_round=progress.soft_pass is not None)
        ):
            written.diagnosis, used, secs = explain_first.explain(
                self.llm,
                task.prompt,
                repair,
                on_token=lambda t: state.emit(TokensStreamed("developer", index, t)),
                cancel=state.stop.event,
            )
            written.repair = replace(repair, diagnosis=written.diagnosis)
            written.add(used, secs, so_far)
            state.tokens += used.total_tokens
        # The first program is one greedy reply: most tasks pass there, and it is the
        # single pass the eval compares against. Samples are spent once it failed.
        sampled = st.candidates if index >= 2 else 1
        data_names = _data_names(task)
        for k in range(sampled):
            fresh = written.starts_over(k)
            if k and (
                state.stop.event.is_set() or (self.budget.token_budget > 0 and state.tokens >= self.budget.token_budget)
            ):
                break
            if k:
                state.emit(TokensStreamed("developer", index, f"\n\n[sample {k + 1} of {sampled}]\n\n"))
            proposal = self.developer.propose(
                task.prompt,
                state.run.plan,
                inputs,
                task.tests,
                progress.origin if fresh else written.repair,
                previous_codes=[it.candidate.code for it in state.run.iterations if it.candidate.code],
                keep_spec=state.baseline.spec is not None and not state.baseline.spec.empty,
                on_token=lambda t: state.emit(TokensStreamed("developer", index, t)),
                cancel=state.stop.event,
                context=format_context(task.context),
                restart=written.restarted or fresh,
                temperature=self.developer.retry_temperature if k else None,
            )
            code = proposal.code
            if code is not None and data_names:
                code, _ = strip_input_overwrites(code, data_names)
            earlier = rounds.repeat_of(code, [*_programs(state), *written.programs(index)])
            if earlier is not None:
                # Never run an identical program twice: this one is recorded as a repeat.
                written.repeat_of[len(written.proposals)] = earlier
            written.proposals.append(replace(proposal, code=code))
            written.add(proposal.usage, proposal.llm_s, so_far)
            if so_far.code is None:
                so_far.code, so_far.reply = code, proposal.reply
            state.tokens += proposal.usage.total_tokens
        return written

    def _run_and_judge(
        self, task: Task, state: _RunState, index: int, written: _Written, previous: str | None
    ) -> tuple[list[Trial], float]:
        """Each program run in the sandbox and judged (a single one is shown as it runs)."""
        single = len(written.proposals) == 1
        trials: list[Trial] = []
        sandbox_s = 0.0
        for i, proposal in enumerate(written.proposals):
            if i in written.repeat_of:
                trial, secs = Trial(None, None, judging.repeated(written.repeat_of[i])), 0.0
            elif proposal.code is None:
                trial, secs = Trial(None, None, judging.no_program(proposal.edit_failure)), 0.0
            else:
                trial, secs = self._judge_candidate(
                    task, state, index, proposal.code, announce=previous if single else None, show=single
                )
            trials.append(replace(trial, fresh=written.starts_over(i)))
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
        """What the next round is told went wrong (with the tool's own explanation and the
        failing statement's values), the values, the generated checks that failed, and the
        seconds the probes took."""
        code = chosen.code
        values: list[TestOutcome] = []
        probe_s = 0.0
        if repeat_of is not None:
            feedback = rounds.repeat_feedback(repeat_of, state.progress.repair)
        elif code is None:
            feedback = chosen.no_program_feedback
        else:
            feedback = format_feedback(result, verdict, limits=self.sandbox_limits, explanation=explanation)
            if not verdict.passed and self.strategies.runtime_values:
                values, probe_s = self._runtime_values(code, result, task, state)
                feedback = "\n".join([feedback, *runtime_value_lines(values, differences(code, result, values))])
        failing_checks = check_lines(checks, passed=verdict.passed)
        if failing_checks and not verdict.passed:
            feedback = "\n".join([feedback, *failing_checks])
        return feedback, values, failing_checks, probe_s

    # ------------------------------------------------------------------ one program
    def _judge_candidate(
        self, task: Task, state: _RunState, index: int, code: str, *, announce: str | None, show: bool
    ) -> tuple[Trial, float]:
        """Pre-check, run, spec-check and judge one candidate (against what round 0 found),
        then run the generated checks; and the seconds the sandbox took.

        ``show``: emit the candidate and execution events (the single program of a round)."""
        spec, given_seen = state.baseline.spec, state.baseline.seen
        result, explanation, sandbox_s = self._execute(
            task, state, index, code, asserts=self.qa.spec_asserts(spec, code), announce=announce, show=show
        )
        ctx = task.context
        verdict = judging.judge_candidate(result, task, code, self.qa.check_spec(spec, code, ctx), ctx)
        if judging.compares_behaviour(verdict, given_seen):
            seen, secs = self._observe(task, state, code)
            sandbox_s += secs
            verdict = judging.hold_same_behaviour(verdict, seen, given_seen)
        checks, secs = self._generated_checks(task, state, code, result)
        if task.data_checks and result.clean:
            checks += run_checks(task.data_checks, result.stdout)  # from the notebook's data, on the host
        verdict = judging.hold_data_checks(verdict, checks)
        verdict = judging.with_verified_by(verdict, checks, task)
        return Trial(code, result, verdict, checks, explanation=explanation), sandbox_s + secs

    def _execute(
        self,
        task: Task,
        state: _RunState,
        index: int,
        code: str,
        *,
        asserts: list[tuple[int, int, str]] | None,
        announce: str | None,
        show: bool = True,
    ) -> tuple[ExecutionResult, Explanation | None, float]:
        """The static pre-check, else the sandbox run with the user's tests (and the
        user's asserts the checker evaluates); the tool's own explanation of its failure
        (:func:`~selfheal_jupyter.diagnosis.explain`, shown at once, before any model
        call); and the seconds the sandbox took."""
        ctx = task.context
        if show:
            state.emit(CandidateReady(Candidate(code=code, iteration=index), code_diff(announce, code)))
            state.emit(ExecutionStarted(index))
        sandbox_s = 0.0
        result = self.qa.precheck(code, _data_names(task), defined=ctx.names() if ctx else ())
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
                asserts=asserts,
            )
            sandbox_s = time.monotonic() - s0
        explanation = diagnosis.explain(result, code, ctx, task.initial_code) if result.error is not None else None
        if show:
            state.emit(ExecutionDone(index, result))
            if explanation is not None:
                state.emit(FailureExplained(index, explanation))
        return result, explanation, sandbox_s

    def _observe(self, task: Task, state: _RunState, code: str) -> tuple[Observation | None, float]:
        """What ``code`` shows on the user's checks (a second sandbox run) and its seconds."""
        ctx = task.context
        s0 = time.monotonic()
        seen = self.qa.observe(
            code, state.sandbox_inputs, task.tests, cancel=state.stop.event, prelude=ctx.prelude if ctx else None
        )
        return seen, time.monotonic() - s0

    def _generated_checks(
        self, task: Task, state: _RunState, code: str, result: ExecutionResult
    ) -> tuple[list[TestOutcome], float]:
        """QA's generated checks on a program that ran cleanly (soft: never the verdict)."""
        generated = state.run.checks
        if (
            generated is None
            or not generated.statements
            or result.status != "ok"
            or result.error is not None
            or state.stop.event.is_set()
        ):
            return [], 0.0
        ctx = task.context
        s0 = time.monotonic()
        checked = self.qa.run(
            code, state.sandbox_inputs, generated.source, cancel=state.stop.event, prelude=ctx.prelude if ctx else None
        )
        return list(checked.tests), time.monotonic() - s0

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

    # ------------------------------------------------------------------ budget
    def _check_budget(self, state: _RunState, *, before: str, tokens: bool = True) -> None:
        """Stop before ``before`` when the user stopped, the clock ran out or (``tokens``:
        a step that asks the model) the token budget is used up."""
        if state.stop.cancelled:
            raise Cancelled(f"Stopped before {before}.")
        if state.stop.expired:
            raise _Stop(
                "budget_exhausted",
                f"The wall-clock budget of {self.budget.time_budget_s:g} s ran out before "
                f"{before}. {advise(state.run)} (`%config SelfHeal.time_budget_s` sets the budget; 0 = no limit.)",
            )
        budget = self.budget.token_budget
        if tokens and budget > 0 and state.tokens >= budget:
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
                verdict=judging.unfinished(),
                usage=usage,
                timings=Timings(llm_s=so_far.llm_s),
            )
        )

    def _admit(self, state: _RunState, size: int) -> None:
        """Before each request: one whose prompt cannot fit in what is left of the token
        budget ends the run, before it is sent."""
        budget = self.budget.token_budget
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
                f"The wall-clock budget of {self.budget.time_budget_s:g} s ran out. {advise(run)} "
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


@dataclass
class _Written:
    """What a round's writing step produced: the programs, what they cost, and how the
    round began (a restart, a diagnosis, the repair context it wrote from)."""

    repair: RepairContext | None = None
    proposals: list[Proposal] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0
    diagnosis: str = ""
    restarted: bool = False
    quick_fix: bool = False
    """The round's program is the tool's own (no model call)."""
    answer: bool = False
    """...and it is the tool's program for the question, not an edit of the last one."""
    repeat_of: dict[int, int] = field(default_factory=dict)
    """Proposals (by position) that repeat an earlier program → that program's round."""

    def programs(self, index: int) -> list[tuple[int, str]]:
        """(round, program) of this round's proposals so far that will run (not repeats)."""
        return [(index, p.code) for i, p in enumerate(self.proposals) if p.code and i not in self.repeat_of]

    def add(self, used: Usage, secs: float, so_far: _RoundSoFar) -> None:
        self.usage, self.llm_s = self.usage + used, self.llm_s + secs
        so_far.usage, so_far.llm_s = self.usage, self.llm_s

    def starts_over(self, k: int) -> bool:
        """Sample ``k`` (from 0) writes the program again rather than repairing it."""
        return not self.restarted and k + 1 >= FRESH_FROM_SAMPLE


@dataclass
class _RoundSoFar:
    """The round in progress: what it spent and the first program it got."""

    index: int
    code: str | None = None
    reply: str = ""
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0


@dataclass(frozen=True)
class _Baseline:
    """What round 0 found out about the user's own program (empty for a task from scratch)."""

    spec: Spec | None = None
    """The spec a repair keeps (None: the task did not start from the user's code)."""
    seen: Observation | None = None
    """What it showed on its checks, when the task says it is wrong and it passed them
    anyway (None: nothing to compare a candidate with)."""


@dataclass
class _RunState:
    """One run in progress: its record, its stop signal and what it spent so far."""

    run: Run
    stop: _StopSignal
    emit: Callable[[Event], None]
    started: float
    tokens: int = 0
    llm_s: float = 0.0
    sandbox_inputs: dict[str, Pickled] = field(default_factory=dict)
    baseline: _Baseline = field(default_factory=_Baseline)
    progress: rounds.Progress = field(default_factory=rounds.Progress)
    """What the last round hands to the next (:func:`~selfheal_jupyter.loop.rounds.next_step`)."""
    round: _RoundSoFar | None = None
    """The round in progress (None between rounds)."""


def _programs(state: _RunState) -> list[tuple[int, str]]:
    """(round, program) of every round so far that had one, the latest first."""
    return [(it.index, it.candidate.code) for it in reversed(state.run.iterations) if it.candidate.code]


def _data_names(task: Task) -> dict[str, None]:
    """The user's data (inputs and copied notebook values): never to be replaced."""
    ctx = task.context
    return dict.fromkeys([*task.inputs, *(ctx.data_names() if ctx else ())])


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
