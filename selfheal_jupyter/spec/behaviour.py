"""What a program shows on its checks: the output it prints and the values its tests compute.

Why: when the task says the given program is wrong (``%%heal`` with a hint, a benchmark's
buggy starter, an exercise with TODOs) and that program passes its checks anyway, the
checks are too weak to see the bug. :func:`~selfheal_jupyter.loop.verdict.hold_known_wrong`
refuses the given program itself, and a candidate that leaves its code unchanged; a
candidate that changes the code but not one thing the checks can see — the same printed
output, the same figures and tables, the same value of every name the tests assign — is
no more evidence of a fix, and is refused too. When the given program shows nothing
(no output, no tests assigning names) there is nothing to compare, and no candidate is
held.

The values come from an ordinary second sandbox run: the tests, then one probe per name
they assign (``assert False, repr(name)``, the probes of :mod:`selfheal_jupyter.spec.probes`),
so nothing is traced or patched inside the candidate. Values are compared as their
reprs, exactly: a change that moves a float in its last digit counts as a change, so
that the rule holds only programs that compute the very same thing.

Where the checks cannot show the bug, a correct fix is held too; the run's best attempt
(:attr:`~selfheal_jupyter.model.Run.best_attempt`) then still hands it over. How often
each case occurs on the repair set: docs/measurements.md.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

from ..feedback import clip
from ..model import ExecutionResult
from .probes import probe_statement, probe_values

OBSERVED_CHARS = 4000
"""How much of each value's repr is compared (of a longer value, only its first
OBSERVED_CHARS characters)."""


@dataclass(frozen=True)
class Observation:
    """Everything the checks of one run could see."""

    stdout: str
    outputs: tuple[str, ...]
    """Each rich output as ``mime:sha256`` of its data."""
    values: tuple[tuple[str, str], ...]
    """(name, repr or "raises ...") for every name the tests assign, in order."""

    @property
    def empty(self) -> bool:
        return not (self.stdout.strip() or self.outputs or self.values)

    def summary(self, limit: int = 3) -> str:
        """A short line naming what was seen (for the feedback)."""
        parts = [f"{name} = {clip(' '.join(value.split()), 120)}" for name, value in self.values[:limit]]
        if self.stdout.strip():
            parts.append(f"it prints {clip(self.stdout.strip(), 120)!r}")
        if self.outputs:
            parts.append(f"{len(self.outputs)} figure(s)/table(s)")
        return "; ".join(parts)


def assigned_names(tests: str | None) -> list[str]:
    """The names the tests' top-level statements bind, in order (``out = f(x)``,
    ``a, b = ...``, ``for row in ...``)."""
    if not tests or not tests.strip():
        return []
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return []
    names: list[str] = []
    for stmt in tree.body:
        targets: list[ast.AST] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and node.id not in names:
                    names.append(node.id)
    return names


def observing_tests(tests: str | None) -> str:
    """The tests followed by a probe of every name they assign."""
    probes = [probe_statement(name, OBSERVED_CHARS) for name in assigned_names(tests)]
    return "\n".join([*([tests] if tests and tests.strip() else []), *probes])


def observation(result: ExecutionResult, tests: str | None) -> Observation | None:
    """What the run of :func:`observing_tests` showed; None when it did not run cleanly
    (a program that fails shows its failure, and is judged by that)."""
    if result.status != "ok" or result.error is not None:
        return None
    names = set(assigned_names(tests))
    values = tuple(
        (v.source, v.message if v.passed else f"raises {v.message}")
        for v in probe_values(result.tests)
        if v.source in names
    )
    outputs = tuple(f"{o.mime}:{hashlib.sha256(str(o.data).encode()).hexdigest()}" for o in result.outputs)
    return Observation(result.stdout, outputs, values)
