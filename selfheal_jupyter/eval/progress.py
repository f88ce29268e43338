"""A progress bar with an ETA on stderr (one line per step when stderr is not a terminal)."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Counts finished jobs; the ETA is the mean time per job so far times what is left."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None,
                 width: int = 24) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.passed = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        per = (time.monotonic() - self.started) / self.done
        return per * (self.total - self.done)

    def line(self, note: str = "") -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        eta = self.eta_s()
        eta_text = "ETA --" if eta is None else f"ETA {format_duration(eta)}"
        elapsed = format_duration(time.monotonic() - self.started)
        text = (f"{self.label} [{bar}] {self.done}/{self.total} {frac:4.0%} "
                f"passed {self.passed} | {elapsed} elapsed, {eta_text}")
        return f"{text} | {note}" if note else text

    def start(self) -> None:
        self._write(self.line("starting"))

    def advance(self, *, passed: bool = False, note: str = "") -> None:
        with self._lock:
            self.done += 1
            self.passed += int(passed)
            self._write(self.line(note))

    def finish(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()

    def _write(self, text: str) -> None:
        if self._tty:
            self.stream.write("\r\x1b[2K" + text[:200])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
