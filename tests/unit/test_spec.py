"""The user's spec is sacred: the static rules checked one by one on
:func:`selfheal_jupyter.spec.guard.check`. (End to end in the real sandbox:
tests/sandbox/test_spec.py.)"""

from __future__ import annotations

import pytest

from selfheal_jupyter.spec import guard as spec

# The user's cell: a bug in average() makes their own assert fail.
USER = """\
def average(values):
    return sum(values) / len(values) + 1

scores = [3, 4, 5]
mean = average(scores)
print("mean:", mean)
assert mean == 4, "the mean of 3, 4, 5 is 4"
"""
ASSERT = 'assert mean == 4, "the mean of 3, 4, 5 is 4"'
FIXED = USER.replace(" + 1", "")

MESSAGE_ONLY = FIXED.replace('"the mean of 3, 4, 5 is 4"', '"average([3, 4, 5]) must be 4.0"')


# --------------------------------------------------------------------------- rule by rule
def check(original: str, candidate: str, tests: str | None = None, failing=()) -> list:
    return spec.check(spec.extract(original, tests, failing), candidate)


def test_identical_or_message_only_or_reformatted_keeps_the_spec():
    assert check(USER, USER) == []
    assert check(USER, MESSAGE_ONLY) == []
    assert check(USER, FIXED.replace("mean == 4", "(mean) == 4")) == []  # same AST


@pytest.mark.parametrize(
    "candidate, rule",
    [
        (USER.replace(ASSERT, "print(mean == 4)"), "assert_silenced"),
        (USER.replace(ASSERT, 'if not mean == 4:\n    print("wrong mean")'), "assert_silenced"),
        (USER.replace(ASSERT, 'assert mean == 4 or True, "x"'), "assert_changed"),
        (USER.replace(ASSERT, "assert 4 == mean"), "assert_changed"),
        (USER.replace(ASSERT, f"try:\n    {ASSERT}\nexcept:\n    pass"), "failure_swallowed"),
        (
            USER.replace(ASSERT, f"import contextlib\nwith contextlib.suppress(AssertionError):\n    {ASSERT}"),
            "failure_swallowed",
        ),
        (USER.replace(ASSERT, f"import sys\nsys.exit(0)\n{ASSERT}"), "early_exit"),
        (
            USER.replace("mean = average(scores)", "try:\n    mean = average(scores)\nexcept Exception:\n    pass"),
            "bare_except",
        ),
        (
            USER.replace(
                "    return sum(values) / len(values) + 1",
                "    if values == [3, 4, 5]:\n        return 4\n    return sum(values) / len(values) + 1",
            ),
            "hard_coded",
        ),
    ],
    ids=[
        "print",
        "if-print",
        "or-true",
        "swapped",
        "bare-except-pass",
        "suppress",
        "exit",
        "except-exception-pass",
        "special-case",
    ],
)
def test_each_rule(candidate, rule):
    found = check(USER, candidate)
    assert rule in {v.rule for v in found}, found
    assert all(v.fix for v in found)


def test_special_case_of_the_asserted_call_argument():
    original = "def square(x):\n    return x * 3\n\nassert square(4) == 16\n"
    candidate = "def square(x):\n    if x == 4:\n        return 16\n    return x * 3\n\nassert square(4) == 16\n"
    assert [v.rule for v in check(original, candidate)] == ["hard_coded"]
    assert check(original, original.replace("x * 3", "x * x")) == []


def test_test_functions_and_their_calls_are_kept():
    original = "def f(x):\n    return x\n\ndef test_f():\n    assert f(2) == 2\n\ntest_f()\n"
    gone = "def f(x):\n    return x\n"
    uncalled = "def f(x):\n    return x\n\ndef test_f():\n    assert f(2) == 2\n"
    assert {v.rule for v in check(original, gone)} == {"test_removed", "assert_removed"}
    assert [v.rule for v in check(original, uncalled)] == ["test_removed"]


def test_tests_block_values_may_not_be_written_in():
    original = "import math\ntotal = math.fsum([1, 2, 3]) // 0\n"
    assert [v.rule for v in check(original, "total = 6\n", tests="assert total == 6")] == ["hard_coded"]
    assert check(original, "import math\ntotal = math.fsum([1, 2, 3])\n", tests="assert total == 6") == []


def test_legitimate_repairs_are_not_flagged():
    # an accumulator that starts at the expected value's type, a guard that handles the
    # error properly, a literal return in a function that reads its argument
    original = (
        "def is_even(n):\n    return n % 2 == 1\n\n"
        "def safe_div(a, b):\n    return a / b\n\n"
        "count = None\nfor x in [1, 2, 3]:\n    count += 1\n"
        "assert is_even(4) == True\nassert count == 3\nassert safe_div(1, 0) == 0\n"
    )
    repaired = (
        "def is_even(n):\n    if n % 2 == 0:\n        return True\n    return False\n\n"
        "def safe_div(a, b):\n    if b == 0:\n        return 0\n    return a / b\n\n"
        "count = 0\nfor x in [1, 2, 3]:\n    count += 1\n"
        "assert is_even(4) == True\nassert count == 3\nassert safe_div(1, 0) == 0\n"
    )
    assert check(original, repaired) == []


def test_code_that_does_not_parse_still_has_its_asserts():
    broken = "def f(x)\n    return x\nassert f(2) == 2, 'two'\n"
    found = check(broken, "def f(x):\n    return x\n")
    assert [v.rule for v in found] == ["assert_removed"]
    assert check(broken, "def f(x):\n    return x\nassert f(2) == 2, 'f(2) is 2'\n") == []


USER_TEST_FUNCTION = """\
def average(values):
    return sum(values) / len(values) + 1


def test_average():
    assert average([3, 4, 5]) == 4
    assert average([1, 2]) == 1.5


test_average()
"""


def test_the_checker_gets_the_user_s_top_level_asserts_and_test_calls_where_they_stand():
    user = spec.extract(USER_TEST_FUNCTION + 'assert average([3, 4, 5]) == 4, "the mean"\n')
    candidate = (
        "import math\n\n"
        + USER_TEST_FUNCTION.replace(" + 1", "")
        + "x = 1; "
        + 'assert average([3, 4, 5]) == 4, "message may change"\n'
    )
    checks = spec.checked_statements(user, candidate)
    lines = candidate.splitlines()
    assert [(lines[line - 1][col:], text.splitlines()[-1]) for line, col, text in checks] == [
        ("test_average()", "test_average()"),
        (
            'assert average([3, 4, 5]) == 4, "message may change"',
            "assert average([3, 4, 5]) == 4, 'the mean'",
        ),  # the user's own
    ]
    assert checks[0][2].startswith("def test_average():")  # the user's test, run by the checker
    nested = "if True:\n    " + ASSERT + "\n"
    assert spec.checked_statements(spec.extract(USER), nested) == []
    assert "assert_moved" in {v.rule for v in check(USER, USER.replace(ASSERT, nested))}


@pytest.mark.parametrize(
    "candidate, flagged",
    [
        (
            "class Exact(float):\n    def __eq__(self, o):\n        return abs(self - o) < 1\n"
            "def f():\n    return Exact(1)\n",
            True,
        ),  # a plain value that compares differently
        ("class P:\n    def __eq__(self, o):\n        return True\ndef f():\n    return P()\n", True),
        ("class P:\n    __eq__ = lambda self, o: True\ndef f():\n    return P()\n", True),
        ("class P:\n    def __bool__(self):\n        return True\ndef f():\n    return P()\n", True),
        ("class P:\n    def __sub__(self, o):\n        return 0.0\ndef f():\n    return P()\n", True),
        ("class P:\n    def __eq__(self, o):\n        return True\n", False),  # never used
        (
            "class P:\n    def __init__(self, x):\n        self.x = x\n    def __eq__(self, o):\n"
            "        return isinstance(o, P) and o.x == self.x\ndef f():\n    return P(1)\n",
            False,
        ),
        ("from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\ndef f():\n    return P(1)\n", False),
        ("class V:\n    def __len__(self):\n        return 3\ndef f():\n    return V()\n", False),
        ("class Name(str):\n    pass\ndef f():\n    return Name('a')\n", False),  # no override
    ],
)
def test_forced_comparisons_are_a_spec_violation(candidate, flagged):
    original = "def f():\n    return 0\n\nassert f() == 1\n"
    found = {v.rule for v in check(original, candidate + "\nassert f() == 1\n")}
    assert ("forced_comparison" in found) is flagged, found


def test_a_user_s_own_comparison_method_kept_is_not_held_against_the_repair():
    original = (
        "class P:\n    def __eq__(self, o):\n        return True\n\ndef f():\n    return P() + 1\n\nassert f() == P()\n"
    )
    assert "forced_comparison" not in {v.rule for v in check(original, original.replace(" + 1", ""))}


def test_the_user_s_failing_checks_fail_the_verdict_without_a_tests_block():
    from selfheal_jupyter.loop.verdict import judge
    from selfheal_jupyter.model import ExecutionResult, TestOutcome

    result = ExecutionResult(
        status="ok",
        exit_code=0,
        tests=[TestOutcome("assert mean == 4", False, "AssertionError (left = 5.0, right = 4)", 7)],
    )
    verdict = judge(result, None, [])
    assert verdict.passed is False and "1 of 1 tests failed" in verdict.reasons


# --------------------------------------------------------------------------- blanks vs cheats
IS_LEARNING = (
    "# TODO: Create a variable IS_LEARNING_PYTHON and set it to True\n"
    "IS_LEARNING_PYTHON = \n\n"
    "# DO NOT TOUCH the checks below\n"
    "assert IS_LEARNING_PYTHON is True\n"
)


def test_filling_a_blank_the_user_left_is_the_answer_not_hard_coding():
    filled = IS_LEARNING.replace("IS_LEARNING_PYTHON = \n", "IS_LEARNING_PYTHON = True\n")
    assert check(IS_LEARNING, filled, failing=[2]) == []
    scale = '# TODO: assign the name of the scale\ncelsius_name = ""\nassert celsius_name == "Celsius"\n'
    assert check(scale, scale.replace('= ""', '= "Celsius"')) == []
    fruits = (
        "# TODO: initialise a list with apple, banana and cherry\nfruits = []\n"
        "fruits.append()\nassert fruits == ['apple', 'banana', 'cherry']\n"
    )
    answer = fruits.replace("fruits = []\nfruits.append()\n", "fruits = ['apple', 'banana', 'cherry']\n")
    assert check(fruits, answer, failing=[3]) == []
    body = "def language():\n    # TODO: return 'Python'\n\nassert language() == 'Python'\n"
    assert check(body, "def language():\n    return 'Python'\n\nassert language() == 'Python'\n") == []


def test_a_blank_filled_while_the_data_to_compute_it_from_stays_unread_is_hard_coded():
    original = "prices = [4.5, 3.0, 12.25]\n# TODO: add up the prices\ntotal = 0\nassert total == 19.75\n"
    found = check(original, original.replace("total = 0", "total = 19.75"))
    assert [v.rule for v in found] == ["hard_coded"] and "`prices`" in found[0].message
    assert check(original, original.replace("total = 0", "total = sum(prices)")) == []


def test_a_literal_written_over_a_computation_is_hard_coded_also_after_it():
    after = USER.replace("mean = average(scores)\n", "mean = average(scores)\nmean = 4\n")
    assert [v.rule for v in check(USER, after)] == ["hard_coded"]
    caught = "try:\n    x = int('a')\n    ok = True\nexcept ValueError:\n    ok = False\nassert ok\n"
    assert check(caught, caught) == []  # the literals the user wrote themselves
    assert [v.rule for v in check(caught, caught.replace("assert ok", "ok = True\nassert ok"))] == ["hard_coded"]


@pytest.mark.parametrize(
    "body",
    [
        "    return 3 if text == 'banana' else 0\n",
        "    return {'banana': 3, 'sky': 0}[text]\n",
        "    return {'banana': 3}.get(text, 0)\n",
    ],
    ids=["if-expression", "lookup-table", "lookup-get"],
)
def test_answers_keyed_by_the_asserted_input_are_hard_coded(body):
    original = (
        "def vowels(text):\n    count = 0\n    # TODO\n    return count\n\n"
        "assert vowels('banana') == 3\nassert vowels('sky') == 0\n"
    )
    candidate = "def vowels(text):\n" + body + "\nassert vowels('banana') == 3\nassert vowels('sky') == 0\n"
    assert "hard_coded" in {v.rule for v in check(original, candidate)}


def test_special_cases_joined_by_and_and_constant_methods_are_hard_coded():
    add = "def add(a, b):\n    raise NotImplementedError\n\nassert add(2, 3) == 5\n"
    cheat = "def add(a, b):\n    if a == 2 and b == 3:\n        return 5\n    return 0\n\nassert add(2, 3) == 5\n"
    assert [v.rule for v in check(add, cheat)] == ["hard_coded"]
    rect = (
        "class R:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n"
        "    def perimeter(self):\n        return self.w + self.h\n\n"
        "assert R(3, 4).perimeter() == 14\n"
    )
    assert [v.rule for v in check(rect, rect.replace("return self.w + self.h", "return 14"))] == ["hard_coded"]
    assert check(rect, rect.replace("self.w + self.h", "2 * (self.w + self.h)")) == []
