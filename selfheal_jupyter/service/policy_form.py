"""The policy page's forms: what each form posts, turned into an edit of the policy's JSON.

One form per section: the whole class (the file's top-level keys), a course (a hub group:
``groups[NAME]``), an assignment (a notebook path glob: ``notebooks[GLOB]``), an exam
window (``windows``). In a course's or an assignment's form an empty field means "as the
whole class" (the key is left out); in the whole class's form an empty limit means no
limit. Keys the page does not show (``max_runs``) are kept as the file has them. The
values are checked here for what a form can get wrong (a number, a time); the policy's
own parser checks the result before it is written (:class:`~.policy_store.PolicyStore`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..teaching.policy import MODES
from .policy_store import PolicyEditError

Form = Mapping[str, str]
Edit = Callable[[dict[str, Any]], None]

QUOTA_FIELDS = ("runs", "hints", "tokens")
LIMIT_LABELS = {
    "max_hints": "hints per cell",
    "runs": "runs per day",
    "hints": "hints per day",
    "tokens": "tokens per day",
}


@dataclass
class Section:
    """What one form changes: the words for the change log, and the edit itself."""

    what: str
    edit: Edit
    at: tuple[str, ...] = ()
    """The part of the policy it changes (what the change log describes)."""


def _count(form: Form, field: str, label: str) -> int | None:
    text = form.get(field, "").strip().replace(",", "").replace("_", "")
    if not text:
        return None
    if not text.isdigit():
        raise PolicyEditError(f"“{label}” must be a whole number of 0 or more (or empty), not {text[:40]!r}.")
    return int(text)


def _values(form: Form, *, whole_class: bool) -> dict[str, Any]:
    """The keys a class/course/assignment form sets (None: leave the key out)."""
    mode = form.get("mode", "")
    if mode not in (*MODES, "") or (whole_class and not mode):
        raise PolicyEditError("Choose a mode: off, hints or full.")
    reveal = form.get("reveal_fix", "")
    if reveal not in ("yes", "no", "") or (whole_class and not reveal):
        raise PolicyEditError("Choose whether the last hint may show the fix.")
    model = form.get("model", "").strip()
    if model and (len(model) > 200 or not model.isprintable()):
        raise PolicyEditError("The model's name must be one line of at most 200 characters.")
    quota = {f: _count(form, f"quota_{f}", LIMIT_LABELS[f]) for f in QUOTA_FIELDS}
    return {
        "mode": mode or None,
        "reveal_fix": {"yes": True, "no": False}.get(reveal),
        "max_hints": _count(form, "max_hints", LIMIT_LABELS["max_hints"]),
        "quota": {k: v for k, v in quota.items() if v is not None} or None,
        "model": model or None,
    }


def _set(target: dict[str, Any], values: dict[str, Any]) -> None:
    for key, value in values.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def whole_class(form: Form) -> Section:
    values = _values(form, whole_class=True)
    return Section("the whole class", lambda data: _set(data, values))


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    table = data.get(key)
    if not isinstance(table, dict):
        table = data[key] = {}
    return table


def _override(key: str, name: str, values: dict[str, Any] | None) -> Edit:
    """Set (``values``) or remove (None) the override ``data[key][name]``."""

    def edit(data: dict[str, Any]) -> None:
        table = _table(data, key)
        found = table.get(name)
        entry: dict[str, Any] = found if isinstance(found, dict) else {}
        if values is not None:
            _set(entry, values)
        if values is None or not entry:
            table.pop(name, None)
        else:
            table[name] = entry
        if not table:
            data.pop(key, None)

    return edit


def course(form: Form) -> Section:
    name = form.get("course", "").strip()
    if not name:
        raise PolicyEditError("Which course (hub group)? The form named none.")
    values = None if form.get("remove") else _values(form, whole_class=False)
    return Section(f"course {name}", _override("groups", name, values), ("groups", name))


def assignment(form: Form) -> Section:
    glob = form.get("glob", "").strip()
    if not glob:
        raise PolicyEditError("Give the assignment's notebooks as a path pattern, e.g. hw1/*.ipynb.")
    if len(glob) > 300 or not glob.isprintable():
        raise PolicyEditError("The notebook pattern must be one line of at most 300 characters.")
    values = None if form.get("remove") else _values(form, whole_class=False)
    return Section(f"assignment {glob}", _override("notebooks", glob, values), ("notebooks", glob))


def _moment(form: Form, field: str, label: str) -> str:
    text = form.get(field, "").strip()
    try:
        return datetime.fromisoformat(text).isoformat(timespec="minutes")
    except ValueError:
        raise PolicyEditError(f"“{label}” must be a date and time such as 2026-12-01T09:00.") from None


def add_window(form: Form) -> Section:
    name = form.get("name", "").strip() or "Exam"
    if len(name) > 100 or not name.isprintable():
        raise PolicyEditError("The window's name must be one line of at most 100 characters.")
    window: dict[str, Any] = {
        "name": name,
        "start": _moment(form, "start", "From"),
        "end": _moment(form, "end", "Until"),
    }
    if window["end"] <= window["start"]:
        raise PolicyEditError("The window must end after it starts.")
    mode = form.get("mode", "off")
    if mode not in MODES:
        raise PolicyEditError("Choose a mode for the window: off, hints or full.")
    if mode != "off":
        window["mode"] = mode
    if form.get("course", "").strip():
        window["groups"] = [form["course"].strip()]
    scope = form.get("scope", "matching" if form.get("glob", "").strip() else "every")
    if scope not in ("every", "matching"):
        raise PolicyEditError("Choose whether the window applies to every notebook or to some.")
    if scope == "matching":  # the student's word: it can only narrow, and can be left by another name
        if not form.get("glob", "").strip():
            raise PolicyEditError("Give the notebooks the window applies to as a pattern, or choose every notebook.")
        window["notebooks"] = [form["glob"].strip()]

    def edit(data: dict[str, Any]) -> None:
        windows = data.get("windows")
        if not isinstance(windows, list):
            windows = data["windows"] = []
        windows.append(window)

    return Section(f"exam window {name}", edit, ("windows",))


def remove_window(form: Form) -> Section:
    """Remove the window the form showed (its place, name and start must still match)."""
    try:
        index = int(form.get("index", ""))
    except ValueError:
        raise PolicyEditError("Which window? The form named none.") from None
    name, start = form.get("name", ""), form.get("start", "")

    def edit(data: dict[str, Any]) -> None:
        windows = data.get("windows")
        if not isinstance(windows, list):
            windows = []
        found = windows[index] if 0 <= index < len(windows) else None
        if (
            not isinstance(found, dict)
            or found.get("name", f"exam window {index + 1}") != name
            or (str(found.get("start", ""))[:16] != start[:16])
        ):
            raise PolicyEditError("That window changed meanwhile (someone else edited the policy): reload the page.")
        del windows[index]
        if not windows:
            data.pop("windows", None)

    return Section(f"exam window {name}", edit, ("windows",))


SECTIONS: dict[str, Callable[[Form], Section]] = {
    "class": whole_class,
    "course": course,
    "assignment": assignment,
    "add-window": add_window,
    "remove-window": remove_window,
}


def section(form: Form) -> Section:
    """The edit a posted form asks for."""
    make = SECTIONS.get(form.get("section", ""))
    if make is None:
        raise PolicyEditError("This form is not one the page knows: reload the page.")
    return make(form)
