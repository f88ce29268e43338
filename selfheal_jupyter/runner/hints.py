"""The hint flow, written once: a student cell's run, then its next hint.

The kernel (``%%hint`` with a local loop) and the class service (for every student) go
through :func:`find` and :func:`next_turn`; a kernel of a class reaches them through the
service (:mod:`~selfheal_jupyter.runner.service`). What a hint says is teaching mode's
(:mod:`selfheal_jupyter.teaching`); here is only the order: the loop's run of the cell
as its code is now, what the session learns from it (the small-change search when its
rounds verified nothing, the two runs compared, what the student's edit changed), the
session's next rung under the policy, and the progress in words (nothing of a candidate).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..agents.hint_writer import HintWriter
from ..errors import Cancelled
from ..loop.events import ExecutionStarted, TokensStreamed, VerdictReady
from ..model import Run, Task
from ..teaching.session import HintSession, examine
from .base import Emit, HintTurn, Taken

RUNNING = "Running your cell in the sandbox…"
FINDING = "Finding a hint…"
WRITING = "Writing the hint…"


def words(event: Any) -> str | None:
    """A hint turn's progress as the student reads it (None: nothing to say), from the
    loop's events or the flow's own words."""
    if isinstance(event, str):
        return event
    if isinstance(event, ExecutionStarted) and event.iteration == 0:
        return RUNNING
    if isinstance(event, (ExecutionStarted, TokensStreamed)) and event.iteration > 0:
        return f"{FINDING} (trying an idea, attempt {event.iteration})"
    if isinstance(event, VerdictReady) and event.iteration.index == 0:
        return FINDING
    return None


def find(
    session: HintSession,
    loop: Any,
    task: Task,
    emit: Emit,
    cancel: threading.Event,
    *,
    keep: Callable[[Run], Run] = lambda run: run,
) -> str:
    """The cell's run as its code is now (its events to ``emit``), then what the session
    learns from it (:func:`~selfheal_jupyter.teaching.session.examine`: the search for a
    small change that passes when its rounds verified nothing, the student's and the
    verified run's values compared, what the student's edit changed); the session keeps
    ``keep(run)``. Returns why no fix was looked for ("" when one was); raises
    ``Cancelled`` when the run was stopped (nothing kept)."""
    session.begin(task)
    run = loop.run(task, on_event=emit, cancel=cancel)
    if run.outcome == "cancelled" or not run.iterations:
        raise Cancelled(f"No hint this time: {run.error or 'you stopped it.'} Run %%hint again to look again.")
    if not run.verified and run.outcome != "error":
        emit(f"{FINDING} (trying small changes to your code)")
    run = examine(session, run, loop, cancel)
    if cancel.is_set():
        raise Cancelled("No hint this time: you stopped it. Run %%hint again to look again.")
    session.keep(keep(run))
    return run.error if run.outcome == "error" else ""


def next_turn(
    session: HintSession,
    emit: Emit,
    cancel: threading.Event | None,
    *,
    llm: Any = None,
    given_before: int = 0,
    taken: Taken | None = None,
) -> HintTurn:
    """The session's next hint under its policy (``llm``: the hint writer's model when
    ``SelfHeal.hint_prose`` is on; ``given_before``: hints this student already had for
    the cell, as the class service's log counts them)."""
    total = session.total()
    note = session.take_note(spent=given_before >= total)
    if note:
        return HintTurn(session.hints, total, False, note, session.record() if session.failed else None)
    emit(WRITING)
    writer = HintWriter(llm) if llm is not None else None
    hint = session.next_hint(writer, cancel=cancel)
    if taken is not None:
        taken(hint)
    spent = writer.usage.prompt_tokens + writer.usage.completion_tokens if writer is not None else 0
    return HintTurn(session.hints, session.total(), session.more, "", session.record(), new=hint, tokens=spent)
