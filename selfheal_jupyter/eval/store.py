"""Results as JSON Lines: one line per (problem, condition), appended as they finish.

Why JSONL: a campaign that is interrupted (Ctrl-C, a crash, a reboot) keeps every
finished problem; a rerun reads the file and skips them. The last record of a key
wins, and a run that ended in an infrastructure error (endpoint or sandbox down) is
not "finished": the rerun tries it again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Key = tuple[str, str, str]
"""(benchmark, problem_id, condition)."""


def key_of(record: dict[str, Any]) -> Key:
    return (record["benchmark"], record["problem_id"], record["condition"])


def is_finished(record: dict[str, Any]) -> bool:
    return record.get("outcome") != "error"


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every well-formed record of a file in order (a torn last line is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and {"benchmark", "problem_id", "condition"} <= rec.keys():
                out.append(rec)
    return out


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per key, the last one written, in first-seen order."""
    by_key: dict[Key, dict[str, Any]] = {}
    for rec in records:
        by_key[key_of(rec)] = rec
    return list(by_key.values())


class ResultStore:
    """An append-only JSONL file shared by the worker threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def finished(self) -> set[Key]:
        return {key_of(r) for r in latest(read_records(self.path)) if is_finished(r)}

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def records(self) -> list[dict[str, Any]]:
        return latest(read_records(self.path))
