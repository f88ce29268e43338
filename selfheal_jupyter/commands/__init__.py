"""The command groups of ``selfheal``; each module exposes ``register(subparsers)``."""

from __future__ import annotations

import argparse
from typing import Any


def trait_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--SelfHeal.<name>=<value>`` options given on the command line (cli.main
    puts them on ``args``); they win over a command's own flags."""
    return dict(getattr(args, "selfheal_traits", {}) or {})
