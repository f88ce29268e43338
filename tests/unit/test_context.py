"""The notebook context: which names a cell needs, how each kind travels, what cannot.

Resolution runs in a real in-process IPython shell (cells defined with ``run_cell`` so
their sources live where IPython keeps them). The runs at the end go through the real
Docker sandbox and the real ``openai`` client against the scripted server.
"""

from __future__ import annotations

import pickle

import pytest

from selfheal_jupyter.agents.inputs import format_context
from selfheal_jupyter.notebook import context
from selfheal_jupyter.notebook.names_read import names_in_task, names_read
from selfheal_jupyter.render.html import context_lines

NOTEBOOK = """
import numpy as np
import pandas as pd
import functools
from math import sqrt

df = pd.DataFrame({"region": ["north", "south", "north"], "sales": [10, 20, 30]})
RATE = 2

def helper(x):
    return x * RATE

@functools.lru_cache
def scale(x):
    return helper(x) + 1

class Account:
    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount
        return self.balance

acct = Account("ann", 100)
"""

HEAL_CELL = """totals = df.groupby("regionn")["sales"].sum()
print(scale(int(totals["north"])), np.sqrt(16), sqrt(9), acct.deposit(5))
"""


def resolve(ip, cell, **kw):
    kw.setdefault("max_bytes", 100 << 20)
    return context.for_cell(cell, ip.user_ns, hidden=ip.user_ns_hidden, **kw)


def by_name(ctx):
    return {e.name: e for e in ctx.entries}


# ---------------------------------------------------------------- which names
def test_names_read_in_order_minus_what_the_cell_binds_first():
    cell = (
        "import os\n"
        "x = df.head()\n"  # df read; x bound
        "y = x + offset\n"  # offset read
        "total += 1\n"  # augmented: read first
        "def f(a, k=K):\n"  # default read now
        "    return a * factor + x\n"  # factor read later (never bound); x is bound
        "g = lambda q: q + late\n"  # late: read later
        "late = 3\n"  # ... but the cell binds it, so not needed
        "sq = [v * w for v in vals]\n"  # vals, w read
        "for i in range(n): pass\n"  # n read; range builtin (kept: may be shadowed)
        "del gone\n"
    )
    assert names_read(cell) == ["df", "offset", "total", "K", "vals", "range", "n", "gone", "factor", "w"]


def test_names_in_task_words_and_braces():
    ns = {"df": 1, "sales": 2, "a": 3}
    assert names_in_task("print how many rows df has, {sales}", ns) == ["sales", "df"]


# ---------------------------------------------------------------- how each kind travels
def test_each_kind_resolves_with_transitive_needs(shell):
    shell.run_cell(NOTEBOOK, store_history=True)
    before = dict(shell.user_ns)
    ctx = resolve(shell, HEAL_CELL)
    entries = by_name(ctx)
    assert entries["np"].kind == "module" and entries["np"].source == "import numpy as np"
    assert entries["sqrt"].kind == "import" and entries["sqrt"].source == "from math import sqrt"
    assert entries["scale"].kind == "function" and "@functools.lru_cache" in entries["scale"].source
    # what scale reads comes too: helper, and what helper reads
    assert entries["helper"].kind == "function" and entries["RATE"].kind == "value"
    assert entries["functools"].kind == "module"
    assert entries["df"].kind == "value" and entries["df"].type == "DataFrame 3×2"
    assert entries["acct"].kind == "value"
    # the instance needs its class: its source travels although the cell never names it
    assert entries["Account"].kind == "class"
    # definitions come after the imports, each after what it needs at definition time
    prelude = ctx.prelude
    assert prelude.index("import functools") < prelude.index("def helper") < prelude.index("def scale")
    assert "class Account" in prelude and "df" not in prelude.split("class Account")[0].split("\n")[0]
    # copies, pickled now: they load as equal objects, not the kernel's own
    assert pickle.loads(ctx.values["df"]).equals(shell.user_ns["df"])
    assert set(ctx.values) == {"df", "RATE", "acct"}
    # the namespace was only read
    assert dict(shell.user_ns).keys() == before.keys()
    assert all(shell.user_ns[k] is before[k] for k in before)


def test_the_model_is_told_kinds_types_columns_signatures_never_values(shell):
    shell.run_cell(NOTEBOOK + "\nsecret = 'hunter2-value'\n", store_history=True)
    ctx = resolve(shell, "print(df.shape, secret, scale(2), acct.balance)")
    text = format_context(ctx)
    assert "`df`: pandas.DataFrame — 3 rows × 2 columns (region: " in text
    assert "`scale`: function scale(x)" in text
    assert "`Account`: class Account(owner, balance); methods deposit(amount)" in text
    assert "`secret`: str — length 13" in text
    for value in ("hunter2", "north", "ann", "100"):
        assert value not in text
    lines = context_lines(ctx)
    assert lines[0].startswith("from your notebook: df (DataFrame 3×2), secret (str)")
    assert "scale (function)" in lines[0] and "acct (Account)" in lines[0]


def test_a_columns_name_the_data_made_long_reaches_the_model_cut():
    """A survey's export names each column by its whole question; 30 names of 5,000
    characters were 150,000 characters of every prompt (red team, issue 46)."""
    import pandas as pd

    df = pd.DataFrame({f"Q{i} " + "how often " * 500: [1] for i in range(30)})
    text = format_context(context.for_cell("print(df.sum())", {"df": df}, max_bytes=1 << 20))
    assert "Q29 how often" in text and len(text) < 6_000, len(text)


# ---------------------------------------------------------------- what cannot travel
def test_bad_cases_are_named_with_a_reason(shell, tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("x")
    shell.run_cell(
        "import threading\n"
        f"handle = open({str(path)!r})\n"
        "gen = (i for i in range(3))\n"
        "lock = threading.Lock()\n"
        "big = list(range(200_000))\n"
        "tmp = 5\n"
        "exec('class Ghost:\\n    def hi(self):\\n        return 1')\n"
        "ghost = Ghost()\n"
        "list = [3, 1, 2]\n",
        store_history=True,
    )
    shell.run_cell("del tmp", store_history=True)
    cell = "print(handle, next(gen), lock, len(big), tmp, ghost, Ghost, sorted(list))"
    ctx = resolve(shell, cell, max_bytes=100_000)
    entries = by_name(ctx)
    assert "a generator" in entries["gen"].reason and "list(gen)" in entries["gen"].reason
    assert "an open file" in entries["handle"].reason
    assert "a lock" in entries["lock"].reason
    assert "SelfHeal.context_max_bytes" in entries["big"].reason
    assert "not defined in your notebook" in entries["tmp"].reason
    assert "source is not available" in entries["Ghost"].reason
    assert "Ghost" in entries["ghost"].reason
    # a notebook variable that shadows a builtin is the user's value, copied
    assert entries["list"].kind == "value" and pickle.loads(ctx.values["list"]) == [3, 1, 2]
    assert set(ctx.values) == {"list"}
    lines = context_lines(ctx)
    for name in ("gen", "handle", "lock", "big", "tmp", "Ghost", "ghost"):
        assert sum(line.startswith(f"not sent: {name} ") for line in lines) == 1, name
    text = format_context(ctx)
    assert "NOT available" in text and "`gen`" in text.split("NOT available")[1]
    shell.user_ns["handle"].close()


def test_a_missing_or_different_library_says_which_and_how_to_add_it(shell):
    shell.run_cell(
        "import numpy as np\nimport pandas as pd\ndf = pd.DataFrame({'a': [1]})\narr = np.arange(3)", store_history=True
    )
    image = {"numpy": "2.4.6"}  # no pandas in this image
    ctx = resolve(shell, "print(np, pd, df, arr)", image_packages=image)
    entries = by_name(ctx)
    assert entries["pd"].kind == "unavailable"
    assert "`selfheal sandbox build --with pandas`" in entries["pd"].reason
    assert "has no pandas" in entries["df"].reason
    assert entries["np"].kind == "module"
    import numpy

    image = {"numpy": "1.26.0", "pandas": "3.1.1"}
    ctx = resolve(shell, "print(arr, np)", image_packages=image)
    entries = by_name(ctx)
    assert entries["np"].kind == "module"  # an import works at any version
    assert entries["arr"].kind == "unavailable"
    assert f"numpy is {numpy.__version__} in your kernel but 1.26.0 in the sandbox" in entries["arr"].reason
    assert "--with numpy" in entries["arr"].reason


def test_a_redefined_class_leaves_old_instances_behind_with_a_reason(shell):
    shell.run_cell("class P:\n    def f(self):\n        return 1\np = P()", store_history=True)
    shell.run_cell("class P:\n    def f(self):\n        return 2", store_history=True)
    entries = by_name(resolve(shell, "print(p.f())"))
    assert "older definition of P" in entries["p"].reason


# ---------------------------------------------------------------- selfheal sandbox build --with
def test_with_pins_the_kernels_versions_and_names_a_missing_package():
    from importlib import metadata

    from selfheal_jupyter.errors import ImageBuildError
    from selfheal_jupyter.sandbox.image import kernel_pins

    version = metadata.version("pygments")
    assert kernel_pins(["pygments"], {}) == [f"pygments=={version}"]
    assert kernel_pins(["pygments"], {"pygments": version}) == []  # the image has it
    assert kernel_pins(["Pygments==2.0"], {"pygments": version}) == ["Pygments==2.0"]
    with pytest.raises(ImageBuildError, match=r"no-such-package-xyz is not installed in this Python"):
        kernel_pins(["no-such-package-xyz"], {})
