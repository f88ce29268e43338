"""The instructor's page, its parts without a hub: the policy's forms and file, the class's
rows and a student's log from a real run log, the exports, and the templates' escaping.

The page itself, behind the hub's login, is driven in Chromium by
``tests/hub/test_instructor_page_hub.py``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from tornado.escape import url_escape
from tornado.template import Loader

from selfheal_jupyter.service import classview, export, pages, policy_form
from selfheal_jupyter.service.log import RunLog
from selfheal_jupyter.service.policy_store import PolicyEditError, PolicyStore
from selfheal_jupyter.service.runs import PolicyFile
from selfheal_jupyter.teaching.policy import parse_class

PAYLOADS = (
    '<script>window.__pwned = "script"</script>',
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    '<a href="javascript:window.__pwned=1">click</a>',
    '"><svg onload="window.__pwned=2">',
    "javascript:alert(1)",
)
PAYLOAD = " ".join(PAYLOADS)


@pytest.fixture()
def store(tmp_path: Path) -> PolicyStore:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"mode": "full", "quota": {"hints": 9}}))
    return PolicyStore(str(path), tmp_path / "policy-changes.jsonl")


def save(store: PolicyStore, by: str, **form: str) -> str:
    edit = policy_form.section(form)
    return store.edit(by, edit.what, edit.edit, edit.at)


def test_a_course_form_changes_its_course_only_and_the_change_log_says_who(store: PolicyStore):
    said = save(store, "teacher", section="course", course="cs101", mode="hints", reveal_fix="no", quota_runs="5")
    data = json.loads(store.path.read_text())
    assert data == {
        "mode": "full",
        "quota": {"hints": 9},
        "groups": {"cs101": {"mode": "hints", "reveal_fix": False, "quota": {"runs": 5}}},
    }
    assert said == 'course cs101: mode set to "hints"; reveal_fix set to false; quota.runs set to 5'
    [change] = store.changes()
    assert change["by"] == "teacher" and change["change"] == said and change["policy"] == data
    # the course's quota of runs keeps the class's quota of hints
    policy = parse_class(data, source="t").resolve({"cs101"}, "a.ipynb", datetime.now())
    assert (policy.mode, policy.reveal_fix, policy.quota.runs, policy.quota.hints) == ("hints", False, 5, 9)
    # a form with every field empty removes the course's override; nothing changed writes nothing
    save(store, "ta", section="course", course="cs101", mode="", reveal_fix="")
    assert "groups" not in json.loads(store.path.read_text())
    assert save(store, "ta", section="course", course="cs101", mode="", reveal_fix="") == ""
    assert [c["by"] for c in store.changes()] == ["ta", "teacher"]


def test_assignments_windows_and_the_model(store: PolicyStore):
    save(store, "t", section="assignment", glob="hw1/*.ipynb", mode="off", model="small-model")
    now = datetime.now().replace(second=0, microsecond=0)
    start, end = (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=1)).isoformat()
    save(store, "t", section="add-window", name="Midterm", start=start, end=end, mode="off", course="cs101")
    data = json.loads(store.path.read_text())
    said = [c["change"] for c in store.changes()]
    assert said[0].startswith('exam window Midterm: added {"name": "Midterm"')
    assert said[1] == 'assignment hw1/*.ipynb: mode set to "off"; model set to "small-model"'
    assert data["notebooks"] == {"hw1/*.ipynb": {"mode": "off", "model": "small-model"}}
    assert data["windows"] == [{"name": "Midterm", "start": start[:16], "end": end[:16], "groups": ["cs101"]}]
    policy = parse_class(data, source="the policy")
    assert policy.resolve({"cs102"}, "hw1/a.ipynb", now).model == "small-model"
    during = policy.resolve({"cs101"}, "lab.ipynb", now)
    assert during.mode == "off" and "the exam window “Midterm” until" in during.source
    # the window's remove form names it: a window that changed meanwhile is not removed
    with pytest.raises(PolicyEditError, match="changed meanwhile"):
        save(store, "t", section="remove-window", index="0", name="Other", start=start)
    save(store, "t", section="remove-window", index="0", name="Midterm", start=start[:16])
    save(store, "t", section="assignment", glob="hw1/*.ipynb", remove="1")
    assert json.loads(store.path.read_text()) == {"mode": "full", "quota": {"hints": 9}}


@pytest.mark.parametrize(
    "form, said",
    [
        ({"section": "class", "mode": "full", "reveal_fix": "yes", "quota_runs": "-1"}, "whole number"),
        ({"section": "class", "mode": "sometimes", "reveal_fix": "yes"}, "Choose a mode"),
        ({"section": "add-window", "start": "2026-12-01T10:00", "end": "2026-12-01T09:00"}, "end after it starts"),
        ({"section": "add-window", "start": "tomorrow", "end": "2026-12-01T09:00"}, "date and time"),
        ({"section": "course", "course": "", "mode": "off"}, "Which course"),
        ({"section": "nonsense"}, "not one the page knows"),
    ],
)
def test_a_form_that_cannot_be_right_writes_nothing(store: PolicyStore, form: dict, said: str):
    before = store.path.read_bytes()
    with pytest.raises(PolicyEditError, match=said):
        save(store, "t", **form)
    assert store.path.read_bytes() == before and store.changes() == []


def test_a_hand_broken_policy_file_is_not_overwritten(store: PolicyStore):
    store.path.write_text("{ not json")
    with pytest.raises(PolicyEditError, match="not JSON"):
        save(store, "t", section="class", mode="off", reveal_fix="no")
    assert store.path.read_text() == "{ not json"


def test_a_policy_file_the_page_writes_is_readable_by_the_services_group_only(tmp_path: Path):
    """Exam windows and assignment rules are the instructor's: other accounts cannot read
    them. A file made world-readable by hand (0644) was kept so by every edit of the page."""
    store = PolicyStore(str(tmp_path / "new" / "policy.json"), tmp_path / "policy-changes.jsonl")
    save(store, "t", section="class", mode="hints", reveal_fix="no")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o640
    os.chmod(store.path, 0o644)
    save(store, "t", section="class", mode="off", reveal_fix="no")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o640


def test_the_service_reads_the_page_s_change_at_its_next_request(store: PolicyStore):
    """PolicyFile stats the file per request; the page replaces it in one step."""
    served = PolicyFile(str(store.path))
    assert served.current().resolve({"cs101"}, "", datetime.now()).mode == "full"
    save(store, "t", section="course", course="cs101", mode="off")
    assert served.current().resolve({"cs101"}, "", datetime.now()).mode == "off"
    assert not list(store.path.parent.glob(".policy-*")), "a temporary file was left behind"


# ---------------------------------------------------------------------- the log, read for the page
def hint_line(user: str, cell: str, text: str, level: int, notebook: str = "lab.ipynb") -> dict:
    return {
        "user": user,
        "entry": "hint",
        "notebook": notebook,
        "mode": "hints",
        "cell": cell + "\0",
        "runs": 1 if level == 1 else 0,
        "tokens": 100,
        "outcome": "success",
        "result": "fixed",
        "hints": [text],
        "titles": [f"Level {level}"],
        "level": level,
    }


def test_rows_and_a_student_s_log_from_the_run_log(tmp_path: Path):
    log = RunLog(tmp_path / "log.jsonl")
    cell_a, cell_b = "def average(xs):\n    return sum(xs) // len(xs)", "print(total)"
    log.write(hint_line("s1", cell_a, "Look at line 2.", 1))
    log.write(hint_line("s1", cell_a, "Whole-number division.", 2))
    log.write(hint_line("s1", cell_b, "total is never set.", 1))
    log.write(
        {
            "user": "s1",
            "entry": "hint",
            "notebook": "lab.ipynb",
            "mode": "off",
            "cell": cell_b + "\0",
            "runs": 0,
            "outcome": "refused",
            "result": "refused",
            "error": "selfheal is off (Midterm)",
        }
    )
    policy = parse_class({"mode": "hints", "quota": {"runs": 3, "hints": 5}}, source="p")
    rows = classview.rows(log.entries(), {"s1": {"cs101"}, "s2": {"cs101"}}, policy, log.used_today, datetime.now())
    s1, s2 = rows
    assert (s1.name, s1.runs, s1.hints, s1.level, s1.refused) == ("s1", 2, 3, 2, 1)
    assert (s1.left.runs, s1.left.hints, s1.left.tokens) == (1, 2, None)
    assert [(s.label, s.hints) for s in s1.struggles] == [("def average(xs):", 2), ("print(total)", 1)]
    assert (s2.runs, s2.hints, s2.struggles, s2.last) == (0, 0, [], "")
    log.reset_today("s1", by="teacher")
    assert classview.rows(log.entries(), {}, policy, log.used_today, datetime.now())[0].left.runs == 3
    # a restart reads the reset back: nobody gets today's use again by a restart, nor loses a reset
    log.close()
    again = RunLog(tmp_path / "log.jsonl")
    assert again.used_today("s1").runs == 0
    views = classview.student_log(again.entries(), "s1")
    assert [v.kind for v in views] == ["reset", "request", "request", "request", "request"]
    assert views[0].by == "teacher" and views[1].result == "refused" and "Midterm" in views[1].error
    assert views[-1].hints[0].text == "Look at line 2." and views[-1].code == cell_a and views[-1].fix == ""


def test_the_exports_hold_one_line_per_request_and_csv_runs_no_formula(tmp_path: Path):
    log = RunLog(tmp_path / "log.jsonl")
    log.write(hint_line("s1", '=HYPERLINK("http://evil","x")', "-1 is the answer? +check @here", 1))
    log.write(hint_line("s2", "x = 1", "Fine.", 1, notebook="=cmd|' /C calc'!A0"))
    log.reset_today("s1", by="teacher")
    found = export.requests(log.entries())
    assert len(found) == 2
    lines = export.to_json_lines(found).splitlines()
    assert [json.loads(line)["user"] for line in lines] == ["s1", "s2"]
    rows = list(csv.DictReader(io.StringIO(export.to_csv(found))))
    assert [r["student"] for r in rows] == ["s1", "s2"]
    assert rows[0]["cell"] == '\'=HYPERLINK("http://evil","x")' and rows[0]["hint_text"].startswith("'-1 is")
    assert rows[1]["notebook"].startswith("'=cmd") and rows[1]["hint_text"] == "Fine."
    for row in rows:
        assert not any(v.startswith(("=", "+", "-", "@")) for v in row.values())
    assert export.requests(log.entries(), {"s2"}) == [found[1]]


# ---------------------------------------------------------------------- the templates' escaping
class Inventory(HTMLParser):
    """Every element and attribute of a page (what a browser would build from it)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.attrs.extend((name, value or "") for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def render(template: str, **values) -> str:
    app = pages.settings("/services/selfheal/")  # the templates as the service loads them
    loader = Loader(app["template_path"], autoescape=app["autoescape"])
    namespace = {
        "static_url": lambda path: "/services/selfheal/static/" + path,
        "_tt_modules": SimpleNamespace(xsrf_form_html=lambda: '<input type="hidden" name="_xsrf" value="t">'),
        "url_escape": url_escape,
        "prefix": "/services/selfheal/",
        "when": pages.when,
        "user": {"name": "teacher"},
        "current": "",
        "hub_home": "/hub/home",
    }
    return loader.load(template).generate(**namespace, **values).decode()


def policy_page(data: dict, **values) -> str:
    """The policy page for ``data`` (a policy file's content), the rest as an empty class has it."""
    page = {
        "courses": ["cs101"],
        "groups": {},
        "notebooks": data.get("notebooks", {}),
        "windows": data.get("windows", []),
        "problem": "",
        "unreadable": "",
        "path": "p",
        "error": "",
        "saved": "",
        "modes": ("off", "hints", "full"),
        "default_model": "m",
        "changes": [],
    }
    return render("policy.html", data=data, **{**page, **values})


def assert_inert(html: str) -> Inventory:
    found = Inventory()
    found.feed(html)
    assert "script" not in found.tags and "svg" not in found.tags and "img" not in found.tags
    assert not [a for a in found.attrs if a[0].startswith("on")], "an event handler attribute reached the page"
    urls = [v for n, v in found.attrs if n in ("href", "src", "action", "formaction")]
    assert not [u for u in urls if u.strip().lower().startswith("javascript:")]
    return found


def test_every_text_from_a_student_or_a_model_is_escaped_in_the_templates(tmp_path: Path):
    log = RunLog(tmp_path / "log.jsonl")
    line = hint_line("s1", f"# {PAYLOAD}\nx = 1", f"The model says {PAYLOAD}", 3, notebook=f"{PAYLOAD}.ipynb")
    log.write({**line, "fix": f"- {PAYLOAD}\n+ fixed", "note": PAYLOAD, "error": PAYLOAD})
    entries = log.entries()
    views = classview.student_log(entries, "s1")
    page = assert_inert(render("student.html", name="s1", views=views, reset=""))
    text = "".join(page.text)
    for payload in PAYLOADS:
        assert payload in text, f"{payload!r} is not shown as text"
    policy = parse_class({"mode": "hints"}, source=PAYLOAD)
    rows = classview.rows(entries, {"s1": {"cs101"}}, policy, log.used_today, datetime.now())
    assert_inert(
        render(
            "class.html",
            rows=rows,
            courses=["cs101"],
            course="",
            problem=PAYLOAD,
            in_effect=[("cs101", policy.default)],
            reset="",
            down=PAYLOAD,
        )
    )
    data = {
        "mode": "hints",
        "model": PAYLOAD,
        "notebooks": {PAYLOAD: {"mode": "off"}},
        "windows": [{"name": PAYLOAD, "start": "2026-01-01T09:00", "end": "2026-01-01T10:00"}],
    }
    assert_inert(
        render(
            "policy.html",
            data=data,
            courses=["cs101"],
            groups={},
            notebooks=data["notebooks"],
            windows=data["windows"],
            problem="",
            unreadable="",
            path="/etc/selfheal/policy.json",
            error=PAYLOAD,
            saved=PAYLOAD,
            modes=("off", "hints", "full"),
            default_model="scripted",
            changes=[{"time": "2026-01-01T09:00:00", "by": "t", "change": PAYLOAD}],
        )
    )
    assert_inert(render("error.html", status=403, reason="Forbidden", message=PAYLOAD))


def test_every_form_control_has_a_label():
    html = policy_page(
        {"mode": "hints"},
        courses=["cs101", "cs102"],
        groups={"cs101": {"mode": "off"}},
        notebooks={"hw1/*.ipynb": {"mode": "off"}},
    )

    class Controls(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids: list[str] = []
            self.labelled: set[str] = set()
            self.in_label = 0
            self.bare: list[str] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            a = dict(attrs)
            if tag == "label":
                self.in_label += 1
                if a.get("for"):
                    self.labelled.add(a["for"])
            elif tag in ("input", "select", "textarea") and a.get("type") != "hidden":
                if self.in_label:
                    return
                if not a.get("id"):
                    self.bare.append(str(a))
                else:
                    self.ids.append(a["id"])

        def handle_endtag(self, tag: str) -> None:
            if tag == "label":
                self.in_label -= 1

    found = Controls()
    found.feed(html)
    assert not found.bare, found.bare
    assert len(found.ids) == len(set(found.ids)), "two controls share an id"
    assert set(found.ids) <= found.labelled, set(found.ids) - found.labelled


def test_the_model_a_course_names_is_the_one_the_service_asks_for(tmp_path: Path):
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.llm import Endpoint
    from selfheal_jupyter.model import Task
    from selfheal_jupyter.service.runs import Request, Service

    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"mode": "full", "groups": {"cs101": {"model": "course-model"}}}))
    service = Service(SelfHeal(model="class-model"), policy=str(path), log=RunLog(tmp_path / "log.jsonl"))
    service.endpoint = Endpoint("http://127.0.0.1:9/v1", "key", "class-model")
    request = Request("heal", Task(prompt="", initial_code="x = 1"), "lab.ipynb", {})
    for groups, asked in (({"cs101"}, "course-model"), ({"cs102"}, "class-model")):
        policy = service.policy_for(groups, "lab.ipynb")
        assert service._llm(service.settings_for(request, policy, "s1")).endpoint.model == asked


def test_the_log_read_again_holds_every_whole_line_once(tmp_path: Path):
    """entries() reads only what was appended since it last read; a line still being
    written waits for the next call, whole."""
    log = RunLog(tmp_path / "log.jsonl")
    log.write({"user": "a"})
    assert [e["user"] for e in log.entries()] == ["a"]
    log.write({"user": "b"})
    with (tmp_path / "log.jsonl").open("a") as fh:
        fh.write('{"user": "c"')
        fh.flush()
        assert [e["user"] for e in log.entries()] == ["a", "b"]
        fh.write("}\n")
    assert [e["user"] for e in log.entries()] == ["a", "b", "c"]
    assert [e["user"] for e in RunLog(tmp_path / "log.jsonl").entries()] == ["a", "b", "c"]


def test_the_page_says_what_binds_and_an_exam_window_binds_every_notebook_of_a_course(store: PolicyStore):
    """A window limited to some notebooks is escaped by a student who names their notebook
    otherwise (the path is their kernel's word): the page says so, and its window form
    makes a window for every notebook of the course, even with a pattern typed in."""
    now = datetime.now()
    start, end = (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=1)).isoformat()
    form = dict(section="add-window", start=start, end=end, mode="off", course="cs101", glob="exam/*.ipynb")
    save(store, "t", name="Midterm", scope="every", **form)
    save(store, "t", name="Quiz", scope="matching", **form)
    data = store.read()
    every, matching = data["windows"]
    assert "notebooks" not in every and matching["notebooks"] == ["exam/*.ipynb"]
    binding = parse_class({**data, "windows": [every]}, source="p")
    assert binding.resolve({"cs101"}, "renamed.ipynb", now).mode == "off"  # whatever the kernel reports
    narrowing = parse_class({**data, "windows": [matching]}, source="p")
    assert narrowing.resolve({"cs101"}, "renamed.ipynb", now).mode == "full"  # left by another name
    with pytest.raises(PolicyEditError, match="pattern"):
        save(store, "t", name="Empty", scope="matching", **{**form, "glob": ""})
    html = policy_page(data, notebooks={"hw1/*.ipynb": {"mode": "off"}})
    found = Inventory()
    found.feed(html)
    said = " ".join(" ".join(found.text).split())
    assert (
        "These rules bind: the whole class, each course" in said and "exam windows for everyone or for a course" in said
    )
    assert "only as good as the notebook path a student's kernel reports: assignments, and exam windows" in said
    assert "yes: every notebook" in said and "only as good as the notebook path the kernel reports" in said


def test_a_hint_session_across_the_student_s_edits_is_one_cell_on_the_page(tmp_path: Path):
    """Each request was a cell of its own, keyed by its code: a student who edited their
    cell between hints showed as several cells, each "struggled with" a hint or two."""
    log = RunLog(tmp_path / "log.jsonl")
    before, after = "middle = len(xs) / 2\nprint(xs[middle])", "middle = len(xs) // 2\nprint(xs[middle])"
    log.write({**hint_line("s1", before, "It fails on line 3.", 1), "session": "id:c1"})
    log.write({**hint_line("s1", "print(1)", "Another cell.", 1), "session": "id:c2", "notebook": "other.ipynb"})
    edited = {**hint_line("s1", after, "`middle` is `1`.", 2), "session": "id:c1"}
    log.write({**edited, "change": "Your edit changed line 2. Now the assert on line 5 fails."})
    solved = {**hint_line("s1", after + "\n", "", 0), "session": "id:c1", "hints": [], "note": "Solved."}
    log.write(solved)
    views = classview.student_log(log.entries(), "s1")
    cell, other = views
    assert isinstance(cell, classview.CellView) and len(cell.steps) == 3 and cell.hints == 2 and cell.versions == 3
    assert [cell.new_version(i) for i in range(3)] == [True, True, True]
    assert isinstance(other, classview.CellView) and other.notebook == "other.ipynb"
    policy = parse_class({"mode": "hints"}, source="p")
    (row,) = classview.rows(log.entries(), {}, policy, log.used_today, datetime.now())
    assert [(s.label, s.hints) for s in row.struggles] == [("middle = len(xs) // 2", 2), ("print(1)", 1)]
    page = Inventory()
    page.feed(render("student.html", name="s1", views=views, reset=""))
    said = " ".join(" ".join(page.text).split())
    assert said.count("one cell in") == 2 and "2 hints over 3 versions of the cell" in said
    assert "What the edit changed, as the student was told: Your edit changed line 2." in said
    assert said.index("It fails on line 3.") < said.index("`middle` is `1`.") < said.index("Solved.")
