"""The planner: task (+ input descriptions) → a short ordered list of concrete steps.

Why a plan: small models write better programs when the task is first broken into
steps, and a visible plan is something the user can read and edit before any code is
written (a plan the user gives is used as is and never reaches this module).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

from ..llm import ChatReply, LLMClient
from ..model import InputDescription, Plan
from .environment import environment_text
from .inputs import INPUTS_HEADER, format_inputs

MAX_STEPS = 8

SYSTEM = """\
You are the planner of a coding agent. Break the user's task into a short plan that a \
programmer will follow to write ONE Python program.
Rules:
- 2 to 6 numbered steps, in order, one line each.
- Each step is a concrete action: which data to use, what to compute, what to print or plot.
- Use the given inputs by their names: they already exist as Python variables holding \
the user's data. Never plan to create, load or define them, and no step for imports.
- Do not write code. Reply with the numbered list only."""

_NUMBERED = re.compile(r"^\s*(?:\*\*)?(?:step\s*)?(\d{1,2})\s*[.):]\s*(?:\*\*)?\s*(.+)$", re.I)
_BULLET = re.compile(r"^\s*[-*•]\s+(.+)$")


def build_messages(
    prompt: str,
    inputs: list[InputDescription],
    libraries: tuple[str, ...] | None = None,
    context: str = "",
) -> list[dict[str, str]]:
    parts = [f"Task:\n{prompt.strip()}"]
    if inputs:
        parts.append(INPUTS_HEADER + "\n" + format_inputs(inputs))
    if context:
        parts.append(context)
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


_IMPORT_STEP = re.compile(r"^(import|load|install)\b.*\b(librar(y|ies)|modules?|packages?)\b", re.I)
_CREATE_VERB = re.compile(r"\b(define|create|load|read|generate|make|initiali[sz]e|set up|construct|build)\b", re.I)
_WORK_VERB = re.compile(
    r"\b(comput\w*|calculat\w*|group\w*|sum\w*|plot\w*|print\w*|filter\w*|merg\w*|"
    r"sort\w*|count\w*|aggregat\w*|find\w*|add\w*|multipl\w*)\b",
    re.I,
)


def drop_harmful_steps(steps: list[str], input_names: list[str]) -> list[str]:
    """Remove steps that would mislead the developer.

    Small planners add "Import the libraries" (noise) and "Define the `df`
    DataFrame" — which makes the developer replace the user's data with made-up
    values. An input already exists, so a step whose only job is to create it goes.
    """
    kept = []
    for step in steps:
        if _IMPORT_STEP.search(step):
            continue
        mentions_input = any(re.search(rf"\b{re.escape(n)}\b", step) for n in input_names)
        if mentions_input and _CREATE_VERB.search(step) and not _WORK_VERB.search(step):
            continue
        kept.append(step)
    return kept


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
        context: str = "",
        data_names: Iterable[str] = (),
    ) -> tuple[Plan, ChatReply]:
        reply = self.llm.chat(
            build_messages(prompt, inputs, self.libraries, context),
            on_token=on_token,
            cancel=cancel,
        )
        names = [d.name for d in inputs] + list(data_names)
        steps = drop_harmful_steps(parse_plan(reply.text), names)
        return Plan(steps=steps, source="planner"), reply
