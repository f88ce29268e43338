"""The paper's metrics over run records (built from the data model)."""

from __future__ import annotations

import pytest

from selfheal_jupyter.metrics import attempt_errors, code_lines, run_metrics, summarize
from selfheal_jupyter.model import (
    Candidate,
    ErrorInfo,
    ExecutionResult,
    Iteration,
    Run,
    Task,
    Totals,
    Verdict,
)
from selfheal_jupyter.model import TestOutcome as Outcome


def it(index, code, status="ok", *, error=None, tests=(), passed=False):
    result = ExecutionResult(status=status, error=ErrorInfo(error, "x") if error else None, tests=list(tests))
    return Iteration(index, Candidate(code, index), result, Verdict(passed))


def run(outcome, *iterations, error="", tokens=(0, 0)):
    return Run(
        Task("t"),
        iterations=list(iterations),
        outcome=outcome,
        error=error,
        totals=Totals(len(iterations), tokens[0], tokens[1], 2.0),
    )


FOUR_LINES = "import math\n\n# comment\nx = 1\ny = 2\nprint(x)\n"
FAILED_TEST = Outcome("assert x", False, "AssertionError", 1)
NOT_RUN = Outcome("assert y", False, "not run: the program raised KeyError", 2)


def test_code_lines_and_attempt_errors():
    assert code_lines(FOUR_LINES) == 4 and code_lines("") == 1
    assert attempt_errors(it(1, "x", "error", error="KeyError", tests=[NOT_RUN]).to_dict()) == 1
    assert attempt_errors(it(1, "x", "ok", tests=[FAILED_TEST, FAILED_TEST]).to_dict()) == 2
    assert attempt_errors(it(1, "x", "timeout").to_dict()) == 1
    assert attempt_errors({"result": None}) == 1
    assert attempt_errors(it(1, "x", "ok", passed=True).to_dict()) == 0


def test_one_run():
    r = run(
        "success",
        it(1, FOUR_LINES, "error", error="NameError"),
        it(2, FOUR_LINES, "ok", tests=[FAILED_TEST]),
        it(3, FOUR_LINES, "ok", passed=True),
        tokens=(300, 40),
    )
    m = run_metrics(r)
    assert m.success and m.iterations == 3 and m.iterations_to_success == 3
    assert (m.first_errors, m.first_lines, m.final_errors) == (1, 4, 0)
    assert m.within_limits and m.prompt_tokens == 300
    assert run_metrics(r.to_dict()) == m  # JSON records give the same


def test_given_program_is_round_zero():
    passes_as_is = run("success", it(0, "x = 1", passed=True))
    assert run_metrics(passes_as_is).iterations_to_success == 0
    repaired = run("success", it(0, "x", "error", error="E"), it(1, "x = 1", passed=True))
    assert run_metrics(repaired).iterations_to_success == 1


def test_summary_over_runs():
    runs = [
        # success on the first try: 0 errors
        run("success", it(1, FOUR_LINES, passed=True)),
        # success after a timeout: not within limits
        run("success", it(1, FOUR_LINES, "timeout"), it(2, FOUR_LINES, passed=True)),
        # never right: 2 errors first, 1 at the end
        run(
            "budget_exhausted",
            it(1, FOUR_LINES, "error", error="E", tests=[]),
            it(2, FOUR_LINES, "ok", tests=[FAILED_TEST, FAILED_TEST]),
            it(3, FOUR_LINES, "ok", tests=[FAILED_TEST]),
            error="max_iterations",
        ),
        # infrastructure error before any attempt
        run("error", error="endpoint down"),
    ]
    s = summarize(runs)
    assert s.runs == 4
    assert s.esr == pytest.approx(2 / 4)
    assert s.ari == pytest.approx((1 + 2) / 2)
    assert s.ied == pytest.approx((0 + 1 + 1) / 12)  # three attempted runs × 4 lines
    assert s.err == pytest.approx(((1 + 1) - (0 + 1)) / (1 + 1))
    assert s.esr_s == pytest.approx(1 / 4)
    assert summarize([]).esr == 0.0 and summarize([]).ari is None
    assert set(s.to_dict()) >= {"esr", "ari", "ied", "err", "esr_s"}
