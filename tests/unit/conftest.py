"""The unit lane's own fixture: ``recorded_sandbox``, the real runner's results replayed
(tests/recorded_sandbox.py), for the loop's tests whose subject is its rounds, feedback
and verdict. With ``--record-sandbox`` (``make record``) it is the session's real
sandbox, and what it answers is written to ``recordings/`` beside the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.recorded_sandbox import Recordings, RecordingSandbox


@pytest.fixture(scope="session")
def recordings(request: pytest.FixtureRequest) -> Iterator[dict[Path, Recordings]]:
    """Each module's records, loaded once; written at the end when recording."""
    found: dict[Path, Recordings] = {}
    yield found
    if request.config.getoption("--record-sandbox"):
        for module in found.values():
            module.write()


@pytest.fixture()
def recorded_sandbox(request: pytest.FixtureRequest, recordings: dict[Path, Recordings]) -> Iterator[object]:
    module = recordings.setdefault(request.path, Recordings.of_module(request.path))
    if request.config.getoption("--record-sandbox"):
        recording = RecordingSandbox(request.getfixturevalue("sandbox"))
        yield recording
        module.keep(request.node.name, recording)
    else:
        yield module.replay(request.node.name)
