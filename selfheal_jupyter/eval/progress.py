"""The evaluation's progress bar: tqdm on stderr (one line per step when stderr is not a
terminal, so a log keeps every step)."""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO

from tqdm import tqdm

BAR_FORMAT = "{desc} {bar} {n_fmt}/{total_fmt} {percentage:3.0f}%{postfix} | {elapsed} elapsed, ETA {remaining}"


class Progress:
    """Counts finished jobs and passes; tqdm computes the rate and the ETA."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.done = 0
        self.passed = 0
        self._lock = threading.Lock()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._sink = None if self._tty else open(os.devnull, "w")  # noqa: SIM115 - closed in finish
        self.bar = tqdm(
            total=total,
            desc=label,
            unit="job",
            file=self.stream if self._tty else self._sink,
            bar_format=BAR_FORMAT,
            ascii=not self._tty,
            mininterval=0,
            dynamic_ncols=True,
        )
        self.bar.set_postfix_str("passed 0", refresh=False)

    def line(self, note: str = "") -> str:
        text = str(self.bar)
        return f"{text} | {note}" if note else text

    def start(self) -> None:
        self._log("starting")

    def advance(self, *, passed: bool = False, note: str = "") -> None:
        with self._lock:
            self.done += 1
            self.passed += int(passed)
            self.bar.set_postfix_str(f"passed {self.passed}", refresh=False)
            self.bar.update(1)
            self._log(note)

    def finish(self) -> None:
        self.bar.close()
        if self._sink is not None:
            self._sink.close()

    def _log(self, note: str) -> None:
        if self._tty:
            return  # tqdm redraws the bar in place
        self.stream.write(self.line(note) + "\n")
        self.stream.flush()
