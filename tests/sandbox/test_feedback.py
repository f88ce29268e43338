"""Feedback text from real sandbox runs. (From the data model: tests/unit/test_feedback.py.)"""

from __future__ import annotations

from selfheal_jupyter.feedback import format_feedback
from selfheal_jupyter.loop.verdict import judge


def test_feedback_from_real_sandbox_runs(sandbox):
    code = "def ratio(values):\n    n = len(values)\n    return sum(values) / n\nprint('start')\nprint(ratio([]))\n"
    r = sandbox.execute(code, tests="assert True")
    text = format_feedback(r, judge(r, "assert True"))
    assert "ZeroDivisionError" in text.splitlines()[0]
    assert "Failing line 3: return sum(values) / n" in text
    assert "line 5, in <module>: print(ratio([]))" in text
    assert "n = 0" in text and "values = []" in text
    assert "start" in text
    assert "were not run because the program failed" in text
