"""Issue 46: what a request costs on the embedded model. Each prompt token is read again at
~30 tokens/s on this project's machine and each reply token written at ~15, so a line
that tells the model nothing, or a reply that has lost its program, is seconds of the
user's wait. End to end: the real openai client against the scripted server, the
programs' runs recorded from the real runner (``make record``)."""

from __future__ import annotations

import pickle

from selfheal_jupyter.agents.developer import REPLY_FLOOR_TOKENS, REPLY_TOKENS_PER_PROGRAM_TOKEN
from selfheal_jupyter.agents.inputs import DATA_KEEP, DATA_TERMS
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.llm import estimate_tokens
from selfheal_jupyter.model import ContextEntry, ErrorInfo, ExecutionResult, Frame, NotebookContext, Task
from selfheal_jupyter.model import TestOutcome as Outcome
from selfheal_jupyter.spec.probes import failing_path_values, plan_probes, probe_values
from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_loop import fenced, make_loop

PRICES = NotebookContext(
    entries=[ContextEntry("prices", "value", type="list (3)", summary="list — length 3 of str")],
    values={"prices": pickle.dumps(["4", "5", "6"])},
)
CELL = "total = 0\nfor p in prices:\n    total += p\nprint(total)\n"
FIXED = "total = 0\nfor p in prices:\n    total += int(p)\nprint(total)\n"


def test_a_heal_is_not_told_how_to_name_answers_and_its_repair_reply_is_capped(recorded_sandbox):
    """A repair of the user's own cell prints what the cell prints: the answer-naming rules
    are for a program written to answer a question. A repair's reply is the program again,
    so it is capped near the program's length (a sampled reply that never closes its fence
    streamed 1,024 tokens, 69 s, before); a program written from a task is not."""
    heal_task = Task(prompt="Make this code run without errors.", initial_code=CELL, context=PRICES)
    with ScriptedServer([fenced(FIXED), fenced(FIXED)]) as s:
        heal = make_loop(s, recorded_sandbox, max_iterations=2, auto_plan=False).run(heal_task)
        agent = make_loop(s, recorded_sandbox, max_iterations=2, auto_plan=False).run(
            Task(prompt="Print the total of the prices.", context=PRICES)
        )
        heal_request, agent_request = s.chat_requests()
    assert heal.outcome == "success" and agent.outcome == "success"
    heal_prompt = heal_request["messages"][-1]["content"]
    agent_prompt = agent_request["messages"][-1]["content"]
    assert DATA_KEEP in heal_prompt and DATA_TERMS not in heal_prompt
    assert DATA_KEEP in agent_prompt and DATA_TERMS in agent_prompt
    cap = max(REPLY_FLOOR_TOKENS, REPLY_TOKENS_PER_PROGRAM_TOKEN * estimate_tokens(CELL))
    assert heal_request["max_tokens"] == cap < SelfHeal().max_tokens
    assert agent_request["max_tokens"] == SelfHeal().max_tokens


CUT = Reply("Let me think about this step by step. " * 120, finish_reason="length")
"""A reply the repair's cap cut before its program began."""


def test_after_a_reply_the_cap_cut_the_next_has_the_whole_budget_and_a_stop_says_why(recorded_sandbox):
    """The cap is four times the program as it stands: a task that starts from a stub may
    need more, and the same cap cut every reply again; two cuts in a row ended the run
    with "try a stronger model" (red team, issue 46)."""
    heal_task = Task(prompt="Make this code run without errors.", initial_code=CELL, context=PRICES)
    cap = max(REPLY_FLOOR_TOKENS, REPLY_TOKENS_PER_PROGRAM_TOKEN * estimate_tokens(CELL))
    with ScriptedServer([CUT, fenced(FIXED)]) as s:
        run = make_loop(s, recorded_sandbox, max_iterations=3, auto_plan=False).run(heal_task)
        limits = [r["max_tokens"] for r in s.chat_requests()]
    assert run.outcome == "success" and limits == [cap, SelfHeal().max_tokens]
    with ScriptedServer([CUT, CUT]) as s:
        run = make_loop(s, recorded_sandbox, max_iterations=3, auto_plan=False).run(heal_task)
    assert run.outcome == "failed" and "cut off at its length limit" in run.error and "max_tokens" in run.error


def test_a_loops_own_variable_is_not_probed_before_the_loop():
    """The probes run the program up to the failing statement; for a loop they ran before
    its first pass, where the loop's variable is not defined: five lines of "raises
    NameError" in every repair prompt of a failure inside a loop."""
    code = 'for entry in ledger:\n    if entry.startswith("+"):\n        acct.deposit(entry[1:])\n'
    error = ErrorInfo(
        "TypeError",
        "unsupported operand type(s) for +=: 'int' and 'str'",
        3,
        [Frame("candidate.py", 3, "<module>", "acct.deposit(entry[1:])")],
    )
    assert plan_probes(code, ExecutionResult(status="error", exit_code=1, error=error)) is None
    code = "total = 0\nfor i in range(len(xs)):\n    total += xs[i + 1] * sum(v for v in ys)\n"
    error = ErrorInfo("IndexError", "list index out of range", 3, [Frame("candidate.py", 3, "<module>", "")])
    _, probes = plan_probes(code, ExecutionResult(status="error", exit_code=1, error=error))
    shown = [p.split("repr(", 1)[1].rsplit(")[:", 1)[0] for p in probes]
    assert "len(xs)" in shown and "sum((v for v in ys))" in shown
    assert not any("i + 1" in e or "total" in e for e in shown)
    # a name the program never defined: its own error says so already
    outcomes = [Outcome("assert False, repr(x)[:200]", False, "NameError: name 'x' is not defined")]
    assert failing_path_values(outcomes) == []
    assert [v.source for v in probe_values(outcomes)] == ["x"]  # what a fix changed keeps it


def test_what_a_probe_raised_is_clipped_as_its_value_is():
    """``raise ValueError("\\x1b[2J" + "A" * 10**6)`` in a probed call: the sandbox reports the
    whole message, which went unclipped to the transcript, the panel and the hint writer."""
    raised = Outcome("assert False, repr(f())[:200]", False, "ValueError: \x1b[2J" + "A" * 1_000_000)
    (value,) = probe_values([raised])
    assert value.source == "f()" and not value.passed and value.message.startswith("ValueError: \x1b[2JAAA")
    assert len(value.message) <= 200
