"""Turn one QA result into short, structured feedback for the developer.

Why structured and short: the developer sees its own last program plus this text,
not the whole conversation, so token cost per iteration stays flat. What helps a
model repair code (and what the debugging literature, e.g. LDB, found lifts repair
rates) is precise: the exception, the failing line with its source, the program's own
frames, the failing frame's local variables, the end of stdout/stderr, and which of
the user's tests failed and why. Every part is capped, and a local or a value whose
name or text looks like a secret (a key, a token, a password) is ``<redacted>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import (
    DATA_CHECK_PREFIX,
    DATA_RULES,
    NOTEBOOK_FILE,
    ExecutionResult,
    Explanation,
    Limits,
    SpecViolation,
    TestOutcome,
    Verdict,
    split_checks,
)
from .redact import redact_value

MAX_FRAMES = 6
MAX_LOCALS = 12
MAX_TESTS = 8
NOT_RUN = "not run"
"""How the checker's message of a test it never reached starts (sandbox/runner)."""
TAIL_LINES = 15
TAIL_CHARS = 1200
MAX_FIELD = 300

_TRACEBACK_HEAD = "Traceback (most recent call last):"


def clip(text: str, limit: int = MAX_FIELD) -> str:
    """``text`` stripped, cut to ``limit`` characters with an ellipsis."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last ``lines`` lines (at most ``chars`` characters) of ``text``."""
    kept = text.rstrip("\n").splitlines()[-lines:]
    out = "\n".join(kept)
    if len(out) > chars:
        out = "…" + out[-chars:]
    return out


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + ln for ln in text.splitlines())


def _headline(result: ExecutionResult, limits: Limits | None) -> str:
    error = result.error
    status = result.status
    if status == "blocked":
        what = f"{error.type}: {clip(error.message)}" if error else clip(result.message)
        return f"The program was NOT run: the static pre-check found {what}"
    if status == "timeout":
        secs = f" of {limits.timeout_s:g} s" if limits else ""
        return (
            f"The program did not finish within the time limit{secs} and was stopped. "
            "Look for an infinite loop, waiting on input, or work that is far too slow "
            "(use vectorised numpy/pandas operations, smaller loops)."
        )
    if status == "oom":
        mem = f" ({limits.memory})" if limits else ""
        return (
            f"The program ran out of memory{mem} and was killed. Avoid building huge "
            "lists/arrays or cross joins; process data in chunks or use smaller dtypes."
        )
    if status == "output_limit":
        return (
            "The program printed more output than allowed and was stopped. Print "
            "summaries (len(), .head(), aggregates), not whole datasets or endless loops."
        )
    if status == "killed":
        return "The run was killed before it finished."
    if error is not None:
        return f"The program raised {error.type}: {clip(error.message)}"
    if result.exit_code not in (0, None):
        return f"The program exited with code {result.exit_code}."
    return "The program ran without raising an error."


def _location(result: ExecutionResult) -> list[str]:
    error = result.error
    if error is None:
        return []
    out: list[str] = []
    frames = error.frames[-MAX_FRAMES:]
    failing = frames[-1] if frames else None
    if failing is not None and failing.file == NOTEBOOK_FILE:
        out.append(f"It failed inside {failing.function}(), defined in the user's notebook: {failing.source}")
        if error.line:
            out.append(f"Your program's line that called it: line {error.line}.")
    elif failing is not None:
        out.append(f"Failing line {failing.line}: {failing.source}")
    elif error.line:
        out.append(f"Failing line {error.line}.")
    if len(frames) > 1:
        out.append("Your frames (most recent call last):")
        skipped = len(error.frames) - len(frames)
        if skipped:
            out.append(f"  … {skipped} earlier frames")
        for f in frames:
            where = "notebook" if f.file == NOTEBOOK_FILE else f"line {f.line}"
            out.append(f"  {where}, in {f.function}: {f.source}")
    if error.locals:
        items = list(error.locals.items())
        out.append("Local variables of the failing frame:")
        for name, summary in items[:MAX_LOCALS]:
            out.append(f"  {name} = {clip(redact_value(name, summary), 160)}")
        if len(items) > MAX_LOCALS:
            out.append(f"  … {len(items) - MAX_LOCALS} more")
    return out


def _located(result: ExecutionResult) -> set[str]:
    """The explanation's sentences that :func:`_location` already says."""
    frames = result.error.frames if result.error is not None else []
    if frames and frames[-1].file == NOTEBOOK_FILE:
        return {INSIDE_NOTEBOOK.format(source=frames[-1].source)}
    return set()


def _stderr_without_traceback(result: ExecutionResult) -> str:
    """stderr minus the traceback (already given in structured form above)."""
    stderr = result.stderr
    if result.error is not None and _TRACEBACK_HEAD in stderr:
        stderr = stderr[: stderr.rfind(_TRACEBACK_HEAD)]
    return stderr


def _streams(result: ExecutionResult) -> list[str]:
    out: list[str] = []
    if result.stdout.strip():
        cut = " (truncated by the output limit)" if result.stdout_truncated else ""
        out.append(f"End of stdout{cut}:")
        out.append(_indent(tail(result.stdout)))
    stderr = _stderr_without_traceback(result)
    if stderr.strip():
        out.append("End of stderr:")
        out.append(_indent(tail(stderr)))
    return out


def _tests(tests: list[TestOutcome]) -> list[str]:
    """The user's tests that failed, each with why; those that did not run (the program
    stopped before them) one line per reason, by line: their source is in the prompt
    already, and listing each as FAILED said more had failed than had."""
    if not tests:
        return []
    failed = [t for t in tests if not t.passed]
    not_run = [t for t in failed if t.message.startswith(NOT_RUN)]
    ran_and_failed = [t for t in failed if not t.message.startswith(NOT_RUN)]
    if not_run and not ran_and_failed and len(failed) == len(tests):
        return [f"The user's {len(tests)} test(s) were not run because the program failed."]
    if not failed:
        return [f"All {len(tests)} of the user's tests passed."]
    counted = (
        f"{len(ran_and_failed)} of the user's {len(tests)} tests failed"
        if ran_and_failed
        else f"{len(not_run)} of the user's {len(tests)} tests did not run"
    )
    out = [f"{counted} (the tests are fixed; change the program, not the tests):"]
    for t in ran_and_failed[:MAX_TESTS]:
        where = f"line {t.line}: " if t.line else ""
        out.append(f"  FAILED {where}{clip(t.source, 160)}")
        if t.message:
            out.append(f"    → {clip(t.message, 240)}")
    if len(ran_and_failed) > MAX_TESTS:
        out.append(f"  … {len(ran_and_failed) - MAX_TESTS} more failed")
    reasons: dict[str, list[TestOutcome]] = {}
    for t in not_run:
        reasons.setdefault(t.message[len(NOT_RUN) :].lstrip(": ").strip(), []).append(t)
    for why, group in reasons.items():
        lines = ", ".join(str(t.line) for t in group if t.line)
        where = f" (line{'s' if len(group) > 1 else ''} {clip(lines, 120)})" if lines else ""
        out.append(f"  {len(group)} not run{where}" + (f": {clip(why, 160)}" if why else ""))
    return out


SPEC_HEADER = (
    "REJECTED whatever the run shows: the program changes the user's spec (their asserts "
    "and tests are fixed; make the program satisfy them):"
)


DATA_HEADER = (
    "REJECTED whatever the run shows: the program does not work on the user's notebook data "
    "as it is (the task is about their data, not example values):"
)


def spec_lines(violations: list[SpecViolation]) -> list[str]:
    """The spec section of the feedback: which rule, what exactly, how to comply."""
    if not violations:
        return []
    out = [DATA_HEADER if all(v.rule in DATA_RULES for v in violations) else SPEC_HEADER]
    for v in violations[:MAX_TESTS]:
        out.append(f"  RULE {v.rule} ({v.title}): {clip(v.message, 300)}")
        out.append(f"    → to comply: {v.fix}")
    if len(violations) > MAX_TESTS:
        out.append(f"  … {len(violations) - MAX_TESTS} more")
    return out


EXPLANATION_HEADER = "What the tool found from the notebook's context:"
INSIDE_NOTEBOOK = "It failed inside a function of your notebook, at `{source}`."
"""The explanation's first sentence for a failure inside the notebook's code; the feedback's
location line says it already, so the model is not told twice."""


def without_explanation(feedback: str) -> str:
    """``feedback`` without the tool's explanation of the failure (which may name the fix:
    a close column and the edit it implies), for what a student may hold in hints mode."""
    out, skipping = [], False
    for line in feedback.splitlines():
        if line == EXPLANATION_HEADER:
            skipping = True
            continue
        if skipping and line.startswith("  "):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out)


def format_feedback(
    result: ExecutionResult | None,
    verdict: Verdict | None = None,
    *,
    limits: Limits | None = None,
    explanation: Explanation | None = None,
) -> str:
    """Feedback text for one iteration ("" when it passed); ``explanation``: what the tool
    worked out of the failure from the notebook's context (:mod:`~selfheal_jupyter.diagnosis`)."""
    if verdict is not None and verdict.passed:
        return ""
    if result is None:
        reasons = "; ".join(verdict.why) if verdict else "no program was produced"
        return f"No program was run: {reasons}."
    violations = verdict.spec_violations if verdict is not None else []
    parts = spec_lines(violations)
    if violations:
        parts.append("When it ran:")
    parts.append(_headline(result, limits))
    if result.message and result.status not in ("ok", "error", "blocked"):
        parts.append(clip(result.message, 400))
    parts += _location(result)
    found = [s for s in explanation.diagnosis if s not in _located(result)] if explanation is not None else []
    if found:
        parts.append(EXPLANATION_HEADER)
        parts += [f"  {sentence}" for sentence in found]
    parts += _streams(result)
    parts += _tests(result.tests)
    if (
        verdict is not None
        and result.status == "ok"
        and not result.error
        and not any(not t.passed for t in result.tests)
    ):
        extra = [r for r in verdict.reasons if r]
        if extra:
            parts.append("Why it did not pass: " + "; ".join(extra))
    return "\n".join(parts)


def failure_signature(result: ExecutionResult | None, verdict: Verdict | None = None) -> tuple[str, ...]:
    """What identifies "the same failure again" (to notice a fix that did not work): the
    error and the failed tests; for a run that ran cleanly and passed them, what held it:
    the spec rules it broke, and, when ``verdict`` held it for its output (a check of the
    user's data, the given program's behaviour), what it printed, since another output is
    another attempt (and only then: a line that changes each round is no new attempt)."""
    if result is None:
        return ("no-code",)
    sig: tuple[str, ...] = (result.status,)
    if result.error is not None:
        sig += (result.error.type, result.error.message[:200], str(result.error.line))
    failed = tuple(sorted(t.source for t in result.tests if not t.passed))
    if result.error is None and not failed and result.status == "ok" and verdict is not None:
        sig += tuple(sorted({v.rule for v in verdict.spec_violations}))
        if verdict.held:
            sig += ("printed", result.stdout[-4000:])
    return sig + failed


GENERATED_HEADER = (
    "{failed} of {total} GENERATED checks failed (written by QA from the task alone, not by "
    "the user; they may be wrong):"
)


DATA_CHECKS_HEADER = (
    "{failed} of {total} checks FROM THE USER'S DATA failed (the answer each group should show, "
    "computed from the notebook's own values):"
)


def check_lines(checks: list[TestOutcome], *, passed: bool = False) -> list[str]:
    """QA's generated checks and the checks from the notebook's data that failed,
    labelled apart from the user's tests.

    ``passed``: the program passed the user's tests and ran cleanly (the checks are then
    the only thing left to look at)."""
    failed = [t for t in checks if not t.passed and not t.message.startswith(NOT_RUN)]
    if not failed:
        return []
    out = []
    if passed:
        out.append("The program ran cleanly and passed the user's own checks.")
    derived, generated = split_checks(failed)
    all_derived, all_generated = split_checks(checks)
    if derived:
        out.append(DATA_CHECKS_HEADER.format(failed=len(derived), total=len(all_derived)))
        for t in derived[:MAX_TESTS]:
            out.append(f"  FROM YOUR DATA: {clip(t.source.removeprefix(DATA_CHECK_PREFIX), 200)}")
            if t.message:
                out.append(f"    → {clip(t.message, 240)}")
    if generated:
        out.append(GENERATED_HEADER.format(failed=len(generated), total=len(all_generated)))
        for t in generated[:MAX_TESTS]:
            out.append(f"  GENERATED {clip(t.source, 160)}")
            if t.message:
                out.append(f"    → {clip(t.message, 240)}")
    return out


def runtime_value_lines(values: list[TestOutcome], differences: Sequence[str] = ()) -> list[str]:
    """Values of the failing statement's sub-expressions and, for a failing ``==``, what
    differs (see :mod:`selfheal_jupyter.spec.probes`)."""
    out = []
    if values:
        out.append("Values at the failing statement (evaluated where it failed):")
    for v in values:
        shown = v.message if v.passed else f"raises {v.message}"
        out.append(f"  {clip(v.source, 120)} = {clip(redact_value(v.source, shown), 200)}")
    if differences:
        out.append("What differs (change the program so that these hold; never the assert):")
        out += [f"  {clip(d, 400)}" for d in differences]
    return out
