"""Read an :class:`~selfheal_jupyter.model.ExecutionResult` from JSON: the runner's frame
or a saved record.

Why a module of its own: the JSON came out of a container, where a hostile candidate
ran, so it is checked against the result schema before anything uses it (required
keys, their types, ``status`` one of :data:`~selfheal_jupyter.model.Status`, an ``ok``
run with exit code 0 and no error). The data model holds the types; this is the one
way in from the wire.
"""

from __future__ import annotations

import math
from typing import Any

from .model import ATTEMPT_KINDS, STATUSES, Attempt, ErrorInfo, ExecutionResult, Frame, RichOutput, TestOutcome
from .safe_output import clean_output, clean_text


def read_result(data: object) -> ExecutionResult:
    """The result ``data`` describes, validated; never raises.

    Every string loses its lone surrogates and rich outputs keep only what
    :func:`~selfheal_jupyter.safe_output.clean_output` lets through. Keys of the runner's
    own bookkeeping (``run_s``, ``dirty``...) are ignored. Anything malformed becomes an
    ``error`` result (:meth:`ExecutionResult.malformed`) saying what.
    """
    try:
        return _parse_result(data)
    except _Malformed as exc:
        return ExecutionResult.malformed(str(exc))


class _Malformed(Exception):
    """A result's JSON broke the schema; the message says where and how."""


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _Malformed(f"{where} should be a string, not {_type_name(value)}")
    return clean_text(value)


MAX_MESSAGE = 4_000
"""Characters kept of an error's or a test's message: the candidate chooses its length
(``raise ValueError("A" * 10**8)`` passes the output limit, which counts what it prints),
and every view, record and prompt holds it."""


def _message(value: object, where: str) -> str:
    text = _str(value, where)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise _Malformed(f"{where} should be true or false, not {_type_name(value)}")
    return value


def _int(value: object, where: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Malformed(f"{where} should be an integer, not {_type_name(value)}")
    return value


def _number(value: object, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise _Malformed(f"{where} should be a finite number, not {value!r:.40}")
    return float(value)


def _dict(value: object, where: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Malformed(f"{where} should be an object, not {_type_name(value)}")
    missing = [key for key in required if key not in value]
    if missing:
        raise _Malformed(f"{where} lacks {', '.join(repr(k) for k in missing)}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Malformed(f"{where} should be a list, not {_type_name(value)}")
    return value


def _parse_frame(value: object, where: str) -> Frame:
    d = _dict(value, where, ("file", "line", "function"))
    return Frame(
        file=_str(d["file"], f"{where}.file"),
        line=_int(d["line"], f"{where}.line"),  # type: ignore[arg-type]
        function=_str(d["function"], f"{where}.function"),
        source=_str(d.get("source", ""), f"{where}.source"),
    )


def _parse_error(value: object) -> ErrorInfo | None:
    if value is None:
        return None
    d = _dict(value, "error", ("type", "message"))
    local_values = _dict(d.get("locals", {}), "error.locals")
    return ErrorInfo(
        type=_str(d["type"], "error.type"),
        message=_message(d["message"], "error.message"),
        line=_int(d.get("line"), "error.line", optional=True),
        frames=[
            _parse_frame(f, f"error.frames[{i}]") for i, f in enumerate(_list(d.get("frames", []), "error.frames"))
        ],
        locals={clean_text(name): _str(text, f"error.locals[{name!r:.40}]") for name, text in local_values.items()},
    )


def _parse_output(value: object, where: str) -> RichOutput | None:
    d = _dict(value, where, ("mime", "data"))
    mime = _str(d["mime"], f"{where}.mime")
    _str(d["data"], f"{where}.data")
    data = clean_output(mime, d["data"])
    return None if data is None else RichOutput(mime, data)


def _parse_test(value: object, where: str) -> TestOutcome:
    d = _dict(value, where, ("source", "passed"))
    return TestOutcome(
        source=_str(d["source"], f"{where}.source"),
        passed=_bool(d["passed"], f"{where}.passed"),
        message=_message(d.get("message", ""), f"{where}.message"),
        line=_int(d.get("line"), f"{where}.line", optional=True),
    )


def _parse_result(value: object) -> ExecutionResult:
    d = _dict(value, "the result", ("status", "exit_code", "stdout", "stderr", "error", "outputs", "tests"))
    status = _str(d["status"], "status")
    if status not in STATUSES:
        raise _Malformed(f"status {status[:40]!r} is not one of {', '.join(STATUSES)}")
    exit_code = _int(d["exit_code"], "exit_code", optional=True)
    error = _parse_error(d["error"])
    if status == "ok" and (exit_code != 0 or error is not None):
        raise _Malformed(
            f"status 'ok' with exit code {exit_code} and {'an error' if error is not None else 'no error'}"
        )
    outputs = [_parse_output(o, f"outputs[{i}]") for i, o in enumerate(_list(d["outputs"], "outputs"))]
    return ExecutionResult(
        status=status,  # type: ignore[arg-type]
        exit_code=exit_code,
        stdout=_str(d["stdout"], "stdout"),
        stderr=_str(d["stderr"], "stderr"),
        duration_s=_number(d.get("duration_s", 0.0), "duration_s"),
        error=error,
        outputs=[o for o in outputs if o is not None],
        stdout_truncated=_bool(d.get("stdout_truncated", False), "stdout_truncated"),
        stderr_truncated=_bool(d.get("stderr_truncated", False), "stderr_truncated"),
        tests=[_parse_test(t, f"tests[{i}]") for i, t in enumerate(_list(d["tests"], "tests"))],
        message=_str(d.get("message", ""), "message"),
        tried=[_parse_attempt(a, f"tried[{i}]") for i, a in enumerate(_list(d.get("tried", []), "tried"))],
    )


def _parse_attempt(value: object, where: str) -> Attempt:
    d = _dict(value, where, ("kind", "count", "evidence"))
    kind = _str(d["kind"], f"{where}.kind")
    if kind not in ATTEMPT_KINDS:
        raise _Malformed(f"{where}.kind {kind[:40]!r} is not one of {', '.join(ATTEMPT_KINDS)}")
    count = _int(d["count"], f"{where}.count") or 0
    evidence = _str(d["evidence"], f"{where}.evidence")[:300]
    return Attempt(kind=kind, count=max(count, 0), evidence=evidence)  # type: ignore[arg-type]
