"""An expectation stated in words (``%%heal the total should be 42``) read into a check."""

from __future__ import annotations

import pytest

from selfheal_jupyter.spec.stated import stated_checks, with_stated

CELL = "prices = [10, 20, 12]\ntotal = sum(prices[1:])\nmean_price = total / 3\nstats = object()\n"


@pytest.mark.parametrize(
    "text, check",
    [
        ("the total should be 42", "assert total == 42"),
        ("The mean price should be 4.5.", "assert abs(mean_price - 4.5) <= 0.05"),
        ("total == 42", "assert total == 42"),
        ("`len(prices)` must be 3", "assert len(prices) == 3"),
        ("stats.n should be 6, not 12", "assert stats.n == 6"),
        ("fix the loop so that the total should be 42 instead of 32", "assert total == 42"),
        ("the flag should be True", None),
        ("the total should be about 42", None),
        ("the plot should look right", None),
        ("make it faster", None),
    ],
)
def test_plain_statements_about_the_cells_names_become_checks(text, check):
    found = stated_checks(text, CELL)
    if check is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(check + ", 'you said "), found


def test_the_checks_follow_the_users_tests_and_run_as_python():
    stated = stated_checks("the total should be 42", CELL)
    tests = with_stated("assert total > 0", stated)
    assert tests.splitlines()[0] == "assert total > 0" and tests.splitlines()[1] == stated[0]
    namespace = {"total": 42}
    exec(compile(tests, "tests", "exec"), namespace)
    namespace["total"] = 41
    with pytest.raises(AssertionError, match="you said total should be 42; it is 41"):
        exec(compile(tests, "tests", "exec"), namespace)
    assert with_stated(None, []) is None
