"""What a program shows on its checks (selfheal_jupyter.spec.behaviour), in the real sandbox."""

from __future__ import annotations

from selfheal_jupyter.model import ExecutionResult
from selfheal_jupyter.spec.behaviour import observation, observing_tests


def test_two_programs_that_compute_the_same_show_the_same(sandbox) -> None:
    tests = "m = mean([3, 4, 5])\nassert m > 0"
    plus_one = "def mean(v):\n    return sum(v) / len(v) + 1\n"
    rewritten = "def mean(v):\n    s = sum(v) + len(v)\n    return s / len(v)\n"
    fixed = "def mean(v):\n    return sum(v) / len(v)\n"
    seen = [
        observation(sandbox.execute(code, tests=observing_tests(tests)), tests) for code in (plus_one, rewritten, fixed)
    ]
    assert seen[0] is not None and seen[0].values == (("m", "5.0"),)
    assert seen[0] == seen[1] and seen[0] != seen[2]
    assert "m = 5.0" in seen[0].summary()


def test_prints_and_probes_failures_are_seen(sandbox) -> None:
    tests = "x = 1\ndel x"
    seen = observation(sandbox.execute("print('hi')", tests=observing_tests(tests)), tests)
    assert seen is not None and seen.stdout == "hi\n"
    assert seen.values[0][0] == "x" and seen.values[0][1].startswith("raises NameError")
    assert observation(ExecutionResult(status="error"), tests) is None
    nothing = observation(sandbox.execute("y = 2", tests=observing_tests(None)), None)
    assert nothing is not None and nothing.empty
