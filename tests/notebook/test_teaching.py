"""Teaching mode in a real kernel and shell: the student's cell and the fix run in the real
Docker sandbox; the policy's limits, the hint panel, Stop. (The checks on hints alone:
tests/unit/test_teaching.py.)"""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from IPython.utils.capture import capture_output

from selfheal_jupyter.teaching import prose
from tests.scripted_server import Reply, ScriptedServer
from tests.unit import test_teaching as unit_teaching
from tests.unit.test_teaching import (
    CELL,
    DISGUISES,
    FIX,
    FIXED_LINE,
    LEAKY,
    MEDIAN,
    MEDIAN_FIXED,
    MEDIAN_HALF,
    NOTEBOOK_03,
    blocked,
    developer_fix,
    execute,
    noted,
)

# Fixtures shared with the unit lane's tests.
kernel_with_policy = unit_teaching.kernel_with_policy

TESTS = "median_tests = 'assert median([3, 1, 2]) == 2'"
WRITER = "patient programming teacher"


# ---------------------------------------------------------------- in a shell
def shown(cap) -> str:
    return "".join(o.data.get("text/plain", "") + o.data.get("text/html", "") for o in cap.outputs)


def asked(shell, cell: str, times: int) -> list[str]:
    """What the shell showed for each of ``times`` runs of ``cell``."""
    texts = []
    for _ in range(times):
        with capture_output() as cap:
            shell.run_cell(cell, store_history=True)
        texts.append(shown(cap))
    return texts


PRINTS_ITS_FIX = FIX + "print('the fix: middle = len(ordered) // 2')\n"


@pytest.mark.sandbox
def test_the_writer_never_sees_the_fix_its_disguises_never_reach_the_student_nor_the_record(shell, tmp_path):
    fix = Reply(f"```python\n{PRINTS_ITS_FIX}```", match="expert Python developer")
    replies = [fix, Reply(DISGUISES["zero-width"], match=WRITER), Reply(DISGUISES["split-spans"], match=WRITER)]
    with ScriptedServer(replies) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("%config SelfHeal.hint_prose = True", store_history=False)
        shell.run_cell(TESTS, store_history=True)
        before = set(shell.run_line_magic("who_ls", ""))
        outputs, records = [], []
        for _ in range(3):
            with capture_output() as cap:
                result = shell.run_cell(f"%%hint --tests median_tests\n{CELL}", store_history=True)
            assert result.success, cap.stderr
            outputs.append(shown(cap))
            records.append(json.dumps(shell.user_ns["agent_result"].to_dict(), default=str))
        remaining = server.remaining
        asked = [json.dumps(r) for r in server.chat_requests() if WRITER in json.dumps(r)]
    assert remaining == 0 and len(asked) == 2
    assert not any("//" in request for request in asked)  # the writer was never shown the fix
    first, second, third = outputs
    for text in (first, second):
        assert "// 2" not in prose.plain(text) and not prose.leaked_lines(text, [FIXED_LINE])
    # Line numbers as the student sees them: the %%hint line is line 1.
    assert "Hint 1 of 3" in first and "fails on line 5" in first and "starts on lines 4 and 7" in first
    assert "Hint 2 of 3" in second and "1.5" in second and "line 4 is an operator" in second
    assert "Hint 3 of 3" in third and "+    middle = len(ordered) // 2" in third  # no policy file: revealed
    record = shell.user_ns["agent_result"]
    assert [h.level for h in record.hints] == [1, 2, 3]
    assert all(h.check.startswith("dropped") for h in record.hints[:2])
    assert set(shell.run_line_magic("who_ls", "")) - before == {"agent_result"}  # nothing else changed
    # Built, not blanked: what the fix printed (its own line) is nowhere before level 3.
    for kept in records[:2]:
        assert "// 2" not in kept and "the fix:" not in kept
        data = json.loads(kept)
        assert [it["index"] for it in data["iterations"]] == [0] and data["withheld"]
    assert record.verified and record.final_code == PRINTS_ITS_FIX  # revealed at level 3: the whole run
    # For the teacher: which cell, which hints, in order.
    with capture_output():
        shell.run_cell(f"%agent_export {tmp_path}/hints.ipynb --hints")
        shell.run_cell(f"%agent_export {tmp_path}/hints.json --hints --json")
    nb = nbformat.read(tmp_path / "hints.ipynb", as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == [CELL] and code_cells[0].metadata["selfheal"]["hints"] == [1, 2, 3]
    exported = json.loads((tmp_path / "hints.json").read_text())
    assert [h["level"] for h in exported[0]["hints"]] == [1, 2, 3] and exported[0]["cell"] == CELL


@pytest.mark.sandbox
def test_policy_hints_allows_only_hints_and_keeps_a_hidden_fix_hidden(kernel_with_policy):
    replies = [
        developer_fix(),
        Reply("Look at the value of middle when line 5 runs.", match=WRITER),  # right, keeps the change
        Reply("What is len(ordered) / 2 when there are 3 values?", match=WRITER),  # names the changed operator
    ]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "reveal_fix": False})
        blocked(kc, "%%agent --no-plan\nPrint 1.", says="Only hints")
        blocked(kc, f"%%heal\n{CELL}", says="Only hints")
        assert execute(kc, TESTS)[0]["status"] == "ok"
        texts = []
        for _ in range(3):
            content, text = execute(kc, f"%%hint --tests median_tests\n{CELL}")
            assert content["status"] == "ok", content
            texts.append(text)
        assert "Hint 1 of 3" in texts[0] and "line 4" in texts[0]
        assert "Look at the value of middle when line 5 runs." in texts[0]  # shown: nothing wrong with it
        assert "len(ordered) / 2 when" not in texts[1]  # dropped: it names the operator the fix changes
        assert "Hint 3 of 3" in texts[2] and "keeps the fix hidden" in texts[2] and "// 2" not in texts[2]
        content, text = execute(kc, "print('// 2' in repr(agent_result.to_dict()), len(agent_result.hints))")
        assert text.split() == ["False", "3"]  # no fix code anywhere in the record
        assert server.remaining == 0


@pytest.mark.sandbox
def test_max_hints_and_max_runs_are_spent_with_a_clear_message(kernel_with_policy):
    replies = [developer_fix(), Reply("Look at line 3.", match=WRITER)]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "full", "max_hints": 1, "max_runs": 1})
        execute(kc, TESTS)
        content, text = execute(kc, f"%%hint --tests median_tests\n{CELL}")
        assert content["status"] == "ok" and "Hint 1 of 1" in text
        spent = noted(kc, f"%%hint --tests median_tests\n{CELL}", says="all 1 hints")
        assert "Hint 1 of 1" in spent  # the hint the student had stays in view
        blocked(kc, f"%%heal\n{CELL}", says="all 1 runs")
        assert server.remaining == 0


@pytest.mark.sandbox
def test_the_hint_button_then_another_hint_in_the_panel_up_to_the_hidden_fix(kernel_with_policy):
    """The front end's part played on the wire (as tests/notebook/test_panel.py does)."""
    from tests.unit.test_panel import Wire, execute_in_cell, status_text

    checked = CELL + "assert median([1, 2, 3]) == 2\n"  # the student's own assert verifies the fix
    fix = Reply("```python\n" + checked.replace("/ 2", "// 2") + "```", match="expert Python developer")
    replies = [
        fix,
        Reply("The division on line 3 gives a float.", match=WRITER),
        Reply("What is len(ordered) / 2 when there are 3 values?", match=WRITER),
    ]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "reveal_fix": False})
        assert execute(kc, "%agent_autoheal on")[0]["status"] == "ok"
        wire = Wire(kc, execute_in_cell(kc, checked, "cell-student"))
        button = wire.until(lambda: wire.find("ButtonModel", description="Give me a hint"), 30, "the hint button")
        assert not wire.find("ButtonModel", description="Ask the agent to fix this")
        wire.until(lambda: wire.idle, 30, "the cell to end")
        assert server.remaining == 3  # nothing happened by itself
        wire.click(button)
        wire.until(lambda: wire.find("ButtonModel", description="Finding a hint…"), 30, "the button's hint words")
        wire.until(lambda: "Hint 1 of 3" in status_text(wire), 120, "the first hint")
        for number in (2, 3):
            another = wire.until(lambda: _visible_another(wire), 60, "Another hint")
            wire.click(another)
            shown = f"Hint {number} of 3"
            wire.until(lambda shown=shown: shown in status_text(wire), 60, f"hint {number}")
        assert "keeps the fix hidden" in status_text(wire) and "// 2" not in status_text(wire)
        assert not _visible_another(wire)  # none is left
        assert server.remaining == 0
        content, text = execute(kc, "print(sorted(get_ipython().run_line_magic('who_ls', '')))")
        assert text.strip() == "['agent_result', 'median']"  # the student's cell defined median; nothing else
        # The same cell fails again: no Give me a hint is offered when no hint is left.
        again = Wire(kc, execute_in_cell(kc, checked, "cell-student"))
        again.until(lambda: again.idle, 30, "the cell to end")
        assert not again.find("ButtonModel", description="Give me a hint")


def _visible_another(wire) -> str | None:
    """The Another hint button, once it is shown (its layout's display is not none)."""
    for comm_id, state in wire.widgets.items():
        if state.get("_model_name") == "ButtonModel" and state.get("description") == "Another hint":
            layout = wire.widgets.get(str(state.get("layout", "")).removeprefix("IPY_MODEL_"), {})
            if layout.get("display") != "none" and not state.get("disabled"):
                return comm_id
    return None


NO_SMALL_FIX = "def median(values):\n    return values[len(values)]\n\nprint(median([3, 1, 2]))\n"


@pytest.mark.sandbox
def test_without_a_verified_fix_the_student_gets_the_facts_and_is_told_so(shell):
    from selfheal_jupyter.teaching.small_fix import mutants

    assert list(mutants(NO_SMALL_FIX)) == []  # no one-token change to try either
    still_broken = NO_SMALL_FIX.replace("len(values)]", "len(values) + 1]")
    with ScriptedServer([Reply(f"```python\n{still_broken}```", match="expert Python developer")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell(TESTS, store_history=True)
        with capture_output() as cap:
            shell.run_cell(f"%%hint --tests median_tests --max-iterations 1\n{NO_SMALL_FIX}", store_history=True)
        assert len(server.chat_requests()) == 1  # the developer only: the hint writer was not asked to guess
    text = shown(cap)
    assert "Hint 1 of 1" in text and "It fails on line 3" in text and "No fix could be verified" in text
    assert shell.user_ns["agent_result"].hints[0].prose == ""


@pytest.mark.sandbox
def test_when_the_model_finds_no_fix_a_one_token_change_is_tried_and_judged_like_a_round(shell):
    """Notebook 03 dead-ended on the embedded model ("Hint 1 of 1 … No fix could be
    verified"): the small changes a beginner's bug usually is are tried, each judged by
    the loop's own QA (the student's tests, the spec guard), and the first that passes is
    the verified fix the hints come from."""
    from selfheal_jupyter.teaching.small_fix import REPLY, mutants

    assert FIX in list(mutants(CELL))
    rewrites_the_check = CELL + "assert True\n"  # the model's one try: still the same TypeError
    with ScriptedServer([Reply(f"```python\n{rewrites_the_check}```", match="expert Python developer")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell("%config SelfHeal.hint_prose = False", store_history=False)
        shell.run_cell(TESTS, store_history=True)
        texts = asked(shell, f"%%hint --tests median_tests --max-iterations 1\n{CELL}", 3)
        assert len(server.chat_requests()) == 1
    assert "Hint 1 of 3" in texts[0] and "starts on line 4" in texts[0]
    assert "line 4 is an operator" in texts[1]
    assert "Hint 3 of 3" in texts[2] and "+    middle = len(ordered) // 2" in texts[2]
    record = shell.user_ns["agent_result"]
    assert record.verified and record.final_code == FIX and record.final_iteration.candidate.reply == REPLY


@pytest.mark.sandbox
def test_reveal_fix_true_shows_the_diff_at_level_3_and_a_leaky_model_never_before(kernel_with_policy):
    replies = [developer_fix(), *[Reply(text, match=WRITER) for text in LEAKY[:2]]]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "reveal_fix": True})
        execute(kc, TESTS)
        texts = [execute(kc, f"%%hint --tests median_tests\n{CELL}")[1] for _ in range(3)]
        assert server.remaining == 0
    assert "starts on line 4" in texts[0]
    for text in texts[:2]:
        assert "// 2" not in text and "//2" not in text
    assert "Hint 3 of 3" in texts[2] and "+    middle = len(ordered) // 2" in texts[2]


@pytest.mark.sandbox
def test_stop_in_the_hint_panel_is_a_calm_note_said_once_with_the_hints_kept(kernel_with_policy):
    """A Stop was a red UsageError and said twice (the panel and the error line); now one
    grey note under the hints the student already had, and the cell ends ``ok``."""
    from tests.unit.test_panel import Wire, execute_reply, status_text

    slow = Reply("```python\n" + FIX + "```\n" + "Done. " * 400, match="expert Python developer", chunk_delay_s=0.05)
    with ScriptedServer([slow]) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "reveal_fix": False})
        execute(kc, TESTS)
        msg_id = kc.execute(f"%%hint --tests median_tests\n{CELL}")
        wire = Wire(kc, msg_id)
        stop = wire.until(lambda: wire.find("ButtonModel", description="Stop"), 60, "the Stop button")
        wire.until(lambda: "Finding a hint…" in status_text(wire), 60, "the hint-mode words")
        assert "fix" not in status_text(wire).lower()
        wire.click(stop)
        reply = execute_reply(kc, msg_id, timeout=60)
        wire.until(lambda: wire.idle, 30, "the cell to end")
    assert reply["content"]["status"] == "ok"
    assert not any(m["msg_type"] == "error" for m in wire.messages)
    said = [m for m in wire.messages if "No hint this time" in json.dumps(m["content"])]
    assert said and "No hint this time" in status_text(wire)
    assert all("UsageError" not in json.dumps(m["content"]) for m in wire.messages)


@pytest.mark.sandbox
def test_notebook_03s_cell_reaches_level_3_when_the_model_only_rewrites_the_assert(shell):
    """What the embedded model did with notebook 03's cell (issue 35, and again at load 11:
    the run ended ``failed`` after it changed the student's assert twice): the small-change
    search still finds the verified fix, so the student gets where, why and the fix."""
    weakened = NOTEBOOK_03.replace("== 26 / 3", "== round(26 / 3, 2)")
    replies = [Reply(f"```python\n{weakened}```", match="expert Python developer")] * 6
    with ScriptedServer(replies) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        texts = asked(shell, f"%%hint\n{NOTEBOOK_03}", 3)
    record = shell.user_ns["agent_result"]
    assert "Hint 1 of 3" in texts[0] and "fails on line 8" in texts[0] and "starts on line 4" in texts[0]
    assert "Hint 3 of 3" in texts[2] and "+    for i in range(len(marks)):" in texts[2]
    assert record.outcome == "success" and record.final_code == NOTEBOOK_03.replace("range(1, len", "range(len")


# ---------------------------------------------------------------- the why from two runs
@pytest.mark.sandbox
def test_level_2_asks_about_the_value_that_differs_from_the_verified_run_never_saying_that_one(shell):
    """It asked about the function's argument (``values`` is ``[3, 1, 2]``), the first local
    the failing frame had; the value that is wrong is ``middle``, ``1.5`` here and ``1`` in
    the verified run, and what the operation that uses it needs is a whole number."""
    with ScriptedServer([developer_fix()]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell(TESTS, store_history=True)
        texts = asked(shell, f"%%hint --tests median_tests\n{CELL}", 2)
    why = texts[1].split("Hint 2 of 3", 1)[1]
    said = "`middle` is `1.5` (a float: a number with a fraction part): the first time line 4 runs when `median` gets"
    assert said in why and "`values` = `[3, 1, 2]`." in why
    assert "It fails on line 5: `return ordered[middle]`." in why
    assert "What kind of number can be used as a position in a list?" in why
    assert "`middle` is `1`" not in why and "// 2" not in why
    assert shell.user_ns["agent_result"].hints[1].facts[0].startswith("`middle` is `1.5`")


# ---------------------------------------------------------------- the ladder follows the student's edits
def _as_jupyterlab_sends(kc, cell_id: dict) -> None:
    """nbclient sends no cell id; JupyterLab and VS Code put the cell's in each execute
    request's metadata (``cellId``): the kernel client sends it so here."""

    def execute(code, silent=False, store_history=True, user_expressions=None, allow_stdin=None, stop_on_error=True):
        content = {
            "code": code,
            "silent": silent,
            "store_history": store_history,
            "user_expressions": user_expressions or {},
            "allow_stdin": bool(allow_stdin),
            "stop_on_error": stop_on_error,
        }
        msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id["id"]})
        kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    kc.execute = execute


def _said(cell) -> str:
    return "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs)


@pytest.mark.sandbox
def test_the_ladder_follows_a_student_through_their_edits_in_a_notebook(tmp_path):
    """A hint, then an edit that fixes half: the next ``%%hint`` started a new cell from
    hint 1 and said nothing of the edit. Now it says what the edit changed in the run and
    gives the next rung; once the cell passes, ``%%hint`` says it is solved."""
    from nbclient import NotebookClient

    fix = Reply(f"```python\n{MEDIAN_FIXED}```", match="expert Python developer")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext selfheal_jupyter")])
    cell = nbformat.v4.new_code_cell(f"%%hint\n{MEDIAN}")
    cell.id = "median-cell"
    record = nbformat.v4.new_code_cell("print([(h.level, bool(h.change)) for h in agent_result.hints])")
    nb.cells += [cell, record]
    said = []
    with ScriptedServer([fix, fix]) as server:
        env = dict(os.environ, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k", SELFHEAL_MODEL="scripted-model")
        client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        executing = {"id": ""}
        with client.setup_kernel(env=env):
            _as_jupyterlab_sends(client.kc, executing)
            client.execute_cell(nb.cells[0], 0)
            for source in (MEDIAN, MEDIAN_HALF, MEDIAN_FIXED):
                cell.source = f"%%hint\n{source}"
                executing["id"] = cell.id
                client.execute_cell(cell, 1)
                said.append(_said(cell))
            executing["id"] = "record-cell"
            client.execute_cell(record, 2)
        assert server.remaining == 0  # a run for each version that fails: the passing one needs none
    first, after_edit, solved = said
    assert "Hint 1 of 3 — Where" in first and "It fails on line 5" in first
    edit = after_edit.split("What your edit changed:", 1)[1]
    assert edit.startswith(" Your edit changed line 4. On line 4, `middle` is now `1`; it was `1.5`.")
    assert "The TypeError on line 5 is gone; now the assert on line 8 fails." in edit
    assert "Hint 2 of 3 — Why" in edit and "`median([4, 1, 3, 2])` is `3` when line 8 runs." in edit
    assert "Work through `median` by hand" in edit and "(ordered[middle - 1]" not in edit
    assert "Your edit changed lines 5, 6 and 7. Now your cell runs and passes its checks." in solved
    assert "Solved: there is nothing more to hint at." in solved
    assert _said(record).strip() == "[(1, False), (2, True)]"


@pytest.mark.sandbox
def test_an_edit_starts_no_fresh_count_of_hints(kernel_with_policy):
    """``max_hints`` counted hints per exact code: a comment added to the cell was a new
    cell with all its hints again. The count is the cell's, over every edit, and another
    cell id on code the kernel has seen is the same cell."""
    from tests.unit.test_panel import execute_reply

    replies = [developer_fix(), developer_fix()]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "max_hints": 2, "reveal_fix": False})
        kc.execute_interactive("%config SelfHeal.hint_prose = False", timeout=60)
        execute(kc, TESTS)

        def hint(code: str, cell_id: str) -> str:
            """Run ``%%hint`` as JupyterLab does in cell ``cell_id``; what it showed."""
            from tests.unit.test_panel import Wire, execute_in_cell

            msg_id = execute_in_cell(kc, f"%%hint --tests median_tests\n{code}", cell_id)
            wire = Wire(kc, msg_id)
            assert execute_reply(kc, msg_id, timeout=120)["content"]["status"] == "ok"
            wire.until(lambda: wire.idle, 30, "the cell to end")
            return json.dumps([m["content"] for m in wire.messages])

        assert "Hint 1 of 2" in hint(CELL, "cell-a")
        commented = CELL.replace("def median(values):", "def median(values):  # mine")
        second = hint(commented, "cell-a")
        assert "What your edit changed: Your edit changed line 2." in second and "Hint 2 of 2" in second
        for code, cell_id in ((commented + "# again\n", "cell-a"), (CELL, "cell-b")):
            said = hint(code, cell_id)
            assert "all 2 hints this cell may get" in said and "Hint 1 of" not in said.split("Hint 2 of 2")[-1]
        assert server.remaining == 0
