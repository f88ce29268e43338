"""The hint writer: a teacher's words around the facts the tool computed.

It is shown the student's cell, the error, the lines the verified fix changes and the
fix itself (to know what the hint should lead to), and asked for a short hint that does
not give the fix. Its reply is never trusted on that: the front checks it mechanically
(``agents/hint_facts.leaks``), asks once more saying what leaked, and otherwise shows only
the facts.
"""

from __future__ import annotations

import threading

from ..llm import LLMClient
from ..model import Usage
from .hint_facts import Facts, plain_error

SYSTEM = """\
You are a patient programming teacher. A beginner's Python cell fails. You know the \
verified fix, but you must NOT give it: no code, no corrected line, no replacement \
expression. Write plain sentences only, at most three, for a beginner."""

LEVEL_ASK = {
    1: "Say in plain words what went wrong and on which line the problem starts "
    "(line {start}). Do not say how to change it.",
    2: "Name the concept at stake (for example integer division, an off-by-one range, a "
    "missing dictionary key, a string where a number was meant) and end with ONE question "
    "that nudges the student, using the runtime values (for example: what is `len(ordered) / 2` "
    "when there are 3 values?). Do not say how to change the code.",
}

AGAIN = (
    "Your previous hint contained the fix itself ({leaked}). Write it again without any "
    "code from the fix and without the corrected line."
)


def _numbered(code: str) -> str:
    return "\n".join(f"{i:>3} | {line}" for i, line in enumerate(code.splitlines(), 1))


def prompt(level: int, code: str, facts: Facts) -> str:
    start = facts.changed_lines[0] if facts.changed_lines else facts.failing_line
    values = "\n".join(f"- {name} = {value}" for name, value in facts.values[:6]) or "- (none)"
    return (
        f"The student's cell (line numbers on the left):\n{_numbered(code)}\n\n"
        f"Error: {plain_error(facts)}\n"
        f"Failing line: {facts.failing_line or 'none (a test fails)'}\n"
        f"Lines the verified fix changes: {', '.join(map(str, facts.changed_lines)) or 'none'}\n"
        f"Runtime values at the failing statement:\n{values}\n\n"
        f"The verified fix, for you only (never show it or any line of it):\n{facts.diff}\n\n"
        + LEVEL_ASK[level].format(start=start)
    )


class HintWriter:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm
        self.usage = Usage()

    def write(
        self,
        level: int,
        code: str,
        facts: Facts,
        *,
        leaked: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> str:
        """The model's hint text for ``level`` (1 or 2); ``leaked``: what the previous
        attempt gave away, said to the model."""
        ask = prompt(level, code, facts)
        if leaked:
            ask += "\n\n" + AGAIN.format(leaked="; ".join(leaked))
        reply = self.llm.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}], cancel=cancel)
        self.usage = self.usage + reply.usage
        return reply.text.strip()
