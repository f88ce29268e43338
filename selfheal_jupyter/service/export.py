"""The run log for a course's own analytics: CSV and JSON lines, one line per request.

JSON keeps every request's line as the log has it (an instructor's resets are not
requests and are left out). CSV has fixed columns; a cell that a spreadsheet would
read as a formula (it begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return — a student's cell or a model's words can) gets a leading ``'`` so that opening
the file runs nothing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from .classview import result, split_cell
from .log import is_request

COLUMNS = (
    "time",
    "student",
    "notebook",
    "entry",
    "mode",
    "model",
    "result",
    "outcome",
    "level",
    "hints",
    "hint_text",
    "fix_shown",
    "note",
    "error",
    "runs",
    "rounds",
    "tokens",
    "cell",
    "tests",
)
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def requests(entries: Iterable[dict[str, Any]], users: set[str] | None = None) -> list[dict[str, Any]]:
    """The log's requests (of ``users`` when given), oldest first."""
    return [e for e in entries if is_request(e) and (users is None or e.get("user") in users)]


def _inert(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def csv_row(entry: dict[str, Any]) -> list[str]:
    code, tests = split_cell(str(entry.get("cell", "")))
    hints = [str(h) for h in entry.get("hints") or []]
    values = {
        "time": entry.get("time"),
        "student": entry.get("user"),
        "notebook": entry.get("notebook"),
        "entry": entry.get("entry"),
        "mode": entry.get("mode"),
        "model": entry.get("model"),
        "result": result(entry),
        "outcome": entry.get("outcome"),
        "level": entry.get("level", ""),
        "hints": len(hints),
        "hint_text": "\n\n".join(hints),
        "fix_shown": entry.get("fix", ""),
        "note": entry.get("note", ""),
        "error": entry.get("error", ""),
        "runs": entry.get("runs", 0),
        "rounds": entry.get("rounds", ""),
        "tokens": entry.get("tokens", 0),
        "cell": code,
        "tests": tests,
    }
    return [_inert(values[c]) for c in COLUMNS]


def to_csv(entries: Iterable[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for entry in entries:
        writer.writerow(csv_row(entry))
    return out.getvalue()


def to_json_lines(entries: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in entries)
