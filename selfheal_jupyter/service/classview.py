"""What the instructor's page shows, read from the run log: a row per student, a student's requests.

Plain data for the templates (they only lay it out and escape it). Nothing here asks
the hub or writes anything: the page hands in the log's lines, the roster (who is in
which course), today's use (from the log, resets counted) and the policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..teaching.policy import ClassPolicy
from .log import RESET, Usage, is_request
from .runs import run_limit

RESULTS = {
    "fixed": "fixed",
    "runs": "runs",
    "not fixed": "not fixed",
    "cancelled": "stopped",
    "error": "error",
    "refused": "refused",
}
"""The result of a request as the page names it (see :func:`.runs.result_of`)."""


def result(entry: dict[str, Any]) -> str:
    """A request's result; lines written before ``result`` existed say it by ``outcome``."""
    found = entry.get("result")
    if isinstance(found, str) and found in RESULTS:
        return RESULTS[found]
    outcome = entry.get("outcome")
    if outcome == "success":
        return "fixed"
    if outcome in ("cancelled", "error"):
        return RESULTS[str(outcome)]
    return "not fixed" if outcome else ""


def split_cell(key: str) -> tuple[str, str]:
    """The log's ``cell`` (code, NUL, tests) as the student's code and their tests."""
    code, _, tests = (key or "").partition("\0")
    return code, tests


def first_line(code: str, width: int = 60) -> str:
    line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass
class Left:
    """What a student has left of today's quota (None: no limit)."""

    runs: int | None
    hints: int | None
    tokens: int | None

    @property
    def spent(self) -> bool:
        return any(v == 0 for v in (self.runs, self.hints, self.tokens))


@dataclass
class Struggle:
    notebook: str
    cell: str
    hints: int

    @property
    def label(self) -> str:
        return first_line(split_cell(self.cell)[0]) or "(empty cell)"


@dataclass
class Row:
    """One student at a glance."""

    name: str
    courses: list[str]
    runs: int = 0
    hints: int = 0
    """Hint requests (each ``%%hint``)."""
    level: int = 0
    """The highest hint level shown (1 where, 2 why, 3 the fix)."""
    left: Left = field(default_factory=lambda: Left(None, None, None))
    last: str = ""
    refused: int = 0
    struggles: list[Struggle] = field(default_factory=list)


def _requests(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if isinstance(e, dict) and is_request(e)]


def left_today(policy: ClassPolicy, groups: set[str], notebook: str, used: Usage, now: datetime) -> Left:
    """Today's quota left for a student in ``groups`` working in ``notebook``."""
    resolved = policy.resolve(groups, notebook, now)
    quota, runs = resolved.quota, run_limit(resolved)

    def left(limit: int | None, spent: int) -> int | None:
        return None if limit is None else max(0, limit - spent)

    return Left(left(runs, used.runs), left(quota.hints, used.hints), left(quota.tokens, used.tokens))


def rows(
    entries: Iterable[dict[str, Any]],
    roster: dict[str, set[str]],
    policy: ClassPolicy,
    used: Callable[[str], Usage],
    now: datetime,
) -> list[Row]:
    """One row per student: everyone in ``roster`` (name → courses) and everyone in the log."""
    found = _requests(entries)
    names = sorted({*roster, *(str(e.get("user", "")) for e in found)} - {""})
    by_name: dict[str, Row] = {n: Row(n, sorted(roster.get(n, ()))) for n in names}
    cells: dict[str, Counter[tuple[str, str]]] = {n: Counter() for n in names}
    latest: dict[str, dict[tuple[str, str], str]] = {n: {} for n in names}
    """Each cell's code as last asked about (a session's edits are one cell)."""
    last_notebook: dict[str, str] = {}
    for entry in found:
        row = by_name[str(entry.get("user", ""))]
        row.runs += int(entry.get("runs", 0) or 0)
        if entry.get("entry") == "hint" and result(entry) != "refused":
            row.hints += 1
        if result(entry) == "refused":
            row.refused += 1
        row.level = max(row.level, int(entry.get("level", 0) or 0))
        row.last = max(row.last, str(entry.get("time", "")))
        given = len(entry.get("hints") or [])
        if given and entry.get("cell"):
            key = (str(entry.get("notebook", "")), str(entry.get("session") or entry["cell"]))
            cells[row.name][key] += given
            latest[row.name][key] = str(entry["cell"])
        last_notebook[row.name] = str(entry.get("notebook", ""))
    for row in by_name.values():
        row.left = left_today(policy, set(row.courses), last_notebook.get(row.name, ""), used(row.name), now)
        row.struggles = [
            Struggle(nb, latest[row.name][(nb, key)], n) for (nb, key), n in cells[row.name].most_common(2)
        ]
    return list(by_name.values())


@dataclass
class HintShown:
    level: int
    title: str
    text: str


@dataclass
class RequestView:
    """One line of a student's log as the page shows it."""

    time: str
    kind: str
    """``request`` or ``reset``."""
    notebook: str = ""
    entry: str = ""
    mode: str = ""
    result: str = ""
    code: str = ""
    tests: str = ""
    hints: list[HintShown] = field(default_factory=list)
    fix: str = ""
    note: str = ""
    error: str = ""
    tokens: int = 0
    model: str = ""
    by: str = ""
    change: str = ""
    """What the student's edit changed in the run, as they were told before the hint."""
    session: str = ""
    """The hint session (the cell across its edits) the request belongs to ("" none)."""


@dataclass
class CellView:
    """A hint session on the student's page: one cell, its versions and hints in order."""

    time: str
    notebook: str
    steps: list[RequestView]
    """Its requests, oldest first."""
    kind: str = "cell"

    @property
    def versions(self) -> int:
        return len({(s.code, s.tests) for s in self.steps})

    @property
    def hints(self) -> int:
        return sum(len(s.hints) for s in self.steps)

    def new_version(self, index: int) -> bool:
        """The step's code differs from the one before (the student edited the cell)."""
        here = self.steps[index]
        return index == 0 or (here.code, here.tests) != (self.steps[index - 1].code, self.steps[index - 1].tests)


def student_log(entries: Iterable[dict[str, Any]], user: str) -> list[RequestView | CellView]:
    """A student's requests and resets, newest first; a hint session's requests (the cell
    across the student's edits) are one cell, where its latest request was."""
    views: list[RequestView | CellView] = []
    cells: dict[str, CellView] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("user") != user:
            continue
        time = str(entry.get("time", ""))
        if entry.get("kind") == RESET:
            views.append(RequestView(time, "reset", by=str(entry.get("by", ""))))
            continue
        if not is_request(entry):
            continue
        code, tests = split_cell(str(entry.get("cell", "")))
        texts = [str(t) for t in entry.get("hints") or []]
        titles = [str(t) for t in entry.get("titles") or []]
        level = int(entry.get("level", 0) or 0)
        hints = [HintShown(level, titles[i] if i < len(titles) else "", t) for i, t in enumerate(texts)]
        view = RequestView(
            time,
            "request",
            notebook=str(entry.get("notebook", "")),
            entry=str(entry.get("entry", "")),
            mode=str(entry.get("mode", "")),
            result=result(entry),
            code=code,
            tests=tests,
            hints=hints,
            fix=str(entry.get("fix", "") or ""),
            note=str(entry.get("note", "") or ""),
            error=str(entry.get("error", "") or ""),
            tokens=int(entry.get("tokens", 0) or 0),
            model=str(entry.get("model", "") or ""),
            change=str(entry.get("change", "") or ""),
            session=str(entry.get("session", "") or ""),
        )
        if view.entry == "hint" and view.session:
            cell = cells.get(view.session)
            if cell is None:
                cell = cells[view.session] = CellView(time, view.notebook, [])
            else:
                views.remove(cell)
            cell.steps.append(view)
            cell.time = time
            views.append(cell)
        else:
            views.append(view)
    views.reverse()
    return views
