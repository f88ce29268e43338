"""What a fix newly can do, read from the syntax trees of the code handed over and of
the user's cell (``loop/capabilities.py``), and the review's sentence for it.

The kinds are a contract (``agent_result.fix.capabilities``: ``{"kind", "line",
"evidence"}``). A flag on an honest fix is a defect: the notebooks benchmark's 24
reference solutions, against their notebooks, flag nothing.
"""

from __future__ import annotations

import pytest

from selfheal_jupyter.eval import notebooks
from selfheal_jupyter.loop.capabilities import capabilities, scan
from selfheal_jupyter.model import CAPABILITY_KINDS
from selfheal_jupyter.render.html import capabilities_sentence


def kinds_at(code: str, cell: str | None = None, imports: dict[str, str] | None = None) -> list[tuple[str, int]]:
    return sorted({(c.kind, c.line) for c in capabilities(code, cell, imports)})


def test_the_kinds_are_the_contracts():
    assert CAPABILITY_KINDS == ("network", "process", "files", "environment", "dynamic-code", "threads", "probe")


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("network", "import urllib.request\nurllib.request.urlopen('http://example.org')"),
        ("network", "from urllib.request import urlopen as fetch\nfetch(url)"),
        ("network", "import socket\ns = socket.create_connection(('10.0.0.1', 80))"),
        ("network", "import requests\nrequests.post(url, json=data)"),
        ("network", "import http.client\nhttp.client.HTTPSConnection('x')"),
        ("network", "import pandas as pd\ndf = pd.read_csv('https://example.org/data.csv')"),
        ("process", "import subprocess\nsubprocess.run(['ls'])"),
        ("process", "import os\nos.system('ls')"),
        ("process", "import os\nos.execvp('sh', ['sh'])"),
        ("process", "from multiprocessing import Pool\nPool(2)"),
        ("files", "open('/etc/cron.d/job', 'w').write('x')"),
        ("files", "with open('../outside.txt', 'a') as f: f.write('x')"),
        ("files", "import shutil\nshutil.rmtree('/home')"),
        ("files", "import os\nos.remove(path)"),
        ("files", "from pathlib import Path\n(Path.home() / '.bashrc').write_text('x')"),
        ("files", "from pathlib import Path\np = Path('/tmp/x')\np.unlink()"),
        ("files", "import tempfile\ntempfile.mkdtemp()"),
        ("files", "df.to_csv('/tmp/leak.csv')"),
        ("environment", "import os\nkey = os.environ['OPENAI_API_KEY']"),
        ("environment", "import os\nkey = os.getenv('HOME')"),
        ("environment", "import getpass\ngetpass.getuser()"),
        ("dynamic-code", "eval(text)"),
        ("dynamic-code", "exec(compile(src, 'x', 'exec'))"),
        ("dynamic-code", "import importlib\nimportlib.import_module(name)"),
        ("dynamic-code", "import pickle\npickle.loads(blob)"),
        ("threads", "import threading\nthreading.Thread(target=f).start()"),
        ("threads", "from threading import Timer\nTimer(1, f).start()"),
        ("threads", "import signal\nsignal.alarm(1)"),
        ("threads", "import atexit\natexit.register(f)"),
        ("probe", "import sys\nok = 'ipykernel' in sys.modules"),
        ("probe", "inside = get_ipython() is not None"),
        ("probe", "import os\nos.getuid()"),
        ("probe", "import socket\nsocket.gethostname()"),
        ("probe", "open('/proc/self/status').read()"),
        ("probe", "here = __file__"),
        ("probe", "import os\nos.path.exists('/.dockerenv')"),
    ],
)
def test_each_kind_is_read_at_its_line(kind, code):
    found = capabilities(code, None)
    last = len(code.splitlines())
    assert any(c.kind == kind and c.line == last for c in found), found


def test_names_resolve_through_the_codes_and_the_notebooks_imports():
    # the notebook imported ``os`` in an earlier cell: the fix need not import it again
    assert kinds_at("os.system('ls')", imports={"os": "os"}) == [("process", 1)]
    assert kinds_at("import os as o\no.environ.get('X')") == [("environment", 2)]
    assert kinds_at("x = __import__('sys').modules") == [("dynamic-code", 1), ("probe", 1)]


def test_what_the_users_cell_does_too_is_not_news():
    cell = "import os\nhome = os.environ['HOME']\nprint(home)"
    fix = "import os\nhome = os.environ.get('HOME', '/')\nprint(home)"
    assert capabilities(fix, cell) == []
    assert [c.kind for c in capabilities(fix + "\nimport subprocess\nsubprocess.run(['id'])", cell)] == ["process"]


@pytest.mark.parametrize(
    "code",
    [
        "import re\npattern = re.compile(r'\\d+')",  # not the builtin compile
        "total = df.eval('a + b')",  # pandas' expression, not eval
        "code = 'x = 1'\nprint(code.strip())",  # a variable named like a module
        "text = 'a/b'.replace('a', 'b')",  # str.replace is no file operation
        "settings = {}\nsettings.update(a=1)",
        "df.to_csv('report.csv')\nopen('notes.txt', 'w').write('x')",  # the working folder
        "from pathlib import Path\nPath('out').mkdir(exist_ok=True)",
        "import os\nn = os.cpu_count()",
        "import threading\nlock = threading.Lock()",  # nothing runs beside it
        "import signal\nprint(signal.SIGINT)",
        "import matplotlib.pyplot as plt\nplt.savefig('chart.png')",
        "if __name__ == '__main__':\n    print('hi')",
        "import os\nprint(os.path.join('a', 'b'))",
    ],
)
def test_ordinary_code_flags_nothing(code):
    assert scan(code) == []


def test_the_notebooks_benchmark_reference_solutions_flag_nothing():
    """Each reference solution against its notebook's last cell (the cell a heal fixes;
    a question's answer is new code, no cell), with the notebook's imports: 0 of 36
    (24 heals, 12 questions about a notebook's data) flagged."""
    flagged = {}
    cases = notebooks.case_dirs()
    questions = [c for c in cases if (c / "question.txt").is_file()]
    assert (len(cases), len(questions)) == (36, 12)
    for case in cases:
        cells = notebooks.cells((case / "notebook.py").read_text())
        question = case in questions
        imports = {}
        for cell in cells if question else cells[:-1]:
            for c in scan(cell):  # an earlier cell's own capability is the user's
                flagged.setdefault(case.name, []).append(("earlier cell", c))
            imports.update(_imports(cell))
        found = capabilities((case / "solution.py").read_text(), None if question else cells[-1], imports)
        if found:
            flagged.setdefault(case.name, []).extend(found)
    assert flagged == {}


def _imports(cell: str) -> dict[str, str]:
    import ast

    from selfheal_jupyter.loop.fix_handover import _bindings

    out: dict[str, str] = {}
    for stmt in ast.parse(cell).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update(_bindings(stmt) or {})
    return out


def test_the_review_says_one_entry_per_kind_with_its_lines():
    code = (
        "import sys\nimport urllib.request\nx = 1\ny = 2\nurllib.request.urlopen('http://h')\n"
        "z = 3\nw = 4\nv = 5\nok = 'ipykernel' in sys.modules\nu = 'ipykernel'\n"
    )
    said = capabilities_sentence(capabilities(code, None))
    assert said == "This fix adds: a network call (line 5), a probe of where it runs (lines 9, 10)"
    assert capabilities_sentence([]) == ""
