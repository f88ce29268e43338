"""A sandbox that answers with what the real one answered, for tests whose subject is the
loop's rounds, feedback and verdict rather than running code.

:class:`RecordingSandbox` wraps the real :class:`~selfheal_jupyter.sandbox.docker.DockerSandbox`
and keeps every call with the :class:`~selfheal_jupyter.model.ExecutionResult` the runner
produced; :class:`ReplayingSandbox` implements ``sandbox/base.py``'s protocol from those
records. The records live beside the tests as data (``tests/unit/recordings/<module>.json``,
one list of calls per test) and are written again by one command::

    make record     # pytest tests/unit --record-sandbox, against the real engine

A call is answered by the first unused record of the same call: the code, the tests, the
prelude, the user's asserts, the limits and the names of the inputs (not their pickled
bytes, which differ from one library version to the next). A call without a record fails
the test and says to record again: the loop now runs something the engine never ran.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from selfheal_jupyter.model import ExecutionResult, Limits
from selfheal_jupyter.result_json import read_result
from selfheal_jupyter.sandbox.base import Sandbox

RECORD_AGAIN = "record the runs again against the real engine: make record"


def call_of(
    code: str,
    inputs: Mapping[str, Any] | None,
    limits: Limits | None,
    tests: str | None,
    prelude: str | None,
    asserts: Sequence[tuple[int, int, str]] | None,
) -> dict[str, Any]:
    """What identifies a call, as JSON data."""
    return {
        "code": code,
        "inputs": sorted(inputs or {}),
        "limits": asdict(limits) if limits is not None else None,
        "tests": tests,
        "prelude": prelude,
        "asserts": [list(a) for a in asserts or ()],
    }


class RecordingSandbox:
    """The real sandbox, every call and its result kept (``calls``)."""

    def __init__(self, real: Sandbox) -> None:
        self.real = real
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """The real sandbox is the session's, started already."""

    def close(self) -> None:
        """The real sandbox outlives the test."""

    def execute(self, code: str, **kw: Any) -> ExecutionResult:
        result = self.real.execute(code, **kw)
        call = call_of(code, *(kw.get(k) for k in ("inputs", "limits", "tests", "prelude", "asserts")))
        with self._lock:
            self.calls.append({"call": call, "result": result.to_dict()})
        return result

    def __enter__(self) -> RecordingSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReplayingSandbox:
    """``sandbox/base.py``'s protocol answered from one test's records."""

    def __init__(self, records: list[dict[str, Any]], where: str) -> None:
        self.records = records
        self.where = where
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Nothing to start: no engine."""

    def close(self) -> None:
        """Nothing to release."""

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
        wanted = call_of(code, inputs, limits, tests, prelude, asserts)
        with self._lock:
            for i, record in enumerate(self.records):
                if i not in self._used and record["call"] == wanted:
                    self._used.add(i)
                    return read_result(record["result"])
        pytest.fail(
            f"{self.where} ran a program no recorded run answers ({RECORD_AGAIN}):\n{json.dumps(wanted, indent=1)}",
            pytrace=False,
        )

    def __enter__(self) -> ReplayingSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Recordings:
    """The records of one test module: ``{test name: [{"call": ..., "result": ...}]}``."""

    path: Path
    tests: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def of_module(cls, module: Path) -> Recordings:
        path = module.parent / "recordings" / f"{module.stem}.json"
        tests = json.loads(path.read_text()) if path.exists() else {}
        return cls(path, tests)

    def replay(self, test: str) -> ReplayingSandbox:
        if test not in self.tests:
            pytest.fail(f"{test} has no recorded runs in {self.path} ({RECORD_AGAIN})", pytrace=False)
        return ReplayingSandbox(self.tests[test], test)

    def keep(self, test: str, recording: RecordingSandbox) -> None:
        self.tests[test] = recording.calls
        self.changed = True

    def write(self) -> None:
        if self.changed:
            self.path.parent.mkdir(exist_ok=True)
            self.path.write_text(json.dumps(dict(sorted(self.tests.items())), indent=1, ensure_ascii=False) + "\n")
