"""What a candidate's trial decided: the verdict, and the rules of the user's spec a
candidate may break. Part of the data model (:mod:`~selfheal_jupyter.model` holds the rest
and names these too); plain dataclasses, no behaviour beyond small helpers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SpecRule = Literal[
    "assert_removed",
    "assert_changed",
    "assert_silenced",
    "test_removed",
    "failure_swallowed",
    "bare_except",
    "early_exit",
    "hard_coded",
    "assert_moved",
    "forced_comparison",
    "assert_outlived",
    "dynamic_binding",
    "data_added",
    "data_replaced",
    "data_ignored",
]
"""Which part of the user's spec a candidate broke (see :mod:`selfheal_jupyter.spec.guard`).

The first four change an assert or test itself; the rest make a failure invisible
(silencing) or pass by knowing the expected answer (hard-coding).
"""

ASSERT_RULES: frozenset[str] = frozenset({"assert_removed", "assert_changed", "assert_silenced", "test_removed"})
"""Rules whose repetition means the model believes an assert itself must change."""


RULE_TITLES: dict[str, str] = {
    "assert_removed": "an assert was deleted",
    "assert_changed": "an assert's condition was changed",
    "assert_silenced": "an assert was turned into a check that cannot fail",
    "test_removed": "a test was removed",
    "failure_swallowed": "a failure is swallowed by try/except",
    "bare_except": "`except: pass` hides errors",
    "early_exit": "the program exits early",
    "hard_coded": "an expected value is hard-coded",
    "assert_moved": "a top-level assert was moved into a block",
    "forced_comparison": "a class makes comparisons lie",
    "assert_outlived": "a name an assert checks is redefined after it",
    "dynamic_binding": "a name is bound where the code cannot be read (globals(), exec...)",
    "data_added": "made-up data is added to a notebook value",
    "data_replaced": "a notebook value is replaced by made-up data",
    "data_ignored": "the notebook's data is never read; a made-up table answers instead",
}
DATA_RULES: frozenset[str] = frozenset({"data_added", "data_replaced", "data_ignored"})
"""Rules about the notebook's data (not the user's asserts)."""
"""Each rule in a few words, as the panel and the feedback name it."""


@dataclass
class SpecViolation:
    """One way a candidate breaks the user's spec (their asserts, tests, test functions)."""

    rule: SpecRule
    message: str
    """What the candidate did, precisely (the user's statement and what became of it)."""
    fix: str
    """How to comply."""
    line: int | None = None
    """The candidate's line concerned, when there is one."""
    original: str = ""
    """The user's statement concerned (source), e.g. the assert's condition."""

    @property
    def title(self) -> str:
        """The rule in a few words."""
        return RULE_TITLES.get(self.rule, self.rule)

    @property
    def what(self) -> str:
        """What the candidate did, by kind: it changes the user's spec, or it does not use
        their notebook data as it is."""
        return "does not use your data as it is" if self.rule in DATA_RULES else "changes your spec"


Held = Literal["", "given", "unchanged", "same_behaviour", "data_checks"]
"""Why a program that passed its checks is still no success (see :attr:`Verdict.held`)."""


@dataclass
class Verdict:
    passed: bool
    reasons: list[str] = field(default_factory=list)
    tests_passed: int = 0
    tests_failed: int = 0
    spec_checked: bool = False
    """True when the candidate was compared against the user's spec (a task from user code)."""
    spec_violations: list[SpecViolation] = field(default_factory=list)
    """Why the candidate was rejected for changing the spec (empty: it kept it)."""
    held: Held = ""
    """Why a program that passed its checks is still no success, the task saying the given
    program is wrong: "given" (it is that program), "unchanged" (a candidate that left its
    code as it was), "same_behaviour" (a candidate that shows exactly what it showed,
    :mod:`selfheal_jupyter.spec.behaviour`); "data_checks" (its output contradicts a check
    derived from the notebook's data, whatever the task says); "" for every other verdict."""
    notebook_changes: list[str] = field(default_factory=list)
    """Notebook functions and classes (from other cells) that the program defines again
    with a different body: the fix changes those cells too (:mod:`~selfheal_jupyter.spec.notebook_data`)."""
    verified_by: list[str] = field(default_factory=list)
    """For a pass: what checked the program's output beyond its running without an error
    ("your tests", "your stated expectation", "your asserts", "checks from your data",
    "generated checks"); empty
    when it only runs, and for every verdict that did not pass. Decided with the rest of
    the verdict (:func:`selfheal_jupyter.loop.verdict.checked_by`)."""
    blind_checks: list[str] = field(default_factory=list)
    """For a pass, when the task says the given program is wrong and that program passed
    its checks too (round 0 held "given"): those of the kinds above it passed as well, so
    they cannot tell the fix from it and are not in :attr:`verified_by`
    (:func:`selfheal_jupyter.loop.verdict.with_verified_by`)."""
    changed_behaviour: bool = False
    """For such a pass: it showed other output or values on those checks than the given
    program did (the behaviour rule compared them) — the only sign that it changed what
    the task says is wrong, when nothing else verified it."""

    @property
    def spec_kept(self) -> bool | None:
        """None when there was no spec to keep."""
        return not self.spec_violations if self.spec_checked else None

    @property
    def why(self) -> list[str]:
        """Every reason in words, the broken spec rules included (``reasons`` holds the
        rest; ``spec_violations`` the rules, in full)."""
        return [*self.reasons, *(f"it {v.what} ({v.title}): {v.message}" for v in self.spec_violations)]

    @property
    def rejected_for(self) -> str:
        """Why the spec guard rejected it, in a few words ("" when it did not)."""
        if not self.spec_violations:
            return ""
        return self.spec_violations[0].what if len({v.what for v in self.spec_violations}) == 1 else "changes your spec"
