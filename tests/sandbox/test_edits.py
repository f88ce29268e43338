"""Edit-style repairs in the loop end to end: the real openai client against the scripted
server, candidates in the real Docker sandbox. (Parsing and applying blocks:
tests/unit/test_edits.py.)"""

from __future__ import annotations

import pytest
from traitlets import TraitError

from selfheal_jupyter.agents.developer import WHOLE_INSTRUCTION
from selfheal_jupyter.agents.edits import (
    EDIT_FAILED_FEEDBACK,
    EDIT_FAILED_NOTE,
    EDIT_INSTRUCTION,
)
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.loop.orchestrator import Loop
from selfheal_jupyter.model import Task
from selfheal_jupyter.render.html import run_html
from tests.scripted_server import ScriptedServer
from tests.unit.test_edits import block
from tests.unit.test_loop import fenced, llm_for, make_loop


def test_repair_format_reaches_the_developer_and_is_validated(sandbox):
    with ScriptedServer([]) as s:
        assert build_loop(SelfHeal(), sandbox=sandbox, llm=llm_for(s)).developer.repair_format == "whole"
        assert make_loop(s, sandbox, repair_format="edit").developer.repair_format == "edit"
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


def test_a_repair_answered_with_blocks_runs_the_whole_edited_program(sandbox):
    one_bug = GRADES.replace("score > 80", "score >= 80")
    reply = "The mean divides by one too many.\n" + fenced(AVERAGE_FIX)
    with ScriptedServer([reply]) as s:
        run = edit_loop(s, sandbox, max_iterations=1).run(Task(prompt="", initial_code=one_bug))
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


def test_several_blocks_fix_several_bugs_at_once(sandbox):
    # the second block's SEARCH lost the function's indentation: matched, re-indented
    reply = fenced(AVERAGE_FIX + "\n" + LETTER_FIX)
    with ScriptedServer([reply]) as s:
        run = edit_loop(s, sandbox, max_iterations=1).run(Task(prompt="", initial_code=GRADES))
    assert run.outcome == "success", run.error
    assert run.iterations[1].edited and run.final_code == FIXED


def test_a_block_that_does_not_apply_makes_the_next_round_ask_for_the_whole_program(sandbox):
    one_bug = GRADES.replace("score > 80", "score >= 80")
    wrong = block("    return total / (len(values) - 1)", "    return total / len(values)")
    with ScriptedServer([fenced(wrong), fenced(FIXED)]) as s:
        run = edit_loop(s, sandbox, max_iterations=2).run(Task(prompt="", initial_code=one_bug))
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


def test_an_ambiguous_block_falls_back_for_one_round_then_edits_again(sandbox):
    ambiguous = block("    return price * 1.2", "    return price * 0.8")
    still_wrong = PRICES.replace("1.2\n\n\nassert", "0.9\n\n\nassert")
    right = block(
        "def with_discount(price):\n    return price * 0.9", "def with_discount(price):\n    return price * 0.8"
    )
    with ScriptedServer([fenced(ambiguous), fenced(still_wrong), fenced(right)]) as s:
        run = edit_loop(s, sandbox, max_iterations=3).run(Task(prompt="", initial_code=PRICES))
        asked = prompts(s)
    assert "matches 2 places in the current program (lines 2, 6)" in run.iterations[1].edit_failure
    assert [p.endswith(EDIT_INSTRUCTION) for p in asked] == [True, False, True]
    assert [it.edited for it in run.iterations] == [False, False, False, True]
    assert run.outcome == "success", run.error
    assert run.final_code == PRICES.replace("1.2\n\n\nassert", "0.8\n\n\nassert")


def test_a_whole_program_reply_to_an_edit_request_is_taken_as_it_is(sandbox):
    with ScriptedServer(["Here is the corrected program:\n" + fenced(FIXED)]) as s:
        run = edit_loop(s, sandbox, max_iterations=1).run(Task(prompt="", initial_code=GRADES))
        (asked,) = prompts(s)
    assert asked.endswith(EDIT_INSTRUCTION)
    assert run.outcome == "success" and run.final_code == FIXED
    assert not run.iterations[1].edited and run.iterations[1].edit_failure == ""
