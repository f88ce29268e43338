"""The recorded sandbox answers only what the real runner answered: a call it has no
record of (the loop now runs something else) fails the test and says to record again,
so a replay can never stand for a run that did not happen."""

from __future__ import annotations

import pytest

from selfheal_jupyter.model import ErrorInfo, ExecutionResult, Limits
from selfheal_jupyter.sandbox.base import Sandbox
from tests.recorded_sandbox import ReplayingSandbox, call_of


def limits(timeout_s: float) -> Limits:
    return Limits(timeout_s=timeout_s, memory="512m", pids=64, cpus=1.0, output_bytes=1 << 20, tmpfs_size="64m")


RESULT = ExecutionResult(
    status="error",
    exit_code=1,
    stderr="Traceback",
    error=ErrorInfo(type="NameError", message="name 'x' is not defined"),
)


def record(code: str, **kw) -> dict:
    call = call_of(code, kw.get("inputs"), kw.get("limits"), kw.get("tests"), kw.get("prelude"), kw.get("asserts"))
    return {"call": call, "result": RESULT.to_dict()}


def test_a_recorded_call_gets_the_recorded_result_once() -> None:
    box = ReplayingSandbox([record("print(x)", inputs={"df": 1}, limits=limits(3))], "here")
    assert isinstance(box, Sandbox)
    got = box.execute("print(x)", inputs={"df": object()}, limits=limits(3))  # the names, not the bytes
    assert got == RESULT
    with pytest.raises(pytest.fail.Exception, match="make record"):
        box.execute("print(x)", inputs={"df": 1}, limits=limits(3))  # its record is used up


@pytest.mark.parametrize(
    "other",
    [
        {"code": "print(y)"},
        {"inputs": {"frame": 1}},
        {"limits": limits(4)},
        {"tests": "assert x == 1"},
        {"prelude": "x = 1"},
        {"asserts": [(1, 0, "assert x")]},
    ],
    ids=["code", "input-names", "limits", "tests", "prelude", "asserts"],
)
def test_a_call_that_differs_in_anything_the_run_depends_on_is_not_answered(other: dict) -> None:
    call = {"code": "print(x)", "inputs": {"df": 1}, "limits": limits(3)}
    box = ReplayingSandbox([record(**call)], "test_x")
    code = {**call, **other}.pop("code")
    rest = {k: v for k, v in {**call, **other}.items() if k != "code"}
    with pytest.raises(pytest.fail.Exception, match=r"test_x ran a program no recorded run answers .*make record"):
        box.execute(code, **rest)
