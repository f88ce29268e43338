"""The command groups of ``selfheal``; each module exposes ``register(subparsers)``."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..flags import given_options, option_flags

if TYPE_CHECKING:
    from ..config import SelfHeal


def trait_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--SelfHeal.<name>=<value>`` options given on the command line (cli.main
    puts them on ``args``); they win over a command's own flags."""
    return dict(getattr(args, "selfheal_traits", {}) or {})


def command_options(args: argparse.Namespace, flags: Iterable[str], **values: Any) -> dict[str, Any]:
    """The options one command was given: ``values``, then the command's own ``flags``
    (dests of :data:`~selfheal_jupyter.flags.OPTION_FLAGS`) that were given, then
    ``--SelfHeal.<name>=<value>``; checked by ``SelfHeal`` (a bad value is BadInput)."""
    options = {**values, **given_options(args, flags), **trait_overrides(args)}
    validated(options)
    return options


def command_settings(args: argparse.Namespace, flags: Iterable[str], **values: Any) -> SelfHeal:
    """``SelfHeal`` with :func:`command_options` over its defaults."""
    return validated(command_options(args, flags, **values))


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


def for_terminal(text: str, flags: Iterable[str]) -> str:
    """A message written for the notebook (`` `%config SelfHeal.x` ``) as the user of a
    command writes the option: the command's own flag (``flags``: its dests, e.g.
    ``--llm-timeout``), else ``--SelfHeal.x=VALUE``."""
    own: Mapping[str, str] = option_flags(flags)

    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), (match.group(2) or "").strip().strip("'\"")
        if name in own:
            return f"`{own[name]}{' ' + value if value else ''}`"
        return f"`--SelfHeal.{name}={value or 'VALUE'}`"

    return _OPTION.sub(flag, text)
