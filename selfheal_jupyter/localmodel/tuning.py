"""Sampling settings measured to work best with the embedded small models.

Why here: the factory applies them only when the endpoint is the embedded model,
so a hosted model keeps the user's settings. Values come from the evaluation on
the fixed task set (see the measurements in the issue's closing note).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LocalSettings:
    """What to send the embedded model (per request)."""

    temperature: float = 0.2
    max_tokens: int = 768
    # later attempts after a repeated failure raise the temperature to escape a loop
    retry_temperature: float = 0.7
    stop: tuple[str, ...] = field(default_factory=tuple)


def recommended_settings(model: str = "qwen2.5-coder-1.5b") -> LocalSettings:
    """Settings for ``SelfHeal.local_model`` = ``model`` (key or alias)."""
    return LocalSettings()
