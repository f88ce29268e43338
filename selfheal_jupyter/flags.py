"""The flags that set a ``SelfHeal`` option, declared once for every front.

``%%agent`` / ``%%heal`` (IPython's ``magic_arguments``), ``selfheal run``,
``selfheal eval`` and ``selfheal sandbox`` offer some of the same options under the same
flag. Each flag is declared here once — its name, the option it sets, how its value is
read and a short help — and each front names which ones it offers: the parser is built
from the declaration, the given values become options through it, and a message that
names an option (`` `%config SelfHeal.x` ``) is rewritten to the flag of the front that
shows it. Defaults are ``SelfHeal``'s (config.py), never written here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OptionFlag:
    """``--flag VALUE`` sets ``SelfHeal.<option>`` (``value``: a flag without a value,
    e.g. ``--no-plan``, sets the option to this)."""

    flag: str
    option: str
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    value: Any = None

    @property
    def dest(self) -> str:
        """The attribute argparse gives the parsed value."""
        return self.flag.lstrip("-").replace("-", "_")

    def argument(self, default: str | None = None) -> tuple[tuple[str], dict[str, Any]]:
        """The ``add_argument`` (or IPython ``argument``) call's arguments; the help names
        the option and its default, read from ``SelfHeal`` (``default``: what a front
        uses instead, in words)."""
        if self.value is not None:
            return (self.flag,), {"action": "store_true", "help": self.help}
        if default is None:
            from .config import SelfHeal

            value = SelfHeal.class_traits()[self.option].default_value
            default = f"SelfHeal.{self.option}" + (f" = {value!r}" if value not in ("", None) else "")
        kwargs: dict[str, Any] = {"help": f"{self.help} (default: {default})", "metavar": self.metavar}
        if self.type is not None:
            kwargs["type"] = self.type
        return (self.flag,), kwargs


OPTION_FLAGS: dict[str, OptionFlag] = {
    f.dest: f
    for f in (
        OptionFlag("--max-iterations", "max_iterations", "most developer → QA rounds", int, "N"),
        OptionFlag("--model", "model", "model name at the endpoint", metavar="NAME"),
        OptionFlag(
            "--base-url",
            "base_url",
            "OpenAI-compatible endpoint; none and no $OPENAI_BASE_URL: the embedded model",
            metavar="URL",
        ),
        OptionFlag("--timeout", "timeout_s", "wall-clock seconds one sandbox run may take", float, "S"),
        OptionFlag("--memory", "memory", "memory limit of the sandbox, e.g. 512m, 1g", metavar="SIZE"),
        OptionFlag(
            "--llm-timeout", "llm_timeout_s", "seconds one LLM request may wait, and a reply may stream", float, "S"
        ),
        OptionFlag("--image", "image", "sandbox image", metavar="REF"),
        OptionFlag("--runtime", "runtime", "Docker runtime of the sandbox, e.g. runsc (gVisor)", metavar="R"),
        OptionFlag("--sandbox-backend", "sandbox_backend", "where candidates run: docker or kubernetes", metavar="B"),
        OptionFlag("--kubeconfig", "kubeconfig", "kubeconfig of the kubernetes backend", metavar="FILE"),
        OptionFlag("--kubernetes-namespace", "kubernetes_namespace", "namespace of the sandbox pods", metavar="NS"),
        OptionFlag("--no-plan", "auto_plan", "skip the planner; write code straight away", value=False),
        OptionFlag("--quiet", "quiet", "show only the final summary", value=True),
    )
}


def select(names: Iterable[str]) -> list[OptionFlag]:
    """The flags a front offers, by dest (``"max_iterations"``, ``"no_plan"``)."""
    return [OPTION_FLAGS[name] for name in names]


def add_to_parser(parser: Any, names: Iterable[str], defaults: Mapping[str, str] | None = None) -> None:
    """Add the flags to an argparse parser (``defaults``: dest → the front's own default,
    in words, where it is not ``SelfHeal``'s)."""
    for f in select(names):
        args, kwargs = f.argument((defaults or {}).get(f.dest))
        parser.add_argument(*args, **kwargs)


def magic_arguments(names: Iterable[str]) -> list[Callable[[Any], Any]]:
    """IPython ``argument`` decorators for the flags, in the order shown in the help."""
    from IPython.core.magic_arguments import argument

    decorators: list[Callable[[Any], Any]] = []
    for f in select(names):
        args, kwargs = f.argument()
        decorators.append(argument(*args, **kwargs))
    return decorators


def given_options(args: Any, names: Iterable[str]) -> dict[str, Any]:
    """``{option: value}`` for the flags the user gave (absent or empty: not given)."""
    values: dict[str, Any] = {}
    for f in select(names):
        given = getattr(args, f.dest, None)
        if f.value is not None:
            if given:
                values[f.option] = f.value
        elif given is not None and given != "":
            values[f.option] = given
    return values


def option_flags(names: Iterable[str]) -> Mapping[str, str]:
    """``{option: flag}`` of the flags that take a value, for messages (``--llm-timeout``)."""
    return {f.option: f.flag for f in select(names) if f.value is None}
