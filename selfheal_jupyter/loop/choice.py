"""Pick one of N sampled programs by execution (``SelfHeal.candidates``).

Order of preference: the verdict (the user's tests + a clean run + the spec), then
keeping the user's spec (a program that deleted a failing assert runs clean and would
otherwise win over one that kept it and still fails), then the number of the user's
tests passed, then a clean run, then CodeT's dual agreement on
QA's generated checks: samples are grouped by which checks they pass, and a sample's
score is (size of its group) × (checks it passes) — a program that many independent
samples agree with, on checks that many programs pass, is more likely right than one
that passes a check alone. With no generated checks, samples agree when their clean
runs printed the same output (execution-based agreement). Ties go to the earlier sample.

A round stops sampling at a program that :func:`settles` it: one that passed with the
user's spec kept, where no generated check or check from the data is there to agree on.
Only a later passing program whose output two samples share could be chosen over it, and
each sample is a whole model reply (docs/measurements.md, issue 46).
"""

from __future__ import annotations

from ..model import Sample
from .judge import Trial


def _behaviour(trial: Trial) -> tuple:
    if trial.checks:
        return tuple(t.passed for t in trial.checks)
    if trial.result is not None and trial.result.status == "ok":
        return ("stdout", trial.result.stdout)
    return ("failed", id(trial))


def agreement(trials: list[Trial]) -> list[int]:
    """CodeT's dual-agreement score of each trial (0 for one that produced no run)."""
    groups: dict[tuple, int] = {}
    for t in trials:
        if t.result is not None:
            groups[_behaviour(t)] = groups.get(_behaviour(t), 0) + 1
    scores = []
    for t in trials:
        if t.result is None:
            scores.append(0)
            continue
        weight = sum(c.passed for c in t.checks) if t.checks else (1 if t.result.status == "ok" else 0)
        scores.append(groups[_behaviour(t)] * weight)
    return scores


def settles(trial: Trial) -> bool:
    """No sample after this one needs writing: it passed, kept the spec, and has no checks
    for samples to agree on."""
    return trial.verdict.passed and not trial.verdict.spec_violations and not trial.checks


def choose(trials: list[Trial]) -> tuple[int, list[Sample]]:
    """The index of the chosen trial and every trial summarised as a :class:`Sample`."""
    scores = agreement(trials)

    def key(i: int) -> tuple:
        t = trials[i]
        clean = t.result is not None and t.result.status == "ok" and t.result.error is None
        ran = t.result is not None  # a program run beats none (no code, or a repeat not run again)
        return (t.verdict.passed, not t.verdict.spec_violations, ran, t.verdict.tests_passed, clean, scores[i], -i)

    best = max(range(len(trials)), key=key)
    samples = [
        Sample(
            code=t.code or "",
            status=t.result.status if t.result is not None else "none",
            passed=t.verdict.passed,
            tests_passed=t.verdict.tests_passed,
            checks_passed=sum(c.passed for c in t.checks),
            agreement=scores[i],
            chosen=i == best,
            fresh=t.fresh,
        )
        for i, t in enumerate(trials)
    ]
    return best, samples
