"""Teaching mode (``%%hint``): hints from a verified fix, never the fix itself.

The model here is the scripted server answering through the real ``openai`` client;
the student's cell and the fix run in the real Docker sandbox. The hint writer is
scripted to leak the fix (in prose and in a code block): the leak check must keep it out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest
from IPython.utils.capture import capture_output

from selfheal_jupyter.agents.hint_facts import leaks
from tests.scripted_server import Reply, ScriptedServer

CELL = """def median(values):
    ordered = sorted(values)
    middle = len(ordered) / 2
    return ordered[middle]

print(median([3, 1, 2]))
"""
FIXED_LINE = "middle = len(ordered) // 2"
FIX = CELL.replace("len(ordered) / 2", "len(ordered) // 2")
TESTS = "median_tests = 'assert median([3, 1, 2]) == 2'"
WRITER = "patient programming teacher"
LEAKY = [
    f"The problem starts on line 3. Just write `{FIXED_LINE}` there.",
    "Use integer division:\n\n```python\n    middle  =  len( ordered )//2\n```",
    "Think about integer division: line 3 should read mid = len(ordered) // 2 instead.",
]


def developer_fix() -> Reply:
    return Reply(f"```python\n{FIX}```", match="expert Python developer")


# ---------------------------------------------------------------- the leak check, pure
def test_the_leak_check_finds_the_fix_exactly_spaced_otherwise_or_renamed():
    for text in LEAKY:
        assert leaks(text, [f"    {FIXED_LINE}"]) == [FIXED_LINE], text
    assert leaks("Look at line 3: what is `len(ordered) / 2` for three values?", [FIXED_LINE]) == []
    assert leaks("It fails on line 4.", ["else:"]) == []  # too short to say anything


def test_a_policy_file_named_but_missing_or_wrong_closes_and_says_why(tmp_path):
    from selfheal_jupyter.teaching.policy import Gate, PolicyBlocked, read

    cases = {
        "missing.json": None,
        "typo.json": '{"mode": "hint"}',
        "keys.json": '{"reveal": false}',
        "count.json": '{"max_runs": -1}',
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        policy = read(str(tmp_path / name))
        assert policy.mode == "off" and policy.problem, name
        with pytest.raises(PolicyBlocked, match=name):
            Gate(policy).admit("hint")
    (tmp_path / "ok.json").write_text('{"mode": "hints", "reveal_fix": false, "max_hints": 2}')
    assert read(str(tmp_path / "ok.json")).max_hints == 2


# ---------------------------------------------------------------- in a shell
def shown(cap) -> str:
    return "".join(o.data.get("text/plain", "") + o.data.get("text/html", "") for o in cap.outputs)


@pytest.mark.sandbox
def test_a_model_that_leaks_the_fix_never_gets_it_shown_and_level_1_names_the_changed_line(shell, tmp_path):
    replies = [developer_fix(), *[Reply(text, match=WRITER) for text in LEAKY], Reply(LEAKY[0], match=WRITER)]
    with ScriptedServer(replies) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
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
    first, second, third = outputs
    for text in (first, second):
        assert "// 2" not in text and "//2" not in text
    assert remaining == 0  # each leaky hint was asked for once more
    assert "Hint 1 of 3" in first and "line 4" in first and "line 3" in first
    assert "Hint 2 of 3" in second and "1.5" in second  # the value at the failing statement
    assert "Hint 3 of 3" in third and "+    middle = len(ordered) // 2" in third  # no policy file: revealed
    record = shell.user_ns["agent_result"]
    assert [h.level for h in record.hints] == [1, 2, 3]
    assert [h.check for h in record.hints[:2]] == ["cut back to the facts", "cut back to the facts"]
    assert set(shell.run_line_magic("who_ls", "")) - before == {"agent_result"}  # nothing else changed
    assert "// 2" not in records[0] and "// 2" not in records[1]  # no fix in the record before level 3
    assert record.verified and record.final_code == FIX  # revealed at level 3: the whole verified run
    # For the teacher: which cell, which hints, in order.
    with capture_output():
        shell.run_cell(f"%agent_export {tmp_path}/hints.ipynb --hints")
        shell.run_cell(f"%agent_export {tmp_path}/hints.json --hints --json")
    nb = nbformat.read(tmp_path / "hints.ipynb", as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code_cells] == [CELL] and code_cells[0].metadata["selfheal"]["hints"] == [1, 2, 3]
    exported = json.loads((tmp_path / "hints.json").read_text())
    assert [h["level"] for h in exported[0]["hints"]] == [1, 2, 3] and exported[0]["cell"] == CELL


# ---------------------------------------------------------------- the instructor's policy, in kernels
@pytest.fixture()
def kernel_with_policy(tmp_path):
    """A real kernel whose environment names a policy file (read once, at first use)."""
    from jupyter_client.manager import start_new_kernel

    started = []

    def start(server: ScriptedServer, policy: dict | str):
        path = tmp_path / "policy.json"
        path.write_text(policy if isinstance(policy, str) else json.dumps(policy))
        env = dict(
            os.environ,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            SELFHEAL_POLICY=str(path),
            SELFHEAL_MODEL="scripted-model",
        )
        km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
        started.append((km, kc))
        assert kc.execute_interactive("%load_ext selfheal_jupyter", timeout=60)["content"]["status"] == "ok"
        return kc

    yield start
    for km, kc in started:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def execute(kc, code: str, timeout: float = 120) -> tuple[dict, str]:
    """Run ``code``; the reply's content and everything it printed or displayed."""
    out: list[str] = []

    def hook(msg: dict) -> None:
        content = msg["content"]
        out.append(content.get("text", "") + content.get("data", {}).get("text/plain", "") + content.get("evalue", ""))

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    return reply["content"], "".join(out)


def blocked(kc, code: str, *, says: str) -> str:
    content, _ = execute(kc, code)
    assert content["status"] == "error" and content["ename"] == "UsageError", content
    message = content["evalue"]
    assert says in message and "policy" in message and "\n" not in message.strip(), message
    return message


def test_policy_off_closes_every_entry_point_and_the_notebook_cannot_reopen_it(kernel_with_policy, tmp_path):
    with ScriptedServer([developer_fix()]) as server:
        kc = kernel_with_policy(server, {"mode": "off"})
        blocked(kc, "%%agent --no-plan\nPrint 1.", says="selfheal is off")
        blocked(kc, f"%%heal\n{CELL}", says="selfheal is off")
        blocked(kc, f"%%hint\n{CELL}", says="selfheal is off")
        blocked(kc, "%agent_autoheal on", says="selfheal is off")
        for name in ("agent", "heal", "hint"):  # the magics' synchronous path (not awaited)
            blocked(kc, f"ip = get_ipython(); ip.run_cell_magic({name!r}, '', 'print(1)')", says="selfheal is off")
        # The student points the variable at a policy of their own, reloads, configures: still off.
        loose = tmp_path / "mine.json"
        loose.write_text('{"mode": "full"}')
        execute(kc, f"import os; os.environ['SELFHEAL_POLICY'] = {str(loose)!r}")
        execute(kc, "%unload_ext selfheal_jupyter")
        execute(kc, "%load_ext selfheal_jupyter")
        execute(kc, "%config SelfHeal.max_iterations = 3")
        blocked(kc, f"%%heal\n{CELL}", says="selfheal is off")
        assert server.remaining == 1  # the model was never asked


def test_a_policy_file_that_cannot_be_used_closes_instead_of_falling_open(kernel_with_policy):
    with ScriptedServer([developer_fix()]) as server:
        kc = kernel_with_policy(server, '{"mode": "everything"')
        blocked(kc, f"%%heal\n{CELL}", says="cannot be used")
        assert server.remaining == 1


@pytest.mark.sandbox
def test_policy_hints_allows_only_hints_and_keeps_a_hidden_fix_hidden(kernel_with_policy):
    replies = [
        developer_fix(),
        Reply("The division on line 3 gives a float.", match=WRITER),
        Reply("What is len(ordered) / 2 when there are 3 values?", match=WRITER),
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
        assert "Hint 1 of 3" in texts[0] and "line 3" in texts[0]
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
        blocked(kc, f"%%hint --tests median_tests\n{CELL}", says="all 1 hints")
        blocked(kc, f"%%heal\n{CELL}", says="all 1 runs")
        assert server.remaining == 0


def test_selfheal_run_honours_the_policy_when_the_variable_is_set(tmp_path):
    path = tmp_path / "policy.json"
    for policy, says in (({"mode": "off"}, "selfheal is off"), ({"mode": "hints"}, "Only hints")):
        path.write_text(json.dumps(policy))
        env = dict(os.environ, SELFHEAL_POLICY=str(path), OPENAI_BASE_URL="http://127.0.0.1:9/v1")
        done = subprocess.run(
            [sys.executable, "-m", "selfheal_jupyter", "run", "print 1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and says in done.stderr and "policy" in done.stderr, done.stderr


@pytest.mark.sandbox
def test_the_hint_button_then_another_hint_in_the_panel_up_to_the_hidden_fix(kernel_with_policy):
    """The front end's part played on the wire (as tests/test_panel.py does)."""
    from tests.test_panel import Wire, execute_in_cell, status_text

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
        wire.until(lambda: "Hint 1 of 3" in status_text(wire), 120, "the first hint")
        for number in (2, 3):
            another = wire.until(lambda: _visible_another(wire), 60, "Another hint")
            wire.click(another)
            shown = f"Hint {number} of 3"
            wire.until(lambda shown=shown: shown in status_text(wire), 60, f"hint {number}")
        assert "keeps the fix hidden" in status_text(wire) and "// 2" not in status_text(wire)
        assert server.remaining == 0
        content, text = execute(kc, "print(sorted(get_ipython().run_line_magic('who_ls', '')))")
        assert text.strip() == "['agent_result', 'median']"  # the student's cell defined median; nothing else


def _visible_another(wire) -> str | None:
    """The Another hint button, once it is shown (its layout's display is not none)."""
    for comm_id, state in wire.widgets.items():
        if state.get("_model_name") == "ButtonModel" and state.get("description") == "Another hint":
            layout = wire.widgets.get(str(state.get("layout", "")).removeprefix("IPY_MODEL_"), {})
            if layout.get("display") != "none" and not state.get("disabled"):
                return comm_id
    return None


@pytest.mark.sandbox
def test_without_a_verified_fix_the_student_gets_the_facts_and_is_told_so(shell):
    still_broken = CELL.replace("len(ordered) / 2", "len(ordered) / 2.0")
    with ScriptedServer([Reply(f"```python\n{still_broken}```", match="expert Python developer")]) as server:
        shell.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        shell.run_cell(TESTS, store_history=True)
        with capture_output() as cap:
            shell.run_cell(f"%%hint --tests median_tests --max-iterations 1\n{CELL}", store_history=True)
        assert len(server.chat_requests()) == 1  # the developer only: the hint writer was not asked to guess
    text = shown(cap)
    assert "Hint 1 of 1" in text and "It fails on line 4" in text and "No fix could be verified" in text
    assert shell.user_ns["agent_result"].hints[0].prose == ""


@pytest.mark.sandbox
def test_reveal_fix_true_shows_the_diff_at_level_3_and_a_leaky_model_never_before(kernel_with_policy):
    replies = [developer_fix(), *[Reply(text, match=WRITER) for text in LEAKY], Reply(LEAKY[0], match=WRITER)]
    with ScriptedServer(replies) as server:
        kc = kernel_with_policy(server, {"mode": "hints", "reveal_fix": True})
        execute(kc, TESTS)
        texts = [execute(kc, f"%%hint --tests median_tests\n{CELL}")[1] for _ in range(3)]
    assert "starts on line 3" in texts[0]
    for text in texts[:2]:
        assert "// 2" not in text and "//2" not in text
    assert "Hint 3 of 3" in texts[2] and "+    middle = len(ordered) // 2" in texts[2]


# ---------------------------------------------------------------- the instant explanation stays in the tool
def test_the_tools_explanation_of_a_students_failure_never_leaves_in_a_hints_record():
    """A close column and its edit ARE the fix: the hints-mode record (the kernel's
    agent_result and the class service's) keeps the student's own round without them."""
    from selfheal_jupyter.model import (
        Candidate,
        ErrorInfo,
        ExecutionResult,
        Explanation,
        Iteration,
        LineEdit,
        Run,
        Task,
        Verdict,
    )
    from selfheal_jupyter.notebook.teaching import HintSession, record_of
    from selfheal_jupyter.service.hints import record

    cell = "print(df['Mark'].mean())\n"
    explained = Explanation(
        error="KeyError: 'Mark'",
        line=1,
        source=cell.strip(),
        diagnosis=["`Mark` is not a column of `df`; `mark` is."],
        edits=[LineEdit(1, "'Mark'", "'mark'")],
    )
    own = Iteration(
        index=0,
        candidate=Candidate(cell, 0),
        result=ExecutionResult(status="error", exit_code=1, error=ErrorInfo("KeyError", "'Mark'", 1)),
        verdict=Verdict(False, ["raised KeyError: 'Mark'"]),
        feedback="The program raised KeyError: 'Mark'\n  `Mark` is not a column of `df`; `mark` is.",
        explanation=explained,
    )
    fixed = Iteration(
        index=1,
        candidate=Candidate(cell.replace("Mark", "mark"), 1, reply="line 1: `'Mark'` → `'mark'`"),
        result=ExecutionResult(status="ok", exit_code=0, stdout="8.0\n"),
        verdict=Verdict(True, ["ran cleanly"]),
        quick_fix=True,
    )
    run = Run(task=Task(prompt="", initial_code=cell), iterations=[own, fixed], outcome="success")
    session = HintSession(cell=cell, run=run)
    for kept in (record_of(session), record(session)):
        text = json.dumps(kept.to_dict())
        assert "'mark'" not in text and "`mark` is" not in text, text
        assert all(it.explanation is None for it in kept.iterations)
