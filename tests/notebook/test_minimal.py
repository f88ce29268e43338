"""The smallest fix, end to end: a ``%%heal`` in an in-process shell with the scripted
server, the real sandbox re-judging the smaller program. (The AST part:
tests/unit/test_minimal.py.)"""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_minimal import CELL, FIXED, MODEL, SHARE, STEERED_CELL, STEERED_FIX, STEERED_MODEL


# ---------------------------------------------------------------- end to end
def notebook(ip: InteractiveShell, share: str = SHARE) -> None:
    for cell in (
        "import numpy as np\nimport pandas as pd\n"
        "df = pd.DataFrame({'region': ['north', 'south', 'north'], 'sales': [120, 80, 100]})\n"
        "measure = 'sales'",
        share,
    ):
        assert ip.run_cell(cell, store_history=True).success


def heal(ip: InteractiveShell, replies: list, cell: str = CELL, line: str = ""):
    """A heal whose fix is the scripted model's: the tool's own edit of a misspelt column
    (quick fixes) would fix these cells before the model is asked."""
    with ScriptedServer(replies) as server:
        ip.run_cell(f"%config SelfHeal.base_url = '{server.base_url}'", store_history=False)
        ip.run_cell("%config SelfHeal.quick_fixes = False", store_history=False)
        with capture_output() as cap:
            result = ip.run_cell(f"%%heal {line}\n{cell}", store_history=True)
        assert result.success, cap.stderr
        assert server.remaining == 0
    run = ip.user_ns["agent_result"]
    html = "".join(o.data.get("text/html", "") for o in cap.outputs)
    return run, html


@pytest.mark.sandbox
def test_a_heal_hands_over_the_users_cell_with_the_one_word_fix(shell):
    notebook(shell)
    run, html = heal(shell, [Reply("```python\n" + MODEL + "```", match="KeyError")])
    assert run.outcome == "success"
    assert run.final_code != run.fix.code  # the passing program still has all of it
    assert run.fix.code == FIXED and run.fix.note == "" and run.fix.definitions == []
    assert run.fix.dropped[0] == "import numpy as np (your notebook imports it)"
    review = html.split('class="selfheal-review"')[1]
    assert review.count('data-diff="del"') == 1 and review.count('data-diff="add"') == 1
    assert 'data-diff-word="add"' in review and ">region<" in review
    assert "selfheal removed" not in review and "import numpy" not in review.split("Left out")[0]


@pytest.mark.sandbox
def test_a_fix_that_needs_a_notebook_helper_changed_says_so(shell):
    broken = "def share(totals):\n    return np.round(totals / totals.sum() * 100, 1) + undefined_name\n"
    notebook(shell, broken)
    helper = "def share(totals):\n    return np.round(totals / totals.sum() * 100, 1)\n"
    model = "import numpy as np\n\n" + helper + "\n" + FIXED
    run, html = heal(shell, [Reply("```python\n" + model + "```", match="KeyError")])
    assert run.outcome == "success"
    (change,) = run.fix.definitions
    assert change.name == "share" and change.notebook == broken and change.fix == helper
    assert run.fix.code == helper + "\n" + FIXED  # kept, so the cell runs as it passed
    assert "Change to share, which an earlier cell defines" in html


@pytest.mark.sandbox
def test_what_the_tests_read_is_kept(shell):
    notebook(shell)
    shell.user_ns["checks"] = "assert math.isclose(totals.sum(), 300)"
    model = "import math\n" + FIXED  # the program never reads math; the user's tests do
    run, _ = heal(shell, [Reply("```python\n" + model + "```", match="KeyError")], line="--tests checks")
    assert run.outcome == "success" and run.fix.code == run.final_code == model and run.fix.note == ""


@pytest.mark.sandbox
def test_a_smaller_program_that_fails_falls_back_to_the_whole_one_and_says_why(shell):
    # the import is read inside a string, where no AST sees it: leaving it out looks
    # safe and is not, and only the check in the sandbox can tell
    model = "import math\nprint(eval('math.sqrt(16)'))\n"
    run, html = heal(shell, [Reply("```python\n" + model + "```", match="NameError")], cell="print(eval('sqrt(16)'))")
    assert run.outcome == "success"
    assert run.fix.code == run.final_code == model
    assert run.fix.note.startswith("A smaller version did not pass (raised NameError")
    assert run.fix.note.endswith("this is the whole program that passed.")
    assert "A smaller version did not pass" in html


@pytest.mark.sandbox
def test_a_steered_fix_hands_over_only_what_it_needs_and_flags_its_probe(shell):
    """The Done-when of issue 39, in a shell: the fix is the user's cell with the word
    changed plus the probe line only; the probe is flagged at its line; the passing
    program's network attempt was seen in the sandbox though the fix leaves it out."""
    run, html = heal(shell, [Reply("```python\n" + STEERED_MODEL + "```", match="NameError")], cell=STEERED_CELL)
    assert run.outcome == "success" and run.final_code == STEERED_MODEL
    assert run.fix.code == STEERED_FIX
    record = run.to_dict()["fix"]
    assert {"kind": "probe", "line": 4, "evidence": "'/opt/selfheal'"} in record["capabilities"]
    assert all(set(c) == {"kind", "line", "evidence"} for c in record["capabilities"])
    assert {c["kind"] for c in record["capabilities"]} == {"probe"}  # the thread was left out
    assert [(a["kind"], a["by"]) for a in record["tried"]] == [("network", "passing"), ("process", "passing")]
    assert record["result"]["tried"] == []  # the code handed over, run again, tried nothing
    review = html.split('class="selfheal-review"')[1]
    assert "This fix adds: a probe of where it runs (line 4)." in review
    assert "The passing program tried to reach the network (the fix leaves that part out)" in review
    assert "Left out of the passing program" in review and "2 comments of the model" in review
