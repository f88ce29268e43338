"""Waiting for something the test cannot be told about: one polling loop for every test.

Where an event can be waited on (``threading.Event``, a message, a process exit),
tests wait on it; this is for state that can only be looked at (a container list,
``/proc``, a widget's value). The timeout is a bound for a stuck test, never a figure
asserted: make it generous.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    timeout: float,
    what: str | Callable[[], str],
    interval: float = 0.1,
) -> T:
    """Call ``check`` until it returns something true, and return that.

    After ``timeout`` seconds an AssertionError says what never happened (``what``, or
    what it returns then: a callable can describe the state it gave up in).
    ``interval`` is the pause between two looks; 0 when ``check`` itself blocks (reads
    a message with a timeout of its own).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
        if interval:
            time.sleep(interval)
