"""Settings for the embedded small models, applied by the factory only when the endpoint
is the embedded model and only where the user kept the default, so a hosted model keeps
the user's settings. The figures behind each value are in ``docs/measurements.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .catalog import get_spec


@dataclass(frozen=True)
class LocalSettings:
    """What to send the embedded model, and how to drive the loop with it."""

    options: Mapping[str, Any] = field(
        default_factory=lambda: {
            "plan_on_heal": False,
            "plan_min_words": 30,
            "candidates": 3,
            "llm_timeout_s": 600.0,
        }
    )
    """``SelfHeal`` options that differ for this model from their defaults (applied where
    the user kept the default): no planner on a heal (same pass rate, half the tokens) nor
    on a task shorter than 30 words (the same measurement: without it 10 of 10 passed in
    half the time), three samples per repair round (the loop beats its single pass where
    one did not), and 600 s for a reply to stream: on 2 busy cores it writes as slowly as
    2–3 tokens/s, so a whole 1,024-token reply can take minutes where a hosted model takes
    seconds."""
    # --- the server (bench/local_model.py) ------------------------------------
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
    cache_reuse: int = 32
    """Reuse cached prompt chunks of at least this many tokens after the first change
    (the unchanged parts of a program shown again in the next round)."""


def recommended_settings(model: str = "qwen2.5-coder-1.5b") -> LocalSettings:
    """Settings for ``SelfHeal.local_model`` = ``model`` (key or alias). Both embedded
    models get the same: only the 1.5B was measured, and nothing measured says the
    0.5B needs other values."""
    get_spec(model)  # an unknown name is the caller's error, said the usual way
    return LocalSettings()
