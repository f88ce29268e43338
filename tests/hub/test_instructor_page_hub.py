"""The instructor's page in Debian's Chromium (Playwright), against the real hub and service.

The lane's shared class (``tests/hub/conftest.py``: PyPI ``jupyterhub`` with the block ``selfheal service
--hub-config`` prints, npm ``configurable-http-proxy``, Unix students running nbclient
in their own processes, the scripted model behind the service's key), plus a teaching
assistant who is no hub admin but in the hub group ``instructors``. People sign in
through the hub's login form; the page signs them in with the hub's OAuth. Screenshots
go to ``$SELFHEAL_SCREENS`` (default ``test-output/instructor-page/``). Playwright only
drives ``/usr/bin/chromium``; nothing downloads a browser.
"""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.class_hub import (
    COURSE,
    INSTRUCTOR,
    cell_text,
    notebook,
    run_student,
    student_env,
)
from tests.hub.conftest import PASSWORD, TA
from tests.scripted_server import Reply

pytestmark = [pytest.mark.hub, pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCREENS = Path(os.environ.get("SELFHEAL_SCREENS") or ROOT / "test-output" / "instructor-page")

AVERAGE = "def average(scores):\n    return sum(scores) // len(scores)\n\nassert average([1, 2]) == 1.5\n"
AVERAGE_FIX_LINE = "return sum(scores) / len(scores)"
AVERAGE_FIX = f"```python\ndef average(scores):\n    {AVERAGE_FIX_LINE}\n\nassert average([1, 2]) == 1.5\n```"
EDITED = AVERAGE.replace("def average(scores):\n", "def average(scores):\n    # the mean of the scores\n")
"""The student's cell after an edit (one that changes nothing of the run)."""
PROSE = "Think about what kind of division gives a whole number, and what the assert expects."


def screens() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a shared, loaded machine: the page answers through the proxy
    SCREENS.mkdir(parents=True, exist_ok=True)


def signed_in(browser, hub, user: str):
    """A browser of ``user``, signed in on the hub's login form, on the service's page."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login?next={quote('/services/selfheal/')}")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    with page.expect_navigation(url=lambda url: "/services/selfheal/" in url and "oauth" not in url):
        page.click("#login_submit")
    expect(page.locator("h1")).to_be_visible()
    return context, page


def shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENS / f"{name}.png"), full_page=True)


def hint_notebook(cell: str):
    return notebook("%load_ext selfheal_jupyter", "%%hint\n" + cell)


def test_the_instructor_sets_hints_sees_the_hint_word_for_word_closes_an_exam_and_exports(classroom, chromium):
    """On the shared class, whose hint writer's prose is on: the page must show it word for word."""
    from playwright.sync_api import expect

    s1 = classroom.students[0]
    classroom.script(*[Reply(AVERAGE_FIX, match="def average("), Reply(PROSE, match="teacher")] * 2)
    hub = classroom.hub
    screens()
    browser = chromium
    context, page = signed_in(browser, hub, INSTRUCTOR)
    expect(page.get_by_role("heading", name="The class at a glance")).to_be_visible()
    expect(page.get_by_role("row", name=s1)).to_be_visible()  # on the roster before asking anything
    response = page.request.get(hub.service_url)
    assert response.status == 200
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp

    # 1. hints for the course
    page.get_by_role("link", name="Policy", exact=True).click()
    course = page.locator("form", has=page.get_by_role("heading", name=f"Course {COURSE}"))
    course.get_by_label("hints", exact=True).check()
    course.get_by_label("The last hint shows the fix").select_option("no")
    course.get_by_label("Hints per cell", exact=True).fill("3")
    course.get_by_role("button", name=f"Save for {COURSE}").click()
    expect(page.get_by_role("status")).to_contain_text(f"course {COURSE}")
    changes = page.locator("#changes table")
    expect(changes).to_contain_text(INSTRUCTOR)
    expect(changes).to_contain_text('mode set to "hints"')
    shot(page, "1-policy-hints-for-the-course")
    saved = json.loads((hub.folder / "policy.json").read_text())
    assert saved["groups"][COURSE] == {"mode": "hints", "reveal_fix": False, "max_hints": 3}

    # a post without the hub's XSRF token (another site's form, a script) changes nothing
    forged = context.request.post(
        hub.service_url + "policy", form={"section": "class", "mode": "off", "reveal_fix": "yes"}
    )
    assert forged.status == 403
    assert json.loads((hub.folder / "policy.json").read_text()) == saved

    # 2. the student asks for a hint, edits the cell and asks again (the same cell: JupyterLab
    # names it); the course's policy holds at once (%%heal is refused)
    env = student_env(s1, hub, hub.token(s1), "lab.ipynb")
    asked = notebook("%load_ext selfheal_jupyter", "%%hint\n" + AVERAGE, "%%hint\n" + EDITED, "%%heal\n" + AVERAGE)
    asked.cells[2].metadata["lab_cell_id"] = asked.cells[1].id  # the first cell, edited and run again
    got = run_student(s1, asked, env, "a")
    shown = cell_text(got, 1)
    assert "Hint 1 of 3" in shown, shown
    again = cell_text(got, 2)
    assert "What your edit changed: Your edit changed line 3." in again and "Hint 2 of 3" in again, again
    assert "Only hints are allowed here" in cell_text(got, 3) and f"for {COURSE}" in cell_text(got, 3)
    assert "/" not in cell_text(got, 3).split("Only hints", 1)[1].split(":")[0]  # the rule, no server path
    first_line, second_line = [e for e in classroom.log() if e.get("hints")]
    hint = first_line["hints"][0]
    assert hint in shown and PROSE in hint  # the log holds what the student was shown
    assert first_line["session"] == second_line["session"] and second_line["change"].startswith("Your edit")

    # 3. the class at a glance, then the student's log: the hint word for word, never the fix
    page.get_by_role("link", name="Class", exact=True).click()
    row = page.get_by_role("row", name=s1)
    expect(row).to_contain_text(COURSE)
    expect(row.locator("td").nth(2)).to_have_text("2")  # hints asked
    expect(row.locator("td").nth(3)).to_have_text("1")  # refused: the %%heal under hints
    expect(row).to_contain_text("def average(scores): 2 hints")  # the cell they struggled with, as one
    shot(page, "2-class-at-a-glance")
    row.get_by_role("link", name=s1).click()
    expect(page.get_by_role("heading", name=f"{s1}: every request")).to_be_visible()
    cell = page.locator(".cell-session")
    expect(cell).to_have_count(1)  # the hint session across the edit: one cell
    expect(cell).to_contain_text("2 hints over 2 versions of the cell")
    expect(cell).to_contain_text("What the edit changed, as the student was told: Your edit changed line 3.")
    hint_text = page.locator(".hint-text")
    expect(hint_text).to_have_count(2)
    assert hint_text.first.inner_text() == hint
    assert AVERAGE_FIX_LINE not in page.content()
    expect(page.locator(".request").first).to_contain_text("Only hints are allowed here")
    shot(page, "3-student-log-with-the-hint")

    # 4. an exam window covering now: the student's next %%hint is refused, naming it
    page.get_by_role("link", name="Policy", exact=True).click()
    window = page.locator("form", has=page.get_by_role("heading", name="A new exam window"))
    now = datetime.now().replace(second=0, microsecond=0)
    window.get_by_label("Name").fill("Midterm exam")
    window.get_by_label("From").fill((now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    window.get_by_label("Until").fill((now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"))
    window.get_by_label("Course").select_option(COURSE)
    window.get_by_role("button", name="Add the window").click()
    expect(page.get_by_role("status")).to_contain_text("exam window Midterm exam")
    expect(page.locator("#windows table")).to_contain_text("Midterm exam")
    shot(page, "4-exam-window")
    got = run_student(s1, hint_notebook(AVERAGE), env, "b")
    refused = cell_text(got, 1)
    said = next((ln for ln in refused.splitlines() if "selfheal is off" in ln), refused)
    assert "selfheal is off" in said and "the exam window “Midterm exam” until" in said, refused

    # 5. the CSV export holds the requests (the hint, the refused %%heal, the refused %%hint)
    page.get_by_role("link", name="Class", exact=True).click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV", exact=True).click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    mine = [r for r in rows if r["student"] == s1]
    assert [(r["entry"], r["result"]) for r in mine] == [
        ("hint", "fixed"),
        ("hint", "fixed"),
        ("heal", "refused"),
        ("hint", "refused"),
    ]
    assert mine[0]["hint_text"] == hint and mine[0]["fix_shown"] == ""
    assert "Midterm exam" in mine[3]["error"]
    ours = [r for r in rows if r["student"] in classroom.students]  # the shared class: other tests' too
    assert not any(AVERAGE_FIX_LINE in value for r in ours for value in r.values())
    jsonl = context.request.get(hub.service_url + "export.jsonl")
    lines = [json.loads(line) for line in jsonl.text().splitlines()]
    assert [e["entry"] for e in lines if e.get("user") == s1] == ["hint", "hint", "heal", "hint"]

    # 6. a quota reset, logged with who made it
    page.get_by_role("row", name=s1).get_by_role("button", name=f"Reset today's quota of {s1}").click()
    expect(page.get_by_role("status")).to_contain_text(f"quota of {s1} was reset")
    last = classroom.log()[-1]
    assert (last["kind"], last["user"], last["by"]) == ("reset", s1, INSTRUCTOR)
    shot(page, "5-after-a-quota-reset")

    # 7. a teaching assistant (the instructors' group, no hub admin) sees it; a student gets 403
    ta_context, ta_page = signed_in(browser, hub, TA)
    expect(ta_page.get_by_role("row", name=s1)).to_be_visible()
    ta_context.close()
    student_context, student_page = signed_in(browser, hub, classroom.students[1])
    response = student_page.goto(hub.service_url)
    assert response is not None and response.status == 403
    expect(student_page.locator("main")).to_contain_text("for the class's instructors")
    shot(student_page, "6-a-student-gets-403")
    for path in ("policy", f"students/{s1}", "export.csv", "export.jsonl"):
        assert student_page.request.get(hub.service_url + path).status == 403, path
    assert student_page.request.post(hub.service_url + f"students/{classroom.students[1]}/reset").status == 403
    student_context.close()
    context.close()


PAYLOADS = (
    '<script>window.__pwned = "script"</script>',
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "<a href=\"javascript:window.__pwned = 'link'\">click me</a>",
    '"><svg onload="window.__pwned = \'svg\'">',
)
PAYLOAD = " ".join(PAYLOADS)


def test_payloads_from_a_student_s_cell_and_the_model_s_prose_are_inert_on_the_page(classroom, chromium):
    """A student's cell, notebook name and the model's prose carry script, handlers and a
    javascript: link; on the page they are text, nothing runs, no element is made."""
    from playwright.sync_api import expect

    s2 = classroom.students[1]
    cell = f"# {PAYLOAD}\n" + AVERAGE
    prose = f"{PROSE} {PAYLOAD}"
    script = [
        Reply(
            f"```python\n# {PAYLOAD}\ndef average(scores):\n    {AVERAGE_FIX_LINE}\n\nassert average([1, 2]) == 1.5\n```",
            match="def average(",
        ),
        Reply(prose, match="teacher"),
    ]
    classroom.script(*script, model="course-model")  # the service's own model is refused
    # the shared class's hint writer writes prose: the model's prose is one of the payloads' ways in
    classroom.policy({"mode": "hints", "reveal_fix": False, "groups": {COURSE: {"model": "course-model"}}})
    hub, model = classroom.hub, classroom.model
    screens()
    browser = chromium
    env = student_env(s2, hub, hub.token(s2), f"{PAYLOADS[1]}.ipynb")
    got = run_student(s2, hint_notebook(cell), env, "payload")
    assert "Hint 1 of" in cell_text(got, 1), cell_text(got, 1)
    [line] = [e for e in classroom.log() if e.get("hints")]
    assert PAYLOADS[0] in line["hints"][0] and PAYLOADS[0] in line["cell"]
    # the course's model is the one the service asked for (the endpoint knows no other)
    assert {r["model"] for r in model.chat_requests()} == {"course-model"} and line["model"] == "course-model"

    context, page = signed_in(browser, hub, INSTRUCTOR)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in ("", f"students/{s2}"):
        page.goto(hub.service_url + path)
        expect(page.locator("main")).to_contain_text("<script>window.__pwned")
        assert page.evaluate("window.__pwned") is None
        found = page.evaluate(
            """() => ({
                scripts: document.scripts.length,
                made: document.querySelectorAll('main img, main svg, main iframe, main object').length,
                handlers: [...document.querySelectorAll('*')].flatMap(
                    el => [...el.attributes].filter(a => a.name.startsWith('on')).map(a => a.name)),
                js: [...document.querySelectorAll('[href], [src], [action]')].map(
                    el => el.getAttribute('href') || el.getAttribute('src') || el.getAttribute('action'))
                    .filter(u => u.trim().toLowerCase().startsWith('javascript:')),
            })"""
        )
        assert found == {"scripts": 0, "made": 0, "handlers": [], "js": []}, (path, found)
    # the student's page shows every payload as the text it was: the cell, the prose
    page.goto(hub.service_url + f"students/{s2}")
    page.get_by_text("The cell", exact=True).click()
    for where in (page.locator("pre.code").first, page.locator(".hint-text")):
        text = where.inner_text()
        for payload in PAYLOADS:
            assert payload in text, (payload, text)
    # a click on the text that looks like a link goes nowhere
    page.locator(".hint-text").get_by_text("click me").click()
    assert page.url.endswith(f"students/{s2}") and page.evaluate("window.__pwned") is None
    shot(page, "7-payloads-are-text")
    assert dialogs == []
    context.close()
