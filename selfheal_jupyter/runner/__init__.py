"""Where a run happens: one contract (:class:`~.base.Runner`: full run, hint, plan,
packages; events out, Stop in), two implementations — here (:mod:`.local`) or in the
class service (:mod:`.service`) — chosen in one place, :func:`runner_for`. Every magic,
the autoheal button, ``selfheal run`` and the service itself run through it; the fronts
wait with the :class:`~.pump.Pump`."""

from __future__ import annotations

from ..config import SelfHeal
from .base import HintTurn, Runner, note_kept
from .pump import AWAITING, BLOCKING, Pump, Wait, run_sync

__all__ = ["AWAITING", "BLOCKING", "HintTurn", "Pump", "Runner", "Wait", "note_kept", "run_sync", "runner_for"]


def runner_for(settings: SelfHeal) -> Runner:
    """The class service when ``SelfHeal.service_url`` is set (this process then needs no
    engine and no key), else the loop here. Raises ``ServiceError`` when the service is
    configured but this kernel has no hub token."""
    if settings.service_url:
        from .service import ServiceRunner

        return ServiceRunner(settings)
    from .local import LocalRunner

    return LocalRunner(settings)
