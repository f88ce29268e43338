"""The spec guard on two corpora: correct solutions of beginner exercises (it must reject
none) and cheating variants of the same exercises (it must reject every one).

Each file in ``tests/spec_corpus/`` is one exercise, written for this project: the
user's cell (``### original``: TODO blanks left as ``...``, ``pass``, ``None``, empty
literals, an empty right-hand side, ``raise NotImplementedError``; functions to
complete; bugs to fix; the teacher's asserts), one or more correct solutions
(``### legit``) and one or more cheats (``### cheat <rule>``, the rule that must catch
it). The corpus is checked for soundness too: every solution and every cheat runs to
its end without an error (so for a cheat only the guard stands between it and
"success"), and every original fails. Those runs are of this test data only, in a
child interpreter.

``python bench/spec_guard.py`` prints the same counts as a table (precision, recall).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from selfheal_jupyter.spec import guard as spec

CORPUS = Path(__file__).resolve().parents[1] / "spec_corpus"

_RUNNER = r"""
import contextlib, io, json, sys, traceback
out = []
for code in json.load(sys.stdin):
    try:
        compiled = compile(code, "candidate.py", "exec")
    except SyntaxError as exc:
        out.append({"ok": False, "error": "SyntaxError", "lines": [exc.lineno or 0]})
        continue
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compiled, {"__name__": "__main__"})
        out.append({"ok": True, "error": None, "lines": []})
    except SystemExit as exc:
        out.append({"ok": exc.code in (0, None), "error": "SystemExit", "lines": []})
    except BaseException as exc:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "candidate.py"]
        out.append({"ok": False, "error": type(exc).__name__, "lines": lines})
json.dump(out, sys.stdout)
"""


@dataclass
class Exercise:
    name: str
    original: str
    legit: list[str] = field(default_factory=list)
    cheats: list[tuple[str, str]] = field(default_factory=list)
    """(the rule that must reject it, the program)."""


def load_corpus(root: Path = CORPUS) -> list[Exercise]:
    exercises = []
    for path in sorted(root.glob("*.txt")):
        sections: list[tuple[str, list[str]]] = []
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.startswith("### "):
                sections.append((line[4:].strip(), []))
            elif sections:
                sections[-1][1].append(line)
        ex = Exercise(path.stem, "")
        for head, lines in sections:
            text = "".join(lines)
            kind, _, rule = head.partition(" ")
            if kind == "original":
                ex.original = text
            elif kind == "legit":
                ex.legit.append(text)
            elif kind == "cheat":
                ex.cheats.append((rule.strip(), text))
            else:
                raise ValueError(f"{path.name}: unknown section {head!r}")
        exercises.append(ex)
    return exercises


def run_programs(programs: list[str]) -> list[dict]:
    """Each program run to its end in a child interpreter: ok, error type, failing lines."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(proc.stdout)


def guard(exercise: Exercise, failing: list[int], program: str) -> list:
    """What QA's spec check says of ``program`` as a repair of the exercise's cell."""
    return spec.check(spec.extract(exercise.original, None, failing), program)


def measure(exercises: list[Exercise]) -> dict:
    """Rejections on both corpora (with the failing lines of each original, as QA has them)."""
    runs = run_programs([ex.original for ex in exercises])
    legit_rejected, cheats_missed, wrong_rule = [], [], []
    legit = cheats = 0
    for ex, first in zip(exercises, runs, strict=True):
        for i, program in enumerate(ex.legit):
            legit += 1
            found = guard(ex, first["lines"], program)
            if found:
                legit_rejected.append((ex.name, i, [(v.rule, v.message) for v in found]))
        for rule, program in ex.cheats:
            cheats += 1
            found = guard(ex, first["lines"], program)
            if not found:
                cheats_missed.append((ex.name, rule))
            elif rule not in {v.rule for v in found}:
                wrong_rule.append((ex.name, rule, [v.rule for v in found]))
    caught = cheats - len(cheats_missed)
    rejected = caught + len(legit_rejected)
    return {
        "exercises": len(exercises),
        "legit": legit,
        "cheats": cheats,
        "legit_rejected": legit_rejected,
        "cheats_missed": cheats_missed,
        "wrong_rule": wrong_rule,
        "precision": caught / rejected if rejected else 1.0,
        "recall": caught / cheats if cheats else 1.0,
    }


@pytest.fixture(scope="module")
def corpus() -> list[Exercise]:
    return load_corpus()


@pytest.fixture(scope="module")
def measured(corpus) -> dict:
    m = measure(corpus)
    print(
        f"\nspec guard: {m['exercises']} exercises; legit {m['legit']} "
        f"({len(m['legit_rejected'])} rejected), cheats {m['cheats']} "
        f"({len(m['cheats_missed'])} missed); precision {m['precision']:.3f}, "
        f"recall {m['recall']:.3f}"
    )
    return m


def test_the_corpus_is_large_varied_and_holds_the_reported_exercises(corpus):
    assert len(corpus) >= 60
    assert all(ex.original and ex.legit and ex.cheats for ex in corpus), [
        ex.name for ex in corpus if not (ex.original and ex.legit and ex.cheats)
    ]
    text = "\n".join(ex.original for ex in corpus)
    for blank in (
        "= \n",
        "= ...",
        "= None",
        "= 0\n",
        '= ""',
        "= []",
        "= {}",
        "    pass",
        "raise NotImplementedError",
        ".append()",
    ):
        assert blank in text, blank
    for reported in ("IS_LEARNING_PYTHON", "celsius_name", "fruits"):
        assert reported in text
    rules = {rule for ex in corpus for rule, _ in ex.cheats}
    assert rules == {
        "assert_removed",
        "assert_changed",
        "assert_silenced",
        "test_removed",
        "failure_swallowed",
        "bare_except",
        "early_exit",
        "hard_coded",
    }


def test_the_corpus_is_sound(corpus):
    """Originals fail; every solution and every cheat runs to its end without an error."""
    originals = run_programs([ex.original for ex in corpus])
    assert [ex.name for ex, r in zip(corpus, originals, strict=True) if r["ok"]] == []
    programs = [(ex.name, p) for ex in corpus for p in ex.legit + [c for _, c in ex.cheats]]
    runs = run_programs([p for _, p in programs])
    failing = [(name, r["error"]) for (name, _), r in zip(programs, runs, strict=True) if not r["ok"]]
    assert failing == []


def test_no_correct_solution_is_rejected(measured):
    assert measured["legit_rejected"] == []


def test_every_cheat_is_rejected_by_its_rule(measured):
    assert measured["cheats_missed"] == []
    assert measured["wrong_rule"] == []
    assert measured["precision"] == 1.0 and measured["recall"] == 1.0
