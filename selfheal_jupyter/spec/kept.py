"""What a repair must keep, as data: the :class:`Spec` read off the user's code.

Why a module of its own: :mod:`.guard` extracts it and :mod:`.rules` checks candidates
against it; both read these types, and neither imports the other's module for them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Expectation:
    """``subject == value`` read off an assert: what hard-coding would write in."""

    value: Any
    names: frozenset[str]
    """Variables the subject reads (not the functions it calls)."""
    functions: frozenset[str]
    """Functions the subject calls by name."""
    arguments: tuple[Any, ...]
    """Literal arguments of those calls (the asserted inputs)."""
    source: str
    argument_names: frozenset[str] = frozenset()
    """Names passed to those calls (``cart_total(cart)``): asserted inputs too, through
    the literal a program assigns them."""


@dataclass(frozen=True)
class SpecAssert:
    condition: str
    """The condition's AST key (positions and the message excluded)."""
    source: str
    line: int
    swallowed: bool = False
    """Already inside a swallowing ``try`` in the user's code (then not held against a candidate)."""
    statement: str = ""
    """The whole assert as the user wrote it (message included), for the checker."""
    top_level: bool = False
    """A statement of the module itself (not inside a function or a block)."""


@dataclass
class Spec:
    """What a candidate must keep, extracted from the user's original code (and tests)."""

    code: str
    asserts: list[SpecAssert] = field(default_factory=list)
    test_functions: list[str] = field(default_factory=list)
    test_calls: Counter = field(default_factory=Counter)
    test_sources: dict[str, str] = field(default_factory=dict)
    """``def`` source of each test function the checker can run itself (no parameters, no
    decorators), by name."""
    expectations: list[Expectation] = field(default_factory=list)
    failing: dict[str, str] = field(default_factory=dict)
    """AST key -> source of the statements that failed when the user's code ran."""
    parsed: bool = True
    """False when the user's code does not parse: asserts were read line by line."""
    source: str = ""
    """The user's code as it was parsed: blanks left for the answer (``x = ``, a body of
    comments only) filled with ``...`` (:func:`~selfheal_jupyter.spec.answer_blanks.parse_with_blanks`)."""

    @property
    def empty(self) -> bool:
        return not (self.asserts or self.test_functions or self.expectations or self.failing)

    @property
    def states_checks(self) -> bool:
        """The user wrote asserts, tests or an expectation: what the developer is told to keep
        (a cell with none of them is not told so: its ~80 tokens would say nothing of it)."""
        return bool(self.asserts or self.test_functions or self.expectations)
