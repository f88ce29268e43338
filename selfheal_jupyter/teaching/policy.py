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
controls their own kernel can still change this process's memory: for a class, the
service (``selfheal service``) holds the policy instead, where no student reaches it.

The same file holds the class's rules, which only the service applies (it knows the
student, their hub groups, the notebook and the time; :class:`ClassPolicy`): the keys
above are the class-wide default; ``quota`` (runs, hints, tokens per student per day);
``model`` (the model name the service asks its endpoint for; unset: the service's own);
``groups`` (a hub group: a course) and ``notebooks`` (a path glob: an assignment) map to
overrides of those keys (a key left out, or a quota's field left out, stays as it was),
applied in the file's order, groups first; ``windows`` (an
exam: ``start`` and ``end`` in the service's local time, optionally for some ``groups``
or ``notebooks``) set ``mode`` (default ``off``) while they last, last of all. In a
kernel without the service only the class-wide default applies.

Why a notebook rule may only narrow: the notebook's path is the student's word (their
kernel reports it, and they can name their notebook anything), while a student's hub
groups and the time are the service's own facts. So what a path selects (a ``notebooks``
rule, a window with ``notebooks``) can take away from what the student's groups allow,
never add to it: a file whose notebook rule gives more than the class-wide default is
refused, saying so, and at resolve time each of its keys only ever lowers the policy.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import SelfHealError

ENV_VAR = "SELFHEAL_POLICY"
DEFAULT_PATH = "/etc/selfheal/policy.json"
SOURCE = "your instructor's policy"
"""How every message names the policy file's rules (the rules that apply follow)."""

Mode = Literal["off", "hints", "full"]
MODES: tuple[Mode, ...] = ("off", "hints", "full")
Entry = Literal["agent", "heal", "hint", "autoheal", "run"]
HINT_ENTRIES = ("hint",)
"""The entry points that give hints only (what ``mode: hints`` leaves open)."""


class PolicyBlocked(SelfHealError):
    """The instructor's policy does not allow this (one line naming the policy)."""


@dataclass(frozen=True)
class Quota:
    """What one student may use per day (None: no limit), counted by the service."""

    runs: int | None = None
    hints: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class Policy:
    mode: Mode = "full"
    reveal_fix: bool = True
    max_hints: int | None = None
    """Hints per cell (None: no limit)."""
    max_runs: int | None = None
    """Runs of the agent per kernel, any entry point (None: no limit); the service, which
    cannot tell a student's kernels apart, counts them per student per day."""
    source: str = "no policy file"
    """Which rules it came from, in words named in every message ("your instructor's
    policy for cs101, the exam window “Midterm” until ..."): never a path on a server."""
    problem: str = ""
    """Why a named file could not be used (the policy is then ``off``)."""
    where: str = ""
    """The file it was read from ("" none): for the kernel's own messages and the
    instructor's page, never in the service's answer to a student."""
    quota: Quota = field(default_factory=Quota)
    """Per student per day (the service's)."""
    model: str | None = None
    """The model the service asks its endpoint for (None: the service's ``SelfHeal.model``)."""


@dataclass(frozen=True)
class Override:
    """What a group, a notebook glob or an exam window sets (None: kept as it was)."""

    mode: Mode | None = None
    reveal_fix: bool | None = None
    max_hints: int | None = None
    max_runs: int | None = None
    quota: Quota | None = None
    model: str | None = None

    def over(self, policy: Policy, why: str) -> Policy:
        values = {k: getattr(self, k) for k in _KEYS}
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return policy
        if self.quota is not None:  # a course's quota of runs keeps the class's quota of hints
            given["quota"] = Quota(
                **{
                    k: getattr(self.quota, k) if getattr(self.quota, k) is not None else getattr(policy.quota, k)
                    for k in ("runs", "hints", "tokens")
                }
            )
        return replace(policy, **given, source=qualified(policy.source, why))

    def narrow(self, policy: Policy, why: str) -> Policy:
        """As :meth:`over`, but each given key only where it is stricter than ``policy``
        (what the student's own word selects can take away, never give)."""
        quota = None
        if self.quota is not None:
            quota = Quota(*(_least(getattr(self.quota, k), getattr(policy.quota, k)) for k in _QUOTA_KEYS))
        return Override(
            mode=None if self.mode is None else min(self.mode, policy.mode, key=MODES.index),
            reveal_fix=None if self.reveal_fix is None else self.reveal_fix and policy.reveal_fix,
            max_hints=None if self.max_hints is None else _least(self.max_hints, policy.max_hints),
            max_runs=None if self.max_runs is None else _least(self.max_runs, policy.max_runs),
            quota=quota,
            model=self.model,  # a model the instructor chose for these notebooks gives no more access
        ).over(policy, why)

    def wider_than(self, policy: Policy) -> str:
        """The first key that gives more than ``policy`` (``""``: none does)."""
        if self.mode is not None and MODES.index(self.mode) > MODES.index(policy.mode):
            return f'"mode" {self.mode} (the whole class: {policy.mode})'
        if self.reveal_fix and not policy.reveal_fix:
            return '"reveal_fix" true (the whole class: false)'
        for key, ours, theirs in (
            ("max_hints", self.max_hints, policy.max_hints),
            ("max_runs", self.max_runs, policy.max_runs),
            *(
                (f"quota.{k}", getattr(self.quota, k), getattr(policy.quota, k))
                for k in (_QUOTA_KEYS if self.quota is not None else ())
            ),
        ):
            if ours is not None and _least(ours, theirs) != ours:
                return f'"{key}" {ours} (the whole class: {theirs})'
        return ""


def qualified(source: str, why: str) -> str:
    """``source`` with one more rule that applies: "your instructor's policy for cs101
    and notebooks hw1/*", then ", the exam window “Midterm” until ..."."""
    if why.startswith("the exam window"):
        return f"{source}, {why}"
    return f"{source} and {why}" if " for " in source else f"{source} for {why}"


def _least(a: int | None, b: int | None) -> int | None:
    """The stricter of two limits (None: no limit)."""
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True)
class Window:
    """An exam: ``mode`` (default off) from ``start`` until ``end``."""

    name: str
    start: datetime
    end: datetime
    mode: Mode = "off"
    groups: tuple[str, ...] = ()
    notebooks: tuple[str, ...] = ()

    def applies(self, groups: frozenset[str], notebook: str, now: datetime) -> bool:
        if not self.start <= now < self.end:
            return False
        if self.groups and not groups & set(self.groups):
            return False
        return not self.notebooks or any(fnmatch.fnmatch(notebook, g) for g in self.notebooks)


@dataclass(frozen=True)
class ClassPolicy:
    """The whole file: the class-wide default and the service's overrides."""

    default: Policy = field(default_factory=Policy)
    groups: tuple[tuple[str, Override], ...] = ()
    notebooks: tuple[tuple[str, Override], ...] = ()
    windows: tuple[Window, ...] = ()

    def resolve(self, groups: frozenset[str] | set[str], notebook: str, now: datetime) -> Policy:
        """The policy for a student in ``groups`` working in ``notebook`` at ``now``."""
        policy = self.default
        if policy.problem:
            return policy
        for name, override in self.groups:
            if name in groups:
                policy = override.over(policy, name)
        for glob, override in self.notebooks:  # the student's word: it only narrows
            if fnmatch.fnmatch(notebook, glob):
                policy = override.narrow(policy, f"notebooks {glob}")
        for window in self.windows:
            if window.applies(frozenset(groups), notebook, now):
                until = window.end.strftime("%Y-%m-%d %H:%M")
                switch = Override(mode=window.mode)
                why = f"the exam window “{window.name}” until {until}"
                policy = switch.narrow(policy, why) if window.notebooks else switch.over(policy, why)
        return policy


def _count(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'"{key}" must be a whole number ≥ 0, not {value!r}')
    return value


_KEYS = ("mode", "reveal_fix", "max_hints", "max_runs", "quota", "model")
_QUOTA_KEYS = ("runs", "hints", "tokens")


def _quota(data: object, where: str) -> Quota:
    if not isinstance(data, dict):
        raise ValueError(f'"{where}" must be an object with runs, hints, tokens')
    unknown = sorted(set(data) - {"runs", "hints", "tokens"})
    if unknown:
        raise ValueError(f'unknown key {unknown[0]!r} in "{where}"')
    return Quota(runs=_count(data, "runs"), hints=_count(data, "hints"), tokens=_count(data, "tokens"))


def _mode(data: dict[str, Any], default: Mode | None) -> Mode | None:
    mode = data.get("mode", default)
    if mode is not None and mode not in MODES:
        raise ValueError(f'"mode" must be one of off, hints, full, not {mode!r}')
    return mode


def _reveal(data: dict[str, Any], default: bool | None) -> bool | None:
    reveal = data.get("reveal_fix", default)
    if reveal is not None and not isinstance(reveal, bool):
        raise ValueError(f'"reveal_fix" must be true or false, not {reveal!r}')
    return reveal


def _model(data: dict[str, Any], where: str) -> str | None:
    model = data.get("model")
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip() or len(model) > 200 or not model.isprintable():
        raise ValueError(f'"model" in {where} must be a model name, not {model!r}')
    return model.strip()


def _override(data: object, where: str) -> Override:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be an object of {', '.join(_KEYS)}")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {where}")
    return Override(
        mode=_mode(data, None),
        reveal_fix=_reveal(data, None),
        max_hints=_count(data, "max_hints"),
        max_runs=_count(data, "max_runs"),
        quota=_quota(data["quota"], f"{where}.quota") if "quota" in data else None,
        model=_model(data, where),
    )


def _time(value: object, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a time such as 2026-12-01T09:00")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{where} {value!r} is not a time such as 2026-12-01T09:00") from None
    return moment.astimezone().replace(tzinfo=None) if moment.tzinfo else moment


def _strings(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'{where}."{key}" must be a list of names')
    return tuple(value)


def _window(data: object, index: int) -> Window:
    where = f"windows[{index}]"
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be an object with start and end")
    unknown = sorted(set(data) - {"name", "start", "end", "mode", "groups", "notebooks"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {where}")
    start, end = _time(data.get("start"), f"{where}.start"), _time(data.get("end"), f"{where}.end")
    if end <= start:
        raise ValueError(f"{where} ends before it starts")
    name = data.get("name", f"exam window {index + 1}")
    if not isinstance(name, str):
        raise ValueError(f"{where}.name must be text")
    return Window(
        name=name,
        start=start,
        end=end,
        mode=_mode(data, "off") or "off",
        groups=_strings(data, "groups", where),
        notebooks=_strings(data, "notebooks", where),
    )


def _overrides(data: dict[str, Any], key: str) -> tuple[tuple[str, Override], ...]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise ValueError(f'"{key}" must be an object mapping names to overrides')
    return tuple((str(name), _override(value, f'{key}["{name}"]')) for name, value in table.items())


def parse_class(data: object, *, source: str) -> ClassPolicy:
    """The whole policy a JSON object states; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("it must be a JSON object")
    unknown = sorted(set(data) - {*_KEYS, "groups", "notebooks", "windows"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    windows = data.get("windows", [])
    if not isinstance(windows, list):
        raise ValueError('"windows" must be a list')
    default = Policy(
        mode=_mode(data, "full") or "full",
        reveal_fix=bool(_reveal(data, True)),
        max_hints=_count(data, "max_hints"),
        max_runs=_count(data, "max_runs"),
        source=source,
        quota=_quota(data["quota"], "quota") if "quota" in data else Quota(),
        model=_model(data, "the policy"),
    )
    notebooks = _overrides(data, "notebooks")
    parsed = tuple(_window(w, i) for i, w in enumerate(windows))
    wider = [(f'notebooks["{glob}"]', override.wider_than(default)) for glob, override in notebooks]
    wider += [(f"windows[{i}]", Override(mode=w.mode).wider_than(default)) for i, w in enumerate(parsed) if w.notebooks]
    for where, what in wider:
        if what:
            raise ValueError(
                f"{where} gives more than the whole class: {what}. A notebook's path is what the "
                "student's kernel says, so a rule chosen by it may only narrow; give more to a "
                "course (a hub group) instead"
            )
    return ClassPolicy(default=default, groups=_overrides(data, "groups"), notebooks=notebooks, windows=parsed)


def parse(data: object, *, source: str) -> Policy:
    """The class-wide policy a JSON object states; ValueError naming what is wrong."""
    return parse_class(data, source=source).default


def read_class(path: str | None = None) -> ClassPolicy:
    """The whole policy in ``path`` (default: ``$SELFHEAL_POLICY``, else the default
    path); a file that was named but cannot be used closes everything, saying why."""
    named = path if path is not None else os.environ.get(ENV_VAR) or None
    where = named or DEFAULT_PATH
    source = SOURCE
    try:
        text = Path(where).read_text(encoding="utf-8")
    except FileNotFoundError:
        if named is None:
            return ClassPolicy()
        return ClassPolicy(Policy(mode="off", source=source, problem="the file does not exist", where=where))
    except (OSError, UnicodeDecodeError) as exc:
        return ClassPolicy(Policy(mode="off", source=source, problem=f"it cannot be read ({exc})", where=where))
    try:
        parsed = parse_class(json.loads(text), source=source)
    except ValueError as exc:  # json.JSONDecodeError is one
        return ClassPolicy(Policy(mode="off", source=source, problem=str(exc), where=where))
    return replace(parsed, default=replace(parsed.default, where=where))


def read(path: str | None = None) -> Policy:
    """The class-wide policy in ``path`` (default: ``$SELFHEAL_POLICY``, else the default path)."""
    return read_class(path).default


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
            where = f" ({policy.where})" if policy.where else ""
            raise PolicyBlocked(
                f"selfheal is off: {policy.source}{where} cannot be used ({policy.problem}). Ask your instructor."
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
