"""The one data model that flows through the loop.

Plain dataclasses, no behaviour beyond small helpers. Everything that is shown,
exported or measured is derived from a :class:`Run`. ``to_dict`` methods give the
JSON shapes that the CLI prints (``selfheal sandbox exec --json``,
``selfheal run --json``): those key names are a public contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

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
    """Resource limits for one sandbox run; defaults are the hardened defaults."""

    timeout_s: float = 30.0
    memory: str = "512m"
    pids: int = 64
    cpus: float = 1.0
    output_bytes: int = 1 << 20
    tmpfs_size: str = "64m"


@dataclass
class Frame:
    """One stack frame of the candidate's own code."""

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorInfo:
        return cls(
            type=data.get("type", ""),
            message=data.get("message", ""),
            line=data.get("line"),
            frames=[Frame(**f) for f in data.get("frames") or []],
            locals=dict(data.get("locals") or {}),
        )


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

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecutionResult:
        return cls(
            status=data["status"],
            exit_code=data.get("exit_code"),
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            error=ErrorInfo.from_dict(data["error"]) if data.get("error") else None,
            outputs=[RichOutput(**o) for o in data.get("outputs") or []],
            stdout_truncated=bool(data.get("stdout_truncated", False)),
            stderr_truncated=bool(data.get("stderr_truncated", False)),
            tests=[TestOutcome(**t) for t in data.get("tests") or []],
            message=data.get("message", ""),
        )


@dataclass
class InputDescription:
    """What the prompt is told about one notebook input (never the value itself)."""

    name: str
    type: str
    summary: str = ""
    """Shape / columns / dtypes / length, as short text."""


ContextKind = Literal["module", "import", "function", "class", "value", "unavailable"]


@dataclass
class ContextEntry:
    """One notebook name a cell needs, and how it travels to the sandbox.

    ``module`` / ``import``: an import line; ``function`` / ``class``: the source defined
    in the notebook; ``value``: a copy (pickled once per run); ``unavailable``: not
    sent, ``reason`` says why. ``type`` and ``summary`` are what the model may be told
    (type name, shape, columns, signature): never a value.
    """

    name: str
    kind: ContextKind
    type: str = ""
    summary: str = ""
    reason: str = ""
    source: str = ""
    """The import line or the notebook source (goes into the prelude, not to the model)."""

    def label(self) -> str:
        """Short text for the panel: ``DataFrame 3×2``, ``function``, ``numpy``."""
        if self.kind == "module":
            return self.type
        if self.kind in ("function", "class"):
            return self.kind
        return self.type


@dataclass
class NotebookContext:
    """The names a cell reads from its notebook, resolved at run start (copies only)."""

    entries: list[ContextEntry] = field(default_factory=list)
    prelude: str = ""
    """Imports and notebook definitions run before the candidate (never part of it)."""
    values: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Data values pickled once at run start; copied into the sandbox, never to the model."""
    resolve_s: float = 0.0

    @property
    def available(self) -> list[ContextEntry]:
        return [e for e in self.entries if e.kind != "unavailable"]

    @property
    def unavailable(self) -> list[ContextEntry]:
        return [e for e in self.entries if e.kind == "unavailable"]

    def names(self) -> set[str]:
        """The names defined in the sandbox before the candidate runs."""
        return {e.name for e in self.available}

    def data_names(self) -> set[str]:
        """The names holding the user's data (never to be replaced by made-up values)."""
        return {e.name for e in self.entries if e.kind == "value"}

    def to_dict(self) -> list[dict[str, str]]:
        return [
            {"name": e.name, "kind": e.kind, "type": e.type, "summary": e.summary,
             "reason": e.reason}
            for e in self.entries
        ]


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
    plan: Plan | None = None
    """A plan the user gave or edited; used as is."""
    context: NotebookContext | None = None
    """What the code reads from the notebook (imports, definitions, copied values)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "inputs": sorted(self.inputs),
            "tests": self.tests,
            "language": self.language,
            "initial_code": self.initial_code,
            "context": self.context.to_dict() if self.context else [],
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


SpecRule = Literal[
    "assert_removed",
    "assert_changed",
    "assert_silenced",
    "test_removed",
    "failure_swallowed",
    "bare_except",
    "early_exit",
    "hard_coded",
]
"""Which part of the user's spec a candidate broke (see :mod:`selfheal_jupyter.spec`).

The first four change an assert or test itself; the rest make a failure invisible
(silencing) or pass by knowing the expected answer (hard-coding).
"""

ASSERT_RULES: frozenset[str] = frozenset(
    {"assert_removed", "assert_changed", "assert_silenced", "test_removed"}
)
"""Rules whose repetition means the model believes an assert itself must change."""


@dataclass
class SpecViolation:
    """One way a candidate breaks the user's spec (their asserts, tests, test functions)."""

    rule: SpecRule
    message: str
    """What the candidate did, precisely (the user's statement and what became of it)."""
    fix: str
    """How to comply."""
    line: int | None = None
    """The candidate's line concerned, when there is one."""
    original: str = ""
    """The user's statement concerned (source), e.g. the assert's condition."""


@dataclass
class Verdict:
    passed: bool
    reasons: list[str] = field(default_factory=list)
    tests_passed: int = 0
    tests_failed: int = 0
    spec_checked: bool = False
    """True when the candidate was compared against the user's spec (a task from user code)."""
    spec_violations: list[SpecViolation] = field(default_factory=list)
    """Why the candidate was rejected for changing the spec (empty: it kept it)."""

    @property
    def spec_kept(self) -> bool | None:
        """None when there was no spec to keep."""
        return not self.spec_violations if self.spec_checked else None


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
    started_at: float = 0.0
    totals: Totals = field(default_factory=Totals)

    @property
    def final_code(self) -> str | None:
        """The passing candidate's code, or None."""
        for it in reversed(self.iterations):
            if it.verdict.passed:
                return it.candidate.code
        return None

    @property
    def last_code(self) -> str | None:
        return self.iterations[-1].candidate.code if self.iterations else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.prompt,
            "task_detail": self.task.to_dict(),
            "plan": list(self.plan.steps) if self.plan else [],
            "plan_source": self.plan.source if self.plan else "none",
            "iterations": [it.to_dict() for it in self.iterations],
            "outcome": self.outcome,
            "error": self.error,
            "final_code": self.final_code,
            "model": self.model,
            "base_url": self.base_url,
            "planning_usage": asdict(self.planning_usage),
            "started_at": self.started_at,
            "totals": asdict(self.totals),
        }
