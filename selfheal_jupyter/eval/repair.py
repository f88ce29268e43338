"""Repair: the Python "debug" tasks of ``mlsys-lab==0.4.0``.

Each task ships a hand-written buggy ``starter.py`` (all 157 fail their grader), the
grader ``check.py`` (``grade(solver_module, fixtures) -> {metric: value}``) and the
thresholds in ``meta.json`` (``gates``, AND-ed, as ``mlsys.runner.grade`` does). The
loop starts from the starter (iteration 0, like ``%%heal``). The learner-facing
``task.md`` is the prompt; its example code is the only test the loop's QA gets, run
with asserts of the values its comments state and of the classes the starter's
signatures declare (:func:`visible_tests`). ``check.py`` stays hidden and runs in the
sandbox.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import harness
from .examples import with_declared_types, with_stated_values
from .problem import Problem, package_dir

NAME = "repair"

PROMPT = (
    "The program below is meant to solve this task but has a bug. Fix it and reply with "
    "the whole corrected program (keep the function names).\n\n{task}"
)

_FENCE = re.compile(r"```(?:python|py)?\n(.*?)```", re.S)

_GATES = """
import math as _math
_metrics = {{k: float(v) for k, v in grade(__program__, {fixtures}).items()}}
print("metrics:", _json.dumps(_metrics))
_ops = {{">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "==": lambda a, b: a == b}}
_gates = {gates}
assert _gates, "the task has no gates"
for _g in _gates:
    _v = _metrics.get(_g["metric"], _math.nan)
    assert not _math.isnan(_v) and _ops[_g["op"]](_v, float(_g["threshold"])), (
        f"gate {{_g['metric']}} {{_g['op']}} {{_g['threshold']}} failed: {{_v}}")
"""


def tasks_root() -> Path:
    return Path(str(package_dir("mlsys").joinpath("tasks")))


#: Tasks whose grader must reach into the candidate's own objects (addresses of array
#: views, descriptors or metaclasses applied to the grader's classes, line tracing, gc
#: reachability, RNG state inside a module). The grader calls the candidate across a
#: process boundary, values only, so that the candidate cannot touch it: there even the
#: reference solution cannot pass these, and they are left out of the set
#: (tests/sandbox/test_eval.py checks that every loaded task's reference passes).
NEEDS_IN_PROCESS_GRADER = frozenset(
    {
        "cpu-scatter-with-duplicate-indices-byte-exact-accumulate",
        "num-fix-out-of-bounds-as-strided",
        "pyt-find-the-retaining-edge-that-blocks-free",
        "pyt-fix-a-broken-metatype-so-isinstance-tells-the-truth",
        "pyt-fix-a-cached-property-that-never-caches",
        "pyt-fix-a-generator-that-skips-cleanup",
        "pyt-fix-a-non-data-descriptor-shadowed-by-the-instance-dict",
        "pyt-fix-a-slots-defeating-subclass",
        "pyt-fix-coroutine-was-never-awaited",
        "pyt-fix-tombstone-handling-in-a-scratch-open-addressing-dict",
        "pyt-reorder-bases-so-cooperative-super-fires-fully",
        "rwm-fix-a-checkpoint-that-drops-rng-state-dropout-mismatch",
        "rwq-debug-smoothing-folded-the-same-way-into-both-sides",
    }
)


def task_dirs() -> list[Path]:
    """The Python debug tasks that can be graded from outside, sorted by directory name."""
    out = []
    for meta in sorted(tasks_root().glob("*/meta.json")):
        data = json.loads(meta.read_text())
        if data.get("id", meta.parent.name) in NEEDS_IN_PROCESS_GRADER:
            continue
        if data.get("genre") == "debug" and (meta.parent / "starter.py").exists():
            out.append(meta.parent)
    return out


def example_code(task_md: str) -> str | None:
    """The code blocks of the task's "Example" section that parse (a smoke test)."""
    section = re.split(r"^##\s+", task_md, flags=re.M)
    blocks = []
    for part in section:
        if part.lower().startswith("example"):
            blocks.extend(_FENCE.findall(part))
    good = []
    for block in blocks:
        try:
            compile(block, "example", "exec")
        except SyntaxError:
            continue
        good.append(block.strip())
    return "\n".join(good) if good else None


FEEDBACK = "the task's example code, with the values its comments state"

#: Tasks whose example code fails on the task's own reference solution (it imports the
#: solution under a file name, calls a name it never defines, ...). A check no correct
#: program passes would only send the loop after a wrong target: these get a clean run.
BROKEN_EXAMPLES = frozenset(
    {
        "llm-debug-accidental-mean-centering-in-rmsnorm",
        "llm-debug-softmax-over-wrong-query-axis",
        "num-fix-one-pass-variance-that-returns-negatives",
        "pyt-fix-an-exception-swallowing-bug",
        "rwa-debug-accumulator-not-rescaled-when-running-max-grows",
        "rwa-debug-block-skipper-drops-a-partial-diagonal-block",
        "rwb-debug-a-merge-that-forgets-the-accumulator-rescale",
        "rwb-debug-an-off-by-one-in-slot-mapping",
        "rwc-fix-a-wrong-transpose-perm-that-corrupts-the-export",
        "rwm-prove-offloaded-cache-decode-is-bit-lossless-vs-full-cache",
        "rwq-debug-scale-applied-in-the-wrong-direction",
    }
)

#: Tasks whose example comments state values the reference solution does not produce
#: (a slip in the task text, or prose the reader cannot take literally): their example
#: runs as a smoke test only. tests/sandbox/test_eval.py finds both sets again from the references.
WRONG_STATED_VALUES = frozenset(
    {
        "llm-debug-missing-sqrt-d-embedding-scale",
        "llm-debug-unbiased-n-1-vs-biased-n-variance",
        "num-fix-off-by-one-in-back-sub",
        "num-fix-overflowing-softplus",
        "num-fix-underflowing-log-likelihood",
        "pyt-resolve-a-metaclass-conflict",
        "rwb-debug-a-scale-that-clips-outliers",
        "rwb-debug-a-scheduler-that-never-frees-finished-slots",
        "rwb-debug-kv-byte-accounting-gqa-factor-of-2",
        "rws-debug-a-half-coupled-head-prune",
        "rws-debug-an-unclamped-arccos-max-distance-selector",
        "sys-fix-row-parallel-missing-all-reduce",
    }
)


def visible_tests(task_id: str, task_md: str, starter: str) -> str | None:
    """The example code, with an assert of each value its comments state (to the
    digits shown) and of the class the starter's signature declares for each result
    (``-> list[...]``): a reader of the task would compare them, and a smoke run alone
    passes a wrong-but-quiet program."""
    code = example_code(task_md)
    if code is None or task_id in BROKEN_EXAMPLES:
        return None
    if task_id not in WRONG_STATED_VALUES:
        code = with_stated_values(code) or code
    return with_declared_types(code, starter) or code


def _fixtures(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    names = meta.get("fixtures") or []
    if not names:
        return {}
    import numpy as np  # only a handful of tasks ship fixtures

    return {Path(f).stem: np.load(path / "fixtures" / f, allow_pickle=False) for f in names}


def load() -> list[Problem]:
    problems = []
    for path in task_dirs():
        meta = json.loads((path / "meta.json").read_text())
        task_md = (path / "task.md").read_text()
        starter = (path / "starter.py").read_text()
        provides = meta.get("provides") or []
        tests = visible_tests(meta.get("id", path.name), task_md, starter)
        problems.append(
            Problem(
                benchmark=NAME,
                id=meta.get("id", path.name),
                prompt=PROMPT.format(task=task_md.strip()),
                entry_point=provides[0] if provides else "",
                initial_code=starter,
                visible_tests=tests,
                feedback=FEEDBACK if tests else "clean execution",
                hidden={
                    "check": (path / "check.py").read_text(),
                    "gates": meta.get("gates") or [],
                    "dir": str(path),
                },
                hidden_inputs={"__fixtures__": _fixtures(path, meta)} if meta.get("fixtures") else {},
            )
        )
    return problems


def hidden_run(problem: Problem) -> harness.HiddenRun:
    """``check.py`` (and the scorers it imports) as modules of the grader, which grades
    the candidate's module (importable as ``candidate``), then the gates."""
    scorers = package_dir("mlsys").joinpath("scorers.py").read_text()
    fixtures = "__fixtures__" if problem.hidden_inputs else "{}"
    check = "from check import grade\n" + _GATES.format(
        fixtures=fixtures, gates=harness.json_literal(problem.hidden["gates"])
    )
    return harness.HiddenRun(
        tests=harness.grader(
            check,
            modules={"mlsys": "", "mlsys.scorers": scorers, "check": problem.hidden["check"]},
            program_as="candidate",
        )
    )
