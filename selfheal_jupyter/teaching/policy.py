"""The instructor's policy: which of the agent's entry points a notebook may use.

Why a file and not a traitlet: ``%config`` is the student's; the policy is the
instructor's. It is read once per process, from the JSON file named by the
environment variable ``SELFHEAL_POLICY`` (default ``/etc/selfheal/policy.json``,
where a JupyterHub image or the instructor puts it), the first time any entry point
asks, and kept: changing the variable or the file afterwards changes nothing in this
kernel. No file at the default path means no policy (``full``). A file that was named
but cannot be read, or that says something unknown, closes every entry point and says
why: a broken policy must not fall open.

Every entry point (``%%agent``, ``%%heal``, ``%%hint``, the autoheal button,
``selfheal run``) asks :meth:`Gate.admit` before it starts anything. A student who
controls their own kernel can still change this process's memory; the README says what
the instructor's lever is then (the model endpoint and its key).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import SelfHealError

ENV_VAR = "SELFHEAL_POLICY"
DEFAULT_PATH = "/etc/selfheal/policy.json"

Mode = Literal["off", "hints", "full"]
MODES: tuple[Mode, ...] = ("off", "hints", "full")
Entry = Literal["agent", "heal", "hint", "autoheal", "run"]
HINT_ENTRIES = ("hint",)
"""The entry points that give hints only (what ``mode: hints`` leaves open)."""


class PolicyBlocked(SelfHealError):
    """The instructor's policy does not allow this (one line naming the policy)."""


@dataclass(frozen=True)
class Policy:
    mode: Mode = "full"
    reveal_fix: bool = True
    max_hints: int | None = None
    """Hints per cell (None: no limit)."""
    max_runs: int | None = None
    """Runs of the agent per kernel, any entry point (None: no limit)."""
    source: str = "no policy file"
    """Where it came from, named in every message."""
    problem: str = ""
    """Why a named file could not be used (the policy is then ``off``)."""


def _count(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'"{key}" must be a whole number ≥ 0, not {value!r}')
    return value


def parse(data: object, *, source: str) -> Policy:
    """The policy a JSON object states; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("it must be a JSON object")
    unknown = sorted(set(data) - {"mode", "reveal_fix", "max_hints", "max_runs"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    mode = data.get("mode", "full")
    if mode not in MODES:
        raise ValueError(f'"mode" must be one of off, hints, full, not {mode!r}')
    reveal = data.get("reveal_fix", True)
    if not isinstance(reveal, bool):
        raise ValueError(f'"reveal_fix" must be true or false, not {reveal!r}')
    return Policy(
        mode=mode,
        reveal_fix=reveal,
        max_hints=_count(data, "max_hints"),
        max_runs=_count(data, "max_runs"),
        source=source,
    )


def read(path: str | None = None) -> Policy:
    """The policy in ``path`` (default: ``$SELFHEAL_POLICY``, else the default path)."""
    named = path if path is not None else os.environ.get(ENV_VAR) or None
    where = named or DEFAULT_PATH
    source = f"the instructor's policy ({where})"
    try:
        text = Path(where).read_text(encoding="utf-8")
    except FileNotFoundError:
        if named is None:
            return Policy()
        return Policy(mode="off", source=source, problem="the file does not exist")
    except (OSError, UnicodeDecodeError) as exc:
        return Policy(mode="off", source=source, problem=f"it cannot be read ({exc})")
    try:
        return parse(json.loads(text), source=source)
    except ValueError as exc:  # json.JSONDecodeError is one
        return Policy(mode="off", source=source, problem=str(exc))


_lock = threading.Lock()
_current: Policy | None = None


def current() -> Policy:
    """The policy of this process, read on first use and then kept (see the module
    docstring: neither ``%config`` nor a later change of the variable reaches it)."""
    with _lock:
        return _read_once()


def _read_once() -> Policy:
    global _current
    if _current is None:
        _current = read()
    return _current


@dataclass
class Gate:
    """The policy plus what this kernel has used of it (runs; hints per cell)."""

    policy: Policy
    runs: int = 0
    hints: dict[str, int] = field(default_factory=dict)

    def admit(self, entry: Entry, *, run: bool = True) -> None:
        """Raise :class:`PolicyBlocked` unless ``entry`` may be used now; with ``run``
        (it starts the agent's loop) the run is counted against ``max_runs``."""
        policy = self.policy
        if policy.problem:
            raise PolicyBlocked(
                f"selfheal is off: {policy.source} cannot be used ({policy.problem}). Ask your instructor."
            )
        if policy.mode == "off":
            raise PolicyBlocked(f"selfheal is off in this notebook ({policy.source}).")
        if policy.mode == "hints" and entry not in HINT_ENTRIES:
            raise PolicyBlocked(f"Only hints are allowed here ({policy.source}): use %%hint on your cell.")
        if not run:
            return
        if policy.max_runs is not None and self.runs >= policy.max_runs:
            raise PolicyBlocked(
                f"You have used all {policy.max_runs} runs of the agent this kernel may make ({policy.source})."
            )
        self.runs += 1

    def hints_left(self, cell: str) -> int | None:
        """How many more hints ``cell`` may get (None: no limit)."""
        if self.policy.max_hints is None:
            return None
        return max(0, self.policy.max_hints - self.hints.get(cell, 0))

    def take_hint(self, cell: str) -> None:
        """Count one hint for ``cell``; raise :class:`PolicyBlocked` when none is left."""
        left = self.hints_left(cell)
        if left == 0:
            raise PolicyBlocked(
                f"You have had all {self.policy.max_hints} hints this cell may get "
                f"({self.policy.source}). Try a change of your own, then run it."
            )
        self.hints[cell] = self.hints.get(cell, 0) + 1


_gate: Gate | None = None


def kernel_gate() -> Gate:
    """The one gate of this process (``max_runs`` counts per kernel, not per load of
    the extension)."""
    global _gate
    with _lock:
        if _gate is None:
            _gate = Gate(policy=_read_once())
        return _gate
