"""The service's run log: one JSON line per request it served (a run or a hint), and
what each student used today, read back from it.

Why the quotas are counted from the log: it is the one record that outlives a restart
of the service, so a restart gives nobody a fresh day. The log holds what the student
saw (the hints word for word), never the fix unless the policy revealed it.
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
        used = self._used.setdefault((user, day), Usage())
        used.runs += int(entry.get("runs", 0) or 0)
        used.hints += len(entry.get("hints", []) or [])
        used.tokens += int(entry.get("tokens", 0) or 0)
        if entry.get("hints") and entry.get("cell"):
            key = (user, str(entry["cell"]))
            self._cell_hints[key] = self._cell_hints.get(key, 0) + len(entry["hints"])

    def write(self, entry: dict[str, Any]) -> None:
        """Append one request's line (``time`` is added) and count it."""
        entry = {"time": datetime.now().isoformat(timespec="seconds"), **entry}
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self._count(entry)

    def used_today(self, user: str) -> Usage:
        with self._lock:
            found = self._used.get((user, datetime.now().date().isoformat()), Usage())
            return Usage(found.runs, found.hints, found.tokens)

    def hints_for(self, user: str, cell: str) -> int:
        """Hints this student was given for this cell (any day)."""
        with self._lock:
            return self._cell_hints.get((user, cell), 0)

    def entries(self) -> list[dict[str, Any]]:
        """Every line, oldest first (the instructor's view)."""
        with self._lock:
            self._file.flush()
            text = self.path.read_text(encoding="utf-8")
        found = []
        for line in text.splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def close(self) -> None:
        with self._lock:
            self._file.close()
