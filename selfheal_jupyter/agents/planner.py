"""The planner: task (+ input descriptions) → a short ordered list of concrete steps.

Why a plan: small models write better programs when the task is first broken into
steps, and a visible plan is something the user can read and edit before any code is
written (a plan the user gives is used as is and never reaches this module).
"""

from __future__ import annotations

import re
import threading
from typing import Callable

from ..inputs import format_inputs
from ..llm import ChatReply, LLMClient
from ..model import InputDescription, Plan
from .environment import environment_text

MAX_STEPS = 8

SYSTEM = """\
You are the planner of a coding agent. Break the user's task into a short plan that a \
programmer will follow to write ONE Python program.
Rules:
- 2 to 6 numbered steps, in order, one line each.
- Each step is a concrete action: which data to use, what to compute, what to print or plot.
- Use the given inputs by their names; they are already defined as Python variables.
- Do not write code. Reply with the numbered list only."""

_NUMBERED = re.compile(r"^\s*(?:\*\*)?(?:step\s*)?(\d{1,2})\s*[.):]\s*(?:\*\*)?\s*(.+)$", re.I)
_BULLET = re.compile(r"^\s*[-*•]\s+(.+)$")


def build_messages(
    prompt: str, inputs: list[InputDescription], libraries: tuple[str, ...] | None = None
) -> list[dict[str, str]]:
    parts = [f"Task:\n{prompt.strip()}"]
    if inputs:
        parts.append("Inputs (already defined as global variables):\n" + format_inputs(inputs))
    parts.append(environment_text(libraries))
    parts.append("Write the numbered plan.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _clean(step: str) -> str:
    step = step.strip().strip("*").strip()
    return re.sub(r"\s+", " ", step)


def parse_plan(text: str) -> list[str]:
    """The steps of a numbered (or, failing that, bulleted) list; [] when none."""
    text = re.sub(r"<think>.*?(</think>|\Z)", "", text or "", flags=re.S | re.I)
    text = re.sub(r"```.*?(```|\Z)", "", text, flags=re.S)  # a plan has no code
    numbered, bullets = [], []
    for line in text.splitlines():
        m = _NUMBERED.match(line)
        if m and _clean(m.group(2)):
            numbered.append(_clean(m.group(2)))
            continue
        b = _BULLET.match(line)
        if b and _clean(b.group(1)):
            bullets.append(_clean(b.group(1)))
    steps = numbered or bullets
    return steps[:MAX_STEPS]


class Planner:
    def __init__(self, llm: LLMClient, *, libraries: tuple[str, ...] | None = None) -> None:
        self.llm = llm
        self.libraries = libraries

    def plan(
        self,
        prompt: str,
        inputs: list[InputDescription],
        *,
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[Plan, ChatReply]:
        reply = self.llm.chat(
            build_messages(prompt, inputs, self.libraries), on_token=on_token, cancel=cancel
        )
        return Plan(steps=parse_plan(reply.text), source="planner"), reply
