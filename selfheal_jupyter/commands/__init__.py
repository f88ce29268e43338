"""The command groups of ``selfheal``; each module exposes ``register(subparsers)``."""

from __future__ import annotations

import argparse
import re
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


_OPTION = re.compile(r"`%config SelfHeal\.(\w+)(?: = ([^`]*))?`")


def for_terminal(text: str, flags: Mapping[str, str]) -> str:
    """A message written for the notebook (`` `%config SelfHeal.x` ``) as the user of a
    command writes the option: the command's own flag (``flags`` maps flag dest →
    option name, e.g. ``--llm-timeout``), else ``--SelfHeal.x=VALUE``."""
    dests = {option: dest for dest, option in flags.items()}

    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), (match.group(2) or "").strip().strip("'\"")
        dest = dests.get(name)
        if dest is not None:
            return f"`--{dest.replace('_', '-')}{' ' + value if value else ''}`"
        return f"`--SelfHeal.{name}={value or 'VALUE'}`"

    return _OPTION.sub(flag, text)
