"""The package's own exceptions.

Each one carries a message a user can act on (what happened, what to do). Fronts
(the magic, the CLI) show ``str(exc)`` as a short message, never a traceback of our
internals.
"""

from typing import Any


class SelfHealError(Exception):
    """Base of every error a user can meet."""


class BadInput(SelfHealError):
    """The user gave something we cannot use (empty task, tests that do not parse...)."""


class SandboxError(SelfHealError):
    """The sandbox cannot run code."""


class EngineUnavailable(SandboxError):
    """No Docker engine answers."""


class EngineLost(EngineUnavailable):
    """The Docker engine stopped answering while a run (or a build) was using it."""


class ImageMissing(SandboxError):
    """The sandbox image is absent or stale."""


class ImageBuildError(SandboxError):
    """The offline build of the sandbox image failed (the message names the step)."""


class LLMError(SelfHealError):
    """The model endpoint failed."""

    usage: Any = None
    """The tokens of a reply received in part before the request failed (a ``Usage``)."""


class LLMUnreachable(LLMError):
    pass


class LLMAuthError(LLMError):
    pass


class LLMRateLimited(LLMError):
    pass


class LLMTimeout(LLMError):
    pass


class ModelNotFound(LLMError):
    pass


class LocalModelUnavailable(LLMError):
    """The embedded model cannot be started (extra not installed, weights corrupt...)."""


class Cancelled(SelfHealError):
    """The user stopped the run (the cancel signal was set)."""


class ServiceError(SelfHealError):
    """The class service (``SelfHeal.service_url``) cannot be used: it, or the hub in
    front of it, is down, refused the token, or stopped during the run."""
