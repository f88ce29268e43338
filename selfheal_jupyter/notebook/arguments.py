"""Turn a magic's arguments into a Task: interpolation, inputs, tests, a given plan.

Kept apart from the magic class (as jupyter-ai does) so every rule is testable
without IPython. Each user mistake raises :class:`BadInput` with what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import BadInput
from ..flags import given_options
from ..model import Plan, Task
from ..spec.stated import stated_checks, with_stated

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}")
_CELL_REF = re.compile(r"^(?:In\[\s*(-?\d+)\s*\]|(-?\d+))$")
_STEP_PREFIX = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}`` / ``{name.attr}`` by the notebook value, as jupyter-ai does.

    ``{{`` and ``}}`` give literal braces. A name the notebook does not define, and
    anything else in braces (``{'a': 1}``, ``{x + 1}``), is left exactly as written.
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        head, *attrs = match.group(1).split(".")
        if head not in namespace:
            return token
        value = namespace[head]
        for attr in attrs:
            if not hasattr(value, attr):
                return token
            value = getattr(value, attr)
        return str(value)

    return _FIELD.sub(replace, text)


def split_names(spec: str | None) -> list[str]:
    """``"df, x"`` → ``["df", "x"]``; each must be a Python identifier."""
    if not spec:
        return []
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for name in names:
        if not _IDENT.match(name):
            raise BadInput(
                f"--inputs: {name!r} is not a variable name. Give notebook variable names "
                "separated by commas, e.g. --inputs df,threshold."
            )
    return names


def resolve_inputs(spec: str | None, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The notebook values named by ``--inputs`` (copied into the sandbox, never sent to the model)."""
    values = {}
    for name in split_names(spec):
        if name not in namespace:
            raise BadInput(
                f"--inputs: the notebook has no variable {name!r}. Define it in a cell above "
                "(and run that cell), or fix the spelling."
            )
        values[name] = namespace[name]
    return values


def resolve_tests(spec: str | None, namespace: Mapping[str, Any], raw_inputs: list[str]) -> str | None:
    """The user's assert code for ``--tests``.

    ``--tests NAME``: a notebook variable holding the code as a string.
    ``--tests In[3]`` or ``--tests 3``: the source of input cell 3 (as typed);
    negative numbers count back from the current cell (``-1`` = the cell above).
    """
    if not spec:
        return None
    spec = spec.strip()
    ref = _CELL_REF.match(spec)
    if ref:
        number = int(ref.group(1) or ref.group(2))
        # raw_inputs[0] is "" and the last entry is the cell running now.
        current = len(raw_inputs) - 1
        index = number if number > 0 else current + number
        if not 0 < index < current:
            raise BadInput(
                f"--tests {spec}: there is no input cell {number} yet. Use the number shown "
                "in the cell's prompt (In [n]), or a variable holding the asserts."
            )
        code = raw_inputs[index]
    elif _IDENT.match(spec):
        if spec not in namespace:
            raise BadInput(
                f"--tests {spec}: the notebook has no variable {spec!r}. Put your asserts in a "
                'string, e.g. checks = "assert f(2) == 4", or name a cell: --tests In[3].'
            )
        code = namespace[spec]
        if not isinstance(code, str):
            raise BadInput(
                f"--tests {spec}: {spec!r} is a {type(code).__name__}, not a string of test code. "
                'Give a string, e.g. checks = "assert f(2) == 4".'
            )
    else:
        raise BadInput(f"--tests {spec!r}: give a variable name holding assert code, or a cell as In[3] / 3.")
    if not code.strip():
        raise BadInput(f"--tests {spec}: the test code is empty. Write at least one assert.")
    try:
        compile(code, "<tests>", "exec")
    except SyntaxError as exc:
        raise BadInput(
            f"--tests {spec}: the test code does not parse (line {exc.lineno}: {exc.msg}). Fix it first."
        ) from None
    return code


def plan_from_value(value: Any, *, label: str = "--plan") -> Plan:
    """A Plan from what the user holds: a Plan, a list of steps, or text (one step a line)."""
    if isinstance(value, Plan):
        steps = list(value.steps)
    elif isinstance(value, str):
        steps = [_STEP_PREFIX.sub("", line).strip() for line in value.splitlines()]
    elif isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
        steps = [str(s).strip() for s in value]
    else:
        raise BadInput(
            f"{label}: expected a list of steps (strings), a text with one step per line, or a "
            f"Plan; got a {type(value).__name__}."
        )
    steps = [s for s in steps if s]
    if not steps:
        raise BadInput(f"{label}: the plan has no steps. Add at least one, or drop {label}.")
    return Plan(steps=steps, source="user")


def resolve_plan(spec: str | None, namespace: Mapping[str, Any]) -> Plan | None:
    if not spec:
        return None
    if spec not in namespace:
        raise BadInput(
            f"--plan {spec}: the notebook has no variable {spec!r}. Run %%agent --plan-only "
            "first (it stores the plan in agent_plan), edit it, then use --plan agent_plan."
        )
    return plan_from_value(namespace[spec], label=f"--plan {spec}")


def clean_task(text: str) -> str:
    """The task text, stripped; empty is a user error."""
    task = text.strip()
    if not task:
        raise BadInput(
            "The task is empty: write what you want in the cell body under %%agent, e.g.\n"
            "%%agent\nLoad the numbers 1..10 and print their mean."
        )
    return task


# ---------------------------------------------------------------- from parsed arguments to a job
def settings_for(args: Any, parent: Any, flags: Iterable[str], **extra: Any) -> Any:
    """``SelfHeal`` with the cell's options (``flags``: the magic's, from
    :mod:`selfheal_jupyter.flags`) over the configured ones (``SelfHeal`` validates them:
    a bad value is a :class:`BadInput` saying what to write)."""
    from traitlets import TraitError

    from ..config import SelfHeal

    overrides: dict[str, Any] = {**extra, **given_options(args, flags)}
    try:
        return SelfHeal(parent=parent, **overrides)
    except TraitError as exc:
        raise BadInput(str(exc)) from None


def agent_task(args: Any, cell: str, namespace: Mapping[str, Any], raw_inputs: list[str]) -> Task:
    """The task of an ``%%agent`` cell (the body with ``{name}`` replaced)."""
    if args.plan and args.plan_only:
        raise BadInput("--plan and --plan-only do not go together: plan first, then use it.")
    if args.plan_only and not args.plan_only.isidentifier():
        raise BadInput(f"--plan-only {args.plan_only!r}: give a variable name to store the plan in.")
    return Task(
        prompt=clean_task(interpolate(cell, namespace)),
        inputs=resolve_inputs(args.inputs, namespace),
        tests=resolve_tests(args.tests, namespace, raw_inputs),
        plan=resolve_plan(args.plan, namespace),
        origin="%%agent",
    )


def heal_task(args: Any, cell: str, namespace: Mapping[str, Any], raw_inputs: list[str]) -> Task:
    """The task of a ``%%heal`` cell: make the body (iteration 0) run / pass the tests."""
    if not cell.strip():
        raise BadInput("%%heal needs code in the cell body: the code to run and repair.")
    hint = interpolate(" ".join(args.hint), namespace).strip()
    tests = resolve_tests(args.tests, namespace, raw_inputs)
    goals = ["run without errors"]
    if tests:
        goals.append("pass the given tests")
    if hint:
        goals.append(hint)
    prompt = "Make this code " + ", ".join(goals[:-1]) + (" and " if len(goals) > 1 else "") + goals[-1] + "."
    stated = stated_checks(hint, cell)
    # A hint says what the cell does wrong or still lacks: running is then not enough.
    return Task(
        prompt=prompt,
        inputs=resolve_inputs(args.inputs, namespace),
        tests=with_stated(tests, stated),
        stated=stated,
        initial_code=cell,
        given_is_wrong=bool(hint),
        origin="%%heal",
    )
