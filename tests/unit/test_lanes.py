"""The lanes' rule, as tests/conftest.py applies it to a tree of its own (pytester):
a test under ``unit/`` that needs the engine stops the collection and says where it
belongs; one that needs nothing runs there."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parents[1] / "conftest.py").read_text()


def test_a_test_that_takes_the_engine_cannot_live_in_the_unit_lane(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.mkpydir("unit")
    pytester.makepyfile(**{"unit/test_x": "def test_runs(sandbox):\n    pass\n"})
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot be in tests/unit/*", "*unit/test_x.py::test_runs*"])


def test_a_plain_test_runs_in_the_unit_lane_and_elsewhere_is_marked_sandbox(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    for lane in ("unit", "sandbox"):
        pytester.mkpydir(lane)
        pytester.makepyfile(**{f"{lane}/test_{lane}": "def test_plain():\n    pass\n"})
    result = pytester.runpytest_inprocess("-q", "-m", "not sandbox")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 deselected*"])
