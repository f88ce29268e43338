"""A candidate's whole trial, in the order a reader expects.

1. the static pre-check (a program certain to fail is never run; one that nests too deep
   for the tool's readers is read by nothing else either);
2. the sandbox run with the user's tests and the asserts of their code the checker
   evaluates; the tool's own explanation of a failure, shown at once;
3. the spec guard: what the user's code specifies, kept by a repair;
4. behaviour: when the task says the given program is wrong and it passed its checks
   anyway, a second run shows whether this one shows the same;
5. the user's tests (in the verdict of step 2's run);
6. QA's generated checks (soft) and the checks from the notebook's data (never soft);
7. what verified it (never a check the program the task says is wrong passes too).

:class:`Judge` runs these steps, each rule from :mod:`~selfheal_jupyter.loop.verdict`
(pure), and returns one :class:`Trial`: the result, the verdict, and — once the round
chose it (:meth:`Judge.tell`) — what the next round is told. Round 0, the user's own
program, is judged by the same steps without a spec (it *is* the spec); what it found
(:class:`Baseline`) is kept with the run, so a recheck of a smaller form of a passing
program (:meth:`~selfheal_jupyter.loop.orchestrator.Loop.recheck`) judges as the run did
without running the user's program again.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field, replace

from .. import diagnosis
from ..agents.data_checks import run_checks
from ..agents.developer import Proposal, RepairContext
from ..agents.qa import QA, unreadable
from ..codeblocks import code_diff
from ..errors import Cancelled
from ..feedback import check_lines, format_feedback, runtime_value_lines
from ..model import (
    Candidate,
    ExecutionResult,
    Explanation,
    GeneratedChecks,
    Iteration,
    Limits,
    Run,
    Task,
    TestOutcome,
    Verdict,
)
from ..sandbox.serialize import Pickled
from ..spec.behaviour import Observation
from ..spec.guard import Spec
from ..spec.probes import differences, failing_path_values, plan_probes
from . import rounds
from . import verdict as judging
from .events import CandidateReady, ExecutionDone, ExecutionStarted, FailureExplained
from .state import Emitter, data_names


@dataclass
class Trial:
    """One program's trial: what QA found, the verdict, and what the next round is told."""

    code: str | None
    """None: the reply had no program, or it repeated one (never run again)."""
    result: ExecutionResult | None
    verdict: Verdict
    checks: list[TestOutcome] = field(default_factory=list)
    """QA's generated checks and the checks from the notebook's data, as they came out."""
    fresh: bool = False
    """A sample that started over from the task (:mod:`~selfheal_jupyter.loop.choice`)."""
    explanation: Explanation | None = None
    """What the tool worked out of its failure on its own (:mod:`~selfheal_jupyter.diagnosis`)."""
    sandbox_s: float = 0.0
    """Seconds of the sandbox runs this trial took."""
    feedback: str = ""
    """What the next round is told went wrong (:meth:`Judge.tell`; a program not run has it at once)."""
    values: list[TestOutcome] = field(default_factory=list)
    """The failing statement's sub-expression values, when they were looked up."""
    failing_checks: list[str] = field(default_factory=list)
    """The generated checks and checks from the data that failed, as the model reads them."""


@dataclass(frozen=True)
class Baseline:
    """What round 0 found out about the user's own program (empty for a task from scratch)."""

    spec: Spec | None = None
    """The spec a repair keeps (None: the task did not start from the user's code)."""
    seen: Observation | None = None
    """What it showed on its checks, when the task says it is wrong and it passed them
    anyway (None: nothing to compare a candidate with)."""
    wrong: judging.WrongPassed | None = None
    """What it passed though the task says it is wrong: checks that verify no candidate
    (None: it was not held for that)."""

    @property
    def keeps_spec(self) -> bool:
        """The user's code states checks a repair must keep (the developer is told so)."""
        return self.spec is not None and self.spec.states_checks


class Baselines:
    """Round 0's :class:`Baseline` of each run a loop made, for the rechecks after it
    (forgotten with the run)."""

    def __init__(self) -> None:
        self._by_run: dict[int, Baseline] = {}

    def keep(self, run: Run, baseline: Baseline) -> None:
        key = id(run)
        if key not in self._by_run:
            weakref.finalize(run, self._by_run.pop, key, None)
        self._by_run[key] = baseline

    def get(self, run: Run) -> Baseline | None:
        return self._by_run.get(id(run))


class Judge:
    """Judges the programs of one run (its task, inputs and stop signal); see the module
    docstring for the order. ``runtime_values``: ``SelfHeal.runtime_values``."""

    def __init__(
        self,
        qa: QA,
        task: Task,
        inputs: dict[str, Pickled],
        *,
        stop: threading.Event,
        emit: Emitter,
        limits: Limits,
        runtime_values: bool,
        generated: GeneratedChecks | None = None,
        baseline: Baseline | None = None,
    ) -> None:
        self.qa, self.task, self.inputs = qa, task, inputs
        self.stop, self.emit, self.limits = stop, emit, limits
        self.runtime_values = runtime_values
        self.generated = generated
        self.baseline = baseline or Baseline()

    @property
    def _prelude(self) -> str | None:
        ctx = self.task.context
        return ctx.prelude if ctx else None

    # ------------------------------------------------------------------ trials
    def given(self) -> Trial:
        """Round 0: the user's own program, run as it is (no spec: it is the spec). It
        sets the :attr:`baseline` the candidates are judged against."""
        task = self.task
        code = task.initial_code or ""
        result, explanation, sandbox_s = self._execute(0, code, asserts=None, announce=None, show=True)
        verdict = judging.judge_given(result, task)
        seen = None
        if judging.observes_given(verdict):
            shown, secs = self._observe(code)
            seen = judging.given_shows(shown)
            sandbox_s += secs
        checks, secs = self._generated_checks(code, result)
        wrong = judging.wrong_passed(verdict, checks, seen)
        self.baseline = Baseline(spec=self.qa.spec_for(task, result), seen=seen, wrong=wrong)
        verdict = judging.with_verified_by(verdict, checks, task)
        return Trial(code, result, verdict, checks, explanation=explanation, sandbox_s=sandbox_s + secs)

    def baseline_again(self, given: Iteration | None) -> Baseline:
        """Round 0's baseline worked out again from its record (``given``, None when the
        run had no round 0): for a run this loop did not make, so its rechecks judge as it did."""
        task = self.task
        if task.initial_code is None or given is None:
            return Baseline()
        seen = (
            judging.given_shows(self._observe(task.initial_code)[0]) if judging.observes_given(given.verdict) else None
        )
        wrong = judging.wrong_passed(given.verdict, given.checks, seen)
        return Baseline(spec=self.qa.spec_for(task, given.result), seen=seen, wrong=wrong)

    def candidate(self, index: int, code: str, *, announce: str | None = None, show: bool = True) -> Trial:
        """A candidate of round ``index``, judged against the :attr:`baseline`.

        ``show``: emit its candidate and execution events as it runs (the single program
        of a round; ``announce`` is the program it changes)."""
        task, spec, given_seen = self.task, self.baseline.spec, self.baseline.seen
        unread = unreadable(code) is not None  # too deep for the tool's readers: none reads it
        asserts = None if unread else self.qa.spec_asserts(spec, code)
        result, explanation, sandbox_s = self._execute(index, code, asserts=asserts, announce=announce, show=show)
        if unread:
            return Trial(code, result, judging.judge(result, task.tests), explanation=explanation)
        ctx = task.context
        verdict = judging.judge_candidate(result, task, code, self.qa.check_spec(spec, code, ctx), ctx)
        if judging.compares_behaviour(verdict, given_seen):
            seen, secs = self._observe(code)
            sandbox_s += secs
            verdict = judging.hold_same_behaviour(verdict, seen, given_seen)
        checks, secs = self._generated_checks(code, result)
        if judging.reads_data_checks(task, result):
            checks += run_checks(task.data_checks, result.stdout)  # from the notebook's data, on the host
        verdict = judging.hold_data_checks(verdict, checks)
        verdict = judging.with_verified_by(verdict, checks, task, self.baseline.wrong)
        return Trial(code, result, verdict, checks, explanation=explanation, sandbox_s=sandbox_s + secs)

    def execute(self, code: str, prelude: str = "") -> ExecutionResult:
        """``code`` run as this run's programs run (its inputs, the notebook's prelude then
        ``prelude``, the user's tests), with no pre-check and no verdict: what a program
        holds along the way, for teaching (:mod:`selfheal_jupyter.teaching.observe`)."""
        if self.stop.is_set():
            raise Cancelled("Stopped before the sandbox run.")
        first = self._prelude or ""
        joined = "\n".join(p for p in (first, prelude) if p) or None
        return self.qa.run(code, self.inputs, self.task.tests, cancel=self.stop, prelude=joined)

    @staticmethod
    def not_run(proposal: Proposal, repeat_of: int | None, told: RepairContext | None) -> Trial:
        """A reply that gives nothing to run: no program (or edits that did not apply),
        or a program of round ``repeat_of`` again; what the next round is told is known
        at once (``told``: what this round was told)."""
        if repeat_of is not None:
            return Trial(None, None, judging.repeated(repeat_of), feedback=rounds.repeat_feedback(repeat_of, told))
        return Trial(None, None, judging.no_program(proposal.edit_failure), feedback=proposal.no_program_feedback)

    # ------------------------------------------------------------------ what the next round is told
    def tell(self, trial: Trial) -> Trial:
        """``trial`` with what the next round is told (the round chose it): the failure
        with the tool's own explanation, the failing statement's values (a sandbox run,
        ``runtime_values``) and the generated checks that failed."""
        if trial.code is None:
            return trial
        verdict = trial.verdict
        feedback = format_feedback(trial.result, verdict, limits=self.limits, explanation=trial.explanation)
        values: list[TestOutcome] = []
        probe_s = 0.0
        if not verdict.passed and self.runtime_values:
            values, probe_s = self._runtime_values(trial.code, trial.result)
            lines = runtime_value_lines(values, differences(trial.code, trial.result, values))
            feedback = "\n".join([feedback, *lines])
        failing = check_lines(trial.checks, passed=verdict.passed)
        if failing and not verdict.passed:
            feedback = "\n".join([feedback, *failing])
        return replace(
            trial, feedback=feedback, values=values, failing_checks=failing, sandbox_s=trial.sandbox_s + probe_s
        )

    def show(self, index: int, trial: Trial, reply: str, previous: str | None) -> None:
        """The events of the program a round chose among its samples (each ran unshown)."""
        if trial.code is None:
            return
        self.emit(CandidateReady(Candidate(trial.code, index, reply), code_diff(previous, trial.code)))
        self.emit(ExecutionStarted(index))
        if trial.result is not None:
            self.emit(ExecutionDone(index, trial.result))
        if trial.explanation is not None:
            self.emit(FailureExplained(index, trial.explanation))

    # ------------------------------------------------------------------ the steps
    def _execute(
        self, index: int, code: str, *, asserts: list[tuple[int, int, str]] | None, announce: str | None, show: bool
    ) -> tuple[ExecutionResult, Explanation | None, float]:
        """The static pre-check, else the sandbox run with the user's tests (and the
        user's asserts the checker evaluates); the tool's own explanation of its failure
        (:func:`~selfheal_jupyter.diagnosis.explain`, shown at once, before any model
        call); and the seconds the sandbox took."""
        task = self.task
        ctx = task.context
        if show:
            self.emit(CandidateReady(Candidate(code=code, iteration=index), code_diff(announce, code)))
            self.emit(ExecutionStarted(index))
        sandbox_s = 0.0
        result = self.qa.precheck(code, data_names(task), defined=ctx.names() if ctx else ())
        if result is None:
            if self.stop.is_set():
                raise Cancelled("Stopped before the sandbox run.")
            s0 = time.monotonic()
            result = self.qa.run(
                code, self.inputs, task.tests, cancel=self.stop, prelude=self._prelude, asserts=asserts
            )
            sandbox_s = time.monotonic() - s0
        explanation = diagnosis.explain(result, code, ctx, task.initial_code) if result.error is not None else None
        if show:
            self.emit(ExecutionDone(index, result))
            if explanation is not None:
                self.emit(FailureExplained(index, explanation))
        return result, explanation, sandbox_s

    def _observe(self, code: str) -> tuple[Observation | None, float]:
        """What ``code`` shows on the user's checks (a second sandbox run) and its seconds."""
        s0 = time.monotonic()
        seen = self.qa.observe(code, self.inputs, self.task.tests, cancel=self.stop, prelude=self._prelude)
        return seen, time.monotonic() - s0

    def _generated_checks(self, code: str, result: ExecutionResult) -> tuple[list[TestOutcome], float]:
        """QA's generated checks on a program that ran cleanly (soft: never the verdict)."""
        generated = self.generated
        if generated is None or not judging.runs_generated_checks(generated, result) or self.stop.is_set():
            return [], 0.0
        s0 = time.monotonic()
        checked = self.qa.run(code, self.inputs, generated.source, cancel=self.stop, prelude=self._prelude)
        return list(checked.tests), time.monotonic() - s0

    def _runtime_values(self, code: str, result: ExecutionResult | None) -> tuple[list[TestOutcome], float]:
        """The failing statement's sub-expression values (see :mod:`selfheal_jupyter.spec.probes`)
        and the seconds of the sandbox run that found them (0 when nothing was run)."""
        planned = plan_probes(code, result)
        if planned is None or self.stop.is_set():
            return [], 0.0
        prefix, probes = planned
        s0 = time.monotonic()
        probed = self.qa.run(prefix, self.inputs, "\n".join(probes), cancel=self.stop, prelude=self._prelude)
        seconds = time.monotonic() - s0
        return (failing_path_values(probed.tests) if probed.status == "ok" else []), seconds
