"""What each tool does, with the package's own parts: the sandbox, the loop's judging, the
minimal hand-over, the diagnosis. Synchronous, in a worker thread; ``cancel`` stops it.

Nothing here decides a verdict: ``check_fix`` runs the user's program as round 0 and
judges the candidate with ``Loop.recheck``, exactly as a run judges its candidates, and
hands over what :func:`~selfheal_jupyter.loop.fix_handover.work_out_fix` finds.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .. import diagnosis
from ..codeblocks import code_diff
from ..config import SelfHeal
from ..factory import build_llm, build_loop
from ..llm import LLMClient
from ..loop import verdict as judging
from ..loop.fix_handover import rechecker, run_with_fix, work_out_fix
from ..loop.orchestrator import Loop
from ..loop.task_admission import repair_task
from ..model import Candidate, ExecutionResult, Iteration, Run, Task, Verdict
from ..notebook.controller import note_kept
from ..sandbox.base import Sandbox

ORIGIN = "selfheal mcp"
Emit = Callable[[Any], None]


@dataclass
class Workbench:
    """The parts one server's tools use: the settings, a warm sandbox for ``run_code``,
    ``check_fix`` and ``explain_failure``, and the model client (made on first need).
    ``heal_sandbox`` gives a heal a sandbox of its own, closed when the heal ends however
    it ends (the class service passes its shared one instead)."""

    settings: SelfHeal
    sandbox: Callable[[], Sandbox]
    heal_sandbox: Callable[[], contextlib.AbstractContextManager[Sandbox]]
    llm: Callable[[], LLMClient] | None = None
    _llm: LLMClient | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def model(self) -> LLMClient:
        with self._lock:
            if self._llm is None:
                self._llm = self.llm() if self.llm is not None else build_llm(self.settings)
            return self._llm

    def loop(self, settings: SelfHeal, sandbox: Sandbox) -> Loop:
        return build_loop(settings, sandbox=sandbox, llm=self.model())


def own_sandbox(settings: SelfHeal) -> Callable[[], contextlib.AbstractContextManager[Sandbox]]:
    """A fresh Docker sandbox per use, every container of it removed at the end."""

    @contextlib.contextmanager
    def opened() -> Iterator[Sandbox]:
        from ..sandbox.docker import DockerSandbox

        sandbox = DockerSandbox.from_config(settings)
        try:
            sandbox.start()
            yield sandbox
        finally:
            sandbox.close()

    return opened


# --------------------------------------------------------------------------- run_code
def run_code(
    bench: Workbench, code: str, inputs: dict[str, Any], timeout_s: float | None, cancel: threading.Event
) -> ExecutionResult:
    """The program in the sandbox (never on the host), with ``inputs`` as its globals;
    ``timeout_s`` may lower the configured limit, never raise it."""
    limits = bench.settings.limits()
    if timeout_s is not None:
        limits = replace(limits, timeout_s=min(timeout_s, limits.timeout_s))
    return bench.sandbox().execute(code, inputs=inputs, limits=limits, cancel=cancel)


# --------------------------------------------------------------------------- check_fix
@dataclass
class Checked:
    """A candidate judged against the user's program, and its hand-over when it passed."""

    given: Iteration
    candidate: Iteration
    run: Run


def check_fix(
    bench: Workbench,
    original: str,
    candidate: str,
    tests: str | None,
    cancel: threading.Event,
    *,
    hand_over: bool,
) -> Checked:
    """Round 0 on ``original`` (it is the spec), then ``candidate`` judged as a round's
    program is (the spec guard, the user's asserts and ``tests``, behaviour when the
    original passes as it is); when it passes and ``hand_over``, its minimal hand-over."""
    settings = bench.settings
    task = repair_task("", original, tests, origin=ORIGIN, max_code_bytes=settings.max_code_bytes)
    loop = bench.loop(settings, bench.sandbox())
    run = Run(task=task)
    first = loop.recheck(run, original, cancel=cancel)  # no round 0 yet: the program as it is
    assert first.result is not None  # a program given is always run or refused, never skipped
    given_verdict = judging.with_verified_by(judging.judge_given(first.result, task), first.checks, task)
    given = _iteration(0, original, first.result, given_verdict, first.checks, "")
    run.iterations.append(given)
    trial = loop.recheck(run, candidate, cancel=cancel)
    judged = _iteration(1, candidate, trial.result, trial.verdict, trial.checks, code_diff(original, candidate))
    run.iterations.append(judged)
    if judged.verdict.passed:
        run.outcome, run.final_index = "success", 1
        if hand_over:
            run.fix = work_out_fix(run, rechecker(loop, run, cancel), search_tries=settings.fix_search_tries)
    else:
        run.outcome = "failed"
    return Checked(given, judged, run)


def _iteration(
    index: int, code: str, result: ExecutionResult | None, verdict: Verdict, checks: list[Any], diff: str
) -> Iteration:
    return Iteration(
        index=index, candidate=Candidate(code, index), result=result, verdict=verdict, diff=diff, checks=checks
    )


def check_record(checked: Checked, withheld: str) -> dict[str, Any]:
    """The verdict as :class:`~.shapes.CheckShape` says it."""
    verdict = checked.candidate.verdict
    result = checked.candidate.result
    fix = checked.run.fix
    original = checked.given.candidate.code
    return {
        "verdict": "rejected" if verdict.spec_violations else "passed" if verdict.passed else "failed",
        "passed": verdict.passed,
        "verified_by": list(verdict.verified_by),
        "only_runs": verdict.passed and not verdict.verified_by,
        "reasons": list(verdict.reasons),
        "spec_violations": [{**asdict(v), "title": v.title} for v in verdict.spec_violations],
        "tests_passed": verdict.tests_passed,
        "tests_failed": verdict.tests_failed,
        "original_passed": checked.given.verdict.passed,
        "result": result.to_dict() if result is not None else None,
        "fix": None
        if fix is None
        else {
            "code": fix.code,
            "diff": code_diff(original, fix.code, old_name="original.py", new_name="fix.py"),
            "dropped": list(fix.dropped),
            "note": fix.note,
            "capabilities": [asdict(c) for c in fix.capabilities],
            "tried": [asdict(a) for a in fix.tried],
        },
        "withheld": withheld if verdict.passed else "",
    }


# --------------------------------------------------------------------------- heal
def heal_task(settings: SelfHeal, code: str, tests: str | None, task_text: str) -> Task:
    """What ``heal`` asks: ``code`` is round 0, ``task_text`` what it does wrong ("": make it
    pass its asserts and ``tests``). Raises ``BadInput``."""
    initial = code if code.strip() else None
    return repair_task(task_text.strip(), initial, tests, origin=ORIGIN, max_code_bytes=settings.max_code_bytes)


def heal_settings(settings: SelfHeal, max_iterations: int | None) -> SelfHeal:
    """``max_iterations`` may lower the configured rounds, never raise them."""
    if max_iterations is not None and max_iterations < settings.max_iterations:
        return settings.with_values(max_iterations=max_iterations)
    return settings


def heal(bench: Workbench, settings: SelfHeal, task: Task, emit: Emit, cancel: threading.Event) -> Run:
    """The loop on the configured engine and model, in a sandbox of the heal's own; the
    run and, when it passed, its fix (what ``selfheal run --code`` does)."""
    with bench.heal_sandbox() as sandbox:
        loop = bench.loop(settings, sandbox)
        return run_with_fix(loop, task, emit, cancel, search_tries=settings.fix_search_tries)


def run_record(run: Run) -> dict[str, Any]:
    """The record exactly as ``selfheal run --json`` prints it."""
    note_kept(run, "this record's iterations")
    return json.loads(json.dumps(run.to_dict(), default=str))


# --------------------------------------------------------------------------- explain_failure
def explain_failure(bench: Workbench, code: str, cancel: threading.Event) -> dict[str, Any]:
    """The program's sandbox run and the tool's own explanation of its failure."""
    result = run_code(bench, code, {}, None, cancel)
    found = diagnosis.explain(result, code, None)
    return {
        "failed": found is not None,
        "error": found.error if found else "",
        "line": found.line if found else None,
        "source": found.source if found else "",
        "diagnosis": list(found.diagnosis) if found else [],
        "edits": [asdict(e) for e in found.edits] if found else [],
        "result": result.to_dict(),
    }
