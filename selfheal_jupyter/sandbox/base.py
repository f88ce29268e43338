"""The sandbox contract: run code somewhere else and say what happened.

Backends implement :class:`Sandbox`; the loop only knows this protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..model import ExecutionResult, Limits


@runtime_checkable
class Sandbox(Protocol):
    def start(self) -> None:
        """Get ready to run (check the engine and image, warm the pool)."""

    def close(self) -> None:
        """Release everything (every container is removed)."""

    def execute(
        self,
        code: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        tests: str | None = None,
        cancel: threading.Event | None = None,
        prelude: str | None = None,
        asserts: Sequence[tuple[int, int, str]] | None = None,
    ) -> ExecutionResult:
        """Run ``code`` with the named ``inputs`` visible as globals.

        ``prelude``: code run first in the same namespace (the notebook's imports and
        definitions, file name ``<notebook>``), never part of the candidate: its frames
        appear with ``file == "<notebook>"``, line numbers stay the candidate's own.

        ``tests``: the user's test code, run after the candidate in its namespace, one
        top-level statement at a time, each reported in ``ExecutionResult.tests``.
        ``asserts``: the user's own checks, as ``(line, column, the user's code)`` for
        each top-level statement of ``code`` that is one of the user's asserts (or a call
        of their test function): there the checker runs the user's code instead of the
        program, on the program's values fetched as data (a lying ``__eq__`` cannot meet
        it); each is reported, first, in ``ExecutionResult.tests``.
        ``cancel``: when set during the run, the run is killed and the result is
        ``killed``. ``limits``: None = the sandbox's own. Never raises for anything the
        candidate does; raises
        :class:`~selfheal_jupyter.errors.SandboxError` when the sandbox itself fails.
        """

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...
