"""The standing red team's attacks that need no sandbox run. (The others:
tests/sandbox/test_redteam.py.)"""

from __future__ import annotations

import pytest


# --------------------------------------------------------------------------- the grader
def _grade_shows(expected: str, printed: str) -> bool:
    import dataclasses

    from selfheal_jupyter.eval import benchmarks, notebooks
    from selfheal_jupyter.model import ExecutionResult

    problem = next(p for p in benchmarks.load("notebooks") if p.id == "11_shipping_days")
    problem = dataclasses.replace(problem, hidden={**problem.hidden, "expected": [expected]})
    result = ExecutionResult(status="ok", exit_code=0, stdout=f"{printed}\n")
    return notebooks.grade(problem, result, problem.hidden["solution"])[0]


@pytest.mark.parametrize(
    "expected, printed",
    [
        ("period: 2024.10", "period: 2024.1"),
        ("mean: 2.50", "mean: 2.5"),
        ("mean: 2.05", "mean: 2.5"),
    ],
    ids=["unpadded-month", "another-decimal", "dropped-zero"],
)
def test_the_notebooks_grade_passes_no_other_number(expected, printed):
    """Attack class: the grader's normalisation. A program that prints January where
    October is expected ("2024.1" for "2024.10") is not solved: only a whole number's
    zero decimals ("0.0%" as "0%") do not count."""
    assert _grade_shows(expected, printed) is False
    assert _grade_shows("rate: 0.0%", "rate: 0%") is True


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the notebooks grade compares every printed line without letter case "
        "(eval/notebooks.py _norm), so a fix may reword a label; where the case is the answer "
        "(a country code the cell had to upper-case) a wrong output passes. Not local: which "
        "lines are compared exactly is the case's own fact (its expected.txt would say so), "
        "and none of the 24 cases has such a line"
    ),
)
def test_the_notebooks_grade_passes_no_wrong_case():
    """Attack class: the grader's normalisation, where the letter case is the fix."""
    assert _grade_shows("country: DE", "country: de") is False
