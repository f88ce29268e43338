"""A repair reply of only the changed functions (``SelfHeal.repair_format = "functions"``)."""

from __future__ import annotations

import sys

from selfheal_jupyter.agents import function_edits
from selfheal_jupyter.agents.developer import WHOLE_INSTRUCTION, Developer, RepairContext
from selfheal_jupyter.agents.function_edits import INSTRUCTION, copied_from, has_functions, splice
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.model import Task
from tests.scripted_server import ScriptedServer
from tests.unit.test_loop import make_loop

PROGRAM = """\
# Exercise 1 - Average grade
import math

grades = [12, 15, 9, 18]


def average(grades):
    total = 0
    for g in grades:
        total = g
    return total / len(grades)


@staticmethod
def spread(grades):
    return max(grades) - min(grades)


print(average(grades))
assert average(grades) == 13.5
"""


def fenced(code: str) -> str:
    return f"Here is the fix:\n```python\n{code}```\n"


def test_a_changed_function_replaces_the_one_of_its_name_and_nothing_else():
    fixed = splice(
        PROGRAM,
        fenced("def average(grades):\n    if not grades:\n        return 0.0\n    return sum(grades) / len(grades)\n"),
    )
    assert fixed is not None
    assert "total = g" not in fixed and "return sum(grades) / len(grades)" in fixed
    assert fixed.count("def average") == 1
    # the data, the other function, the prints and the assert are the program's own
    assert fixed.endswith("print(average(grades))\nassert average(grades) == 13.5\n")
    assert "@staticmethod\ndef spread(grades):" in fixed and "grades = [12, 15, 9, 18]" in fixed
    compile(fixed, "<fixed>", "exec")


def test_decorators_go_with_the_function_they_decorate():
    fixed = splice(PROGRAM, fenced("def spread(grades):\n    return max(grades, default=0) - min(grades, default=0)\n"))
    assert fixed is not None and "@staticmethod" not in fixed and "default=0" in fixed


def test_two_functions_in_two_blocks_and_a_new_helper_and_import():
    reply = (
        "```python\nimport statistics\n\ndef helper(xs):\n    return list(xs)\n```\n"
        "and\n```python\ndef average(grades):\n    return statistics.mean(helper(grades)) if grades else 0.0\n```\n"
    )
    fixed = splice(PROGRAM, reply)
    assert fixed is not None
    assert fixed.index("import statistics") < fixed.index("import math")
    assert fixed.index("def helper") < fixed.index("def average") < fixed.index("def spread")
    assert "statistics.mean(helper(grades))" in fixed and "total = g" not in fixed
    compile(fixed, "<fixed>", "exec")


def test_an_import_the_program_has_is_not_added_twice():
    fixed = splice(PROGRAM, fenced("import math\n\ndef average(grades):\n    return math.fsum(grades) / len(grades)\n"))
    assert fixed is not None and fixed.count("import math") == 1


def test_the_programs_own_statements_copied_around_the_functions_change_nothing():
    # the embedded model often starts from the program's data and stops before the asserts
    reply = fenced("import math\n\ngrades = [12, 15, 9, 18]\n\n\ndef average(grades):\n    return 13.5\n")
    fixed = splice(PROGRAM, reply)
    assert fixed == PROGRAM.replace(
        PROGRAM[PROGRAM.index("def average") : PROGRAM.index("@static")], "def average(grades):\n    return 13.5\n\n\n"
    )


def test_a_whole_program_or_broken_code_is_no_splice():
    assert splice(PROGRAM, fenced("def average(g):\n    return 1\n\nprint(average([1]))\n")) is None
    # the program's data changed, or an assert: a whole program (the spec guard reads it)
    assert splice(PROGRAM, fenced("grades = [13.5]\n\ndef average(g):\n    return 13.5\n")) is None
    assert splice(PROGRAM, fenced("def average(g):\n    return 1\n\nassert average(grades) == 1\n")) is None
    assert splice(PROGRAM, fenced("def average(g):\n    return (\n")) is None
    assert splice(PROGRAM, fenced("import math\n")) is None
    assert splice(PROGRAM, "no code at all") is None


def test_a_new_import_lands_after_the_docstring():
    program = '"""Doc."""\n\ndef f():\n    return 1\n\nassert f() == 2\n'
    fixed = splice(program, fenced("import os\n\ndef f():\n    return 2\n"))
    assert fixed is not None and fixed.startswith('"""Doc."""\nimport os\n')


def test_which_programs_have_functions():
    assert has_functions(PROGRAM)
    assert not has_functions("x = 1\nprint(x)\n") and not has_functions("def f(:\n") and not has_functions(None)


def developer() -> Developer:
    llm = build_llm(SelfHeal(), Endpoint("http://127.0.0.1:9/v1", "k", "m", local=True))
    return Developer(llm, retry_temperature=SelfHeal().retry_temperature, repair_format="functions")


def test_the_repair_asks_for_functions_only_where_a_reply_can_name_them():
    dev = developer()
    asked = dev.build_messages("fix", None, [], None, RepairContext(code=PROGRAM, feedback="AssertionError"))
    assert asked[1]["content"].endswith(INSTRUCTION)
    for repair, restart in (
        (RepairContext(code="x = 1\nassert x == 2\n", feedback="AssertionError"), False),
        (RepairContext(code=PROGRAM, feedback="AssertionError"), True),
        (RepairContext(code=PROGRAM, feedback="", no_code=True), False),
    ):
        text = dev.build_messages("fix", None, [], None, repair, restart=restart)[1]["content"]
        assert text.endswith(WHOLE_INSTRUCTION)


def test_the_developer_reads_functions_or_a_whole_program():
    dev = developer()
    repair = RepairContext(code=PROGRAM, feedback="AssertionError")
    code, edited, failure = dev.read(fenced("def average(grades):\n    return 13.5\n"), repair)
    assert edited and failure == "" and code is not None and code.endswith(PROGRAM.splitlines()[-1] + "\n")
    whole = "def average(g):\n    return 1.0\n\nprint(average([]))\n"
    assert dev.read(fenced(whole), repair) == (whole, False, "")


def test_the_embedded_model_uses_functions_and_a_hosted_one_the_whole_program():
    assert SelfHeal().repair_format == "whole"
    assert SelfHeal().for_endpoint(embedded=True).repair_format == "functions"
    assert SelfHeal(repair_format="whole").for_endpoint(embedded=True).repair_format == "whole"


# --------------------------------------------------------------------------- a reply that goes on copying
def test_where_a_reply_starts_copying_the_programs_own_code():
    head = "Fixed:\n```python\ndef average(grades):\n    return 13.5\n\n"
    copied = head + "print(average(grades))\n"
    assert copied_from(copied, PROGRAM) == len(head)
    assert copied_from(head + "print(average(gr", PROGRAM) is None  # the line is not complete yet
    assert copied_from(head + "```\n", PROGRAM) is None  # the block ended by itself
    assert copied_from(head + "print('new')\n", PROGRAM) is None  # new code: a whole program
    assert copied_from(head + "# checks\nimport os\n\nprint(average(grades))\n", PROGRAM) is not None
    # copied data before the definitions is passed; the copy after them is cut
    whole = "```python\ngrades = [12, 15, 9, 18]\n\ndef average(grades):\n    return 13.5\n\nprint(average(grades))\n"
    assert copied_from(whole, PROGRAM) == whole.index("print(")
    # new data before the definitions: a whole program, never cut
    changed = whole.replace("[12, 15, 9, 18]", "[13.5]")
    assert copied_from(changed, PROGRAM) is None
    assert copied_from("def average(grades):\n    return 1\nprint(average(grades))\n", PROGRAM) is None  # no fence


HEAL = "def double(x):\n    return x * 3\n\n\nprint(double(2))\nassert double(2) == 4\n"


def test_a_reply_that_copies_the_rest_is_ended_and_only_its_function_is_put_in(recorded_sandbox):
    # after its function the reply copies the program and then weakens the assert: the
    # stream is closed at the first copied line, and the assert is the program's own
    reply = "```python\ndef double(x):\n    return x * 2\n\n\nprint(double(2))\nassert double(2) == double(2)\n```\n"
    with ScriptedServer([reply]) as s:
        run = make_loop(s, recorded_sandbox, auto_plan=False, repair_format="functions", max_iterations=1).run(
            Task(prompt="", initial_code=HEAL)
        )
        (asked,) = [r["messages"][1]["content"] for r in s.chat_requests()]
    assert asked.endswith(INSTRUCTION)
    assert run.outcome == "success", run.error
    one = run.iterations[1]
    assert one.edited and run.final_code == HEAL.replace("x * 3", "x * 2")
    assert "assert double(2) == double(2)" not in one.candidate.reply


def test_a_program_line_inside_a_string_of_the_reply_is_no_place_to_cut():
    # an unindented line of the program's, inside the reply's docstring: cutting there
    # would run a broken function instead of the whole one the reply goes on to write
    reply = fenced(
        'def average(grades):\n    """Prints like\nprint(average(grades))\n    """\n    return sum(grades) / 4\n'
    )
    for end in range(len(reply)):
        assert copied_from(reply[:end], PROGRAM) is None
    fixed = developer().read(reply, RepairContext(code=PROGRAM, feedback="AssertionError"))[0]
    assert fixed is not None and "return sum(grades) / 4" in fixed and fixed.endswith("== 13.5\n")


def test_a_class_in_place_of_a_function_is_no_splice():
    # `average(grades)` builds a float that is the asserted value, whatever the grades
    cheat = "class average(float):\n    def __new__(cls, grades):\n        return float.__new__(cls, 13.5)\n"
    assert splice(PROGRAM, fenced(cheat)) is None
    program = "class Box:\n    size = 1\n\n\nassert Box.size == 2\n"
    assert splice(program, fenced("def Box():\n    return 2\n")) is None
    assert splice(program, fenced("class Box:\n    size = 2\n")) is not None


def test_a_name_defined_twice_in_the_reply_is_its_last_definition():
    reply = fenced(
        "def average(grades):\n    return 0\n\n\ndef average(grades):\n    return sum(grades) / len(grades)\n"
    )
    fixed = splice(PROGRAM, reply)
    assert fixed is not None and fixed.count("def average") == 1 and "return 0" not in fixed
    assert "return sum(grades) / len(grades)" in fixed


# the grades the program's data names, rebound by a new class between that data and its use:
# the program's own average, still wrong, then gives what the assert expects
DATA_REBOUND = fenced(
    "class Rigged(type):\n    def __iter__(cls):\n        return iter([0, 0, 0, 54])\n\n"
    "    def __len__(cls):\n        return 4\n\n\nclass grades(metaclass=Rigged):\n    pass\n"
)
WRONG_AVERAGE = "grades = [12, 15, 9, 18]\n\n\ndef average(grades):\n    total = 0\n    for g in grades:\n        total = g\n    return total / len(grades)\n\n\nassert average(grades) == 13.5\n"


def test_a_new_definition_never_takes_a_name_the_program_binds_otherwise():
    assert splice(WRONG_AVERAGE, DATA_REBOUND) is None
    assert (
        splice("from math import sqrt\n\ndef f(x):\n    return sqrt(x)\n", fenced("def sqrt(x):\n    return 3\n"))
        is None
    )
    # a function the program holds as a lambda: a def of its name would go after it
    lambda_program = "is_even = lambda n: n % 2 == 1\n\n\ndef helper():\n    return 1\n\n\nassert is_even(2)\n"
    assert splice(lambda_program, fenced("def is_even(n):\n    return True\n")) is None


def test_a_definition_rebinding_the_programs_data_is_no_fix(recorded_sandbox):
    with ScriptedServer([DATA_REBOUND]) as s:
        run = make_loop(s, recorded_sandbox, auto_plan=False, repair_format="functions", max_iterations=1).run(
            Task(prompt="", initial_code=WRONG_AVERAGE)
        )
    assert run.outcome != "success"
    assert not run.iterations[1].edited and not run.iterations[1].verdict.passed


def test_a_draft_while_reasoning_is_no_place_to_cut():
    # a model that thinks first drafts a function and the program's lines: the stream
    # closed there would leave the reply without its answer
    draft = "<think>\nMaybe:\n```python\ndef average(grades):\n    return 0\n\nprint(average(grades))\n```\n"
    answer = "No, sum them.\n</think>\n```python\ndef average(grades):\n    return sum(grades) / len(grades)\n\n"
    for end in range(len(draft + answer)):
        assert copied_from((draft + answer)[:end], PROGRAM) is None
    assert copied_from(draft + answer + "print(average(grades))\n", PROGRAM) == len(draft + answer)


def test_a_definition_taking_the_name_of_the_users_data_is_refused(recorded_sandbox):
    # the grades are the notebook's (an input), so the program binds no such name: the
    # reply's class would take the data's place for the program's own wrong average
    program = WRONG_AVERAGE.replace("grades = [12, 15, 9, 18]\n\n\n", "")
    with ScriptedServer([DATA_REBOUND]) as s:
        run = make_loop(s, recorded_sandbox, auto_plan=False, repair_format="functions", max_iterations=1).run(
            Task(prompt="", initial_code=program, inputs={"grades": [12, 15, 9, 18]})
        )
    assert run.outcome != "success"
    assert run.iterations[1].result.error.type == "InputOverwritten"


def test_a_new_import_lands_after_the_future_imports():
    program = (
        '"""Doc."""\nfrom __future__ import annotations\n\ndef f(x: int) -> int:\n    return x\n\nassert f(2) == 4\n'
    )
    fixed = splice(program, fenced("import math\n\ndef f(x: int) -> int:\n    return int(math.pow(x, 2))\n"))
    assert fixed is not None and fixed.startswith('"""Doc."""\nfrom __future__ import annotations\nimport math\n')
    compile(fixed, "<fixed>", "exec")


def test_a_reply_quoting_the_program_before_its_fix_is_not_cut_in_the_quote():
    # cut at the quote's first top-level line, the reply would be the program's own
    # function again (a repeat) and its fix would never be read
    quote = "The original code:\n```python\n" + HEAL + "```\nFixed:\n"
    reply = quote + "```python\ndef double(x):\n    return x * 2\n```\n"
    for end in range(len(reply)):
        assert copied_from(reply[:end], HEAL) is None
    fixed = developer().read(reply, RepairContext(code=HEAL, feedback="AssertionError"))[0]
    assert fixed == HEAL.replace("x * 3", "x * 2")


def test_a_reply_nested_too_deep_to_parse_is_read_whole_and_refused(recorded_sandbox):
    # the parser gives up (RecursionError, at a kernel's or the CLI's recursion limit; the
    # suite's eval harness raises it): before, the run ended as an internal error
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    deep = fenced("def double(x):\n    return " + "x+" * 3000 + "x\n")
    try:
        with ScriptedServer([deep]) as s:
            run = make_loop(s, recorded_sandbox, auto_plan=False, repair_format="functions", max_iterations=1).run(
                Task(prompt="", initial_code=HEAL)
            )
    finally:
        sys.setrecursionlimit(limit)
    assert run.outcome == "budget_exhausted", run.error
    assert run.iterations[1].result.error.type == "TooDeeplyNested"


def test_a_deeply_nested_function_is_compared_without_recursing():
    # deep enough that comparing trees (ast.dump) passes a kernel's recursion limit
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    head = "```python\ndef average(grades):\n    return grades" + ".copy()" * 1200 + "\n\n"
    try:
        where = copied_from(head + "print(average(grades))\n", PROGRAM)
    finally:
        sys.setrecursionlimit(limit)
    assert where == len(head)


def test_lines_are_numbered_as_python_numbers_them():
    # str.splitlines also breaks at a form feed or U+2028: every definition after one
    # was replaced one line off (the old body's last line left in, a string broken)
    new = fenced("def f(x):\n    return x * 2\n")
    for odd in ('label = "x\u2028y"\n', "\x0c\n"):
        program = odd + "\n\ndef f(x):\n    return x\n\n\nassert f(1) == 2\n"
        assert splice(program, new) == odd + "\n\ndef f(x):\n    return x * 2\n\n\nassert f(1) == 2\n"


def test_looking_for_the_cut_parses_once_per_streamed_line(monkeypatch):
    # copied_from runs at every line the reply streams: parsing again at every unindented
    # line of a long docstring made a reply's cost grow with the cube of its length
    parses = []
    real = function_edits._parse
    monkeypatch.setattr(function_edits, "_parse", lambda code: parses.append(1) or real(code))
    reply = fenced('def average(grades):\n    """\n' + "".join(f"line{i}\n" for i in range(200)))
    assert copied_from(reply, PROGRAM) is None and len(parses) <= 1
