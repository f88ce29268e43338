"""What a program shows on its checks (selfheal_jupyter.spec.behaviour): the names it
assigns. (In the real sandbox: tests/sandbox/test_behaviour.py.)"""

from __future__ import annotations

from selfheal_jupyter.spec.behaviour import assigned_names


def test_the_names_the_tests_assign_in_order() -> None:
    tests = (
        "out = f(x)\na, (b, out) = g()\nfor row in rows:\n    inner = row\ntotal += 1\nn: int = 3\nassert out == 1\n"
    )
    assert assigned_names(tests) == ["out", "a", "b", "row", "total", "n"]
    assert assigned_names(None) == [] and assigned_names("def (") == []
