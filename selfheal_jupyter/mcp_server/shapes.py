"""The JSON shapes of the tools' structured results, published as their output schemas.

They describe what :meth:`ExecutionResult.to_dict`, :meth:`Run.to_dict` and the verdict
give (the data model is :mod:`selfheal_jupyter.model`; these only tell a client the
shape), so an agent's MCP client can validate and read a result without prose.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from ..model import CapabilityKind, Outcome, SpecRule, Status

described = with_config(ConfigDict(use_attribute_docstrings=True))
"""Each key's docstring becomes its description in the published schema."""


@described
class FrameShape(TypedDict):
    file: str
    line: int
    function: str
    source: str


@described
class ErrorShape(TypedDict):
    type: str
    """The exception's class name."""
    message: str
    line: int | None
    """The program's line where it was raised."""
    frames: list[FrameShape]
    """The program's own frames, innermost last."""
    locals: dict[str, str]
    """The failing frame's local variables, summarised (secrets redacted)."""


@described
class OutputShape(TypedDict):
    mime: str
    """``image/png`` (base64, also sent as image content), ``text/html`` (a table), ``text/plain``."""
    data: str


@described
class TestShape(TypedDict):
    source: str
    passed: bool
    message: str
    line: int | None


@described
class AttemptShape(TypedDict):
    kind: Literal["network", "process", "files"]
    count: int
    evidence: str
    by: str


@described
class SandboxResult(TypedDict):
    """One sandbox run, as ``selfheal sandbox exec --json`` prints it."""

    status: Status
    """ok, error, timeout, oom, killed, or blocked (refused before it ran)."""
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    error: ErrorShape | None
    outputs: list[OutputShape]
    stdout_truncated: bool
    stderr_truncated: bool
    tests: list[TestShape]
    message: str
    tried: list[AttemptShape]
    """What the program tried beyond its folder (network, processes, files), seen from outside it."""


@described
class ViolationShape(TypedDict):
    rule: SpecRule
    title: str
    """The rule in a few words."""
    message: str
    """What the candidate did to the user's spec."""
    fix: str
    """How to comply."""
    line: int | None
    """The candidate's line concerned."""
    original: str
    """The user's statement concerned."""


@described
class CapabilityShape(TypedDict):
    kind: CapabilityKind
    line: int
    evidence: str


@described
class HandOverShape(TypedDict):
    code: str
    """The smallest change to the original that passes the same checks."""
    diff: str
    """Unified diff of the original → ``code``."""
    dropped: list[str]
    """What was left out of the candidate, each with why."""
    note: str
    capabilities: list[CapabilityShape]
    """What ``code`` newly can do beside the original, with lines."""
    tried: list[AttemptShape]
    """What its sandbox run tried that its code does not show: a sign of a steered model."""


@described
class CheckShape(TypedDict):
    """The verdict on a candidate fix, as the loop decides it."""

    verdict: Literal["passed", "failed", "rejected"]
    """``rejected``: it broke the user's spec (see ``spec_violations``); ``failed``: it did not pass."""
    passed: bool
    verified_by: list[str]
    """What checked its output ("your asserts", "your tests"...); empty when it passed only by running."""
    only_runs: bool
    """It passed, but nothing checked its output: no verified fix."""
    reasons: list[str]
    spec_violations: list[ViolationShape]
    tests_passed: int
    tests_failed: int
    original_passed: bool
    """The original passed its own checks as it is."""
    result: SandboxResult | None
    """The candidate's sandbox run (None: it was not run, e.g. it does not parse)."""
    fix: HandOverShape | None
    """The minimal hand-over of a passing candidate (None: it did not pass, or the policy withholds it)."""
    withheld: str
    """Why the hand-over is withheld (the instructor's policy), else ""."""


@described
class ExplanationShape(TypedDict):
    failed: bool
    """The program failed (else there is nothing to explain)."""
    error: str
    """``KeyError: 'Region'``."""
    line: int | None
    source: str
    """The failing line."""
    diagnosis: list[str]
    """The tool's own sentences about the failure (names in backticks)."""
    edits: list[dict[str, Any]]
    """The one precise edit of the failing line the diagnosis implies ({line, old, new}), if any."""
    result: SandboxResult


@with_config(ConfigDict(extra="allow"))
class RunRecord(TypedDict):
    """The record ``selfheal run --json`` prints (every key of it; the main ones typed here)."""

    task: str
    outcome: Outcome | None
    error: str
    final_code: str | None
    fix: dict[str, Any] | None
    verified: bool
    verified_by: list[str]
    iterations: list[dict[str, Any]]
