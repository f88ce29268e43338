"""The one data model that flows through the loop.

Plain dataclasses, no behaviour beyond small helpers (JSON that came out of a container
is read into an :class:`ExecutionResult` by :mod:`~selfheal_jupyter.result_json`,
checked before anything uses it). Everything that is shown, exported or measured is
derived from a :class:`Run`. ``to_dict`` methods give the
JSON shapes that the CLI prints (``selfheal sandbox exec --json``,
``selfheal run --json``): those key names are a public contract.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from .context_types import (  # noqa: F401  (the notebook context's types, kept in a module of their own)
    ColumnInfo,
    ContextEntry,
    ContextKind,
    InputDescription,
    NotebookContext,
)
from .safe_output import clean_output
from .verdicts import (  # noqa: F401  (the data model's verdict types, kept in a module of their own)
    ASSERT_RULES,
    DATA_RULES,
    RULE_TITLES,
    Held,
    SpecRule,
    SpecViolation,
    Verdict,
)

Status = Literal["ok", "error", "timeout", "oom", "killed", "output_limit", "blocked"]
"""How a sandbox run ended.

``blocked`` means the candidate was not run at all (the static pre-check refused it).
"""

Outcome = Literal["success", "failed", "budget_exhausted", "cancelled", "error"]
"""How a run ended.

``success``: a candidate passed QA. ``budget_exhausted``: ``max_iterations``, the token
budget or the wall-clock budget ran out before one did. ``failed``: the loop stopped
early without a passing candidate for another reason (e.g. the model kept replying
without code). ``cancelled``: the user stopped it. ``error``: infrastructure failed
(endpoint unreachable, sandbox unavailable); ``Run.error`` says what to do.
"""


@dataclass
class Limits:
    """Resource limits for one sandbox run (``SelfHeal.limits()`` holds the defaults)."""

    timeout_s: float
    memory: str
    pids: int
    cpus: float
    output_bytes: int
    tmpfs_size: str


CANDIDATE_FILE = "candidate.py"
"""The file name a candidate runs under unless given another (its frames show it)."""
NOTEBOOK_FILE = "<notebook>"
"""The file name the notebook's prelude (imports and definitions) runs under."""


@dataclass
class Frame:
    """One stack frame of the candidate's own code (``file``: the candidate's file name,
    or :data:`NOTEBOOK_FILE` for a function the notebook defined)."""

    file: str
    line: int
    function: str
    source: str = ""


@dataclass
class ErrorInfo:
    """A structured exception, built inside the container (never parsed from text)."""

    type: str
    message: str
    line: int | None = None
    frames: list[Frame] = field(default_factory=list)
    locals: dict[str, str] = field(default_factory=dict)


@dataclass
class RichOutput:
    """A display output that came back from the sandbox.

    ``data`` is text for ``text/html`` / ``text/plain`` and base64 for ``image/png``.
    """

    mime: str
    data: str


@dataclass
class TestOutcome:
    """One user test (a top-level statement of the tests block) run after the candidate."""

    source: str
    passed: bool
    message: str = ""
    line: int | None = None


AttemptKind = Literal["network", "process", "files"]
ATTEMPT_KINDS: tuple[str, ...] = get_args(AttemptKind)


@dataclass
class Attempt:
    """Something a sandbox run tried, observed by the runner's server from outside the
    program (kernel counters and events the program can neither reset nor reach)."""

    kind: AttemptKind
    count: int
    evidence: str
    """What was seen and how, in plain words ("1 attempt (1 to an address outside it),
    refused: the sandbox has no network (counted by the kernel ...)")."""
    by: str = ""
    """In :attr:`Fix.tried`: whose run it was, "fix" (the code handed over) or
    "passing" (the passing program it came from); "" in a result."""


@dataclass
class ExecutionResult:
    """What one sandbox run produced."""

    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: ErrorInfo | None = None
    outputs: list[RichOutput] = field(default_factory=list)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    tests: list[TestOutcome] = field(default_factory=list)
    message: str = ""
    """A one-paragraph human explanation for non-``ok``/``error`` statuses (timeout, oom...)."""
    tried: list[Attempt] = field(default_factory=list)
    """What the run tried beyond its own folder, as the sandbox's server observed it from
    outside the program's processes (network attempts, processes or threads started,
    files written elsewhere); empty when nothing was seen or could be observed."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def clean(self) -> bool:
        """Ran to the end without an error and exited 0 (QA's condition for a pass)."""
        return self.status == "ok" and self.error is None and self.exit_code in (0, None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape; rich outputs are held to :mod:`~selfheal_jupyter.safe_output` again."""
        data = asdict(self)
        data["outputs"] = [{"mime": o.mime, "data": o.data} for o in safe_outputs(self.outputs)]
        return data

    @classmethod
    def malformed(cls, problem: str) -> ExecutionResult:
        """The ``error`` result that stands for a result which broke the schema
        (:func:`~selfheal_jupyter.result_json.read_result`)."""
        return cls(
            status="error",
            error=ErrorInfo(type=MALFORMED, message=f"malformed sandbox result: {problem}"),
            message=(
                "The sandbox answered with a result that breaks its protocol "
                f"({problem}), so this run counts as failed. "
                "If it happens with every program, rebuild the image: "
                "`selfheal sandbox build --rebuild`."
            ),
        )

    @property
    def is_malformed(self) -> bool:
        """True for the result :meth:`malformed` made."""
        return self.error is not None and self.error.type == MALFORMED


MALFORMED = "MalformedResult"
"""``ErrorInfo.type`` of a result whose JSON broke the schema (see ``result_json``)."""

STATUSES: tuple[str, ...] = get_args(Status)


def safe_outputs(outputs: list[RichOutput]) -> list[RichOutput]:
    """``outputs`` as they may be shown: allowed types only, each cleaned (see ``hygiene``)."""
    kept = []
    for out in outputs:
        data = clean_output(out.mime, out.data)
        if data is not None:
            kept.append(RichOutput(out.mime, data))
    return kept


DATA_CHECK_PREFIX = "from your data: "
"""How the source of a check derived from the notebook's data begins (:class:`DataCheck`)."""


def split_checks(checks: list[TestOutcome]) -> tuple[list[TestOutcome], list[TestOutcome]]:
    """(checks from the notebook's data, QA's generated checks): the verdict holds on the
    first, only the second is soft; feedback and the panel show them apart."""
    derived = [c for c in checks if c.source.startswith(DATA_CHECK_PREFIX)]
    return derived, [c for c in checks if not c.source.startswith(DATA_CHECK_PREFIX)]


@dataclass
class DataCheck:
    """A check QA derived from the notebook's own data for a question about it
    (:mod:`~selfheal_jupyter.agents.data_checks`): each row's terms must be printed together
    on one line. ``rows`` and ``choices`` never go to the model."""

    source: str
    """What it checks, in words, no values (starts with :data:`DATA_CHECK_PREFIX`)."""
    rows: list[list[str]] = field(default_factory=list, repr=False)
    choices: list[str] = field(default_factory=list, repr=False)
    """Every answer a group could have (all the column's regions, not only the winners);
    a line that shows a group with another of them answers nothing. Empty: the rows' own
    answers."""
    program: str = field(default="", repr=False)
    """The tool's own program for the question as this check reads it
    (:mod:`~selfheal_jupyter.agents.data_answers`; names only, no values), run after a
    model's answer failed; "" where it has none."""


@dataclass
class Task:
    """What the user asked for."""

    prompt: str
    inputs: dict[str, Any] = field(default_factory=dict)
    """Host values by name; copied into the sandbox, never sent to the model."""
    tests: str | None = None
    """The user's own test code (asserts), run after the candidate; never shown as editable."""
    language: str = "python"
    initial_code: str | None = None
    """For ``%%heal``: the user's code is iteration 0."""
    given_is_wrong: bool = False
    """The task says ``initial_code`` does not yet do what it asks (``%%heal`` with a hint, a
    repair benchmark's "this program has a bug"), even if it runs: round 0 passing its
    checks is then no success, and a candidate that leaves it unchanged is no fix."""
    plan: Plan | None = None
    """A plan the user gave or edited; used as is."""
    context: NotebookContext | None = None
    """What the code reads from the notebook (imports, definitions, copied values)."""
    stated: list[str] = field(default_factory=list)
    """Checks read from what the task states (``%%heal the total should be 42`` →
    ``assert total == 42``, :mod:`selfheal_jupyter.spec.stated`); they are also the last
    statements of ``tests``, run and judged with the user's own."""
    origin: str = ""
    """What the user did to start it, as the panel's title says it: "%%agent", "%%heal",
    "autoheal" (the "Ask the agent to fix this" button), "selfheal run" ("": unknown)."""
    data_checks: list[DataCheck] = field(default_factory=list)
    """Checks derived from the notebook's data for a question about it (they hold the
    verdict; their expected rows stay on the host)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "inputs": sorted(self.inputs),
            "tests": self.tests,
            "stated": list(self.stated),
            "language": self.language,
            "initial_code": self.initial_code,
            "given_is_wrong": self.given_is_wrong,
            "origin": self.origin,
            "context": self.context.to_dict() if self.context else [],
            "data_checks": [c.source for c in self.data_checks],
        }


@dataclass
class Plan:
    """Ordered, concrete steps."""

    steps: list[str] = field(default_factory=list)
    source: Literal["planner", "user", "none"] = "planner"


@dataclass
class Usage:
    """Tokens of one or more LLM calls; ``estimated`` when the server reported none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


@dataclass
class Candidate:
    """A program the developer proposed, with the reply it came from."""

    code: str
    iteration: int
    reply: str = ""


@dataclass
class GeneratedChecks:
    """Checks QA wrote from the task alone, before any code (AgentCoder's test designer).

    They are SOFT: their outcomes are shown to the developer (fix the program or say why
    the check is wrong) and help choose among sampled candidates, but they never count as
    the user's tests and never decide pass/fail.
    """

    statements: list[str] = field(default_factory=list)
    """Top-level statements (asserts), run after a candidate like tests, one outcome each."""
    reply: str = ""
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0

    @property
    def source(self) -> str:
        return "\n".join(self.statements)


@dataclass
class Sample:
    """One of the N programs sampled in a round (``SelfHeal.candidates``), as QA saw it."""

    code: str
    status: str
    """The run's status ("none" when the reply had no program)."""
    passed: bool
    """The verdict (the user's tests + a clean run + the spec)."""
    tests_passed: int = 0
    checks_passed: int = 0
    agreement: int = 0
    """CodeT dual agreement: samples with the same generated-check outcomes × checks passed."""
    chosen: bool = False
    fresh: bool = False
    """It started over from the task (or the user's code) instead of repairing the last
    program (see ``loop.FRESH_FROM_SAMPLE``)."""


@dataclass
class LineEdit:
    """One change to one line of a program: ``old`` (text on that line) becomes ``new``."""

    line: int
    old: str
    new: str


@dataclass
class Explanation:
    """What the tool knows of a failure before the model says anything
    (:mod:`~selfheal_jupyter.diagnosis`): the failing line, the exception, and what follows
    from the notebook's context — a close column, attribute or name, a dtype that does not
    fit, both shapes of a mismatch. Computed in milliseconds, shown at once, and given to
    the model with the rest of the feedback."""

    error: str
    """``KeyError: 'Region'``."""
    line: int | None = None
    source: str = ""
    """The failing line's source (the program's own line)."""
    diagnosis: list[str] = field(default_factory=list)
    """Plain sentences, names in backticks ("`Region` is not a column of `df`; `region` is")."""
    edits: list[LineEdit] = field(default_factory=list)
    """The change the diagnosis implies, when it is one precise edit of the failing line
    (a close column for a misspelt one, ``pd.to_datetime`` around a text column under
    ``.dt``): the loop may try it before asking the model (``SelfHeal.quick_fixes``)."""

    @property
    def useful(self) -> bool:
        """It says more than the traceback does."""
        return bool(self.diagnosis)


@dataclass
class Timings:
    llm_s: float = 0.0
    sandbox_s: float = 0.0
    overhead_s: float = 0.0


@dataclass
class Iteration:
    """One developer → QA round."""

    index: int
    candidate: Candidate
    result: ExecutionResult | None
    verdict: Verdict
    diff: str = ""
    """Unified diff to the previous candidate ("" on the first)."""
    feedback: str = ""
    """The feedback text this iteration produced for the next one."""
    usage: Usage = field(default_factory=Usage)
    timings: Timings = field(default_factory=Timings)
    checks: list[TestOutcome] = field(default_factory=list)
    """Outcomes of QA's generated checks (soft; never part of ``result.tests``/the verdict)."""
    runtime_values: list[TestOutcome] = field(default_factory=list)
    """Values along the failing path (``SelfHeal.runtime_values``): one probe per
    sub-expression of the failing statement, evaluated where it failed."""
    samples: list[Sample] = field(default_factory=list)
    """With ``SelfHeal.candidates`` > 1: every program sampled this round (one is chosen)."""
    diagnosis: str = ""
    """The model's explanation of the bug before this repair (``SelfHeal.explain_first``)."""
    restarted: bool = False
    """This round started over (``SelfHeal.restart_after``) instead of repairing the last one."""
    edited: bool = False
    """The candidate is the previous program with the reply's SEARCH/REPLACE blocks applied
    (``SelfHeal.repair_format = "edit"``) or its functions put in (``"functions"``);
    ``candidate.code`` is always the whole program."""
    edit_failure: str = ""
    """The reply's SEARCH/REPLACE blocks could not be applied: which block and why (the
    round then has no program, and the next one asks for the whole program)."""
    explanation: Explanation | None = None
    """What the tool worked out of this round's failure on its own (None: it passed, or
    nothing failed that it can read)."""
    quick_fix: bool = False
    """The round's program is the tool's own edit of the last one, from its explanation
    (``SelfHeal.quick_fixes``): no model was asked."""
    answer: bool = False
    """With :attr:`quick_fix`: the program is the tool's own answer to a question about
    the notebook's data, as its check from that data reads it
    (:mod:`~selfheal_jupyter.agents.data_answers`), not an edit."""
    repeat_of: int | None = None
    """The model wrote the program of this earlier round again: it was not run again."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "code": self.candidate.code,
            "reply": self.candidate.reply,
            "diff": self.diff,
            "result": self.result.to_dict() if self.result else None,
            "verdict": asdict(self.verdict),
            "feedback": self.feedback,
            "usage": asdict(self.usage),
            "timings": asdict(self.timings),
            "checks": [asdict(t) for t in self.checks],
            "runtime_values": [asdict(t) for t in self.runtime_values],
            "samples": [asdict(x) for x in self.samples],
            "diagnosis": self.diagnosis,
            "restarted": self.restarted,
            "edited": self.edited,
            "edit_failure": self.edit_failure,
            "explanation": asdict(self.explanation) if self.explanation else None,
            "quick_fix": self.quick_fix,
            "answer": self.answer,
            "repeat_of": self.repeat_of,
        }


@dataclass
class Totals:
    iterations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_s: float = 0.0
    llm_s: float = 0.0
    sandbox_s: float = 0.0
    overhead_s: float = 0.0


def has_assert(code: str) -> bool:
    """The code holds an ``assert`` statement (False when it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


@dataclass
class DefinitionChange:
    """A fix that passes only with a notebook function or class defined differently: the
    definition an earlier cell holds and the one the fix needs (both sources)."""

    name: str
    notebook: str
    fix: str


CapabilityKind = Literal["network", "process", "files", "environment", "dynamic-code", "threads", "probe"]
CAPABILITY_KINDS: tuple[str, ...] = get_args(CapabilityKind)


@dataclass
class Capability:
    """Something the code handed over can do that the user's cell could not, read from
    the syntax trees of both (``loop/capabilities.py``)."""

    kind: CapabilityKind
    line: int
    """The line of the code handed over where it is."""
    evidence: str
    """What was found there ("urllib.request.urlopen", "sys.modules", "'ipykernel'")."""


@dataclass
class Fix:
    """What a passing run hands over (Insert below / Replace this cell / Run in my kernel):
    the smallest change to the user's cell that passed, judged like the run's candidates.

    The passing program may carry what the notebook already supplies (its imports, a
    helper redefined, the tool's own notes) and lines the fix does not need; ``code``
    leaves that out when the smaller program passed the same checks, else it is the
    whole passing program and ``note`` says why."""

    code: str
    dropped: list[str] = field(default_factory=list)
    """What was left out of the passing program, each with why (plain words)."""
    definitions: list[DefinitionChange] = field(default_factory=list)
    """Notebook definitions the fix needs changed (kept in ``code``, shown apart)."""
    note: str = ""
    """Why the whole passing program is handed over ("" when it was made smaller or
    nothing could be left out), or that the search for unneeded lines stopped at its bound."""
    capabilities: list[Capability] = field(default_factory=list)
    """What ``code`` newly can do beside the user's cell, one entry per place."""
    tried: list[Attempt] = field(default_factory=list)
    """What the sandbox saw the code handed over (or the passing program it came from)
    try that the code handed over does not show and the user's cell did not do: a sign
    the model was steered."""
    result: ExecutionResult | None = None
    """The sandbox run of ``code`` (judged again, or the passing run when ``code`` is
    that program): its output and figures are what the review shows."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "dropped": list(self.dropped),
            "definitions": [asdict(d) for d in self.definitions],
            "note": self.note,
            "capabilities": [asdict(c) for c in self.capabilities],
            "tried": [asdict(a) for a in self.tried],
            "result": self.result.to_dict() if self.result is not None else None,
        }


@dataclass
class Hint:
    """One hint of teaching mode (``%%hint``) for a student's cell."""

    level: int
    """1 where, 2 why, 3 the fix."""
    title: str
    text: str
    """What the student was shown (plain text)."""
    facts: list[str] = field(default_factory=list)
    """The lines the tool computed itself (failing line, changed lines, values)."""
    prose: str = ""
    """The model's words that passed the leak check ("" when none did)."""
    check: str = ""
    """What the leak check did: "passed", "dropped" (never why: that tells which of the
    student's guesses the fix has; the tool keeps it), or "" (no model prose at this level)."""
    cell: str = ""
    """The student's code the hint is about."""
    diff: str = ""
    """Level 3 when the policy reveals the fix: the diff to the student's cell."""
    change: str = ""
    """What the student's edit since the last hint changed in the run ("" when none)."""


@dataclass
class Run:
    """The record of one task through the loop."""

    task: Task
    plan: Plan | None = None
    iterations: list[Iteration] = field(default_factory=list)
    outcome: Outcome | None = None
    """None while the run is in progress."""
    error: str = ""
    """For ``outcome == "error"`` (and budget reasons): what happened and what to do."""
    model: str = ""
    base_url: str = ""
    planning_usage: Usage = field(default_factory=Usage)
    checks: GeneratedChecks | None = None
    """QA's generated checks (soft feedback), None when none were asked for."""
    started_at: float = 0.0
    totals: Totals = field(default_factory=Totals)

    fix: Fix | None = None
    """What a notebook front hands over of the passing program (see :class:`Fix`); None
    until it was worked out, or when no candidate passed."""

    hints: list[Hint] = field(default_factory=list)
    """Teaching mode: the hints shown for this cell, newest last."""
    final_index: int | None = None
    """The iteration chosen as the result when it is not simply the last passing one (a
    pass followed by the soft round of the generated checks)."""
    withheld: str = ""
    """Teaching mode: this record was built from the student's own run and the hints, and
    says what stays with the tool ("" for a whole run)."""

    @property
    def final_iteration(self) -> Iteration | None:
        """The passing iteration chosen as the result (the chosen one, else the last that
        passed), or None."""
        for it in self.iterations:
            if it.index == self.final_index and it.verdict.passed:
                return it
        for it in reversed(self.iterations):
            if it.verdict.passed:
                return it
        return None

    @property
    def attempts(self) -> int:
        """How many programs the model wrote (the user's own cell, round 0, is none)."""
        return sum(1 for it in self.iterations if it.index >= 1)

    @property
    def final_code(self) -> str | None:
        """The passing candidate's code (see :attr:`final_iteration`), or None."""
        it = self.final_iteration
        return it.candidate.code if it is not None else None

    @property
    def verified_by(self) -> list[str]:
        """What checked the passing program's output (:attr:`Verdict.verified_by` of the
        final iteration); empty when no candidate passed, or when it passed only by running."""
        it = self.final_iteration
        return [] if it is None else list(it.verdict.verified_by)

    @property
    def verified(self) -> bool:
        """A candidate passed and something checked its output (:attr:`verified_by`)."""
        return bool(self.verified_by)

    @property
    def blind_checks(self) -> list[str]:
        """The checks the passing program passed that the program the task says is wrong
        passes too (:attr:`Verdict.blind_checks` of the final iteration): no verification."""
        it = self.final_iteration
        return [] if it is None else list(it.verdict.blind_checks)

    @property
    def changed_behaviour(self) -> bool:
        """The passing program showed something else on its checks than the program the
        task says is wrong (:attr:`Verdict.changed_behaviour` of the final iteration)."""
        it = self.final_iteration
        return it is not None and it.verdict.changed_behaviour

    @property
    def best_attempt(self) -> Iteration | None:
        """When no candidate passed: the model's program that came closest, the one to
        review first (and what an evaluation scores): it ran cleanly, then it passed the
        most of the user's tests; the earliest of equals. Never the given program (round
        0, or a candidate that left its code unchanged), never one that changed the
        user's spec. None when a candidate passed or none qualifies."""
        if self.final_code is not None:
            return None
        tried = [
            it
            for it in self.iterations
            if it.index >= 1
            and it.candidate.code
            and it.result is not None
            and not it.verdict.spec_violations
            and it.verdict.held != "unchanged"
        ]

        def closeness(it: Iteration) -> tuple[bool, int]:
            return it.result is not None and it.result.clean, it.verdict.tests_passed

        return max(tried, key=closeness) if tried else None  # max keeps the earliest of equals

    def to_dict(self) -> dict[str, Any]:
        best = self.best_attempt
        return {
            "task": self.task.prompt,
            "task_detail": self.task.to_dict(),
            "plan": list(self.plan.steps) if self.plan else [],
            "plan_source": self.plan.source if self.plan else "none",
            "iterations": [it.to_dict() for it in self.iterations],
            "outcome": self.outcome,
            "error": self.error,
            "final_code": self.final_code,
            "final_index": self.final_index,
            "fix": self.fix.to_dict() if self.fix is not None else None,
            "verified": self.verified,
            "verified_by": self.verified_by,
            "blind_checks": self.blind_checks,
            "changed_behaviour": self.changed_behaviour,
            "best_index": best.index if best is not None else None,
            "model": self.model,
            "base_url": self.base_url,
            "planning_usage": asdict(self.planning_usage),
            "generated_checks": self.checks.statements if self.checks else [],
            "started_at": self.started_at,
            "totals": asdict(self.totals),
            "hints": [asdict(h) for h in self.hints],
            "withheld": self.withheld,
        }
