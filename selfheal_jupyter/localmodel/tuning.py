"""How the factory drives the embedded model's server (speculation, slots, prompt cache).

The loop's options for the embedded model are ``SelfHeal``'s own (each option's
``embedded`` tag in :mod:`~selfheal_jupyter.config`); here are only the server's knobs,
which are no user option. The figures behind each value are in ``docs/measurements.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import get_spec


@dataclass(frozen=True)
class LocalSettings:
    """How the embedded model's server is started."""

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
