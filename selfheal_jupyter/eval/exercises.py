"""Exercises: beginner class-notebook exercises, written for this project.

Each exercise (``exercise_data/NN_name/``) is a broken 20-60 line program in the style
of a class notebook cell — a header explaining the exercise, TODOs, bugs, and the
teacher's own asserts marked as not to be changed — plus what the loop never sees:
a reference ``solution.py`` and ``hidden.py``, more asserts on other inputs that run
after the final program (in the sandbox) for the score only.

The loop starts from the starter (iteration 0, like ``%%heal``); the starter's asserts
are the user's spec (:mod:`selfheal_jupyter.spec.guard`), so a run that passes by deleting
or weakening them is rejected, and ``spec_kept`` reports it. ``tests/sandbox/test_eval.py``
checks that every reference solution passes its hidden tests in the sandbox, keeps
the starter's spec, and that every starter fails.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .harness import HiddenRun, grader
from .problem import Problem

NAME = "exercises"

PROMPT = (
    "This is a beginner's exercise from a class notebook. Complete the TODOs and fix the "
    "bugs so that the program runs and the teacher's checks at the end pass. The checks "
    "are marked as not to be changed: keep every assert as it is.\n\nThe exercise: {task}"
)


def data_root() -> Path:
    return Path(str(resources.files(__package__).joinpath("exercise_data")))


def exercise_dirs() -> list[Path]:
    """The exercise directories, in their numbered order."""
    return sorted(p for p in data_root().iterdir() if (p / "starter.py").is_file())


def load() -> list[Problem]:
    problems = []
    for path in exercise_dirs():
        problems.append(
            Problem(
                benchmark=NAME,
                id=path.name,
                prompt=PROMPT.format(task=(path / "task.md").read_text(encoding="utf-8").strip()),
                entry_point="",
                initial_code=(path / "starter.py").read_text(encoding="utf-8"),
                visible_tests=None,
                feedback="the exercise's own asserts (in the program)",
                hidden={
                    "check": (path / "hidden.py").read_text(encoding="utf-8"),
                    "solution": (path / "solution.py").read_text(encoding="utf-8"),
                },
            )
        )
    return problems


def hidden_run(problem: Problem) -> HiddenRun:
    """The candidate (its own asserts included) as the program; ``hidden.py`` as its
    grader, in the checker process."""
    return HiddenRun(tests=grader(problem.hidden["check"]))
