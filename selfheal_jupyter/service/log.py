"""The service's run log: one JSON line per request it served (a run or a hint), and
what each student used today, read back from it.

Why the quotas are counted from the log: it is the one record that outlives a restart
of the service, so a restart gives nobody a fresh day. The log holds what the student
saw (the hints word for word), never the fix unless the policy revealed it. An
instructor's quota reset is a line of its own (``"kind": "reset"``, with who made it):
the student's use of that day counts again from there.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "selfheal" / "service-log.jsonl"


RESET = "reset"
"""The ``kind`` of a quota reset's line; a request's line has no ``kind``."""


def is_request(entry: dict[str, Any]) -> bool:
    """A line for a request a student made (not an instructor's reset)."""
    return "kind" not in entry


@dataclass
class Usage:
    """One student's use on one day."""

    runs: int = 0
    hints: int = 0
    tokens: int = 0


@dataclass
class RunLog:
    """Append-only JSON lines, with today's use per student and hints per cell in memory."""

    path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _used: dict[tuple[str, str], Usage] = field(default_factory=dict, repr=False)
    _cell_hints: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _refused: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _read: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _read_to: int = field(default=0, repr=False)
    """The lines :meth:`entries` parsed so far, and where in the file it stopped."""

    def __post_init__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a crash
                    if isinstance(entry, dict):
                        self._count(entry)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def _count(self, entry: dict[str, Any]) -> None:
        user, day = str(entry.get("user", "")), str(entry.get("time", ""))[:10]
        if entry.get("kind") == RESET:
            self._used[(user, day)] = Usage()
            return
        if entry.get("outcome") == "refused":
            self._refused[(user, day)] = self._refused.get((user, day), 0) + 1
        used = self._used.setdefault((user, day), Usage())
        used.runs += int(entry.get("runs", 0) or 0)
        used.hints += len(entry.get("hints", []) or [])
        used.tokens += int(entry.get("tokens", 0) or 0)
        for name in ("cell", "session"):  # the code's key, and the cell's across its edits
            if entry.get("hints") and entry.get(name) and (name == "cell" or entry[name] != entry.get("cell")):
                key = (user, str(entry[name]))
                self._cell_hints[key] = self._cell_hints.get(key, 0) + len(entry["hints"])

    def write(self, entry: dict[str, Any]) -> None:
        """Append one request's line (``time`` is added) and count it."""
        entry = {"time": datetime.now().isoformat(timespec="seconds"), **entry}
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self._count(entry)

    def reset_today(self, user: str, by: str) -> None:
        """An instructor's reset of ``user``'s quota for today (logged with who made it)."""
        self.write({"kind": RESET, "user": user, "by": by})

    def used_today(self, user: str) -> Usage:
        with self._lock:
            found = self._used.get((user, datetime.now().date().isoformat()), Usage())
            return Usage(found.runs, found.hints, found.tokens)

    def refused_today(self, user: str) -> int:
        """Refused requests of ``user``'s logged today."""
        with self._lock:
            return self._refused.get((user, datetime.now().date().isoformat()), 0)

    def hints_for(self, user: str, cell: str) -> int:
        """Hints this student was given for this cell (any day), by its code's key or its
        session's (:func:`~selfheal_jupyter.teaching.session.id_key`)."""
        with self._lock:
            return self._cell_hints.get((user, cell), 0)

    def entries(self) -> list[dict[str, Any]]:
        """Every line, oldest first (the instructor's view). Only what was appended since
        the last call is read and parsed: a page view of a long term's log stays fast."""
        with self._lock:
            self._file.flush()
            with self.path.open("rb") as fh:
                if os.fstat(fh.fileno()).st_size < self._read_to:  # the file was replaced
                    self._read, self._read_to = [], 0
                fh.seek(self._read_to)
                data = fh.read()
            whole = data.rfind(b"\n") + 1  # a line still being written waits for the next call
            for line in data[:whole].splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash
                if isinstance(entry, dict):
                    self._read.append(entry)
            self._read_to += whole
            return list(self._read)

    def close(self) -> None:
        with self._lock:
            self._file.close()
