"""What a tool call may bring in, and what the instructor's policy lets it have.

Checked before any container or model is touched, each refusal one sentence that says
what to change. The arguments come from an agent, which may be steered by whatever it
read (prompt injection): text must be text, sizes are bounded by
``SelfHeal.max_code_bytes``, inputs are plain JSON of bounded depth under names a
program can use, and an argument the tool does not take is refused, not ignored.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Mapping
from typing import Any

from ..errors import BadInput
from ..teaching.policy import Entry, Gate, Policy, PolicyBlocked

MAX_INPUT_DEPTH = 32
"""How deep an input's lists and objects may nest: data a program reads is rarely deeper
than a few levels, and a bound keeps pickling (recursive) far from Python's limit."""

OPEN_UNDER_HINTS = ("run_code", "check_fix")
"""Tools that give no fix, open under a ``hints`` policy (``check_fix`` without its hand-over)."""


def check_text(what: str, text: str, max_bytes: int) -> None:
    """``text`` is a program's text (no NUL byte) of at most ``max_bytes`` bytes in UTF-8
    (0: any size). Bytes that are not UTF-8 never get here: the SDK's transports read
    them as U+FFFD, and refuse a JSON escape of a lone surrogate as a parse error."""
    if "\x00" in text:
        raise BadInput(f"The {what} holds a NUL byte (at character {text.index(chr(0))}): send Python source as text.")
    size = len(text.encode("utf-8", "surrogatepass"))
    if max_bytes and size > max_bytes:
        raise BadInput(
            f"The {what} is {size:,} bytes, more than this server takes ({max_bytes:,}, "
            "SelfHeal.max_code_bytes): send the part that fails, or a few tests."
        )


def check_inputs(inputs: Mapping[str, Any], max_bytes: int) -> None:
    """Each input under a name a program can use, plain JSON no deeper than
    :data:`MAX_INPUT_DEPTH`, all of them at most ``max_bytes`` as JSON (0: any size)."""
    for name in inputs:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise BadInput(f"The input name {name[:80]!r} is not a Python variable name: rename it (e.g. df, rows).")
    if _depth(inputs) > MAX_INPUT_DEPTH:
        raise BadInput(
            f"The inputs nest deeper than {MAX_INPUT_DEPTH} levels: send flatter data (e.g. a list of records)."
        )
    if max_bytes:
        size = len(json.dumps(inputs, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise BadInput(
                f"The inputs are {size:,} bytes as JSON, more than this server takes ({max_bytes:,}, "
                "SelfHeal.max_code_bytes): send a sample of the data."
            )


def _depth(value: Any) -> int:
    """How deep ``value`` nests (counted up to one past the bound), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_INPUT_DEPTH:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def check_arguments(tool: str, arguments: Mapping[str, Any], takes: Mapping[str, Any]) -> None:
    """Every argument is one the tool takes (its input schema's ``properties``)."""
    unknown = sorted(set(arguments) - set(takes))
    if unknown:
        names = ", ".join(repr(n[:60]) for n in unknown[:5])
        raise BadInput(f"{tool} takes no argument {names}: it takes {', '.join(takes)}.")


# --------------------------------------------------------------------------- policy
def admit(tool: str, policy: Policy, gate: Gate | None = None) -> None:
    """Raise :class:`PolicyBlocked` (one line naming the policy) unless ``policy`` lets
    ``tool`` be used: a policy that cannot be read, or ``off``, closes every tool;
    ``hints`` leaves open only :data:`OPEN_UNDER_HINTS`, as it leaves ``%%hint``. A
    ``heal`` counts against ``max_runs`` of ``gate`` (this process's, when given)."""
    gate = gate or Gate(policy=policy)
    entry: Entry = "hint" if tool in OPEN_UNDER_HINTS else "heal"  # "hint": an entry that hands over no fix
    try:
        gate.admit(entry, run=tool == "heal")
    except PolicyBlocked:
        if policy.mode != "hints" or policy.problem:
            raise
        raise PolicyBlocked(
            f"{tool} is not open here: only hints are allowed ({policy.source}), and {tool} "
            f"{'hands over a fix' if tool == 'heal' else 'explains the failure, which may name the fix'}. "
            f"{', '.join(OPEN_UNDER_HINTS)} stay open (check_fix without its hand-over)."
        ) from None


def withheld(policy: Policy) -> str:
    """Why ``check_fix`` hands over no fix under ``policy`` ("": it may)."""
    if policy.mode == "full":
        return ""
    return f"The fix is not handed over: only hints are allowed ({policy.source}); the verdict stands."
