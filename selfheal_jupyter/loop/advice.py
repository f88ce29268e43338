"""What to do next when a run ends without a pass, from what the run found.

Why: "raise the time budget" is rarely the useful next step when a small model keeps
failing the same way; what the run learnt is. In order: the tool's own explanation of the
last failure it could explain (``Region`` is not a column of ``df``; ``region`` is), the
best attempt and the line it fails at, or — when the model never wrote a program — how
to ask again. A pure function of the record; the messages of a run that ends without a
pass end with it (when to stop is :mod:`~selfheal_jupyter.loop.rounds`'s).
"""

from __future__ import annotations

from ..model import Iteration, Run


def _explained(run: Run) -> Iteration | None:
    return next((it for it in reversed(run.iterations) if it.explanation and it.explanation.diagnosis), None)


def advise(run: Run) -> str:
    """One or two sentences: the most useful thing for the user to do now."""
    explained = _explained(run)
    best = run.best_attempt
    if explained is not None and explained.explanation is not None:
        e = explained.explanation
        where = f" (line {e.line}: `{e.source}`)" if e.line and e.source else ""
        said = " ".join(e.diagnosis[:2])
        who = "your cell" if explained.index == 0 else f"round {explained.index}"
        return f"Next step: {who} failed with {e.error}{where}. {said}"
    if best is not None and best.result is not None and best.result.error is not None:
        err = best.result.error
        line = f" at line {err.line}" if err.line else ""
        return (
            f"Next step: round {best.index} came closest; insert it and fix{line} "
            f"({err.type}: {err.message[:120]}), or add detail to the task."
        )
    if best is not None:
        return (
            f"Next step: round {best.index} came closest (it runs); insert it and compare what it prints "
            "with what you want, or state the expected result in the task (e.g. 'the total should be 42')."
        )
    if not any(it.candidate.code for it in run.iterations if it.index >= 1):
        return (
            "Next step: rephrase the task with the data it uses and the output you want "
            "(e.g. 'print one line per month'), or try a stronger model (`%config SelfHeal.model`)."
        )
    return "Next step: add detail to the task, or fix the last program by hand."
