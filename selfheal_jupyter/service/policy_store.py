"""The instructor's page writes the policy file: one section at a time, checked, atomic, logged.

Why a file still: it is what ``selfheal service --policy FILE`` reads and re-reads when it
changes (:class:`~.runs.PolicyFile`), so a change made on the page reaches the next request
of any student, and an admin can still read or edit it by hand. Each edit reads the file
as it is now (so two instructors editing different sections do not undo each other),
changes one section, is checked by the same parser the service uses (nothing that would
close the class by mistake is written), and replaces the file in one step (a temporary
file in the same folder, then ``os.replace``): the service never reads half a file. Each
change is a line in the change log (who, when, what changed, the whole policy after it).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..teaching import policy as policies

CHANGES_FILE = "policy-changes.jsonl"
"""The change log's name, beside the run log."""
FILE_MODE = 0o640
"""The policy file as the page writes it, whatever it was: the service's account writes it,
the service's group (an admin, the kernels of a class that reads it in the kernel) reads
it, no other account: the exam windows and the assignment rules are the instructor's."""


class PolicyEditError(Exception):
    """The edit cannot be made (what is wrong and what to do, for the page)."""


class PolicyStore:
    def __init__(self, path: str, changes: Path) -> None:
        self.path = Path(path)
        self.changes_path = changes
        self._lock = threading.Lock()

    def read(self) -> dict[str, Any]:
        """The file's JSON object as written (``{}`` when there is no file yet)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyEditError(f"The policy file {self.path} cannot be read ({exc}).") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PolicyEditError(
                f"The policy file {self.path} is not JSON ({exc}); the page will not overwrite it. "
                "Fix or remove it by hand, then reload."
            ) from None
        if not isinstance(data, dict):
            raise PolicyEditError(f"The policy file {self.path} does not hold a JSON object; fix it by hand.")
        return data

    def edit(self, by: str, what: str, change: Callable[[dict[str, Any]], None], at: tuple[str, ...] = ()) -> str:
        """Apply ``change`` to the current policy and write it; returns what changed in
        the part ``at`` (e.g. ``("groups", "cs101")``), ``""`` when nothing did (nothing is
        written). Raises :class:`PolicyEditError`."""
        with self._lock:
            before = self.read()
            after = copy.deepcopy(before)
            change(after)
            if after == before:
                return ""
            try:
                policies.parse_class(after, source=str(self.path))
            except ValueError as exc:
                raise PolicyEditError(f"Not saved: {exc}.") from None
            said = f"{what}: {describe(_part(before, at), _part(after, at))}"
            self._write(after)
            self._log({"by": by, "change": said, "policy": after})
            return said

    def _write(self, data: dict[str, Any]) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        try:
            group = self.path.stat().st_gid
        except FileNotFoundError:
            group = -1
        fd, tmp = tempfile.mkstemp(prefix=".policy-", suffix=".json", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, ensure_ascii=False)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            if group != -1:
                with contextlib.suppress(OSError):  # a group the service is not in: its own then
                    os.chown(tmp, -1, group)
            os.chmod(tmp, FILE_MODE)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _log(self, entry: dict[str, Any]) -> None:
        self.changes_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": datetime.now().isoformat(timespec="seconds"), **entry}, ensure_ascii=False)
        fd = os.open(self.changes_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def changes(self, limit: int = 30) -> list[dict[str, Any]]:
        """The latest changes, newest first."""
        try:
            lines = self.changes_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in reversed(lines):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                found.append(entry)
            if len(found) >= limit:
                break
        return found


def _part(data: Any, at: tuple[str, ...]) -> Any:
    for key in at:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def describe(before: Any, after: Any, where: str = "") -> str:
    """What changed between two parts of a policy, in short words (``key old → new``,
    ``key set to``, ``key removed``, ``added``/``removed`` for a list's items)."""
    if isinstance(before, list) or isinstance(after, list):
        old, new = before if isinstance(before, list) else [], after if isinstance(after, list) else []
        return "; ".join(
            [f"{where}added {_said(x)}" for x in new if x not in old]
            + [f"{where}removed {_said(x)}" for x in old if x not in new]
        )
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    parts = []
    for key in dict.fromkeys([*before, *after]):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        name = f"{where}{key}"
        if isinstance(old, dict) and isinstance(new, dict) or isinstance(old, list) or isinstance(new, list):
            parts.append(describe(old, new, f"{name}."))
        elif old is None and isinstance(new, dict):
            parts.append(describe({}, new, f"{name}."))
        elif old is None:
            parts.append(f"{name} set to {_said(new)}")
        elif new is None:
            parts.append(f"{name} removed (was {_said(old)})")
        else:
            parts.append(f"{name} {_said(old)} → {_said(new)}")
    return "; ".join(p for p in parts if p)


def _said(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
