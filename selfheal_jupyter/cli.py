"""``selfheal``: the terminal front.

Each command group lives in ``selfheal_jupyter/commands/<group>.py`` and exposes
``register(subparsers)``; this module only assembles them and turns the package's
own errors into a short message and exit code 2. Every command accepts any option of
``SelfHeal`` as ``--SelfHeal.<name>=<value>`` (Jupyter's ``--Class.trait=value``),
e.g. ``selfheal run "..." --SelfHeal.local_speculation=off``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys

from .commands import for_terminal
from .config import split_trait_args
from .errors import SelfHealError
from .render.terminal import printable

COMMAND_MODULES = {
    "sandbox": "sandbox",
    "run": "run",
    "model": "embedded_model",
    "kernel": "kernel",
    "eval": "eval",
    "service": "service",
    "mcp": "mcp",
}
"""Each `selfheal COMMAND` and the module of :mod:`selfheal_jupyter.commands` that registers it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="selfheal",
        description="Self-healing coding agent: plan, write, run in a Docker sandbox, repair.",
        epilog="Every command also takes any SelfHeal option as --SelfHeal.<name>=<value> "
        "(e.g. --SelfHeal.local_speculation=off, --SelfHeal.local_threads=2); it wins over "
        "the command's own flag for the same option.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES.values():
        module = importlib.import_module(f"selfheal_jupyter.commands.{module_name}")
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        rest, traits = split_trait_args(sys.argv[1:] if argv is None else list(argv))
    except SelfHealError as exc:
        print(f"selfheal: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(rest)
    args.selfheal_traits = traits
    try:
        return int(args.handler(args) or 0)
    except SelfHealError as exc:
        print(printable(f"selfheal: {for_terminal(str(exc), getattr(args, 'flags', {}))}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("selfheal: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return reader_gone()


SIGPIPE_STATUS = 128 + signal.SIGPIPE
"""What a shell reports for a tool ended by a closed pipe (``cat big | head``: 141)."""


def reader_gone() -> int:
    """The reader of stdout closed it (``| head``, ``less`` quit): end quietly, as Unix
    tools do. Point stdout at /dev/null so the interpreter's last flush does not print
    a second error."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
