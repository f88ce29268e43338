"""What the loop takes in: a task it can work on, and inputs that can travel to the sandbox.

Checked before any model call or container start, so a bad task costs nothing and its
message says what to change; the inputs are pickled once for the whole run.
"""

from __future__ import annotations

import io
import keyword
import pickle

from ..agents.qa import check_tests
from ..errors import BadInput
from ..model import Task
from ..nesting import LEVEL, nesting_note, too_deep
from ..sandbox.serialize import Pickled, PickleFile
from ..spec.stated import stated_checks, with_stated


def repair_task(
    prompt: str,
    code: str | None,
    tests: str | None,
    *,
    inputs: dict[str, object] | None = None,
    origin: str,
    max_code_bytes: int = 0,
) -> Task:
    """The task of a terminal or an agent (``selfheal run``, ``selfheal mcp``): ``prompt``
    alone is a task from scratch; with ``code`` (round 0) it says what that program does
    wrong or still lacks ("": only make it run and pass ``tests``), and what it states
    (``the total should be 42``) joins the tests. Raises :class:`BadInput`."""
    stated = stated_checks(prompt, code) if code is not None else []
    task = Task(
        prompt=prompt,
        inputs=dict(inputs or {}),
        tests=with_stated(tests, stated),
        stated=stated,
        initial_code=code,
        given_is_wrong=code is not None and bool(prompt),
        origin=origin,
    )
    validate_task(task, max_code_bytes=max_code_bytes)
    return task


def validate_task(task: Task, *, max_code_bytes: int = 0) -> None:
    """Raise :class:`BadInput` for a task the loop cannot work on (``max_code_bytes``:
    the largest program, task text or tests it takes; 0 = any)."""
    check_shape(task, max_code_bytes)
    if not (task.prompt and task.prompt.strip()) and not (task.initial_code and task.initial_code.strip()):
        raise BadInput(
            "The task is empty. Describe what the program should do, e.g. "
            "`%%agent` followed by 'plot the monthly mean of df.price', or "
            '`selfheal run "..."`.'
        )
    for name, value in task.inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise BadInput(
                f"Input name {name!r} is not a Python variable name; the program could not "
                "refer to it. Rename the input (e.g. df or sales_2024)."
            )
        check_serialisable(name, value)
    check_tests(task.tests)


def check_shape(task: Task, max_code_bytes: int) -> None:
    """Raise :class:`BadInput` for a task the tool cannot read: larger than
    ``max_code_bytes`` (:func:`check_sizes`), or code that nests deeper than the tool's
    readers go (:func:`check_nesting`). Every front asks this before it reads the code
    or counts a run: ``%%agent``, ``%%heal``, ``%%hint`` and the autoheal button (the
    magics' job), the class service (before its quotas), ``selfheal run`` and ``selfheal
    mcp`` (:func:`repair_task`), and the loop itself."""
    check_sizes(task, max_code_bytes)
    check_nesting(task)


def check_nesting(task: Task) -> None:
    """Raise :class:`BadInput` when the user's code, their tests or the notebook code the
    task carries nests deeper than :data:`~selfheal_jupyter.nesting.MAX_NESTING` levels:
    the pre-check, the spec guard and the diagnosis would meet Python's recursion limit."""
    prelude = task.context.prelude if task.context is not None else None
    for what, code in (
        ("Your code nests", task.initial_code),
        ("Your tests nest", task.tests),
        ("The notebook code your cell uses (from earlier cells) nests", prelude),
    ):
        found = too_deep(code) if code else None
        if found is not None:
            raise BadInput(
                f"{what} {nesting_note(found)} ({LEVEL}): selfheal cannot check a program that "
                "deep, so nothing was run. Split the expression into smaller steps (a few intermediate "
                "variables, or sum() over a list), then run again."
            )


def check_sizes(task: Task, max_code_bytes: int) -> None:
    """Raise :class:`BadInput` when the program, the task text or the tests is larger than
    ``max_code_bytes`` (0: any size)."""
    if max_code_bytes <= 0:
        return
    for what, text in (("program to repair", task.initial_code), ("task text", task.prompt), ("tests", task.tests)):
        size = len((text or "").encode("utf-8"))
        if size > max_code_bytes:
            raise BadInput(
                f"The {what} is {_size(size)}, more than a run takes "
                f"({_size(max_code_bytes)}): each request to the model would carry "
                f"about {size // 4:,} tokens of it. Give "
                "a smaller part (the function that fails, a few tests), or raise "
                "`%config SelfHeal.max_code_bytes`."
            )


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1_000_000 else f"{n / 1e3:.0f} KB" if n >= 1000 else f"{n} bytes"


class _Discard(io.RawIOBase):
    """A sink that only counts: pickling into it checks without keeping a copy."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b)


def check_serialisable(name: str, value: object) -> None:
    """Raise :class:`BadInput` now (before any model call) if ``value`` cannot go to the sandbox."""
    if isinstance(value, (PickleFile, Pickled)):  # already pickled
        return
    try:
        pickle.Pickler(_Discard(), protocol=5).dump(value)
    except Exception as exc:
        raise BadInput(
            f"The input {name!r} (a {type(value).__name__}) cannot be copied into the "
            f"sandbox: it cannot be pickled ({type(exc).__name__}: {exc}). Pass plain "
            "data instead (a DataFrame, array, list, dict, numbers or strings), e.g. "
            "list(a_generator), or a file's path instead of the open file."
        ) from None


def prepare_inputs(task: Task) -> dict[str, Pickled]:
    """Every value the sandbox gets, pickled once for the whole run (not per iteration):
    the ``--inputs`` and the notebook context's copies (pickled when it was resolved)."""
    prepared = {name: Pickled.of(name, value) for name, value in task.inputs.items()}
    if task.context is not None:
        for name, data in task.context.values.items():
            prepared.setdefault(name, Pickled(data))
    return prepared
