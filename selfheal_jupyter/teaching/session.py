"""One student cell in teaching mode, across its edits: its current code's verified run
(kept here), the hints given, and the record the student may hold.

Why here and not in the notebook front: the class service (``selfheal service``) runs
the loop and builds the hints where the student cannot reach them. The one hint flow
(:mod:`selfheal_jupyter.runner.hints`), which the kernel's ``%%hint`` and the service
both run, uses it so::

    session = cells.open(cell_id, task, policy)   # by the cell's id (its edits keep it), else its code
    if session.needs_run(task):                   # a new cell, or the student edited it
        session.begin(task)
        examine(session, loop.run(task), loop)    # round 0, the fix search, the two runs compared
    hint = session.next_hint(writer)              # the next rung of the ladder
    record = session.record()                     # what may leave: the hints and round 0 only

A hint is built from :class:`~.facts.Facts` (no fix in them) and, when a writer is given,
its prose once :func:`~.prose.problems` found nothing wrong with it; the fix itself
(:class:`~.facts.HeldFix`) leaves only in level 3, when the policy reveals it.

**The ladder follows the student.** A session is the cell, not its exact code: after an
edit the next ``%%hint`` first says what the edit changed in the run
(:mod:`.edit`), then gives the next rung for the code as it is now. Each rung (where,
why, the fix) is given once per cell, whatever the edits; a version of the code with no
verified fix can get a "where" of its own, no more. So the count a policy limits
(``max_hints``) runs over every edit: an edit never starts the cell afresh.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..agents.hint_writer import HintAsk, HintWriter, marked, numbered
from ..errors import Cancelled, LLMError, SandboxError
from ..feedback import without_explanation
from ..model import Candidate, ExecutionResult, Hint, Iteration, Run, Task
from . import prose, small_fix, why
from .edit import what_changed
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
NOTHING = "Your cell runs and passes its checks: there is nothing to hint at."
SOLVED = "Solved: there is nothing more to hint at."
HIDDEN = "Your instructor keeps the fix hidden. Try a change of your own and run the cell again."
WITHHELD = (
    "teaching mode: this record holds your own run and the hints; the fix and the rounds that "
    "found it stay with the tool"
)
DROPPED = "dropped"
"""A hint's ``check`` when the writer's words were not shown: why not stays in the tool
(:attr:`HintSession.findings`), as it tells which of the student's guesses the fix has."""
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
    """Level 1: where it failed, where the fix starts, the error in plain words, and a
    next step on that line."""
    out = _where(facts, lines)
    if facts.changed_lines:
        first = lines(facts.changed_lines[0])
        out.append(f"Next step: work through line {first} by hand for the first input. What does it do there?")
    return out


def _where(facts: Facts, lines: Lines) -> list[str]:
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
    """Level 2: the student's value that the verified run does not have at the same place
    and a question on it (what kind of value the operation needs, or what it should be
    then); else the values at the failing statement and a question on the first. Then
    the kind of change each line needs (from the syntax trees, never the fix's text)."""
    differs = facts.differs
    if differs is not None:
        out = [why.said(differs, lines(differs.line))]
        ask = why.question(differs, facts.cell, facts.failing_line, facts.error_type, facts.error_message)
        if facts.failing_line and facts.failing_line != differs.line:
            out.append(f"It fails on line {lines(facts.failing_line)}: `{facts.failing_source}`. {ask}")
        else:
            out.append(ask)
    else:
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
        wrong=why.said(facts.differs, lines(facts.differs.line)) if facts.differs is not None else "",
    )


def cell_key(task: Task) -> str:
    """A cell's code and tests, whitespace aside (where the cell's lines are counted from
    is not part of it): a cell without an id is found by it. The service's log keeps it as
    the request's ``cell`` (code, NUL, tests)."""
    code = "\n".join(line.rstrip() for line in (task.initial_code or "").strip().splitlines())
    return f"{code}\0{(task.tests or '').strip()}"


def id_key(cell_id: str) -> str:
    """The key of a cell the front end named (JupyterLab's and VS Code's cell id): its
    edits keep it. No code key has the prefix (a code key holds a NUL, an id none)."""
    return f"id:{cell_id}"


class HintSession:
    """One student cell across its edits: its current code's verified run (kept here),
    its facts, and every hint given (the ladder goes on over edits)."""

    def __init__(self, cell: str, policy: Policy, *, line_offset: int = 0, key: str = "", tests: str = "") -> None:
        self.cell = cell
        self.policy = policy
        self.lines = Lines(line_offset)
        self.hints: list[Hint] = []
        self.facts = Facts(cell=cell)
        self.key = key or cell_key(Task(prompt="", initial_code=cell, tests=tests or None))
        """What the cell is known by (its id, else its code): the hints a policy limits count by it."""
        self.cell_id = ""
        """The id the front end gave the cell when it last asked ("" none): a kernel of a
        class sends it with the request, so the service's session follows the cell too."""
        self.codes = {cell_key(Task(prompt="", initial_code=cell, tests=tests or None))}
        """Every version's code key (a request without the id finds the cell by any of them)."""
        self.version_hints = 0
        """Hints given for the code as it is now."""
        self.change: list[str] = []
        """What the last edit changed in the run: said with the next hint, or the note."""
        self._run: Run | None = None
        self._held: HeldFix | None = None
        self._before: Run | None = None
        """The run of the code before the edit, until the new code's run is attached."""
        self.findings: list[str] = []
        """Why each hint's prose was dropped ("" none), in order: the checks' findings are
        about the fix (which guess of a name or an operator it has), so they stay with the
        tool — the service's log, the bench — and a hint says only ``dropped``."""
        self._finding = ""

    # ------------------------------------------------------------------ state
    def needs_run(self, task: Task) -> bool:
        """Whether ``task``'s code has no run here yet: the cell is new, or the student
        edited it since."""
        return self._run is None or cell_key(task) != cell_key(self._run.task)

    def begin(self, task: Task) -> None:
        """Move on to ``task``'s code (an edit keeps the hints given and the run before it,
        for what the edit changed) until its run is attached."""
        if not self.needs_run(task):
            return
        if self._run is not None:
            self._before = self._run
            self._run, self._held = None, None
            self.version_hints = 0
        self.cell = task.initial_code or ""
        self.facts = Facts(cell=self.cell)
        self.codes.add(cell_key(task))

    def attach(self, run: Run, found: why.Found | None = None, change: list[str] | None = None) -> None:
        """The loop's run of this cell (round 0 is the student's code), what its two runs
        show (:func:`~.why.find`) and what the edit before it changed."""
        self._run = run
        self.facts, self._held = facts_of(run)
        if found is not None and found.first is not None and self._held is not None:
            self.facts.differs = found.first
            pairs = tuple((d.name, v) for d, v in zip(found.differs, found.verified, strict=True))
            self._held = replace(self._held, verified_values=pairs)
        self.change = list(change or [])
        self._before = None

    def keep(self, run: Run) -> None:
        """Keep ``run`` in place of the attached one: the same run, held lighter (the
        service drops the task's copies), its facts as they were."""
        self._run = run

    @property
    def before(self) -> Run | None:
        """The run of the code before the student's edit (None: no edit is waiting)."""
        return self._before

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

    @property
    def rung(self) -> int:
        """The highest level given so far (0: none)."""
        return max((h.level for h in self.hints), default=0)

    def total(self) -> int:
        """How many hints this cell can get ("Hint N of M"): the rungs left of the ladder
        for a verified fix, one "where" for a version without one, all under the policy's
        ``max_hints``."""
        if not self.facts.failed and self.ran:
            left = 0  # nothing to hint at: the cell passes
        elif self.facts.verified:
            left = LEVELS - self.rung
        else:
            left = 0 if self.version_hints else 1
        total = len(self.hints) + max(0, left)
        return total if self.policy.max_hints is None else max(1, min(total, self.policy.max_hints))

    @property
    def more(self) -> bool:
        """Another hint can be given for this cell (policy's per-kernel counts aside)."""
        return self.ran and self.failed and len(self.hints) < self.total()

    @property
    def revealed(self) -> bool:
        """A hint showed the fix of the code as it is now (a fix shown for an earlier
        version reveals nothing of this one's: the student may put any code in the cell)."""
        return any(h.diff and h.cell == self.cell for h in self.hints)

    def take_note(self, *, spent: bool = False) -> str:
        """Why no hint is given now ("" when one may be), said with what the edit changed
        (once: it is forgotten here). ``spent``: another count (the service's log) says the
        cell's hints are used up."""
        if not self.failed:
            said = SOLVED if self.change else NOTHING
        elif not self.more or spent:
            total = self.total()
            said = f"That was the last hint for this cell ({total} of {total})."
        else:
            return ""
        change, self.change = self.change, []
        return " ".join([*change, said])

    # ------------------------------------------------------------------ hints
    def next_hint(self, writer: HintWriter | None = None, *, cancel: threading.Event | None = None) -> Hint:
        """The next rung's hint (the writer's prose only when it passed the checks), with
        what the student's edit changed when they edited since the last hint."""
        level = min(LEVELS, self.rung + 1) if self.facts.verified else 1
        self._finding = ""
        hint = self.compose(level, writer, cancel=cancel)
        self.findings.append(self._finding)
        if self.change:
            hint = replace(hint, change=" ".join(self.change))
            self.change = []
        self.hints.append(hint)
        self.version_hints += 1
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
        words, check, self._finding = self._prose(level, writer, cancel) if writer is not None else ("", "", "")
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

    def _prose(self, level: int, writer: HintWriter, cancel: threading.Event | None) -> tuple[str, str, str]:
        """The writer's words for ``level`` when nothing is wrong with them, else ""; the
        hint's ``check`` (``passed`` or ``dropped``); and why it was dropped (the tool's)."""
        try:
            text = writer.write(ask_of(level, self.facts, self.lines), cancel=cancel)
        except LLMError:
            return "", DROPPED, "the model could not be asked"
        found = prose.problems(text, facts=self.facts, held=self._held, line_offset=self.lines.offset)
        return ("", DROPPED, found[0]) if found else (text, "passed", "")

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


class CellLoop(Protocol):
    """What a session needs of the loop that ran its cell (``Loop`` is one)."""

    def recheck(self, run: Run, code: str, *, cancel: threading.Event | None = None) -> Any: ...

    def execute(
        self, run: Run, code: str, *, prelude: str = "", cancel: threading.Event | None = None
    ) -> ExecutionResult: ...


def examine(session: HintSession, run: Run, loop: CellLoop | None, cancel: threading.Event | None = None) -> Run:
    """Everything a session learns from a fresh run of its cell (the one hint flow,
    :func:`selfheal_jupyter.runner.hints.find`, calls it for a kernel and for the class
    service alike): the small-change search when the model's rounds verified nothing, the
    student's and the verified run's values compared (:mod:`.why`), and what the edit
    since the last run changed (:mod:`.edit`). Returns the run it attached. Without a
    ``loop`` (nothing can be run) the run is attached as it is; a sandbox that fails
    while the values are looked at costs the hint its comparison, nothing more."""
    if loop is not None and not run.verified and run.outcome != "error":
        tried = run
        run = small_fix.search(tried, lambda code: loop.recheck(tried, code, cancel=cancel), cancel=cancel)
    found, change = None, []
    if loop is not None:

        def execute(code: str, prelude: str) -> ExecutionResult:
            return loop.execute(run, code, prelude=prelude, cancel=cancel)

        facts, held = facts_of(run)
        before = session.before
        try:
            if held is not None and facts.failed:
                found = why.find(facts.cell, held.code, facts.changed_lines, facts.failing_line, execute)
            change = what_changed(before, run, session.lines, execute) if before is not None else []
        except (SandboxError, Cancelled):
            found = None
    if not change and session.before is not None:
        change = what_changed(session.before, run, session.lines)
    session.attach(run, found, change)
    return run


class Cells:
    """A student's cell sessions: found by the cell's id when the front end gives one (its
    edits keep it), else — or for an id not seen yet — by the code of any version, so a
    new id on old code is no new cell. The least recently asked go first past ``keep``."""

    def __init__(self, keep: int | None = None) -> None:
        self.keep = keep
        self.by_key: OrderedDict[str, HintSession] = OrderedDict()

    def find(self, cell_id: str, task: Task) -> HintSession | None:
        found = self.by_key.get(id_key(cell_id)) if cell_id else None
        if found is None:
            code = cell_key(task)
            found = next((s for s in reversed(self.by_key.values()) if code in s.codes), None)
        return found

    def open(self, cell_id: str, task: Task, policy: Policy, *, line_offset: int = 0) -> HintSession:
        """The cell's session (a new one when neither its id nor its code is known); its
        next hints count lines from ``line_offset``."""
        found = self.find(cell_id, task)
        if found is None:
            key = id_key(cell_id) if cell_id else cell_key(task)
            found = HintSession(task.initial_code or "", policy, key=key, tests=task.tests or "")
        self.by_key[found.key] = found
        self.by_key.move_to_end(found.key)
        if cell_id and id_key(cell_id) != found.key:
            old = id_key(found.cell_id) if found.cell_id else ""
            if old and old != found.key and self.by_key.get(old) is found:
                del self.by_key[old]  # a cell has one id at a time: the latest its front end gave
            self.by_key[id_key(cell_id)] = found  # the same cell under the id the front end gives it now
        while self.keep is not None and len({id(s) for s in self.by_key.values()}) > self.keep:
            oldest = next(iter(self.by_key.values()))
            for key in [k for k, s in self.by_key.items() if s is oldest]:
                del self.by_key[key]
        found.policy = policy
        found.lines = Lines(line_offset)
        found.cell_id = cell_id
        return found
