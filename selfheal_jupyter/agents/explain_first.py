"""Explain the bug first (``SelfHeal.explain_first``, off by default): before a repair, the
model's own diagnosis of the failing program, no code; the repair prompt then carries it.

Kept as an option, not the default: no run has measured it against repairing directly
(docs/measurements.md has no figure for it). The loop reaches it through one call in its
writing step (:func:`wanted`, then :func:`explain`); the developer's prompt through
:attr:`~selfheal_jupyter.agents.developer.RepairContext.diagnosis` (:func:`note`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..llm import LLMClient
from ..model import Usage

EXPLAIN_SYSTEM = """You are an expert Python debugger. Explain why the program fails, before anyone fixes it.
Reply in at most 5 short sentences, no code: which line or function is wrong, what \
value it produces and what it should produce instead, and what the fix must change."""
MAX_DIAGNOSIS = 1200


class Failing(Protocol):
    """What a diagnosis reads of the repair context (:class:`~selfheal_jupyter.agents.developer.RepairContext`)."""

    code: str | None
    feedback: str
    no_code: bool


def wanted(repair: Failing | None, *, restarted: bool, soft_round: bool) -> bool:
    """A diagnosis helps a repair of a program that failed: not a start-over, not the soft
    round after a pass, not a turn after a reply without code."""
    return (
        not restarted
        and not soft_round
        and repair is not None
        and repair.code is not None
        and bool(repair.feedback)
        and not repair.no_code
    )


def explain(
    llm: LLMClient,
    prompt: str,
    repair: Failing,
    *,
    on_token: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[str, Usage, float]:
    """The model's diagnosis of the failing program, no code: (diagnosis, usage, seconds).
    Any code block in the reply is dropped."""
    started = time.monotonic()
    parts = [f"Task:\n{prompt.strip() or 'Make the program below run correctly.'}"]
    if repair.code is not None:
        parts.append(f"The program:\n```python\n{repair.code.rstrip()}\n```")
    parts.append(f"What happened when it ran:\n{repair.feedback.strip()}")
    parts.append("Explain the bug. No code.")
    reply = llm.chat(
        [{"role": "system", "content": EXPLAIN_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}],
        on_token=on_token,
        cancel=cancel,
    )
    text = re.sub(r"```.*?(```|\Z)", "", reply.text, flags=re.S)
    text = re.sub(r"<think>.*?(</think>|\Z)", "", text, flags=re.S | re.I).strip()
    return text[:MAX_DIAGNOSIS], reply.usage, time.monotonic() - started


def note(diagnosis: str) -> str:
    """The diagnosis as the repair prompt carries it."""
    return f"Diagnosis of the bug:\n{diagnosis.strip()}"
