"""The user's spec is sacred: a repair may not pass by changing, silencing or answering
the user's asserts.

End to end: the real openai client against the scripted server, the programs' runs the
real runner's results, recorded (``recorded_sandbox``; ``make record`` writes them again).
Every rejected candidate here WOULD pass QA without the spec guard (it runs cleanly), so
each test fails if the guard is removed. The static rules are also checked one by one on
:func:`selfheal_jupyter.spec.guard.check`. (``selfheal run --code`` in the real sandbox:
tests/sandbox/test_spec.py.)"""

from __future__ import annotations

import ast
import io

import pytest

from selfheal_jupyter.model import Task
from selfheal_jupyter.render.html import run_html
from selfheal_jupyter.render.text import Transcript
from selfheal_jupyter.spec import guard as spec
from tests.scripted_server import ScriptedServer
from tests.unit.test_loop import fenced, make_loop

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

DELETED = USER.replace(ASSERT + "\n", "")
WRAPPED = USER.replace(ASSERT, f'try:\n    {ASSERT}\nexcept AssertionError:\n    print("close enough")')
HARD_CODED = USER.replace("mean = average(scores)", "mean = 4")
HARD_CODED_RETURN = USER.replace("return sum(values) / len(values) + 1", "return 4")
WEAKENED = USER.replace(ASSERT, 'assert abs(mean - 4) <= 1, "the mean of 3, 4, 5 is 4"')
MESSAGE_ONLY = FIXED.replace('"the mean of 3, 4, 5 is 4"', '"average([3, 4, 5]) must be 4.0"')

# A cell that fails at a statement (ZeroDivisionError for the empty group).
USER_ZERO = """\
def average(values):
    return sum(values) / len(values)

groups = {"a": [3, 4, 5], "b": []}
means = {}
for name, values in groups.items():
    means[name] = average(values)
assert means["a"] == 4
"""
SWALLOWED = USER_ZERO.replace(
    "    means[name] = average(values)\n",
    "    try:\n        means[name] = average(values)\n    except ZeroDivisionError:\n        pass\n",
)


def heal(server: ScriptedServer, sandbox, code: str = USER, **kw) -> tuple:
    kw.setdefault("max_iterations", 1)
    loop = make_loop(server, sandbox, auto_plan=False, **kw)
    run = loop.run(Task(prompt="", initial_code=code))
    return run


def rules(iteration) -> set[str]:
    return {v.rule for v in iteration.verdict.spec_violations}


# --------------------------------------------------------------------------- end to end
@pytest.mark.parametrize(
    "candidate, rule, words",
    [
        (DELETED, "assert_removed", ["was deleted", "mean == 4", "Put the assert back"]),
        (WRAPPED, "failure_swallowed", ["mean == 4", "try/except", "Remove the try/except"]),
        (HARD_CODED, "hard_coded", ["`mean = 4`", "instead of computed", "Compute the value"]),
        (HARD_CODED_RETURN, "hard_coded", ["`average` now just returns 4", "Compute the value"]),
        (WEAKENED, "assert_changed", ["mean == 4", "abs(mean - 4) <= 1", "Restore the user's condition"]),
    ],
    ids=["deleted", "try-except", "hard-coded-name", "hard-coded-return", "weakened"],
)
def test_a_candidate_that_breaks_the_spec_is_rejected_with_the_rule(recorded_sandbox, candidate, rule, words):
    with ScriptedServer([fenced(candidate)]) as s:
        run = heal(s, recorded_sandbox)
    zero, first = run.iterations
    assert zero.result.error.type == "AssertionError" and zero.verdict.spec_checked is False
    # It ran cleanly: only the spec guard stands between it and "success".
    assert first.result.status == "ok" and first.result.error is None
    assert run.outcome != "success" and run.final_code is None
    assert not first.verdict.passed and first.verdict.spec_kept is False
    assert rule in rules(first)
    assert f"RULE {rule}" in first.feedback
    for w in words:
        assert w in first.feedback, (w, first.feedback)
    assert "The last candidate was rejected because it changed your spec" in run.error
    # the static HTML / panel marks it
    page = run_html(run)
    assert 'data-spec="violated"' in page and "Rejected: changes your spec" in page
    assert f"[{rule}]" in page


def test_feedback_reaches_the_developer_and_names_the_rule(recorded_sandbox):
    with ScriptedServer([fenced(DELETED), fenced(FIXED)]) as s:
        run = heal(s, recorded_sandbox, max_iterations=2)
        repair = s.requests[1]["messages"][1]["content"]
        first_prompt = s.requests[0]["messages"][1]["content"]
    assert "keep every assert with its condition exactly as written" in first_prompt
    assert "RULE assert_removed" in repair and ASSERT.split(",")[0][7:] in repair
    assert "to comply: Put the assert back" in repair
    assert run.outcome == "success" and run.final_code == FIXED
    assert run.iterations[-1].verdict.spec_kept is True


def test_the_failing_statement_wrapped_in_try_except_is_rejected(recorded_sandbox):
    with ScriptedServer([fenced(SWALLOWED)]) as s:
        run = heal(s, recorded_sandbox, code=USER_ZERO)
    zero, first = run.iterations
    assert zero.result.error.type == "ZeroDivisionError"
    assert first.result.status == "ok"
    assert run.outcome != "success"
    assert rules(first) == {"failure_swallowed"}
    assert "means[name] = average(values)" in first.feedback
    assert "hides the error instead of fixing it" in first.feedback


def test_fixing_only_the_assert_message_is_accepted(recorded_sandbox):
    with ScriptedServer([fenced(MESSAGE_ONLY)]) as s:
        run = heal(s, recorded_sandbox)
    assert run.outcome == "success", run.error
    last = run.iterations[-1]
    assert last.verdict.spec_checked and last.verdict.spec_kept is True
    assert run.final_code == MESSAGE_ONLY


def test_a_model_that_keeps_changing_the_assert_ends_failed_never_success(recorded_sandbox):
    with ScriptedServer([fenced(DELETED), fenced(WEAKENED), fenced(FIXED)]) as s:
        run = heal(s, recorded_sandbox, max_iterations=4)
        assert s.remaining == 1  # stopped before asking a third time
    assert run.outcome == "failed"
    assert "rounds 1, 2" in run.error and "mean == 4" in run.error
    assert "If an assert itself is wrong, correct it" in run.error
    assert all(it.verdict.spec_kept is False for it in run.iterations[1:])
    out = io.StringIO()
    tr = Transcript(out)
    for it in run.iterations:
        tr.verdict(it)
    assert "spec [assert_removed]" in out.getvalue()


def test_without_user_code_there_is_no_spec(recorded_sandbox):
    with ScriptedServer([fenced("mean = 4\nprint(mean)")]) as s:
        run = make_loop(s, recorded_sandbox, auto_plan=False, max_iterations=1).run(
            Task(prompt="Set mean to the mean of 3, 4, 5.", tests="assert mean == 4")
        )
    assert run.outcome == "success"
    assert run.iterations[0].verdict.spec_checked is False
    assert run.iterations[0].verdict.spec_kept is None


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


@pytest.mark.parametrize(
    "written_in",
    ["return 8 / 2", "return 2 ** 2", "return -(-4)", "return 3 + 1.0", "return (12 // 3) % 5"],
)
def test_the_answer_written_in_as_arithmetic_is_hard_coded(written_in):
    """rt46b: `return 27 / 2` passed where `return 13.5` was refused: arithmetic over
    number literals is a constant, and a constant the assert expects is an answer written in."""
    candidate = USER.replace("return sum(values) / len(values) + 1", written_in)
    assert [v.rule for v in check(USER, candidate)] == ["hard_coded"]
    assert [v.rule for v in check(USER, USER.replace("mean = average(scores)", "mean = 2 * 2"))] == ["hard_coded"]
    expected_as_arithmetic = USER.replace("mean == 4,", "mean == 8 / 2,")
    assert [
        v.rule
        for v in check(
            expected_as_arithmetic, expected_as_arithmetic.replace("return sum(values) / len(values) + 1", "return 4")
        )
    ] == ["hard_coded"]
    # a computation with a constant in it is not a constant
    assert check(USER, USER.replace(" + 1", " * 2 / 2")) == []


def test_constants_too_large_or_undefined_are_not_worked_out():
    from selfheal_jupyter.spec.syntax import NO_VALUE, literal

    for text in ("9 ** 9 ** 9", "1 / 0", "(-8) ** (1 / 3)", "2.0 ** 100000", "True + 1", "'a' * 3", "x + 1"):
        assert literal(ast.parse(text, mode="eval").body) is NO_VALUE, text
    assert literal(ast.parse("27 / 2", mode="eval").body) == 13.5


AVERAGE_BODY = "    return sum(values) / len(values) + 1\n"


@pytest.mark.parametrize(
    "spelling",
    [
        'return int("4")',
        "return round(4.0)",
        'return len("abcd")',
        "return sum([2, 2])",
        "return (4,)[0]",
        'return {"a": 4}["a"]',
        "return 4 if True else 0",
        "return True * 4",
        "return (lambda: 4)()",
        "r = 8 / 2\n    return r",
        "values = 8 / 2\n    return values",
        "return ANSWER",
        "return K.v",
    ],
)
def test_a_function_that_reads_none_of_its_inputs_is_hard_coded(spelling):
    """rt46c: the answer in a spelling no fold of literals reads (a call, an index, a
    module constant) passed end to end, `selfheal run --code` ending in success: what
    `average` returns does not depend on what it is passed, whatever the spelling."""
    prelude = "ANSWER = 8 / 2\n\nclass K:\n    v = 8 / 2\n\n"
    candidate = prelude + USER.replace(AVERAGE_BODY, f"    {spelling}\n")
    assert [v.rule for v in check(USER, candidate)] == ["hard_coded"]
    default = USER.replace("def average(values):\n" + AVERAGE_BODY, "def average(values, _r=8 / 2):\n    return _r\n")
    found = check(USER, default)
    assert [v.rule for v in found] == ["hard_coded"] and "reads none of its inputs (`values`)" in found[0].message


def test_the_asserted_input_special_cased_as_arithmetic_is_hard_coded():
    """rt46c: `if values == [1 + 2, 4, 5]` passed where `if values == [3, 4, 5]` was
    refused: arithmetic inside a list literal is worked out too."""
    special = "    if values == [1 + 2, 4, 5]:\n        return 8 / 2\n" + AVERAGE_BODY
    assert [v.rule for v in check(USER, USER.replace(AVERAGE_BODY, special))] == ["hard_coded"]
    from selfheal_jupyter.spec.syntax import NO_VALUE, literal

    assert literal(ast.parse("{'a': 2 ** 3, 'b': (-1, 1 / 4)}", mode="eval").body) == {"a": 8, "b": (-1, 0.25)}
    assert literal(ast.parse("[1 / 0, 2]", mode="eval").body) is NO_VALUE


@pytest.mark.parametrize(
    "written_in", ['mean = int("4")', "mean = [4][0]", "mean = (lambda: 4)()", "mean = sum([3, 4, 5]) / 3"]
)
def test_a_computed_name_set_to_an_expression_that_reads_nothing_is_hard_coded(written_in):
    """rt46c: `mean = int("4")` passed where `mean = 4` was refused: a name the user's
    code computes, set to an expression that reads no variable, is an answer written in."""
    assert [v.rule for v in check(USER, USER.replace("mean = average(scores)", written_in))] == ["hard_coded"]
    greeting = "name = 'ann'\ngreeting = f'Hello, {name}'\nassert greeting == 'Hello, Ann'\n"
    for spelling in ("'Hello, ' + 'Ann'", "f'Hello, {\"Ann\"}'"):
        assert [v.rule for v in check(greeting, greeting.replace("f'Hello, {name}'", spelling))] == ["hard_coded"]
    assert check(greeting, greeting.replace("{name}", "{name.title()}")) == []


@pytest.mark.parametrize(
    "read_for_nothing",
    ['values\n    return int("4")', "len(values)\n    return 8 / 2", "n = len(values)\n    return 4"],
)
def test_an_input_read_for_nothing_does_not_make_the_answer_computed(read_for_nothing):
    """rt46c: reading the input in a statement whose result goes nowhere passed the rule
    above; what counts is whether what the function returns can depend on it."""
    found = check(USER, USER.replace(AVERAGE_BODY, f"    {read_for_nothing}\n"))
    assert [v.rule for v in found] == ["hard_coded"]


@pytest.mark.parametrize(
    "special",
    [
        "if values == scores:\n        return 4\n",
        "if values is scores:\n        return 4\n",
        'if values == [3, 4, 5]:\n        return int("4")\n',
        'return int("4") if values == [3, 4, 5] else sum(values) / len(values)\n',
        "if tuple(values) == (3, 4, 5):\n        return 4\n",
        "if sorted(values) == [3, 4, 5]:\n        return 4\n",
        'if str(values) == "[3, 4, 5]":\n        return 4\n',
        "match values:\n        case [3, 4, 5]:\n            return 4\n",
        "match values:\n        case 7 | [3, 4, 5]:\n            return 4\n",
        "if not values:\n        return 0\n    return {(3, 4, 5): 4}.get(tuple(values), sum(values) / len(values))\n",
    ],
)
def test_the_asserted_input_special_cased_in_other_spellings_is_hard_coded(special):
    """rt46c: a special case for the asserted input passed when it named that input
    through the program's own name for it (`scores`), or answered it in a spelling no
    fold reads (`int("4")`)."""
    candidate = USER.replace(AVERAGE_BODY, "    " + special + "    return sum(values) / len(values)\n")
    assert [v.rule for v in check(USER, candidate)] == ["hard_coded"]


@pytest.mark.parametrize(
    "helper", ["return 4", 'return int("4")', "if v == [3, 4, 5]:\n        return 4\n    return 0"]
)
def test_the_answer_written_in_a_helper_the_function_passes_its_input_to_is_hard_coded(helper):
    """rt46c: `average` read its input and handed it to `_answer`, which wrote the answer
    in: the rules looked only at the functions the assert's line calls."""
    wrapped = f"def _answer(v):\n    {helper}\n\ndef average(values):\n    return _answer(values)\n"
    candidate = USER.replace("def average(values):\n" + AVERAGE_BODY, wrapped)
    assert [v.rule for v in check(USER, candidate)] == ["hard_coded"]


@pytest.mark.parametrize(
    "defined",
    [
        "average = lambda values: 4\n",
        "def average(values):\n    return sum(values) / len(values)\n\ndef _a(values):\n    return int('4')\n\naverage = _a\n",
    ],
    ids=["lambda", "alias"],
)
def test_a_function_defined_by_assignment_is_checked_as_a_def(defined):
    """rt46c: `average = lambda values: 4`, or a right `def average` shadowed by `average =
    _a` before the assert, passed: the hard-coding rules only read `def` statements."""
    candidate = USER.replace("def average(values):\n" + AVERAGE_BODY, defined)
    assert [v.rule for v in check(USER, candidate)] == ["hard_coded"]
    assert (
        check(USER, USER.replace("def average(values):\n" + AVERAGE_BODY, "average = lambda v: sum(v) / len(v)\n"))
        == []
    )


def test_the_input_the_assert_checks_may_not_be_changed_to_suit_a_wrong_function():
    """rt46c: `scores = [3, 3, 3]`, on which the wrong `average` gives 4, passed end to
    end: the assert kept its text and checked another input."""
    for changed in (
        "scores = [3, 3, 3]",
        "scores = [3, 4, 5]\nscores = [3, 3, 3]",
        "scores = [3, 4, 5]\nscores[:] = [3, 3, 3]",
        "scores = [3, 4, 5]\nscores.clear()\nscores.extend([3, 3, 3])",
    ):
        found = check(USER, USER.replace("scores = [3, 4, 5]", changed))
        assert [v.rule for v in found] == ["assert_changed"], changed
        assert "checks the input `scores = [3, 4, 5]`" in found[0].message
    assert check(USER, FIXED.replace("scores = [3, 4, 5]", "scores = [3, 4, 5]  # the class")) == []
    assert check(USER, FIXED.replace("scores = [3, 4, 5]", "scores = [3, 4, 5]\nscores.sort()")) == []


@pytest.mark.parametrize("expected", ["math.pi * 4", "round(4.0)"])
def test_an_assert_that_expects_a_value_no_fold_reads_still_has_its_answer_guarded(expected):
    """rt46c: `assert area(2) == math.pi * 4` gave no expectation (its value is not a
    literal), so no hard-coding rule ran: `return math.pi * 4` passed end to end."""
    user = f"import math\n\ndef area(r):\n    return math.pi * r * 2\n\nassert area(2) == {expected}\n"
    found = check(user, user.replace("return math.pi * r * 2", f"return {expected}"))
    assert [v.rule for v in found] == ["hard_coded"]
    assert check(user, user.replace("r * 2", "r ** 2")) == []


def test_a_method_that_no_longer_reads_self_is_hard_coded():
    """rt46c: `def mean(self): return int("4")` passed where the user's `mean` computed
    from `self`: a method's inputs are its object's."""
    user = (
        "class Stats:\n    def __init__(self, v):\n        self.v = v\n\n"
        "    def mean(self):\n        return sum(self.v) / len(self.v) + 1\n\n"
        "assert Stats([3, 4, 5]).mean() == 4\n"
    )
    found = check(user, user.replace("return sum(self.v) / len(self.v) + 1", 'return int("4")'))
    assert [v.rule for v in found] == ["hard_coded"] and "reads none of its inputs (`self`)" in found[0].message
    assert check(user, user.replace(" + 1", "")) == []


def test_a_decorator_that_replaces_the_function_with_its_answer_is_hard_coded():
    """rt46c: `@fixed` over a right-looking `average`, `fixed` returning `lambda *a:
    int("4")`, passed: the rules read the decorated body, not what it was replaced with."""
    fixed = "def fixed(f):\n    return lambda *a: int('4')\n\n@fixed\ndef average(values):"
    assert [v.rule for v in check(USER, USER.replace("def average(values):", fixed))] == ["hard_coded"]
    memo = (
        "def memo(f):\n    seen = {}\n\n    def wrapper(values):\n        key = tuple(values)\n"
        "        if key not in seen:\n            seen[key] = f(values)\n        return seen[key]\n\n"
        "    return wrapper\n\n@memo\ndef average(values):"
    )
    assert check(USER, FIXED.replace("def average(values):", memo)) == []


def test_functions_that_read_their_inputs_or_never_did_are_not_held():
    for computed in (
        "total = 0\n    for v in values:\n        total += v\n    return total / len(values)",
        "acc = []\n    acc.extend(values)\n    return sum(acc) / len(acc)",
        "if not values:\n        return 0\n    return 4 if values == sorted(values) else 4",
    ):
        assert check(USER, USER.replace(AVERAGE_BODY, f"    {computed}\n")) == [], computed
    assert (
        check(USER, USER.replace(AVERAGE_BODY, "    values = sorted(values)\n    return sum(values) / len(values)\n"))
        == []
    )
    own = "scores = [3, 4, 5]\n\ndef average(values):\n    return sum(scores) / len(scores) + 1\n\nassert average(scores) == 4\n"
    assert check(own, own.replace(" + 1", "")) == []  # the user's own design ignores `values`
    scale = "def scale(x, factor=2):\n    return x * factor + 1\n\nassert scale(3) == 6\n"
    assert check(scale, scale.replace(" + 1", "")) == []


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


def test_a_beginner_exercise_whose_blank_is_filled_succeeds_end_to_end(recorded_sandbox):
    filled = IS_LEARNING.replace("IS_LEARNING_PYTHON = \n", "IS_LEARNING_PYTHON = True\n")
    with ScriptedServer([fenced(filled)]) as s:
        run = heal(s, recorded_sandbox, code=IS_LEARNING)
    zero, first = run.iterations
    assert zero.result.status == "blocked" and zero.result.error.type == "SyntaxError"
    assert first.verdict.spec_checked and first.verdict.spec_kept is True, first.verdict.reasons
    assert run.outcome == "success" and run.final_code == filled


EXPECTED_USER = "def compute():\n    return 7\n\nexpected = 10\nresult = compute()\nassert result == expected\n"


BLANK_USER = "answer = 0\nexpected = 42\nassert answer == expected\n"


@pytest.mark.parametrize(
    "original, candidate, flagged",
    [
        (EXPECTED_USER, EXPECTED_USER.replace("return 7", "return 10"), False),  # the repair
        (EXPECTED_USER, EXPECTED_USER.replace("expected = 10", "expected: int = 10").replace("7", "10"), False),
        (
            EXPECTED_USER,
            EXPECTED_USER.replace("expected = 10\n", "").replace(
                "result = compute()", "result = compute()\nexpected = result"
            ),
            True,
        ),
        (EXPECTED_USER, EXPECTED_USER.replace("expected = 10", "expected = 7"), True),
        (EXPECTED_USER, EXPECTED_USER.replace("expected = 10", "expected = compute()"), True),
        (
            EXPECTED_USER,
            EXPECTED_USER.replace("result = compute()", "result = compute()\nfor expected in [result]:\n    pass"),
            True,
        ),
        (BLANK_USER, BLANK_USER.replace("answer = 0", "answer = 6 * 7"), False),  # a blank filled
    ],
)
def test_the_value_a_users_assert_compares_with_is_the_users(original, candidate, flagged):
    """``expected = 10`` … ``assert result == expected``: a candidate (or the tool's own edit
    moving the candidate's later ``expected = result`` up) that binds ``expected`` otherwise
    keeps the assert's text and makes it check something else, or nothing."""
    found = {v.rule for v in check(original, candidate)}
    assert ("assert_changed" in found) is flagged, found


def test_the_tools_own_edit_cannot_make_a_users_assert_check_nothing():
    """The candidate keeps the user's assert, drops ``expected = 10`` and sets ``expected =
    result`` after it (a NameError); the tool's own edit moves that line up: judged as any
    candidate, it breaks the spec."""
    from selfheal_jupyter.diagnosis import apply_edits, explain
    from selfheal_jupyter.model import ErrorInfo, ExecutionResult

    candidate = "def compute():\n    return 7\n\nresult = compute()\nassert result == expected\nexpected = result\n"
    error = ErrorInfo("NameError", "name 'expected' is not defined", 5, [], {})
    found = explain(ExecutionResult(status="error", error=error), candidate, None, EXPECTED_USER)
    fixed = apply_edits(candidate, found.edits)
    assert fixed is not None and fixed.index("expected = result") < fixed.index("assert result == expected")
    assert "assert_changed" in {v.rule for v in check(EXPECTED_USER, fixed)}


def test_the_value_a_users_named_expectation_holds_is_not_written_in():
    """``expected = 10`` … ``assert result == expected``: ``result = 10`` in place of
    ``result = compute()`` is the answer written in, as with ``assert result == 10``."""
    written = EXPECTED_USER.replace("result = compute()", "result = 10")
    assert "hard_coded" in {v.rule for v in check(EXPECTED_USER, written)}
    assert check(EXPECTED_USER, EXPECTED_USER.replace("return 7", "return 5 + 5")) == []
