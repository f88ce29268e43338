"""The developer: writes the complete program, then repairs it from QA feedback.

Why the prompt is rebuilt each time instead of replaying the conversation: a repair
needs the task, the plan, the program as it stands and what went wrong with it —
nothing older. Sending only that keeps the tokens per iteration flat instead of
growing with every round. What stays the same from round to round (the system prompt,
the task, the notebook's context, the note on the user's asserts) comes first: the
server's prompt cache then reads only the program and what follows it again.

Small models often resend the very program that just failed. When the reply repeats
an earlier candidate, the developer asks once more, at a higher temperature, saying
plainly that this program already failed; when the same failure comes back after a
fix, the prompt says the previous fix did not work and asks for another approach.

With ``repair_format="edit"`` a repair of a program asks for SEARCH/REPLACE blocks
instead of the whole program again; a reply that holds a whole program is taken as it
is. When the blocks do not apply, the proposal has no program and says why; the next
round asks for the whole program. That format — its texts, when it is asked for, how a
reply is read — is :mod:`~selfheal_jupyter.agents.edits`. With ``"functions"`` a repair
of a program with functions asks for only the functions it changes, put in place by
:mod:`~selfheal_jupyter.agents.function_edits`; "explain the bug first" is
:mod:`~selfheal_jupyter.agents.explain_first`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..codeblocks import extract_code
from ..llm import LLMClient, estimate_tokens
from ..model import InputDescription, Plan, Usage
from . import edits, function_edits
from .edits import EDIT_FAILED_FEEDBACK, EDIT_FAILED_NOTE, EDIT_INSTRUCTION
from .environment import environment_text
from .explain_first import note as diagnosis_note
from .inputs import INPUTS_HEADER, format_inputs

SYSTEM = """\
You are an expert Python developer. You write ONE complete, runnable Python program \
that solves the user's task.
{environment}
- The inputs listed in the task are already defined as global variables: use them \
directly, never load or redefine them.
Reply with exactly ONE fenced ```python code block containing the complete program \
(all imports included), and nothing after it."""

REPEAT_NOTE = (
    "IMPORTANT: your last reply repeated a program that was already run and failed. "
    "The previous fix did not work. Take a different approach and change the code."
)
SAME_FAILURE_NOTE = (
    "IMPORTANT: the previous fix did not work: the same failure happened again. "
    "Think about the cause again and try a different approach."
)
NO_CODE_FEEDBACK = (
    "Your reply contained no program. Reply with exactly one fenced ```python block holding the complete program."
)
NO_CODE_NOTE = (
    "Your previous reply contained no program. Reply with exactly one fenced ```python "
    "block holding the complete program."
)
SPEC_NOTE = (
    "The asserts and test functions in the user's program are their specification: keep "
    "every assert with its condition exactly as written (you may only correct a wrong "
    "message), never wrap them or a failing line in try/except, and never write the "
    "values they expect in place of what the program computes (filling a blank the user "
    "left for the answer is fine). Change the rest of the program so that they hold."
)
RESTART_NOTE = (
    "IMPORTANT: repairing the program did not work. Start over: write the program "
    "again from the task, with a different approach."
)
CHECKS_NOTE = (
    "The checks above marked GENERATED (written by QA from the task alone) may be wrong. For "
    "each failing one, either fix the program, or, if you are sure the check is wrong, say why "
    "in one sentence before the code block and keep the program's behaviour. Checks FROM YOUR "
    "DATA are computed from the user's own values: fix the program until its output shows them."
)
"""Why: a check from the user's data holds the verdict (:func:`~selfheal_jupyter.loop.verdict.hold_data_checks`),
so a program kept as it is after saying such a check is wrong never succeeds."""
WHOLE_INSTRUCTION = "Fix the program. Reply with ONE fenced ```python block holding the complete corrected program."
TRUNCATED_NOTE = (
    "Your previous reply was cut off because it was too long: write a shorter program without long comments."
)


def normalise(code: str) -> str:
    """Code compared for repeats: trailing spaces and blank lines ignored."""
    return "\n".join(ln.rstrip() for ln in code.strip().splitlines() if ln.strip())


@dataclass
class RepairContext:
    """What a repair round is told (and nothing else)."""

    code: str | None
    """The program as it stands (the last candidate that had code), or None."""
    feedback: str
    same_failure: bool = False
    no_code: bool = False
    truncated: bool = False
    diagnosis: str = ""
    """The model's own explanation of the bug (``SelfHeal.explain_first``, :mod:`~selfheal_jupyter.agents.explain_first`)."""
    soft_checks: bool = False
    """The feedback holds failing GENERATED checks (fix the program or say why they are wrong)."""
    edit_failure: str = ""
    """The last reply's SEARCH/REPLACE blocks did not apply (which block, why): this round
    asks for the whole program."""


REPLY_FLOOR_TOKENS = 512
REPLY_TOKENS_PER_PROGRAM_TOKEN = 4
"""A repair's reply may take ``max(REPLY_FLOOR_TOKENS, 4 × the program's tokens)`` (at most
``SelfHeal.max_tokens``): the program rewritten, with room for a sentence before it. A
reply past that has lost its program (a sampled reply that never closes its fence) and
would otherwise stream to ``max_tokens``; figures in docs/measurements.md (issue 46)."""


def reply_limit(repair: RepairContext | None) -> int | None:
    """The most tokens a reply to this turn may take (None: the client's ``max_tokens``).
    After a reply that was cut, none: the program a task needs may be longer than four
    times the one it starts from (a stub), and the same cap would cut every reply."""
    if repair is None or repair.code is None or repair.truncated:
        return None
    return max(REPLY_FLOOR_TOKENS, REPLY_TOKENS_PER_PROGRAM_TOKEN * estimate_tokens(repair.code))


@dataclass
class Proposal:
    """One developer turn: the program (or None), the reply and its cost."""

    code: str | None
    reply: str
    usage: Usage = field(default_factory=Usage)
    llm_s: float = 0.0
    finish_reason: str | None = None
    repeated: bool = False
    """True when the first reply repeated an earlier candidate and was asked again."""
    prompt_chars: int = 0
    edited: bool = False
    """``code`` is the repaired program with the reply's SEARCH/REPLACE blocks applied, or
    with the reply's functions in place of its own."""
    edit_failure: str = ""
    """The reply's SEARCH/REPLACE blocks did not apply (``code`` is None): which and why."""

    @property
    def no_program_feedback(self) -> str:
        """What the next round is told when this reply gave no program to run."""
        return EDIT_FAILED_FEEDBACK.format(failure=self.edit_failure) if self.edit_failure else NO_CODE_FEEDBACK


class Developer:
    def __init__(
        self,
        llm: LLMClient,
        *,
        retry_temperature: float,
        repair_format: str,
        libraries: tuple[str, ...] | None = None,
    ) -> None:
        self.llm = llm
        self.libraries = libraries
        self.retry_temperature = retry_temperature
        self.repair_format = repair_format
        """"whole": every reply is a whole program; "edit": repairs ask for SEARCH/REPLACE
        blocks; "functions": repairs ask for the functions they change."""

    def asks_for_edits(self, repair: RepairContext | None, restart: bool = False) -> bool:
        """This turn asks for SEARCH/REPLACE blocks (:func:`~selfheal_jupyter.agents.edits.asks_for_edits`)."""
        return repair is not None and edits.asks_for_edits(
            self.repair_format,
            repair.code,
            restart=restart,
            after_no_code=repair.no_code,
            after_failed_edits=bool(repair.edit_failure),
        )

    def asks_for_functions(self, repair: RepairContext | None, restart: bool = False) -> bool:
        """This turn asks for only the changed functions: a repair (not a start-over, not
        after a reply without code) of a program that has functions to name."""
        return (
            self.repair_format == "functions"
            and repair is not None
            and not restart
            and not repair.no_code
            and function_edits.has_functions(repair.code)
        )

    def instruction(self, repair: RepairContext, restart: bool) -> str:
        """The repair turn's last line: what the reply holds."""
        if self.asks_for_edits(repair, restart):
            return EDIT_INSTRUCTION
        if self.asks_for_functions(repair, restart):
            return function_edits.INSTRUCTION
        return WHOLE_INSTRUCTION

    def _copying(self, repair: RepairContext | None, restart: bool) -> Callable[[str], bool] | None:
        """For a turn asking for functions: true once the reply, after its functions,
        copies the program's own top-level code (:func:`~selfheal_jupyter.agents.function_edits.copied_from`)."""
        if repair is None or repair.code is None or not self.asks_for_functions(repair, restart):
            return None
        program = repair.code
        return lambda text: function_edits.copied_from(text, program) is not None

    def read(self, text: str, repair: RepairContext | None) -> tuple[str | None, bool, str]:
        """(program, put together from the reply's parts, why its edits did not apply).
        Blocks are read whenever edits are on, also from a turn that asked for the whole
        program: applied, they beat running a program made of conflict markers; so are
        functions, whose splice is the whole program when the reply held one."""
        program = repair.code if repair is not None else None
        if self.repair_format == "edit":
            return edits.read_reply(text, program)
        if self.repair_format == "functions" and program is not None:
            copied = function_edits.copied_from(text, program)
            spliced = function_edits.splice(program, text if copied is None else text[:copied])
            if spliced is not None:
                return spliced, True, ""
        return extract_code(text), False, ""

    # ------------------------------------------------------------------ prompts
    def build_messages(
        self,
        prompt: str,
        plan: Plan | None,
        inputs: list[InputDescription],
        tests: str | None,
        repair: RepairContext | None = None,
        *,
        extra_note: str = "",
        keep_spec: bool = False,
        context: str = "",
        restart: bool = False,
    ) -> list[dict[str, str]]:
        system = SYSTEM.format(environment=environment_text(self.libraries))
        parts = [f"Task:\n{prompt.strip() or 'Make the program below run correctly.'}"]
        if inputs:
            parts.append(INPUTS_HEADER + "\n" + format_inputs(inputs))
        if context:
            parts.append(context)
        if plan is not None and plan.steps:
            parts.append("Plan:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1)))
        if tests and tests.strip():
            parts.append(
                "After your program runs, these checks (written by the user, not "
                f"editable) run in the same namespace and must pass:\n```python\n"
                f"{tests.strip()}\n```"
            )
        if inputs:
            names = ", ".join(f"`{d.name}`" for d in inputs)
            parts.append(
                f"Remember: {names} already exist{'s' if len(inputs) == 1 else ''} when the "
                "program starts; never assign example data to "
                f"{'it' if len(inputs) == 1 else 'them'}."
            )
        if repair is None:
            if restart:
                parts.append(RESTART_NOTE)
            parts.append("Write the complete program.")
        else:
            if keep_spec:  # before the program: the same in every round, so the server reads it once
                parts.append(SPEC_NOTE)
            if repair.code is not None:
                parts.append(f"The current program:\n```python\n{repair.code.rstrip()}\n```")
            if repair.no_code:
                parts.append(NO_CODE_NOTE)
            if repair.feedback:
                parts.append(f"What happened when it ran:\n{repair.feedback.strip()}")
            if repair.edit_failure:
                parts.append(EDIT_FAILED_NOTE.format(failure=repair.edit_failure))
            if repair.soft_checks:
                parts.append(CHECKS_NOTE)
            if repair.diagnosis:
                parts.append(diagnosis_note(repair.diagnosis))
            if repair.truncated:
                parts.append(TRUNCATED_NOTE)
            if repair.same_failure:
                parts.append(SAME_FAILURE_NOTE)
            if restart:
                parts.append(RESTART_NOTE)
            parts.append(self.instruction(repair, restart))
        if extra_note:
            parts.append(extra_note)
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    # ------------------------------------------------------------------ turn
    def propose(
        self,
        prompt: str,
        plan: Plan | None,
        inputs: list[InputDescription],
        tests: str | None = None,
        repair: RepairContext | None = None,
        *,
        previous_codes: list[str] | tuple[str, ...] = (),
        keep_spec: bool = False,
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        context: str = "",
        restart: bool = False,
        temperature: float | None = None,
    ) -> Proposal:
        """Ask for a program; ask once more if it repeats one that already failed.

        ``restart``: start over (the repair context, if any, is the original program);
        ``temperature``: this call's sampling (default: the client's, or the retry
        temperature after the same failure)."""
        started = time.monotonic()
        if temperature is None and (restart or (repair and repair.same_failure)):
            temperature = self.retry_temperature
        messages = self.build_messages(
            prompt, plan, inputs, tests, repair, keep_spec=keep_spec, context=context, restart=restart
        )
        limit = reply_limit(repair)
        until = self._copying(repair, restart)
        reply = self.llm.chat(
            messages, on_token=on_token, cancel=cancel, temperature=temperature, max_tokens=limit, until=until
        )
        usage = reply.usage
        prompt_chars = sum(len(m["content"]) for m in messages)
        code, edited, failure = self.read(reply.text, repair)
        seen = {normalise(c) for c in previous_codes}
        repeated = code is not None and normalise(code) in seen
        if repeated:
            messages = self.build_messages(
                prompt,
                plan,
                inputs,
                tests,
                repair,
                extra_note=REPEAT_NOTE,
                keep_spec=keep_spec,
                context=context,
                restart=restart,
            )
            if on_token is not None:
                on_token("\n\n[the program repeated an earlier one; asking for another approach]\n\n")
            reply = self.llm.chat(
                messages,
                on_token=on_token,
                cancel=cancel,
                temperature=max(self.retry_temperature, temperature or 0.0),
                max_tokens=limit,
                until=until,
            )
            usage = usage + reply.usage
            prompt_chars += sum(len(m["content"]) for m in messages)
            again, again_edited, again_failure = self.read(reply.text, repair)
            if again is not None:
                code, edited, failure = again, again_edited, again_failure
        return Proposal(
            code=code,
            reply=reply.text,
            usage=usage,
            llm_s=time.monotonic() - started,
            finish_reason=reply.finish_reason,
            repeated=repeated,
            prompt_chars=prompt_chars,
            edited=edited,
            edit_failure=failure,
        )
