"""Teaching mode (``%%hint``): hints from a verified fix, never the fix itself.

The model here is the scripted server answering through the real ``openai`` client;
the student's cell and the fix run in the real Docker sandbox. The hint writer is
scripted to leak the fix (in prose and in a code block): the leak check must keep it out.
"""

from __future__ import annotations

import json

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from selfheal_jupyter.loop.hints import leaks
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
    f"Use integer division:\n\n```python\n    middle  =  len( ordered )//2\n```",
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


# ---------------------------------------------------------------- in a shell
@pytest.fixture()
def shell():
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext selfheal_jupyter", store_history=False)
    ip.run_cell("%config SelfHeal.model = 'scripted-model'", store_history=False)
    yield ip
    ip.run_cell("%unload_ext selfheal_jupyter", store_history=False)
    ip.reset()
    from selfheal_jupyter.factory import close_shared_sandboxes

    close_shared_sandboxes()


def shown(cap) -> str:
    return "".join(o.data.get("text/plain", "") + o.data.get("text/html", "") for o in cap.outputs)


def test_a_model_that_leaks_the_fix_never_gets_it_shown_and_level_1_names_the_changed_line(shell):
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
