"""Settings measured to work best with the embedded small models.

Why here: the factory applies them only when the endpoint is the embedded model and
only where the user kept the defaults, so a hosted model keeps the user's settings.

Measured with ``bench/local_tasks.py`` (10 fixed tasks: 4 writing, 6 repairs —
NameError, pandas KeyError, ZeroDivisionError, empty-list guard, TypeError, a
failing assert) through the real loop and sandbox, 1 thread, on a 2-core machine
shared with other work (load average 3–8, so seconds are pessimistic):
see :data:`EVIDENCE`. Conclusions:

- temperature 0.2, max_tokens 1024, retry temperature 0.8 pass everything with the
  1.5B model; no reply came near 1024 tokens, no prompt above 1,500 tokens.
- A stop sequence after the code block (``"\\n```\\n"``) gained nothing (9/10).
- Skipping the planner halves the tokens and the time at the same pass rate, and
  on repairs (``initial_code``) the plan even misled the model once (it invented a
  ``read_csv('data.csv')``). Hence ``plan_on_heal=False``; ``auto_plan`` stays on
  for writing tasks because the user is shown the plan.
- The 0.5B model passes fewer tasks and needs more rounds: it is the option for
  small machines (~0.7 GB), not the default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog import get_spec


@dataclass(frozen=True)
class LocalSettings:
    """What to send the embedded model, and how to drive the loop with it."""

    temperature: float = 0.2
    max_tokens: int = 1024
    retry_temperature: float = 0.8
    """Used after a repeated failure, so the model stops resending the same program."""
    stop: tuple[str, ...] = field(default_factory=tuple)
    plan_on_heal: bool = False
    """Whether to ask the planner when the task starts from the user's code."""
    # --- the server (see bench/local_model.py) ---------------------------------
    ngram_type: str = "ngram-simple"
    """What ``SelfHeal.local_speculation = "ngram"`` uses (a key of child.SPECULATION_TYPES)."""
    ngram_n: int = 0
    """Lookup n-gram size; 0: llama.cpp's default (12)."""
    ngram_m: int = 0
    """Most tokens drafted from one match; 0: llama.cpp's default (48)."""
    draft_model: str = "qwen2.5-coder-0.5b"
    """The model that drafts for ``local_speculation = "draft"``."""
    draft_max: int = 16
    parallel: int = 2
    """Slots: two kernels are served at once (one KV cache), and the planner's and
    the developer's prompts each keep their own cached prefix."""
    cache_reuse: int = 0
    """Reuse cached prompt chunks of at least this many tokens after the first change."""


EVIDENCE: dict[str, str] = {
    "qwen2.5-coder-1.5b/base": "10/10 passed; 1.6 iterations, 765 tokens per task; median 58 s",
    "qwen2.5-coder-1.5b/stop-after-fence": "9/10 (keyerror: plan-led read_csv); median 49 s",
    "qwen2.5-coder-1.5b/no-planner": "10/10 passed; 1.6 iterations, 421 tokens; median 25 s",
    "qwen2.5-coder-1.5b/no-planner (repeat, quieter machine)": "10/10; 418 tokens; median 14 s",
    "qwen2.5-coder-0.5b/base": "9/10 (wordcount failed); 2.3 iterations, 1734 tokens; median 32 s",
}


def recommended_settings(model: str = "qwen2.5-coder-1.5b") -> LocalSettings:
    """Settings for ``SelfHeal.local_model`` = ``model`` (key or alias)."""
    get_spec(model)  # an unknown name is the caller's error, said the usual way
    return LocalSettings()
