"""Legit asserts about types (issue 41): each holds on a correct program and fails on a
wrong one, through the public interfaces — ``selfheal sandbox exec --tests`` and
``selfheal run --code`` against the scripted server.

Since the checker became data-only, a class object had no plain value, so every
assert that compared one (``params["name"].annotation == str``, ``type(result) is
float``) failed every candidate, the right one included. Types now cross by the
runner's fixed table (the builtin and standard library's classes, as the checker's
own) or as handles of the program's own classes, compared by identity. The attacks on
that seam are in ``test_redteam.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted_server import Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


def _selfheal(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SELFHEAL_"))}
    env["OPENAI_API_KEY"] = "test-key"
    return subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


# id: (tests, a correct program, a wrong one)
CORPUS: dict[str, tuple[str, str, str]] = {
    "signature-annotations": (
        "import inspect\nsig = inspect.signature(greet)\nparams = sig.parameters\n"
        'assert params["name"].annotation == str\nassert sig.return_annotation == str\n'
        'assert params["times"].annotation is int and params["times"].default == 1\n',
        'def greet(name: str, times: int = 1) -> str:\n    return ", ".join(["Hello " + name] * times)\n',
        'def greet(name, times=1):\n    return ", ".join(["Hello " + name] * times)\n',
    ),
    "type-is-float": (
        "result = average([1, 2])\nassert type(result) is float\nassert type(average([2, 4])) == float\n",
        "def average(xs):\n    return sum(xs) / len(xs)\n",
        "def average(xs):\n    return sum(xs) // len(xs)\n",
    ),
    "type-in-a-list": (
        "assert type(parse('3')) in [int, float]\nassert all(type(x) is int for x in squares(3))\n",
        "def parse(text):\n    return int(text)\n\ndef squares(n):\n    return [i * i for i in range(n)]\n",
        "def parse(text):\n    return text.strip()\n\ndef squares(n):\n    return [i ** 2.0 for i in range(n)]\n",
    ),
    "isinstance-with-a-tuple": (
        "assert isinstance(parse('3.5'), (int, float))\nassert not isinstance(parse('3.5'), (str, bytes))\n",
        "def parse(text):\n    return float(text)\n",
        "def parse(text):\n    return text\n",
    ),
    "own-class-type-and-isinstance": (
        "p = make_point(1, 2)\nassert type(p) is Point\nassert isinstance(p, Point)\n"
        "assert p.__class__ is Point and p.__class__.__name__ == 'Point'\nassert type(p).__qualname__ == 'Point'\n",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n"
        "def make_point(x, y):\n    return Point(x, y)\n",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n"
        "def make_point(x, y):\n    return (x, y)\n",
    ),
    "subclass-is-not-the-class": (
        "assert type(make_dog()) is Dog\nassert type(make_dog()) is not Animal\nassert isinstance(make_dog(), Animal)\n",
        "class Animal:\n    pass\n\nclass Dog(Animal):\n    pass\n\ndef make_dog():\n    return Dog()\n",
        "class Animal:\n    pass\n\nclass Dog(Animal):\n    pass\n\ndef make_dog():\n    return Animal()\n",
    ),
    "issubclass-among-own-classes": (
        "assert issubclass(Dog, Animal)\nassert not issubclass(Animal, Dog)\nassert issubclass(Dog, (str, Animal))\n"
        "assert Dog.__bases__ == (Animal,) and Dog.__mro__[-1] is object\n",
        "class Animal:\n    pass\n\nclass Dog(Animal):\n    pass\n",
        "class Animal:\n    pass\n\nclass Dog:\n    pass\n",
    ),
    "dataclass-fields": (
        "from dataclasses import fields, is_dataclass, asdict\nassert is_dataclass(Point)\n"
        "assert [f.name for f in fields(Point)] == ['x', 'y']\nassert [f.type for f in fields(Point)] == [float, float]\n"
        "assert asdict(Point(1.0, 2.0)) == {'x': 1.0, 'y': 2.0}\n",
        "from dataclasses import dataclass\n\n@dataclass\nclass Point:\n    x: float\n    y: float\n",
        "from dataclasses import dataclass\n\n@dataclass\nclass Point:\n    x: int\n    y: int\n",
    ),
    "string-annotations": (
        "import inspect, typing\nassert inspect.signature(area).parameters['shape'].annotation == 'Shape'\n"
        "assert typing.get_type_hints(area) == {'shape': Shape, 'return': float}\n",
        "class Shape:\n    pass\n\ndef area(shape: 'Shape') -> 'float':\n    return 0.0\n",
        "class Shape:\n    pass\n\ndef area(shape: 'Shape') -> 'int':\n    return 0\n",
    ),
    "generic-annotations": (
        "import inspect\nfrom typing import Optional\nparams = inspect.signature(total).parameters\n"
        "assert params['xs'].annotation == list[int]\nassert params['label'].annotation == Optional[str]\n"
        "assert inspect.signature(total).return_annotation == (int | None)\n",
        "from typing import Optional\n\ndef total(xs: list[int], label: Optional[str] = None) -> int | None:\n"
        "    return sum(xs) if xs else None\n",
        "def total(xs: list[float], label: str = '') -> int:\n    return sum(xs)\n",
    ),
    "standard-library-types": (
        "import inspect\nfrom datetime import date\nfrom fractions import Fraction\n"
        "assert inspect.signature(parse_date).return_annotation is date\n"
        "assert type(parse_date('2024-01-02')) is date\nassert type(half(3)) is Fraction\n",
        "from datetime import date\nfrom fractions import Fraction\n\ndef parse_date(text: str) -> date:\n"
        "    return date.fromisoformat(text)\n\ndef half(n):\n    return Fraction(n, 2)\n",
        "def parse_date(text: str) -> str:\n    return text\n\ndef half(n):\n    return n / 2\n",
    ),
    "enum-members": (
        "from enum import Enum\nassert type(Color.RED) is Color\nassert isinstance(Color.RED, Enum)\n"
        "assert issubclass(Color, Enum)\n",
        "from enum import Enum\n\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\n",
        "class Color:\n    RED = 1\n    GREEN = 2\n",
    ),
    "enum-with-a-plain-mixin": (
        "from enum import Enum, IntEnum\nassert Color.RED.value == 'red' and Color.RED == 'red'\n"
        "assert isinstance(Color.RED, Color) and type(Priority.HIGH) is Priority\n"
        "assert Priority.HIGH.name == 'HIGH' and Priority.HIGH > Priority.LOW\n"
        "assert count([Color.RED, Color.RED])['red'] == 2\n",
        "from enum import Enum, IntEnum\n\nclass Color(str, Enum):\n    RED = 'red'\n\n"
        "class Priority(IntEnum):\n    LOW = 1\n    HIGH = 3\n\n"
        "def count(items):\n    counts = {}\n    for item in items:\n        counts[item] = counts.get(item, 0) + 1\n"
        "    return counts\n",
        "from enum import Enum, IntEnum\n\nclass Color(str, Enum):\n    RED = 'red'\n\n"
        "class Priority(IntEnum):\n    LOW = 3\n    HIGH = 1\n\n"
        "def count(items):\n    return {item: 1 for item in items}\n",
    ),
    "named-tuples-and-list-subclasses": (
        "p = make_point(1, 2)\nassert isinstance(p, Point) and type(p) is Point and p == (1, 2) and p.x == 1\n"
        "assert p.norm1() == 3\ns = Stack()\ns.push(4)\nassert isinstance(s, Stack) and isinstance(s, list)\n"
        "assert s == [4] and s.peek() == 4\n",
        "from typing import NamedTuple\n\nclass Point(NamedTuple):\n    x: int\n    y: int\n\n"
        "    def norm1(self):\n        return abs(self.x) + abs(self.y)\n\n"
        "def make_point(x, y):\n    return Point(x, y)\n\n"
        "class Stack(list):\n    def push(self, item):\n        self.append(item)\n\n"
        "    def peek(self):\n        return self[-1]\n",
        "from typing import NamedTuple\n\nclass Point(NamedTuple):\n    x: int\n    y: int\n\n"
        "    def norm1(self):\n        return self.x + self.y\n\n"
        "def make_point(x, y):\n    return (x, y)\n\n"
        "class Stack(list):\n    def push(self, item):\n        self.extend([item, item])\n\n"
        "    def peek(self):\n        return self[0]\n",
    ),
    "abstract-base-classes": (
        "from collections.abc import Iterable, Sized\nassert isinstance(Bag([1, 2]), Iterable)\n"
        "assert isinstance(Bag([1, 2]), Sized) and len(Bag([1, 2])) == 2\n",
        "class Bag:\n    def __init__(self, items):\n        self.items = list(items)\n\n"
        "    def __iter__(self):\n        return iter(self.items)\n\n    def __len__(self):\n        return len(self.items)\n",
        "class Bag:\n    def __init__(self, items):\n        self.items = list(items)\n\n"
        "    def size(self):\n        return len(self.items)\n",
    ),
    "functions-and-classes": (
        "import inspect, types\nassert inspect.isfunction(greet) and inspect.isclass(Greeter)\n"
        "assert type(greet) is types.FunctionType and isinstance(Greeter, type)\n",
        "def greet(name):\n    return 'hi ' + name\n\nclass Greeter:\n    pass\n",
        "greet = 'hi'\n\ndef Greeter():\n    return None\n",
    ),
    "unittest-type-assertions": (
        "import unittest, inspect\n\nclass T(unittest.TestCase):\n    def test_types(self):\n"
        "        self.assertIs(type(area(2)), float)\n        self.assertIsInstance(make(), Circle)\n"
        "        self.assertEqual(inspect.signature(area).return_annotation, float)\n\n"
        "result = unittest.TextTestRunner(verbosity=0).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
        "assert result.wasSuccessful()\n",
        "class Circle:\n    pass\n\ndef area(r: float) -> float:\n    return 3.14159 * r * r\n\n"
        "def make():\n    return Circle()\n",
        "class Circle:\n    pass\n\ndef area(r):\n    return round(3.14159 * r * r)\n\ndef make():\n    return object()\n",
    ),
}


def _exec(tmp_path: Path, tests: str, *programs: str) -> list[dict]:
    args = ["sandbox", "exec"]
    for i, code in enumerate(programs):
        path = tmp_path / f"p{i}.py"
        path.write_text(code)
        args.append(str(path))
    (tmp_path / "tests.py").write_text(tests)
    proc = _selfheal(*args, "--tests", str(tmp_path / "tests.py"), "--json")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(results) == len(programs), proc.stderr
    return results


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_type_assert_holds_on_the_right_program_and_fails_on_the_wrong_one(tmp_path, sandbox_image, case):
    tests, right, wrong = CORPUS[case]
    good, bad = _exec(tmp_path, tests, right, wrong)
    assert good["status"] == "ok", good
    assert all(t["passed"] for t in good["tests"]), [(t["source"], t["message"]) for t in good["tests"]]
    failed = [t for t in bad["tests"] if not t["passed"]]
    assert failed, bad["tests"]
    assert not any("where a value was expected" in t["message"] for t in failed), failed


# The three asserts issue 41 names, as a user's own cell healed by `selfheal run --code`.
ISSUE_CELL = (
    "import inspect\n\ndef describe(name: str, size: int) -> str:\n    return f'{name}: {size}'\n\n"
    "def ratio(a, b):\n    return a // b\n\n"
    "sig = inspect.signature(describe)\nparams = sig.parameters\n"
    'assert params["name"].annotation == str\nassert sig.return_annotation == str\n'
    "result = ratio(3, 2)\nassert type(result) is float\n"
)
ISSUE_RIGHT = ISSUE_CELL.replace("a // b", "a / b")
DATACLASS_CELL = (
    "from dataclasses import dataclass, fields\n\n@dataclass\nclass Point:\n    x: int\n    y: int\n\n"
    "def origin():\n    return (0, 0)\n\n"
    "assert [f.type for f in fields(Point)] == [float, float]\nassert type(origin()) is Point\n"
)
DATACLASS_RIGHT = DATACLASS_CELL.replace("x: int\n    y: int", "x: float\n    y: float").replace(
    "return (0, 0)", "return Point(0.0, 0.0)"
)


def _heal(tmp_path: Path, cell: str, replies: list[str]) -> dict:
    path = tmp_path / "cell.py"
    path.write_text(cell)
    with ScriptedServer([Reply(f"```python\n{r}```") for r in replies]) as server:
        proc = _selfheal(
            "run",
            "",
            "--code",
            str(path),
            "--base-url",
            server.base_url,
            "--model",
            server.model,
            "--max-iterations",
            str(max(1, len(replies))),
            "--json",
        )
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "cell, right",
    [(ISSUE_CELL, ISSUE_RIGHT), (DATACLASS_CELL, DATACLASS_RIGHT)],
    ids=["signature-and-type-of-the-result", "dataclass-fields-and-own-class"],
)
def test_a_cell_whose_asserts_check_types_heals_only_with_the_right_program(tmp_path, sandbox_image, cell, right):
    """The right program holds the user's type asserts (a cell that is right already is
    a success as it stands); a wrong repair does not, and each failed assert is reported
    as the comparison it is, not as a value that could not cross."""
    assert _heal(tmp_path, right, [])["outcome"] == "success"
    healed = _heal(tmp_path, cell, [right])
    assert healed["outcome"] == "success", healed["iterations"][-1]["verdict"]
    assert healed["verified_by"] == ["your asserts"]
    stuck = _heal(tmp_path, cell, [cell + "\nprint('again')\n", cell + "\nprint('once more')\n"])  # each runs
    assert stuck["outcome"] != "success", stuck["final_code"]
    ran = [it["result"] for it in stuck["iterations"] if it["result"]]  # a repeated program is not run again
    failing = [t for result in ran for t in result["tests"] if not t["passed"]]
    assert failing and all("AssertionError" in t["message"] for t in failing), failing
