"""The self-healing loop: planner → developer → QA, bounded, recorded, observable.

Why it looks like this: the orchestrator only drives rounds. A round writes (one
program, or samples), has each judged (:mod:`~selfheal_jupyter.loop.judge`: the whole
trial of a program, in order), chooses one (:mod:`~selfheal_jupyter.loop.choice`),
records it, and asks :func:`~selfheal_jupyter.loop.rounds.next_step` what follows.
Every bound is checked by :mod:`~selfheal_jupyter.loop.budget`; every failure of the
outside world (the model endpoint, the sandbox) ends the run with ``outcome="error"``
and a message that says what to do — recorded, never raised to the caller; everything
that happened is in the returned :class:`Run`. Observers get typed events; nothing here
knows IPython or HTML.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field, replace

from ..agents.checks import CheckDesigner
from ..agents.developer import Developer, Proposal
from ..agents.inputs import describe_inputs, format_context
from ..agents.planner import Planner
from ..agents.qa import QA
from ..codeblocks import code_diff
from ..errors import BadInput, Cancelled, LLMError, SandboxError, SelfHealError
from ..llm import LLMClient
from ..model import (
    Candidate,
    ExecutionResult,
    InputDescription,
    Iteration,
    Limits,
    Plan,
    Run,
    Sample,
    Task,
    Timings,
    has_assert,
)
from ..sandbox.base import Sandbox
from . import rounds
from .advice import advise
from .budget import LoopBudget, OutOfBudget
from .choice import choose, settles
from .events import EventHandler, PlanReady, RunFinished, RunStarted, VerdictReady
from .judge import Baseline, Baselines, Judge, Trial
from .state import Emitter, RoundSoFar, RunState, StopSignal
from .task_admission import prepare_inputs, validate_task
from .writing import Writer, Written

log = logging.getLogger(__name__)

__all__ = ["Loop", "LoopBudget", "Strategies"]


@dataclass
class Strategies:
    """What the loop does beyond write → run → repair (the defaults live in ``SelfHeal``, the
    figures behind them in docs/measurements.md). Each is reached at one place: the checks in
    ``_design_checks`` (their soft round: :mod:`~selfheal_jupyter.loop.rounds`), samples and
    explain-first in :mod:`~selfheal_jupyter.loop.writing`, runtime values in
    :meth:`~selfheal_jupyter.loop.judge.Judge.tell`, restarts and quick fixes in
    :mod:`~selfheal_jupyter.loop.rounds`."""

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
        self.writer = Writer(
            llm,
            self.developer,
            budget,
            candidates=strategies.candidates,
            explain_first=strategies.explain_first,
        )
        self.rules = rounds.Rules(budget.max_iterations, strategies.restart_after, strategies.quick_fixes)
        """What decides the next round (:func:`~selfheal_jupyter.loop.rounds.next_step`)."""
        self.baselines = Baselines()
        """What round 0 of each run found, for the rechecks after it (:meth:`recheck`)."""

    @property
    def max_iterations(self) -> int:
        return self.budget.max_iterations

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
        emit = Emitter(on_event)
        if task.plan is not None:
            plan = Plan(list(task.plan.steps), source="user")
        else:
            plan, _ = self.planner.plan(
                task.prompt,
                describe_inputs(task.inputs),
                on_token=functools.partial(emit.tokens, "planner", 0),
                cancel=cancel,
                context=format_context(task.context),
                data_names=sorted(task.context.data_names()) if task.context else (),
            )
        emit(PlanReady(plan))
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
        emit = Emitter(on_event)
        deadline = started + self.budget.time_budget_s if self.budget.time_budget_s > 0 else None
        stop = StopSignal(cancel, deadline)
        state = RunState(run=run, stop=stop, emit=emit, started=started)
        emit(RunStarted(run))
        self.llm.admit = functools.partial(self.budget.admit, state)
        self.llm.on_wait = emit.waiting
        try:
            validate_task(task, max_code_bytes=self.budget.max_code_bytes)
            inputs = describe_inputs(task.inputs)
            state.sandbox_inputs = prepare_inputs(task)
            if not (task.initial_code or "").strip():
                state.progress = rounds.opening(task.data_checks, self.rules)
            self._plan_step(task, inputs, state)
            self._design_checks(task, inputs, state)
            self._iterate(task, inputs, state)
        except OutOfBudget as s:
            state.keep_round(s)
            run.outcome = s.outcome  # type: ignore[assignment]
            run.error = s.message
        except Cancelled:
            self.budget.stopped(state)
        except (LLMError, SandboxError, BadInput) as exc:
            state.keep_round(exc)
            if stop.event.is_set():
                self.budget.stopped(state)
            else:
                run.outcome, run.error = "error", str(exc)
        except SelfHealError as exc:
            state.keep_round(exc)
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
        if rounds.soft_pass_stands(state.progress, run.outcome):
            run.outcome, run.error = "success", ""
        state.finish()
        emit(RunFinished(run))
        return run

    def recheck(self, run: Run, code: str, *, cancel: threading.Event | None = None) -> Trial:
        """Judge ``code`` as ``run`` judged its candidates: the same inputs, notebook
        prelude, tests, spec of the user's code, generated checks, and, when the task says
        the given program is wrong, the same comparison with what it showed (round 0's
        :class:`~selfheal_jupyter.loop.judge.Baseline`, kept when this loop made the run).
        For a smaller form of the passing program (what a notebook hands over). Raises
        ``SandboxError`` and ``Cancelled``."""
        stop = StopSignal(cancel, None)
        try:
            kept = self.baselines.get(run)
            judge = self._judge(run, prepare_inputs(run.task), stop, Emitter(None), kept)
            if kept is None:
                judge.baseline = judge.baseline_again(next((it for it in run.iterations if it.index == 0), None))
            return judge.candidate(0, code, show=False)
        finally:
            stop.close()

    def execute(
        self, run: Run, code: str, *, prelude: str = "", cancel: threading.Event | None = None
    ) -> ExecutionResult:
        """Run ``code`` as ``run``'s programs ran, judged by nothing (:meth:`Judge.execute
        <selfheal_jupyter.loop.judge.Judge.execute>`): teaching's look at the values a
        program holds along the way. Raises ``SandboxError`` and ``Cancelled``."""
        stop = StopSignal(cancel, None)
        try:
            return self._judge(run, prepare_inputs(run.task), stop, Emitter(None)).execute(code, prelude)
        finally:
            stop.close()

    def _judge(
        self, run: Run, inputs: dict, stop: StopSignal, emit: Emitter, baseline: Baseline | None = None
    ) -> Judge:
        """The judge of ``run``'s programs (after its generated checks were written)."""
        return Judge(
            self.qa,
            run.task,
            inputs,
            stop=stop.event,
            emit=emit,
            limits=self.sandbox_limits,
            runtime_values=self.strategies.runtime_values,
            generated=run.checks,
            baseline=baseline,
        )

    # ------------------------------------------------------------------ steps
    def _plan_step(self, task: Task, inputs: list[InputDescription], state: RunState) -> None:
        run = state.run
        if task.plan is not None:
            run.plan = Plan(list(task.plan.steps), source="user")
        elif (
            self.auto_plan
            and state.progress.quick_fix is None  # the tool's own program comes first: no plan for it
            and task.prompt.strip()
            and (self.plan_on_heal or not task.initial_code)
            and len(task.prompt.split()) >= self.plan_min_words
        ):
            self.budget.check(state, before="planning")
            plan, reply = self.planner.plan(
                task.prompt,
                inputs,
                on_token=functools.partial(state.emit.tokens, "planner", 0),
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

    def _design_checks(self, task: Task, inputs: list[InputDescription], state: RunState) -> None:
        """QA's soft checks, from the task alone (and a repair's comments/docstrings)."""
        count = self.strategies.generated_checks
        if count <= 0 and task.initial_code and not task.tests and not has_assert(task.initial_code):
            count = self.strategies.intent_checks
        if count <= 0:
            return
        self.budget.check(state, before="writing the generated checks")
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

    def _iterate(self, task: Task, inputs: list[InputDescription], state: RunState) -> None:
        """Round 0 (the user's own program, when the task starts from it), then the
        developer's rounds, each followed by :func:`~selfheal_jupyter.loop.rounds.next_step`
        (which also says when a round of the tool's own edit adds one: :meth:`~selfheal_jupyter.loop.rounds.Rules.last_round`)."""
        judge = self._judge(state.run, state.sandbox_inputs, state.stop, state.emit)
        index = 0 if task.initial_code is not None and task.initial_code.strip() else 1
        while index <= self.rules.last_round(state.progress):
            end = self._round_zero(task, state, judge) if index == 0 else self._round(task, inputs, state, judge, index)
            step, state.progress = rounds.next_step(state.progress, end, self.rules, stopping=state.stop.event.is_set())
            if isinstance(step, rounds.Success):
                state.run.outcome, state.run.final_index = "success", step.final_index
                return
            if isinstance(step, rounds.Stop):
                raise OutOfBudget(step.outcome, step.message)
            if isinstance(step, rounds.Stopped):
                raise Cancelled(step.message)
            index += 1
        raise OutOfBudget(
            "budget_exhausted", rounds.out_of_rounds_message(self.budget.max_iterations, None, advise(state.run))
        )

    def _round_zero(self, task: Task, state: RunState, judge: Judge) -> rounds.RoundEnd:
        """Round 0: the user's own program, run as it is (no model call). It is the spec the
        repairs keep, and, when the task says it is wrong yet it passes its checks, what it
        shows on them; its failure is what round 1 is told."""
        t0 = time.monotonic()
        code = task.initial_code or ""
        state.round = RoundSoFar(0, code=code)
        trial = judge.tell(judge.given())
        self.baselines.keep(state.run, judge.baseline)
        return self._record(task, state, 0, _Chosen(trial, Proposal(code=code, reply="")), Written(), t0)

    def _round(
        self, task: Task, inputs: list[InputDescription], state: RunState, judge: Judge, index: int
    ) -> rounds.RoundEnd:
        """One developer → QA round, in steps: write (one program, or samples), judge each,
        choose one and say what the next round is told, then record the round."""
        t0 = time.monotonic()
        state.round = RoundSoFar(index)
        previous = state.progress.last_code
        single = self.writer.samples(state, index) == 1
        trials: list[Trial] = []

        def judged(written: Written) -> bool:
            """Judge the program just written; true when no other sample could be chosen
            over it (:func:`settles`)."""
            i = len(written.proposals) - 1
            proposal = written.proposals[i]
            if i in written.repeat_of or proposal.code is None:
                trial = judge.not_run(proposal, written.repeat_of.get(i), state.progress.repair)
            else:
                trial = judge.candidate(index, proposal.code, announce=previous if single else None, show=single)
            trials.append(replace(trial, fresh=written.starts_over(i)))
            return settles(trial)

        written = self.writer.write(task, inputs, state, index, keep_spec=judge.baseline.keeps_spec, settled=judged)
        best, samples = (0, []) if single else choose(trials)
        trial = judge.tell(trials[best])
        if not single:
            judge.show(index, trial, written.proposals[best].reply, previous)
        others_s = sum(t.sandbox_s for i, t in enumerate(trials) if i != best)
        chosen = _Chosen(trial, written.proposals[best], samples, written.repeat_of.get(best), others_s)
        return self._record(task, state, index, chosen, written, t0)

    def _record(
        self, task: Task, state: RunState, index: int, chosen: _Chosen, written: Written, t0: float
    ) -> rounds.RoundEnd:
        """Record the round and announce it; what :func:`~selfheal_jupyter.loop.rounds.next_step`
        reads of it."""
        trial, proposal = chosen.trial, chosen.proposal
        code, verdict = trial.code, trial.verdict
        sandbox_s = trial.sandbox_s + chosen.others_s
        total_s = time.monotonic() - t0
        progress = state.progress
        iteration = Iteration(
            index=index,
            candidate=Candidate(code=code or "", iteration=index, reply=proposal.reply),
            result=trial.result,
            verdict=verdict,
            diff="" if code is None else code_diff(progress.last_code, code),
            feedback=rounds.feedback_sent(progress, verdict, trial.feedback, trial.failing_checks, index, self.rules),
            usage=written.usage,
            timings=Timings(
                llm_s=written.llm_s, sandbox_s=sandbox_s, overhead_s=max(0.0, total_s - written.llm_s - sandbox_s)
            ),
            checks=trial.checks,
            runtime_values=trial.values,
            samples=chosen.samples,
            diagnosis=written.diagnosis,
            restarted=written.restarted,
            edited=proposal.edited,
            edit_failure=proposal.edit_failure,
            explanation=trial.explanation,
            quick_fix=written.quick_fix,
            answer=written.answer,
            repeat_of=chosen.repeat_of,
        )
        state.run.iterations.append(iteration)
        state.round = None
        state.emit(VerdictReady(iteration))
        repair = written.repair
        return rounds.RoundEnd(
            iteration,
            code,
            finish_reason=proposal.finish_reason,
            failing_checks=tuple(trial.failing_checks),
            repaired=repair is not None and repair.code is not None and not written.restarted,
            quick_fix=rounds.tool_program(
                self.rules, verdict, task.data_checks, code, trial.explanation, state.programs()
            ),
            advice=advise(state.run),
        )


@dataclass
class _Chosen:
    """The program a round chose and what it is judged by."""

    trial: Trial
    proposal: Proposal
    samples: list[Sample] = field(default_factory=list)
    repeat_of: int | None = None
    """The round whose program the chosen one repeats (it was not run again)."""
    others_s: float = 0.0
    """Seconds of the sandbox runs of the samples not chosen."""
