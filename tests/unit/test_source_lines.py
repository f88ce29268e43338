"""Line numbers from Python (the AST, a traceback) meet the text at one function.

``str.splitlines`` breaks at U+2028 and form feeds inside a string too: with one in the
student's cell, the hint quoted another line than the one that fails, and the changed
lines of the fix were counted one off.
"""

from __future__ import annotations

from selfheal_jupyter.source_lines import source_lines
from selfheal_jupyter.spec.guard import extract
from selfheal_jupyter.teaching.facts import Facts, changes_of

CELL = 'title = "Scores\u2028(this term)"\ntotal = 1 - 2\nassert total == 3\n'


def test_lines_break_where_python_numbers_them():
    assert source_lines("a\u2028b\nc\r\nd\re\x0cf") == ["a\u2028b", "c", "d", "e\x0cf"]
    assert source_lines("a\nb\n", keepends=True) == ["a\n", "b\n"]


def test_a_hint_quotes_and_counts_the_line_that_fails():
    assert Facts(cell=CELL).line(2) == "total = 1 - 2"
    changes, *_ = changes_of(CELL, CELL.replace("1 - 2", "1 + 2"))
    assert [c.line for c in changes] == [2]


def test_the_spec_of_a_cell_that_does_not_parse_keeps_its_asserts_lines():
    spec = extract(CELL + "def broken(:\n")
    assert [a.line for a in spec.asserts] == [3]
