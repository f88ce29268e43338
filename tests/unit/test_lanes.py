"""The lanes' rule, as tests/conftest.py applies it to a tree of its own (pytester, in a
process of its own: the session's containers of this process are not the inner run's):
a test under ``unit/`` that needs the engine stops the collection and says where it
belongs; one that needs nothing runs there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parents[1] / "conftest.py").read_text()
ROOT = Path(__file__).parents[2]


@pytest.fixture()
def tree(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A tree whose conftest is the suite's (it imports ``tests.*`` from this checkout)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest(CONFTEST)
    return pytester


def test_a_test_that_takes_the_engine_cannot_live_in_the_unit_lane(tree: pytest.Pytester) -> None:
    tree.mkpydir("unit")
    tree.makepyfile(**{"unit/test_x": "def test_runs(sandbox):\n    pass\n"})
    result = tree.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot be in tests/unit/*", "*unit/test_x.py::test_runs*"])


def test_a_plain_test_runs_in_the_unit_lane_and_elsewhere_is_marked_sandbox(tree: pytest.Pytester) -> None:
    for lane in ("unit", "sandbox"):
        tree.mkpydir(lane)
        tree.makepyfile(**{f"{lane}/test_{lane}": "def test_plain():\n    pass\n"})
    result = tree.runpytest_subprocess("-q", "-m", "not sandbox", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 deselected*"])
