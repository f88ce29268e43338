"""Edit-style repair replies (``SelfHeal.repair_format = "edit"``): SEARCH/REPLACE blocks
parsed and applied by :mod:`selfheal_jupyter.agents.edits`, and the loop end to end — the real
openai client against the scripted server, the programs' runs recorded from the real runner
(``recorded_sandbox``; ``make record`` writes them again)."""

from __future__ import annotations

import os

import pytest
from traitlets import TraitError

from selfheal_jupyter.agents.developer import WHOLE_INSTRUCTION, Developer, RepairContext
from selfheal_jupyter.agents.edits import (
    EDIT_FAILED_FEEDBACK,
    EDIT_FAILED_NOTE,
    EDIT_INSTRUCTION,
    apply_edits,
    asks_for_edits,
    has_blocks,
    parse_blocks,
    read_reply,
)
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_llm, build_loop
from selfheal_jupyter.llm import Endpoint
from selfheal_jupyter.loop.orchestrator import Loop
from selfheal_jupyter.model import Task
from selfheal_jupyter.render.html import run_html
from tests.scripted_server import ScriptedServer
from tests.unit.test_loop import fenced, llm_for, make_loop


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


# --------------------------------------------------------------------------- parse + apply
PROGRAM = """\
class Cart:
    def __init__(self):
        self.items = []

    def total(self):
        result = 0
        for price in self.items:
            result += price
        return result + 1
"""


def test_an_exact_block_replaces_its_lines():
    out = apply_edits(PROGRAM, block("        return result + 1", "        return result"))
    assert out is not None and out.ok and out.blocks == 1 and out.failure == ""
    assert out.code == PROGRAM.replace("result + 1", "result")


def test_blocks_apply_in_order_inside_a_fence_or_not():
    reply = (
        "The total adds one too many, and items should start with a zero.\n```python\n"
        + block("        self.items = []", "        self.items = [0]")
        + "\n```\nand\n"
        + block("        return result + 1", "        return result")
        + "\nDone."
    )
    out = apply_edits(PROGRAM, reply)
    assert out is not None and out.ok and out.blocks == 2
    assert out.code == PROGRAM.replace("[]", "[0]").replace("result + 1", "result")


def test_a_later_block_sees_what_an_earlier_one_wrote():
    reply = (
        block("        return result + 1", "        return result + 2")
        + "\n"
        + block("        return result + 2", "        return result")
    )
    assert apply_edits(PROGRAM, reply).code == PROGRAM.replace("result + 1", "result")


def test_trailing_spaces_and_blank_lines_around_search_are_forgiven():
    reply = block(
        "\n        for price in self.items:   \n            result += price  \n",
        "        for price in self.items:\n            result += 2 * price\n",
    )
    out = apply_edits(PROGRAM, reply)
    assert out.ok and "result += 2 * price\n        return result + 1" in out.code


def test_an_indentation_off_by_the_same_amount_is_moved_back_in_the_replacement():
    # the model copied a method body without its class indentation
    reply = block("def total(self):\n    result = 0", "def total(self):\n    result = 10")
    out = apply_edits(PROGRAM, reply)
    assert out.ok and "    def total(self):\n        result = 10\n" in out.code
    # and the other way round: the model indented more than the program
    reply = block("            return result + 1", "            return result")
    assert apply_edits(PROGRAM, reply).code == PROGRAM.replace("result + 1", "result")


def test_an_indentation_that_is_off_unevenly_does_not_match():
    reply = block("def total(self):\n            result = 0", "def total(self):\n    result = 10")
    out = apply_edits(PROGRAM, reply)
    assert not out.ok and "block 1 (SEARCH starting `def total(self):`) was not found" in out.failure
    assert "not one after the other" in out.failure


def test_a_search_found_twice_is_ambiguous_and_says_where():
    out = apply_edits("a = 1\nb = 2\na = 1\n", block("a = 1", "a = 3"))
    assert out.code is None
    assert out.failure == (
        "block 1 (SEARCH starting `a = 1`) matches 2 places in the current program (lines 1, 3): "
        "copy more lines around the change so that it matches once"
    )
    # ambiguous also when only the whitespace-tolerant match finds it twice
    out = apply_edits("if x:\n    a = 1\nif y:\n        a = 1\n", block("  a = 1", "  a = 2"))
    assert "matches 2 places" in out.failure and "(lines 2, 4)" in out.failure
    # more context makes it unique
    assert apply_edits("a = 1\nb = 2\na = 1\n", block("b = 2\na = 1", "b = 2\na = 3")).code == "a = 1\nb = 2\na = 3\n"


def test_a_missing_search_names_the_line_that_is_not_there_and_nothing_is_half_applied():
    reply = (
        block("        self.items = []", "        self.items = [0]")
        + "\n"
        + block("        for price in items:\n            result += price", "        pass")
    )
    out = apply_edits(PROGRAM, reply)
    assert out.code is None and out.blocks == 2
    assert out.failure == (
        "block 2 (SEARCH starting `for price in items:`) was not found in the current program: "
        "its line `for price in items:` is not in it; copy the lines exactly"
    )


@pytest.mark.parametrize(
    "reply, says",
    [
        ("<<<<<<< SEARCH\na = 1\n=======\na = 2\n", "block 1 is cut off: it has no >>>>>>> REPLACE line"),
        ("<<<<<<< SEARCH\na = 1\n", "block 1 is cut off: it has no ======= and >>>>>>> REPLACE lines"),
        ("<<<<<<< SEARCH\na = 1\n>>>>>>> REPLACE\n", "block 1 has no ======= line"),
        ("a = 2\n>>>>>>> REPLACE\n", "has no <<<<<<< SEARCH line before it"),
        ("<<<<<<< SEARCH\na = 1\n<<<<<<< SEARCH\n", "block 1 has a second <<<<<<< SEARCH line"),
        (block("\n", "a = 2"), "block 1 has an empty SEARCH part"),
    ],
)
def test_malformed_blocks_say_what_is_wrong(reply: str, says: str):
    out = apply_edits("a = 1\n", reply)
    assert out is not None and not out.ok and says in out.failure


def test_a_reply_without_markers_is_no_edit_reply():
    assert apply_edits("a = 1\n", fenced("a = 2")) is None
    assert not has_blocks("x = 1\nprint('=' * 7)\n=======\n")
    blocks, problem = parse_blocks(block("a = 1", "a = 2") + "\n" + block("b", ""))
    assert problem == "" and [(b.search, b.replace) for b in blocks] == [(["a = 1"], ["a = 2"]), (["b"], [""])]
    # an empty REPLACE deletes the lines
    assert apply_edits("a = 1\nb = 2\n", block("b = 2", "")).code == "a = 1\n"


def test_a_reply_is_read_as_edits_only_of_a_program_being_repaired():
    assert read_reply(block("a = 1", "a = 2"), "a = 1\n") == ("a = 2\n", True, "")
    code, edited, failure = read_reply(block("zzz", "a = 2"), "a = 1\n")
    assert code is None and not edited and "zzz" in failure
    assert read_reply(fenced("a = 3"), "a = 1\n") == ("a = 3\n", False, "")
    assert read_reply(fenced("a = 3"), None) == ("a = 3\n", False, "")
    assert asks_for_edits("edit", "a = 1\n") and not asks_for_edits("whole", "a = 1\n")
    assert not asks_for_edits("edit", None) and not asks_for_edits("edit", "a = 1\n", restart=True)
    assert not asks_for_edits("edit", "a = 1\n", after_no_code=True)
    assert not asks_for_edits("edit", "a = 1\n", after_failed_edits=True)


# --------------------------------------------------------------------------- the prompt
def developer(repair_format: str) -> Developer:
    llm = build_llm(SelfHeal(), Endpoint("http://127.0.0.1:9/v1", "k", "m", local=True))
    return Developer(llm, retry_temperature=SelfHeal().retry_temperature, repair_format=repair_format)


def test_the_edit_prompt_keeps_the_prefix_and_asks_for_blocks_only_to_repair_a_program():
    repair = RepairContext(code="total = sum(x)\n", feedback="NameError: x")
    edit = developer("edit").build_messages("sum the list", None, [], "assert total == 6", repair)
    whole = developer("whole").build_messages("sum the list", None, [], "assert total == 6", repair)
    assert edit[0] == whole[0]  # one system message in both formats: the cache holds
    a, b = edit[1]["content"], whole[1]["content"]
    common = len(os.path.commonprefix([a, b]))
    assert "The current program:\n```python\ntotal = sum(x)\n```" in a[:common]
    assert a.endswith(EDIT_INSTRUCTION) and b.endswith(WHOLE_INSTRUCTION)
    dev = developer("edit")
    # no program to edit, a restart, after a reply without code: the whole program
    for messages in (
        dev.build_messages("t", None, [], None),
        dev.build_messages("t", None, [], None, repair, restart=True),
        dev.build_messages("t", None, [], None, RepairContext(code=None, feedback="f")),
        dev.build_messages("t", None, [], None, RepairContext(code="a = 1\n", feedback="f", no_code=True)),
    ):
        assert EDIT_INSTRUCTION not in messages[1]["content"]


def test_repair_format_reaches_the_developer_and_is_validated(recorded_sandbox):
    with ScriptedServer([]) as s:
        assert build_loop(SelfHeal(), sandbox=recorded_sandbox, llm=llm_for(s)).developer.repair_format == "whole"
        assert make_loop(s, recorded_sandbox, repair_format="edit").developer.repair_format == "edit"
    with pytest.raises(TraitError, match="repair_format"):
        SelfHeal(repair_format="diff")


# --------------------------------------------------------------------------- end to end
GRADES = """\
def average(values):
    total = 0
    for v in values:
        total += v
    return total / (len(values) + 1)


def letter(score):
    if score >= 90:
        return "A"
    if score > 80:
        return "B"
    return "C"


scores = [80, 90, 100]
assert average(scores) == 90, "the mean of 80, 90, 100 is 90"
assert letter(80) == "B"
print("ok")
"""
AVERAGE_FIX = block("    return total / (len(values) + 1)", "    return total / len(values)")
LETTER_FIX = block('if score > 80:\n    return "B"', 'if score >= 80:\n    return "B"')
FIXED = GRADES.replace("(len(values) + 1)", "len(values)").replace("score > 80", "score >= 80")


def edit_loop(server: ScriptedServer, sandbox, **options) -> Loop:
    return make_loop(server, sandbox, auto_plan=False, runtime_values=False, repair_format="edit", **options)


def prompts(server: ScriptedServer) -> list[str]:
    return [r["messages"][1]["content"] for r in server.chat_requests()]


def test_a_repair_answered_with_blocks_runs_the_whole_edited_program(recorded_sandbox):
    one_bug = GRADES.replace("score > 80", "score >= 80")
    reply = "The mean divides by one too many.\n" + fenced(AVERAGE_FIX)
    with ScriptedServer([reply]) as s:
        run = edit_loop(s, recorded_sandbox, max_iterations=1).run(Task(prompt="", initial_code=one_bug))
        (asked,) = prompts(s)
    assert asked.endswith(EDIT_INSTRUCTION)
    zero, one = run.iterations
    assert zero.result.error.type == "AssertionError"
    assert run.outcome == "success", run.error
    assert one.edited and one.edit_failure == "" and one.candidate.reply == reply
    assert one.candidate.code == FIXED and run.final_code == FIXED
    assert "ok" in one.result.stdout
    assert one.verdict.spec_kept is True  # the spec guard saw the whole program
    assert one.diff.count("\n-") == 1 and "+    return total / len(values)" in one.diff
    assert run.to_dict()["iterations"][1]["edited"] is True
    assert "edited the previous program" in run_html(run)


def test_several_blocks_fix_several_bugs_at_once(recorded_sandbox):
    # the second block's SEARCH lost the function's indentation: matched, re-indented
    reply = fenced(AVERAGE_FIX + "\n" + LETTER_FIX)
    with ScriptedServer([reply]) as s:
        run = edit_loop(s, recorded_sandbox, max_iterations=1).run(Task(prompt="", initial_code=GRADES))
    assert run.outcome == "success", run.error
    assert run.iterations[1].edited and run.final_code == FIXED


def test_a_block_that_does_not_apply_makes_the_next_round_ask_for_the_whole_program(recorded_sandbox):
    one_bug = GRADES.replace("score > 80", "score >= 80")
    wrong = block("    return total / (len(values) - 1)", "    return total / len(values)")
    with ScriptedServer([fenced(wrong), fenced(FIXED)]) as s:
        run = edit_loop(s, recorded_sandbox, max_iterations=2).run(Task(prompt="", initial_code=one_bug))
        first, second = prompts(s)
    failure = (
        "block 1 (SEARCH starting `return total / (len(values) - 1)`) was not found in "
        "the current program: its line `return total / (len(values) - 1)` is not in it; "
        "copy the lines exactly"
    )
    zero, one, two = run.iterations
    assert one.candidate.code == "" and one.result is None and not one.edited
    assert one.edit_failure == failure
    assert one.verdict.reasons == [f"the reply's SEARCH/REPLACE blocks did not apply: {failure}"]
    assert one.feedback == EDIT_FAILED_FEEDBACK.format(failure=failure)
    assert first.endswith(EDIT_INSTRUCTION)
    # the next round: the same program and its failure, which block failed, the whole program
    assert EDIT_FAILED_NOTE.format(failure=failure) in second
    assert "AssertionError" in second and "return total / (len(values) + 1)" in second
    assert second.endswith(WHOLE_INSTRUCTION) and EDIT_INSTRUCTION not in second
    assert run.outcome == "success" and not two.edited and run.final_code == FIXED


PRICES = """\
def with_tax(price):
    return price * 1.2


def with_discount(price):
    return price * 1.2


assert with_tax(100) == 120
assert with_discount(100) == 80, "a 20% discount"
"""


def test_an_ambiguous_block_falls_back_for_one_round_then_edits_again(recorded_sandbox):
    ambiguous = block("    return price * 1.2", "    return price * 0.8")
    still_wrong = PRICES.replace("1.2\n\n\nassert", "0.9\n\n\nassert")
    right = block(
        "def with_discount(price):\n    return price * 0.9", "def with_discount(price):\n    return price * 0.8"
    )
    with ScriptedServer([fenced(ambiguous), fenced(still_wrong), fenced(right)]) as s:
        run = edit_loop(s, recorded_sandbox, max_iterations=3).run(Task(prompt="", initial_code=PRICES))
        asked = prompts(s)
    assert "matches 2 places in the current program (lines 2, 6)" in run.iterations[1].edit_failure
    assert [p.endswith(EDIT_INSTRUCTION) for p in asked] == [True, False, True]
    assert [it.edited for it in run.iterations] == [False, False, False, True]
    assert run.outcome == "success", run.error
    assert run.final_code == PRICES.replace("1.2\n\n\nassert", "0.8\n\n\nassert")


def test_a_whole_program_reply_to_an_edit_request_is_taken_as_it_is(recorded_sandbox):
    with ScriptedServer(["Here is the corrected program:\n" + fenced(FIXED)]) as s:
        run = edit_loop(s, recorded_sandbox, max_iterations=1).run(Task(prompt="", initial_code=GRADES))
        (asked,) = prompts(s)
    assert asked.endswith(EDIT_INSTRUCTION)
    assert run.outcome == "success" and run.final_code == FIXED
    assert not run.iterations[1].edited and run.iterations[1].edit_failure == ""
