"""The command groups of ``selfheal``; each module exposes ``register(subparsers)``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..config import SelfHeal


def trait_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--SelfHeal.<name>=<value>`` options given on the command line (cli.main
    puts them on ``args``); they win over a command's own flags."""
    return dict(getattr(args, "selfheal_traits", {}) or {})


def command_settings(
    args: argparse.Namespace, flags: Mapping[str, str], **values: Any
) -> SelfHeal:
    """The options of one command: ``SelfHeal``'s defaults, then ``values``, then the
    command's own flags that were given (``flags`` maps flag dest → option name), then
    ``--SelfHeal.<name>=<value>``. Validated by ``SelfHeal``; a bad value is BadInput."""
    for dest, name in flags.items():
        given = getattr(args, dest, None)
        if given is not None:
            values[name] = given
    return validated({**values, **trait_overrides(args)})


def validated(values: Mapping[str, Any]) -> SelfHeal:
    """``SelfHeal(**values)``; a value it refuses is BadInput (its message, no traceback)."""
    from traitlets import TraitError

    from ..config import SelfHeal
    from ..errors import BadInput

    try:
        return SelfHeal(**values)
    except TraitError as exc:
        raise BadInput(str(exc)) from None
