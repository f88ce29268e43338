"""Data science: the 100 test tasks of ``dataframebench==0.1.1`` (CC-BY-4.0), pandas condition.

Installed with ``pip install --no-deps --ignore-requires-python dataframebench==0.1.1``
(its declared Python floor is newer than ours; only the bundled data is used). The
prompt is the benchmark's own, filled for pandas; its hidden ``unittest`` suite runs in
the sandbox, in an image variant that adds the libraries of its
``data/requirements.txt`` (see :func:`requirements`). The loop's QA gets only the stub
docstring's literal examples, when there are any.
"""

from __future__ import annotations

import json
import re

from .examples import example_asserts
from .harness import HiddenRun, grader
from .problem import Problem, package_dir

NAME = "dataframe"
LIBRARY = "pandas"

_CHECK = """
import unittest as _unittest
_suite = _unittest.defaultTestLoader.loadTestsFromTestCase(TestCases)
_result = _unittest.TextTestRunner(stream=_sys.stdout, verbosity=1).run(_suite)
assert _result.wasSuccessful(), (
    f"{len(_result.failures)} failures, {len(_result.errors)} errors of {_result.testsRun} tests")
"""


def records(split: str = "test") -> list[dict]:
    path = package_dir("dataframebench").joinpath("data", f"{split}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fill(text: str) -> str:
    """The benchmark's placeholders, filled for pandas (plain replace, as the package does)."""
    return text.replace("{library_import}", "import pandas as pd").replace(
        "{library_instruction}", f"Use {LIBRARY} as the data processing library in your solution."
    )


def requirements() -> list[str]:
    """The extra sandbox libraries the benchmark lists (pandas added: the condition)."""
    text = package_dir("dataframebench").joinpath("data", "requirements.txt").read_text()
    reqs = [ln.split("#")[0].strip() for ln in text.splitlines()]
    return [r for r in reqs if r]


#: Tasks whose tests need the candidate in their own process: they patch a library the
#: candidate calls (``unittest.mock.patch`` of ``requests.get``, ``plt.show``,
#: ``folium.Map``...) or check ``type(ax)`` by name; one draws a pairplot too slow for the
#: limit with the grader beside it. The grader runs in its own process so that the
#: candidate cannot touch it, where even the ground truth fails these: they are left out
#: (tests/sandbox/test_eval.py checks the ground truth of the others passes).
NEEDS_IN_PROCESS_GRADER = frozenset(
    {
        "DFB/B0011",
        "DFB/B0033",
        "DFB/B0049",
        "DFB/B0065",
        "DFB/B0082",
        "DFB/B0090",
        "DFB/B0096",
    }
)


def load() -> list[Problem]:
    problems = []
    for rec in records():
        if rec["task_id"] in NEEDS_IN_PROCESS_GRADER:
            continue
        stub = _fill(rec["prompt_parts"].get("stub", ""))
        tests = example_asserts(stub, rec["entry_point"])
        problems.append(
            Problem(
                benchmark=NAME,
                id=rec["task_id"],
                prompt=_fill(rec["prompt"]),
                entry_point=rec["entry_point"],
                visible_tests=tests,
                feedback="docstring examples as asserts" if tests else "clean execution",
                hidden={"test_code": rec["test_code"], "category": rec["category"]},
            )
        )
    return problems


_MAIN_GUARD = re.compile(r"^if __name__ == ['\"]__main__['\"]:", re.M)


def hidden_run(problem: Problem) -> HiddenRun:
    # The grader's module is not __main__, so the test file's own
    # ``if __name__ == "__main__": unittest.main()`` stays inert; we run TestCases.
    return HiddenRun(tests=grader(problem.hidden["test_code"] + "\n" + _CHECK))
