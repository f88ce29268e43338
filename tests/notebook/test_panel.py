"""The live panel's buttons in a real kernel, without a browser: the test plays the
front end's part on the wire (widget comm messages), as JupyterLab would.

* Stop: a click on the Stop button reaches the kernel while the %%agent cell runs
  (the cell awaits, so ipykernel dispatches comm messages) and cancels the run.
* Progress in words ("Attempt 1 of 4 · running it in the sandbox"); the model's raw
  reply only behind its toggle, code fences left out.
* A passing cell ends at once. Without the labextension answering, the code goes
  out with the cell's own execute reply (``set_next_input``). With it (the test
  answers the ``selfheal-jupyter`` comm as the extension would), the decision asks
  it to bring the view to it, and Insert below / Accept (Replace this cell), pressed
  after the cell ended, send the cell's id and the code; Reject sends nothing.
* A fix the review flags (issue 39: a probe of where it runs): Run in my kernel asks
  once more, naming it, and runs nothing until the answer; Accept and run is not
  offered. A fix flagged with nothing offers Accept and run, which asks the front end
  to replace the cell, drop its old error and run it.
"""

from __future__ import annotations

import pytest

from tests.scripted_server import Reply, ScriptedServer
from tests.unit import test_panel as unit_panel
from tests.unit.test_panel import Wire, execute_in_cell, execute_reply, status_text

# Fixtures shared with the unit lane's tests.
kernel_for = unit_panel.kernel_for


@pytest.mark.sandbox
def test_stop_button_cancels_a_running_cell(kernel_for):
    slow = (
        "Sleeping as asked.\n```python\nimport time\ntime.sleep(60)\n```\nThe program waits a minute "
        "before it ends, as the task asks; nothing else happens meanwhile, and it prints nothing at all."
    )
    with ScriptedServer([Reply("1. Wait.\n2. Print done."), Reply(slow, chunk_delay_s=0.1)]) as server:
        _, kc = kernel_for(server)
        msg_id = kc.execute("%%agent\nWait a minute, then print done.")
        wire = Wire(kc, msg_id)
        stop = wire.until(lambda: wire.find("ButtonModel", description="Stop"), 60, "the Stop button")
        # while the developer streams: progress in words, the raw reply hidden ...
        wire.until(lambda: "Attempt 1 of 4 · writing the code" in status_text(wire), 60, "progress in words")
        assert "Sleeping" not in status_text(wire)
        # ... until the toggle shows its newest lines, without the code fences
        toggle = wire.find("ToggleButtonModel", description="Show the model's writing")
        wire.set_value(toggle, True)
        wire.until(
            lambda: any(
                "selfheal-tokens" in str(s.get("value", "")) and "time.sleep(60)" in str(s.get("value", ""))
                for s in wire.widgets.values()
            ),
            60,
            "streamed tokens in the panel",
        )
        shown = next(str(s["value"]) for s in wire.widgets.values() if "selfheal-tokens" in str(s.get("value", "")))
        assert "```" not in shown
        wire.until(lambda: server.remaining == 0, 60, "the candidate")
        wire.until(
            lambda: "Attempt 1 of 4 · running it in the sandbox" in status_text(wire), 60, "the candidate to run"
        )
        bar = wire.find("FloatProgressModel")
        assert 0 < wire.widgets[bar]["value"] < 1  # iteration 1 of 4 under way: the bar has moved
        assert "Your kernel may show Idle meanwhile" in status_text(wire)
        wire.click(stop)
        reply = execute_reply(kc, msg_id, timeout=120)
        wire.until(lambda: wire.idle, 60, "the cell to end")
        assert reply["content"]["status"] == "ok"
        assert 'data-outcome="cancelled"' in wire.html()
        said: list[str] = []
        kc.execute_interactive(
            "print(agent_result.iterations[-1].result.status)",
            timeout=60,
            output_hook=lambda m: said.append(m["content"].get("text", "")),
        )
        assert "killed" in "".join(said)  # the candidate was stopped, its 60 s sleep not waited out


@pytest.mark.sandbox
def test_without_the_extension_a_passing_cell_ends_and_hands_over_the_code(kernel_for):
    code = "print(sum([1, 2, 3]) / 3)"
    with ScriptedServer([Reply("1. Print the mean."), Reply(f"```python\n{code}\n```")]) as server:
        _, kc = kernel_for(server)
        msg_id = kc.execute("%%agent\nPrint the mean of 1, 2 and 3.")
        wire = Wire(kc, msg_id)
        reply = execute_reply(kc, msg_id, timeout=60)  # nobody clicks anything
        wire.until(lambda: wire.idle, 10, "the cell to end")
        payloads = reply["content"]["payload"]
        assert [p["source"] for p in payloads] == ["set_next_input"]
        assert payloads[0]["text"].strip() == code and payloads[0]["replace"] is False
        assert "handed to the front end as the next cell" in wire.html()
        assert wire.find("ButtonModel", description="Run in my kernel")
        # the user's namespace got the record only; the code itself was not run
        out = []
        kc.execute_interactive(
            "print(sorted(get_ipython().run_line_magic('who_ls', '')))",
            timeout=30,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert "".join(out).strip() == "['agent_result']"


@pytest.mark.sandbox
def test_insert_after_the_cell_ended_targets_the_agent_cell(kernel_for):
    code = "print(sum([1, 2, 3]) / 3)"
    with ScriptedServer([Reply("1. Print the mean."), Reply(f"```python\n{code}\n```")]) as server:
        _, kc = kernel_for(server)
        msg_id = execute_in_cell(kc, "%%agent\nPrint the mean of 1, 2 and 3.", "cell-agent")
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        reply = execute_reply(kc, msg_id, timeout=60)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        assert reply["content"]["payload"] == []  # the extension inserts, on a click only
        insert = wire.find("ButtonModel", description="Insert below")
        assert insert and not wire.requests
        wire.click(insert)
        request = wire.until(lambda: wire.requests and wire.requests[0], 30, "the insert request")
        assert request["action"] == "insert" and request["cell_id"] == "cell-agent"
        assert request["code"].strip() == code
        wire.until(lambda: "Inserted below the cell." in status_text(wire), 30, "the panel to settle")
        assert [r["cell_id"] for r in wire.reveals] == ["cell-agent"]  # the view was brought to it once


@pytest.mark.sandbox
def test_reject_leaves_everything_as_it_was_and_says_so(kernel_for):
    with ScriptedServer(
        [Reply("```python\nprices = {'tea': 2}\nprint(prices.get('coffee', 0))\n```", match="KeyError")]
    ) as server:
        _, kc = kernel_for(server)
        msg_id = execute_in_cell(kc, "%%heal\nprices = {'tea': 2}\nprint(prices['coffee'])", "cell-heal")
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        execute_reply(kc, msg_id, timeout=60)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        accept = wire.find("ButtonModel", description="Accept (Replace this cell)")
        reject = wire.find("ButtonModel", description="Reject")
        assert accept and reject and wire.display_of(accept) != "none"
        assert "Runs — nothing checked its output" in wire.html()  # no assert, no test: a review
        wire.click(reject)
        wire.until(
            lambda: "Rejected: your cell and your kernel are as they were" in status_text(wire),
            30,
            "the decision to settle",
        )
        assert wire.requests == []  # nothing was sent to edit the notebook
        out = []
        kc.execute_interactive(
            "print(sorted(get_ipython().run_line_magic('who_ls', '')))",
            timeout=30,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert "".join(out).strip() == "['agent_result']"  # nothing ran in the kernel


@pytest.mark.sandbox
def test_run_in_my_kernel_runs_the_code_there(kernel_for):
    code = "mean = sum([1, 2, 3]) / 3\nprint('mean is', mean)"
    with ScriptedServer([Reply("1. Compute the mean."), Reply(f"```python\n{code}\n```")]) as server:
        _, kc = kernel_for(server)
        msg_id = execute_in_cell(kc, "%%agent\nCompute the mean of 1, 2 and 3 as `mean`.", "cell-mean")
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        execute_reply(kc, msg_id, timeout=60)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        run = wire.find("ButtonModel", description="Run in my kernel")
        wire.click(run)
        wire.until(lambda: "Ran the code in your kernel." in status_text(wire), 30, "the panel to settle")
        printed = "".join(m["content"].get("text", "") for m in wire.messages if m["msg_type"] == "stream")
        assert "mean is 2.0" in printed
        out = []
        kc.execute_interactive(
            "print(mean)", timeout=30, output_hook=lambda m: out.append(m["content"].get("text", ""))
        )
        assert "".join(out).strip() == "2.0"


@pytest.mark.sandbox
def test_a_run_without_a_pass_offers_its_best_attempt_to_insert_only(kernel_for):
    crash, closest = "total = int('x')", "total = 5"
    with ScriptedServer([Reply(f"```python\n{crash}\n```"), Reply(f"```python\n{closest}\n```")]) as server:
        _, kc = kernel_for(server)
        kc.execute_interactive("checks = 'assert total > 0\\nassert total == 6'", timeout=30)
        msg_id = execute_in_cell(
            kc, "%%agent --no-plan --max-iterations 2 --tests checks\nSet total to six.", "cell-total"
        )
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        reply = execute_reply(kc, msg_id, timeout=60)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        assert reply["content"]["payload"] == []  # a failed program never goes out by itself
        assert 'data-outcome="budget_exhausted"' in wire.html()
        insert = wire.until(
            lambda: wire.find("ButtonModel", description="Insert best attempt below"), 30, "the best attempt's button"
        )
        assert "Attempt 2 came closest" in status_text(wire)
        assert wire.display_of(wire.find("ButtonModel", description="Run in my kernel")) == "none"  # it failed
        assert wire.display_of(wire.find("ButtonModel", description="Accept (Replace this cell)")) == "none"
        wire.click(insert)
        request = wire.until(lambda: wire.requests and wire.requests[0], 30, "the insert request")
        assert request["action"] == "insert" and request["cell_id"] == "cell-total"
        assert request["code"].strip() == closest  # the clean run that passed one check, not the crash
        wire.until(lambda: "Inserted below the cell." in status_text(wire), 30, "the panel to settle")


@pytest.mark.sandbox
def test_autoheal_offers_a_button_and_heals_on_request(kernel_for):
    fixed = "values = []\nprint(sum(values) / len(values) if values else 0.0)"
    with ScriptedServer([Reply(f"```python\n{fixed}\n```", match="ZeroDivisionError")]) as server:
        _, kc = kernel_for(server)
        assert kc.execute_interactive("%agent_autoheal on", timeout=30)["content"]["status"] == "ok"
        msg_id = execute_in_cell(kc, "values = []\nprint(sum(values) / len(values))", "cell-failing")
        wire = Wire(kc, msg_id)
        wire.extension = True
        button = wire.until(
            lambda: wire.find("ButtonModel", description="Ask the agent to fix this"), 30, "the autoheal button"
        )
        wire.until(lambda: wire.idle, 10, "the cell to end")
        errors = [m for m in wire.messages if m["msg_type"] == "error"]
        assert errors and errors[0]["content"]["ename"] == "ZeroDivisionError"  # the traceback still shows
        kinds = [m["msg_type"] for m in wire.messages if m["msg_type"] in ("display_data", "error")]
        assert kinds.index("display_data") < kinds.index("error")  # the button above the traceback
        assert wire.widgets[button]["layout"]  # its own layout: width auto, the label whole
        layout = wire.widgets[button]["layout"].removeprefix("IPY_MODEL_")
        assert wire.widgets[layout].get("width") == "auto"
        assert server.remaining == 1  # nothing happened by itself
        wire.click(button)
        wire.until(
            lambda: wire.widgets[button].get("description") == "Fixing…" and wire.widgets[button].get("disabled"),
            30,
            "the button to say it is fixing",
        )
        wire.until(lambda: 'data-outcome="success"' in wire.html(), 60, "the healed record")
        assert server.remaining == 0
        replace = wire.until(lambda: wire.find("ButtonModel", description="Accept (Replace this cell)"), 30, "Accept")
        wire.until(lambda: "Diff to your cell" in status_text(wire), 30, "the diff against the failing cell")
        wire.until(lambda: wire.display_of(button) == "none", 30, "the button to give way to the decision")
        wire.click(replace)
        request = wire.until(lambda: wire.requests and wire.requests[0], 30, "the replace request")
        assert request["action"] == "replace" and request["cell_id"] == "cell-failing"
        assert request["code"] == fixed  # as typed: no newline of IPython's added at its end
        assert request["clear_errors"] is True and request["run"] is False  # the old traceback goes with the code
        out = []
        kc.execute_interactive(
            "print(sorted(get_ipython().run_line_magic('who_ls', '')))",
            timeout=30,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert "".join(out).strip() == "['agent_result', 'values']"


@pytest.mark.sandbox
def test_run_in_my_kernel_asks_first_when_the_fix_is_flagged(kernel_for):
    from tests.unit.test_minimal import STEERED_CELL, STEERED_MODEL

    with ScriptedServer([Reply(f"```python\n{STEERED_MODEL}```", match="NameError")]) as server:
        _, kc = kernel_for(server)
        # the model's fix is the subject, not the tool's own edit of the misspelt name
        assert kc.execute_interactive("%config SelfHeal.quick_fixes = False", timeout=30)["content"]["status"] == "ok"
        msg_id = execute_in_cell(kc, "%%heal\n" + STEERED_CELL, "cell-steered")
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        execute_reply(kc, msg_id, timeout=120)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        assert "This fix adds: a probe of where it runs (line 4)." in (status_text(wire))
        assert wire.display_of(wire.find("ButtonModel", description="Accept and run")) == "none"
        run = wire.find("ButtonModel", description="Run in my kernel")
        wire.click(run)
        question = wire.until(
            lambda: next((v for v in status_text(wire).split("</div>") if "selfheal-question" in v), None),
            30,
            "the question",
        )
        assert question.count("Run it in your kernel, where it has your network") == 1
        assert "a probe of where it runs (line 4)" in question
        assert "In the sandbox the passing program tried to reach the network" in question  # what was seen, too
        wire.click(wire.find("ButtonModel", description="Do not run it"))
        wire.until(lambda: "selfheal-question" not in status_text(wire), 30, "the question to go")
        out = []
        kc.execute_interactive("print('mean' in dir())", timeout=30, output_hook=lambda m: out.append(m["content"]))
        assert "False" in str(out)  # nothing ran
        wire.click(run)
        confirm = wire.until(lambda: wire.find("ButtonModel", description="Run it anyway"), 30, "Run it anyway")
        wire.click(confirm)
        wire.until(lambda: "Ran the code in your kernel." in status_text(wire), 30, "the panel to settle")
        errors = [m for m in wire.messages if m["msg_type"] == "error"]
        assert errors and errors[-1]["content"]["ename"] == "AssertionError"  # in a kernel the probe is wrong


@pytest.mark.sandbox
def test_accept_and_run_replaces_clears_the_error_and_runs_a_fix_flagged_with_nothing(kernel_for):
    fixed = "values = [4, 8, 9]\nmean = sum(values) / len(values)\nassert mean == 7"
    with ScriptedServer([Reply(f"```python\n{fixed}\n```", match="NameError")]) as server:
        _, kc = kernel_for(server)
        msg_id = execute_in_cell(kc, "%%heal\n" + fixed.replace("len(values)", "len(value)"), "cell-plain")
        wire = Wire(kc, msg_id)
        wire.extension = True
        wire.until(lambda: wire.front_comm, 30, "the hello of the run")
        execute_reply(kc, msg_id, timeout=120)
        wire.until(lambda: wire.idle, 10, "the cell to end")
        assert "This fix adds" not in status_text(wire) and "Seen in the sandbox" not in status_text(wire)
        both = wire.find("ButtonModel", description="Accept and run")
        assert both and wire.display_of(both) != "none"
        wire.click(both)
        request = wire.until(lambda: wire.requests and wire.requests[0], 30, "the replace request")
        assert request["action"] == "replace" and request["code"] == fixed
        assert request["clear_errors"] is True and request["run"] is True
        wire.until(lambda: "with the fix and ran the cell." in status_text(wire), 30, "the panel to settle")


@pytest.mark.sandbox
def test_autoheal_mends_a_misspelt_name_by_the_tools_own_edit_without_the_model(kernel_for):
    """``len(value)`` where the notebook has ``values``: the button's heal is the tool's own
    edit, judged like any round; the model is never asked and the record spends no token."""
    with ScriptedServer([]) as server:  # no reply: a request would fail the heal
        _, kc = kernel_for(server)
        assert kc.execute_interactive("%agent_autoheal on", timeout=30)["content"]["status"] == "ok"
        assert kc.execute_interactive("values = [1, 2, 3]", timeout=30)["content"]["status"] == "ok"
        msg_id = execute_in_cell(kc, "mean = sum(values) / len(value)\nprint(mean)", "cell-typo")
        wire = Wire(kc, msg_id)
        wire.extension = True
        button = wire.until(
            lambda: wire.find("ButtonModel", description="Ask the agent to fix this"), 30, "the autoheal button"
        )
        wire.until(lambda: wire.idle, 10, "the cell to end")
        wire.click(button)
        wire.until(lambda: 'data-outcome="success"' in wire.html(), 60, "the healed record")
        assert "own edit, from its explanation of the last failure (no model was asked)" in wire.html()
        assert server.chat_requests() == []
        out = []
        kc.execute_interactive(
            "r = agent_result; print(r.totals.prompt_tokens + r.totals.completion_tokens, "
            "[it.quick_fix for it in r.iterations], repr(r.final_code))",
            timeout=30,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert "".join(out).strip() == "0 [False, True] 'mean = sum(values) / len(values)\\nprint(mean)'"
