"""A round's writing step: the program(s) the developer writes, or the tool's own.

Round 1 asks for one greedy program; from round 2 on ``SelfHeal.candidates`` samples
are drawn (from the :data:`FRESH_FROM_SAMPLE`-th on, starting over instead of
repairing), each after an optional explanation of the bug (``SelfHeal.explain_first``),
until the caller says a sample settled the round.
A program identical to one already run is marked as a repeat (never run again). When
the last round left the tool's own edit (:attr:`~selfheal_jupyter.loop.rounds.Progress.quick_fix`),
that program is the round's and no model is asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..agents import explain_first
from ..agents.developer import Developer, Proposal, RepairContext
from ..agents.inputs import format_context
from ..agents.qa import strip_input_overwrites
from ..llm import LLMClient
from ..model import InputDescription, Task, Usage
from . import rounds
from .budget import LoopBudget
from .state import RoundSoFar, RunState, data_names

FRESH_FROM_SAMPLE = 3
"""From this sample of a repair round on (``SelfHeal.candidates`` ≥ 3), a sample starts
over from the task (for a heal: from the user's code) instead of repairing the last
program: asked to repair, a small model often copies the failing program, also at the
retry temperature (figures: docs/measurements.md)."""


@dataclass
class Written:
    """What a round's writing step produced: the programs, what they cost, and how the
    round began (a restart, a diagnosis, the repair context it wrote from)."""

    repair: RepairContext | None = None
    proposals: list[Proposal] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0
    diagnosis: str = ""
    restarted: bool = False
    quick_fix: bool = False
    """The round's program is the tool's own (no model call)."""
    answer: bool = False
    """...and it is the tool's program for the question, not an edit of the last one."""
    repeat_of: dict[int, int] = field(default_factory=dict)
    """Proposals (by position) that repeat an earlier program → that program's round."""

    def programs(self, index: int) -> list[tuple[int, str]]:
        """(round, program) of this round's proposals so far that will run (not repeats)."""
        return [(index, p.code) for i, p in enumerate(self.proposals) if p.code and i not in self.repeat_of]

    def add(self, used: Usage, secs: float, so_far: RoundSoFar) -> None:
        self.usage, self.llm_s = self.usage + used, self.llm_s + secs
        so_far.usage, so_far.llm_s = self.usage, self.llm_s

    def starts_over(self, k: int) -> bool:
        """Sample ``k`` (from 0) writes the program again rather than repairing it."""
        return not self.restarted and k + 1 >= FRESH_FROM_SAMPLE


class Writer:
    """Writes a round's programs (``candidates``: ``SelfHeal.candidates``;
    ``explain_first``: ``SelfHeal.explain_first``)."""

    def __init__(
        self, llm: LLMClient, developer: Developer, budget: LoopBudget, *, candidates: int, explain_first: bool
    ) -> None:
        self.llm, self.developer, self.budget = llm, developer, budget
        self.candidates = candidates
        self.explain_first = explain_first

    def samples(self, state: RunState, index: int) -> int:
        """How many programs round ``index`` writes at most. The first program is one
        greedy reply: most tasks pass there, and it is the single pass the eval compares
        against. Samples are spent once it failed; the tool's own edit is one program."""
        if state.progress.quick_fix is not None or index < 2:
            return 1
        return self.candidates

    def write(
        self,
        task: Task,
        inputs: list[InputDescription],
        state: RunState,
        index: int,
        *,
        keep_spec: bool,
        settled: Callable[[Written], bool] | None = None,
    ) -> Written:
        """The round's program(s): the developer's reply — one greedy program in round 1,
        up to ``candidates`` samples from round 2 on (from the third on, starting over
        instead of repairing); the tool's own program when the last round left one
        (:attr:`~selfheal_jupyter.loop.rounds.Progress.quick_fix`). ``keep_spec``: the
        user's code holds a spec a repair keeps (the developer is told so). ``settled``,
        called after each program: true when it needs no other sample."""
        progress = state.progress
        written = Written(repair=progress.repair)
        so_far = state.round
        assert so_far is not None
        # the tool's own edit asks no model: only the clock and the user's Stop hold it
        self.budget.check(state, before=f"iteration {index}", tokens=progress.quick_fix is None)
        if progress.quick_fix is not None:
            # The last failure's own explanation implied one edit: its program runs, no model.
            fixed, what = progress.quick_fix
            written.quick_fix = True
            written.answer = any(c.program == fixed for c in task.data_checks)
            written.proposals.append(Proposal(code=fixed, reply=what))
            so_far.code, so_far.reply = fixed, what
            if settled is not None:
                settled(written)  # judged like any program; it is the round's only one
            return written
        if progress.restart:
            written.repair, written.restarted = progress.origin, True
        repair = written.repair
        if (
            self.explain_first
            and repair is not None
            and explain_first.wanted(repair, restarted=written.restarted, soft_round=progress.soft_pass is not None)
        ):
            written.diagnosis, used, secs = explain_first.explain(
                self.llm,
                task.prompt,
                repair,
                on_token=functools.partial(state.emit.tokens, "developer", index),
                cancel=state.stop.event,
            )
            written.repair = replace(repair, diagnosis=written.diagnosis)
            written.add(used, secs, so_far)
            state.tokens += used.total_tokens
        sampled = self.samples(state, index)
        names = data_names(task)
        for k in range(sampled):
            fresh = written.starts_over(k)
            if k and (state.stop.event.is_set() or not self.budget.tokens_left(state)):
                break
            if k:
                state.emit.tokens("developer", index, f"\n\n[sample {k + 1} of {sampled}]\n\n")
            proposal = self.developer.propose(
                task.prompt,
                state.run.plan,
                inputs,
                task.tests,
                progress.origin if fresh else written.repair,
                previous_codes=[it.candidate.code for it in state.run.iterations if it.candidate.code],
                keep_spec=keep_spec,
                on_token=functools.partial(state.emit.tokens, "developer", index),
                cancel=state.stop.event,
                context=format_context(task.context, answers=task.initial_code is None),
                restart=written.restarted or fresh,
                temperature=self.developer.retry_temperature if k else None,
            )
            code = proposal.code
            if code is not None and names:
                code, _ = strip_input_overwrites(code, names)
            earlier = rounds.repeat_of(code, [*state.programs(), *written.programs(index)])
            if earlier is not None:
                # Never run an identical program twice: this one is recorded as a repeat.
                written.repeat_of[len(written.proposals)] = earlier
            written.proposals.append(replace(proposal, code=code))
            written.add(proposal.usage, proposal.llm_s, so_far)
            if so_far.code is None:
                so_far.code, so_far.reply = code, proposal.reply
            state.tokens += proposal.usage.total_tokens
            if settled is not None and settled(written):
                break
        return written
