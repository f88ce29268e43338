"""One student cell in teaching mode: its verified run (kept here), the hints given, and
the record the student may hold.

Why here and not in the notebook front: the class service (``selfheal service``) runs
the loop and builds the hints where the student cannot reach them, and calls this the
same way the kernel's ``%%hint`` does::

    session = HintSession(cell, policy, line_offset=1)
    session.attach(loop.run(task))          # the student's round 0, then the search for a fix
    hint = session.next_hint(writer)        # level 1, then 2, then 3
    record = session.record()               # what may leave: the hints and round 0 only

A hint is built from :class:`~.facts.Facts` (no fix in them) and, when a writer is given,
its prose once :func:`~.prose.problems` found nothing wrong with it; the fix itself
(:class:`~.facts.HeldFix`) leaves only in level 3, when the policy reveals it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from ..agents.hint_writer import HintAsk, HintWriter, marked, numbered
from ..errors import LLMError
from ..feedback import without_explanation
from ..model import Candidate, Hint, Iteration, Run, Task
from . import prose
from .facts import CHANGE_WORDS, LEVEL_TITLES, LEVELS, Facts, HeldFix, facts_of, plain_error
from .policy import Policy

NO_FIX = (
    "No fix could be verified by running it, so this is all that is certain: "
    "look at the line above and what the error says."
)
UNCHECKED = (
    "A change that runs was found, but nothing checked its result (your cell has no "
    "asserts and no --tests), so it is no verified fix and there are no more hints: add an "
    "assert that says what the right result is, then ask again."
)
BLIND = (
    "A change was found that passes your checks, but your cell as it is passes them too, so "
    "they cannot tell whether the change fixes what is wrong: it is no verified fix and there "
    "are no more hints. Add an assert that your cell fails and the right result passes, then ask again."
)
HIDDEN = "Your instructor keeps the fix hidden. Try a change of your own and run the cell again."
WITHHELD = (
    "teaching mode: this record holds your own run and the hints; the fix and the rounds that "
    "found it stay with the tool"
)
ENDED = "The run ended without a verified fix ({outcome}); what it said of its attempts stays with the tool."
"""A hints record's ``error``: the run's own message names the rounds' programs, their
errors and the tool's explanation of a failure (its stop and advice messages), so it
stays with the tool as they do."""


@dataclass(frozen=True)
class Lines:
    """Line numbers as the student sees them: the cell's own plus ``offset`` (1 when the
    cell's first line is the ``%%hint`` line)."""

    offset: int = 0

    def __call__(self, number: int) -> int:
        return number + self.offset

    def many(self, numbers: list[int]) -> str:
        shown = [str(self(n)) for n in numbers]
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def where_facts(facts: Facts, lines: Lines) -> list[str]:
    """Level 1: where it failed, where the fix starts, the error in plain words."""
    out: list[str] = []
    if facts.failing_line:
        out.append(f"It fails on line {lines(facts.failing_line)}: `{facts.failing_source}`.")
    out.append("What happened: " + plain_error(facts))
    changed = facts.changed_lines
    if not changed:
        return out
    many = len(changed) > 1
    if changed == [facts.failing_line]:
        out.append("The problem is on that line.")
        return out
    lead = "But the problem starts" if facts.failing_line else "The problem is"
    quoted = [(n, facts.line(n)) for n in changed if facts.line(n)]
    if len(quoted) == 1 and not many:
        n, source = quoted[0]
        out.append(f"{lead} on line {lines(n)}: `{source}`.")
    else:
        out.append(f"{lead} on line{'s' if many else ''} {lines.many(changed)}.")
    return out


def why_facts(facts: Facts, lines: Lines) -> list[str]:
    """Level 2: the values at the failing statement, a question on the first, and the
    kind of change each line needs (from the syntax trees, never the fix's text)."""
    out = [f"At that moment `{name}` is `{value}`." for name, value in facts.values[:4]]
    if facts.values:
        name, value = facts.values[0]
        out.append(f"Is `{value}` what you expected `{name}` to be there? Work it out by hand for this input.")
    for change in facts.changes[:3]:
        words = CHANGE_WORDS.get(change.kind, change.kind)
        if change.kind == "missing":
            out.append(f"Before line {lines(change.line)}: {words}.")
        elif change.kind in ("missing_after", "extra"):
            out.append(f"Line {lines(change.line)}: {words}.")
        else:
            out.append(f"What needs a change on line {lines(change.line)} is {words}.")
    return out


def ask_of(level: int, facts: Facts, lines: Lines) -> HintAsk:
    """What the writer is told for ``level``: built from the facts alone."""
    return HintAsk(
        level=level,
        cell=numbered(marked(facts.cell), lines(1)),
        error=plain_error(facts),
        failing_line=lines(facts.failing_line) if facts.failing_line else None,
        changed_lines=tuple(lines(n) for n in facts.changed_lines),
        change_kinds=tuple((lines(c.line), CHANGE_WORDS.get(c.kind, c.kind)) for c in facts.changes),
        values=tuple(facts.values),
    )


def cell_key(task: Task) -> str:
    """Hints continue while the code and its tests stay the same (whitespace aside; where
    the cell's lines are counted from is not part of it). The service's log keeps it as
    the request's ``cell`` (code, NUL, tests)."""
    code = "\n".join(line.rstrip() for line in (task.initial_code or "").strip().splitlines())
    return f"{code}\0{(task.tests or '').strip()}"


class HintSession:
    """One student cell: the verified run (kept here), its facts and the hints so far."""

    def __init__(self, cell: str, policy: Policy, *, line_offset: int = 0) -> None:
        self.cell = cell
        self.policy = policy
        self.lines = Lines(line_offset)
        self.hints: list[Hint] = []
        self.facts = Facts(cell=cell)
        self._run: Run | None = None
        self._held: HeldFix | None = None

    # ------------------------------------------------------------------ state
    def attach(self, run: Run) -> None:
        """The loop's run of this cell (round 0 is the student's code)."""
        self._run = run
        self.facts, self._held = facts_of(run)

    @property
    def run(self) -> Run | None:
        """The verified run itself (with the fix): for the service's own log, never for the student."""
        return self._run

    @property
    def ran(self) -> bool:
        return self._run is not None

    @property
    def failed(self) -> bool:
        """The student's own run failed (there is something to hint at)."""
        return self.facts.failed

    def total(self) -> int:
        """How many hints this cell can get ("Hint N of M")."""
        levels = LEVELS if self.facts.verified else 1
        return levels if self.policy.max_hints is None else max(1, min(levels, self.policy.max_hints))

    @property
    def more(self) -> bool:
        """Another hint can be given for this cell (policy's per-kernel counts aside)."""
        return self.ran and self.failed and len(self.hints) < self.total()

    @property
    def revealed(self) -> bool:
        return any(h.diff for h in self.hints)

    # ------------------------------------------------------------------ hints
    def next_hint(self, writer: HintWriter | None = None, *, cancel: threading.Event | None = None) -> Hint:
        """The next level's hint (the writer's prose only when it passed the checks)."""
        level = len(self.hints) + 1
        hint = self.compose(level, writer, cancel=cancel)
        self.hints.append(hint)
        return hint

    def compose(self, level: int, writer: HintWriter | None = None, *, cancel: threading.Event | None = None) -> Hint:
        facts, cell, lines = self.facts, self.cell, self.lines
        title = LEVEL_TITLES[level]
        if level == 1:
            said = where_facts(facts, lines)
            if not facts.verified:
                why = BLIND if facts.found_blind else UNCHECKED if facts.found_unchecked else NO_FIX
                return Hint(1, title, "\n".join([*said, why]), facts=said, cell=cell)
        elif level == 2:
            said = why_facts(facts, lines)
        else:
            if not self.policy.reveal_fix or self._held is None:
                return Hint(3, title, HIDDEN, cell=cell)
            return Hint(3, title, "The verified fix, as a diff to your cell:", cell=cell, diff=self._held.diff)
        words, check = self._prose(level, writer, cancel) if writer is not None else ("", "")
        text = "\n".join([*said, words] if words else said)
        return Hint(
            level,
            title,
            text or "(nothing more the tool can say for sure)",
            facts=said,
            prose=words,
            check=check,
            cell=cell,
        )

    def _prose(self, level: int, writer: HintWriter, cancel: threading.Event | None) -> tuple[str, str]:
        """The writer's words for ``level`` when nothing is wrong with them, else ""; and
        what the check found."""
        try:
            text = writer.write(ask_of(level, self.facts, self.lines), cancel=cancel)
        except LLMError:
            return "", "dropped: the model could not be asked"
        found = prose.problems(text, facts=self.facts, held=self._held, line_offset=self.lines.offset)
        return ("", f"dropped: {found[0]}") if found else (text, "passed")

    # ------------------------------------------------------------------ the record
    def record(self) -> Run:
        """What the student may hold (``agent_result``, exports): built from the hints
        and their own round 0 only, until level 3 revealed the fix (then the whole run)."""
        run = self._run
        if run is None:
            return Run(task=Task(prompt="", initial_code=self.cell), hints=list(self.hints), withheld=WITHHELD)
        if self.revealed:
            return replace(run, hints=list(self.hints))
        task = Task(
            prompt=run.task.prompt,
            tests=run.task.tests,
            language=run.task.language,
            initial_code=run.task.initial_code,
            given_is_wrong=run.task.given_is_wrong,
            stated=list(run.task.stated),
        )
        iterations = []
        first = run.iterations[0] if run.iterations else None
        if first is not None and first.index == 0:
            iterations.append(
                Iteration(
                    index=0,
                    candidate=Candidate(code=first.candidate.code, iteration=0),
                    result=first.result,
                    verdict=first.verdict,
                    feedback=without_explanation(first.feedback),  # it may name the fix
                    usage=first.usage,
                    timings=first.timings,
                    runtime_values=list(first.runtime_values),
                )
            )
        return Run(
            task=task,
            iterations=iterations,
            outcome=run.outcome,
            error=ENDED.format(outcome=run.outcome) if run.error else "",
            model=run.model,
            base_url=run.base_url,
            started_at=run.started_at,
            totals=run.totals,
            hints=list(self.hints),
            withheld=WITHHELD,
        )
