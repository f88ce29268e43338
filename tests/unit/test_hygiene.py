"""What comes out of the sandbox is checked before anything uses it, and shown only in
safe forms.

1. The result frame is validated on the host (``result_json.read_result``): hostile
   or broken frames become a clear ``error`` result, never an exception.
2. Output hygiene: only text/plain, sanitised text/html and real PNGs survive, with
   lone surrogates replaced — in the record, the static HTML, the panel's HTML, the
   exported notebook (and nbconvert's page of it), the JSON export and ``agent_result``.

The first part needs nothing; the end-to-end part uses the real sandbox, the real
``openai`` client against the scripted server, and real nbconvert.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from selfheal_jupyter.model import (
    MALFORMED,
    Candidate,
    ExecutionResult,
    Iteration,
    RichOutput,
    Run,
    Task,
    Verdict,
)
from selfheal_jupyter.result_json import read_result
from selfheal_jupyter.safe_output import clean_output, is_png_base64, sanitize_html

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LONE = "\ud800"
HOSTILE_HTML = (
    '<table class="dataframe jp-OutputArea" border="1"><tr><th class="selfheal-summary">a</th>'
    f'<td onclick="steal()">1{LONE}</td></tr></table><script>fetch("/api/kernels")</script>'
    '<img src="http://evil.example/x.png" onerror="alert(1)"><a href="javascript:alert(1)">x</a>'
)
FORGED = [
    {"mime": "application/javascript", "data": "fetch('/api/kernels')"},
    {"mime": "text/html", "data": HOSTILE_HTML},
    {"mime": "image/svg+xml", "data": "<svg onload='alert(1)'/>"},
    {"mime": "image/png", "data": base64.b64encode(b"<script>alert(1)</script>").decode()},
    {"mime": "image/png", "data": PNG + "\n"},
    {"mime": "image/png", "data": "not base64 at all"},
    {"mime": "text/plain", "data": f"plain{LONE}"},
    {"mime": "image/png", "data": PNG},
]


def frame(**changes: Any) -> dict[str, Any]:
    """A well-formed result frame as the runner sends it (with its bookkeeping keys)."""
    good: dict[str, Any] = {
        "status": "error",
        "exit_code": 1,
        "stdout": "6\n",
        "stderr": "Traceback ...\n",
        "error": {
            "type": "ZeroDivisionError",
            "message": "division by zero",
            "line": 4,
            "frames": [{"file": "job.py", "line": 4, "function": "f", "source": "return 1 / 0"}],
            "locals": {"n": "0"},
        },
        "outputs": [{"mime": "text/plain", "data": "6"}],
        "tests": [{"source": "assert f() == 1", "passed": False, "line": 1, "message": "not run: the program failed"}],
        "stdout_truncated": False,
        "stderr_truncated": False,
        "message": "",
        "run_s": 0.01,
        "server_s": 0.012,
        "prep_s": 0.003,
        "dirty": False,
    }
    good.update(changes)
    return good


def edit(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    f = frame()
    fn(f)
    return f


# --------------------------------------------------------------------------- the schema
def test_a_well_formed_frame_becomes_the_result_it_describes():
    r = read_result(frame())
    assert not r.is_malformed and r.status == "error" and r.exit_code == 1
    assert r.error is not None and r.error.frames[0].source == "return 1 / 0"
    assert r.error.locals == {"n": "0"} and r.tests[0].passed is False
    assert r.outputs == [RichOutput("text/plain", "6")]
    # a record's JSON comes back as the same result (the export / eval store round trip)
    assert read_result(json.loads(json.dumps(r.to_dict()))) == r
    ok = read_result(frame(status="ok", exit_code=0, error=None, tests=[]))
    assert ok.ok and not ok.is_malformed


def test_an_error_or_a_tests_message_comes_in_cut():
    """``raise ValueError("A" * 6 * 10**7)``: the output limit counts what a program prints,
    and its error's and tests' messages came through whole (60 MB) to the panel, the
    transcript and the record (red team, issue 46)."""
    huge = "A" * 1_000_000
    r = read_result(edit(lambda f: (f["error"].update(message=huge), f["tests"][0].update(message=huge))))
    assert r.error is not None and r.error.message.startswith("AAA") and len(r.error.message) <= 4_000
    assert len(r.tests[0].message) <= 4_000 and not r.is_malformed
    assert read_result(json.loads(json.dumps(r.to_dict()))) == r


HOSTILE_FRAMES = [
    ("the issue's case", frame(outputs=[{"nomime": 1}]), "outputs[0] lacks 'mime', 'data'"),
    ("not an object", [1, 2, 3], "should be an object, not list"),
    ("null", None, "should be an object, not null"),
    ("a string", "ok", "should be an object, not str"),
    ("no status", edit(lambda f: f.pop("status")), "lacks 'status'"),
    ("no tests", edit(lambda f: f.pop("tests")), "lacks 'tests'"),
    ("unknown status", frame(status="passed"), "status 'passed' is not one of"),
    ("status not str", frame(status=["ok"]), "status should be a string, not list"),
    ("exit code a string", frame(exit_code="0"), "exit_code should be an integer, not str"),
    ("exit code a bool", frame(exit_code=True), "exit_code should be an integer, not bool"),
    ("stdout not str", frame(stdout=7), "stdout should be a string, not int"),
    ("stderr a list", frame(stderr=["a"]), "stderr should be a string, not list"),
    ("outputs an object", frame(outputs={"mime": "text/plain"}), "outputs should be a list"),
    (
        "output data not str",
        frame(outputs=[{"mime": "text/plain", "data": 1}]),
        "outputs[0].data should be a string, not int",
    ),
    (
        "output mime not str",
        frame(outputs=[{"mime": None, "data": ""}]),
        "outputs[0].mime should be a string, not null",
    ),
    ("output a string", frame(outputs=["text/plain"]), "outputs[0] should be an object"),
    ("error a string", frame(error="boom"), "error should be an object, not str"),
    ("error without type", edit(lambda f: f["error"].pop("type")), "error lacks 'type'"),
    (
        "error message not str",
        edit(lambda f: f["error"].update(message={"x": 1})),
        "error.message should be a string, not dict",
    ),
    (
        "frame line a string",
        edit(lambda f: f["error"]["frames"][0].update(line="4")),
        "error.frames[0].line should be an integer, not str",
    ),
    ("frames not a list", edit(lambda f: f["error"].update(frames="f")), "error.frames should be a list"),
    (
        "locals value not str",
        edit(lambda f: f["error"].update(locals={"n": 0})),
        "error.locals['n'] should be a string, not int",
    ),
    (
        "test passed a string",
        edit(lambda f: f["tests"][0].update(passed="yes")),
        "tests[0].passed should be true or false, not str",
    ),
    (
        "test passed an int",
        edit(lambda f: f["tests"][0].update(passed=1)),
        "tests[0].passed should be true or false, not int",
    ),
    ("test without source", edit(lambda f: f["tests"][0].pop("source")), "tests[0] lacks 'source'"),
    ("truncated flag a string", frame(stdout_truncated="no"), "stdout_truncated should be true or false"),
    ("message not str", frame(message=None), "message should be a string, not null"),
    ("duration NaN", frame(duration_s=float("nan")), "duration_s should be a finite number"),
    ("ok with an error", frame(status="ok", exit_code=0), "status 'ok' with exit code 0 and an error"),
    ("ok with exit code 1", frame(status="ok", error=None), "status 'ok' with exit code 1"),
]


@pytest.mark.parametrize(
    "data, problem", [(d, p) for _, d, p in HOSTILE_FRAMES], ids=[name for name, _, _ in HOSTILE_FRAMES]
)
def test_a_malformed_frame_is_a_clear_error_result_never_an_exception(data, problem):
    r = read_result(copy.deepcopy(data))
    assert r.status == "error" and not r.ok and r.is_malformed
    assert r.error is not None and r.error.type == MALFORMED
    assert problem in r.error.message, r.error.message
    assert problem in r.message and "counts as failed" in r.message
    assert r.outputs == [] and r.tests == []  # nothing of a broken frame is believed
    json.dumps(r.to_dict())


def test_every_string_of_a_frame_loses_its_lone_surrogates():
    f = frame(stdout=f"a{LONE}b", stderr=LONE, message=f"m{LONE}")
    f["error"].update(message=LONE, locals={f"x{LONE}": LONE})
    f["error"]["frames"][0]["source"] = LONE
    f["tests"][0]["message"] = LONE
    r = read_result(json.loads(json.dumps(f)))  # JSON carries "\ud800" escapes
    text = json.dumps(r.to_dict(), ensure_ascii=False)
    text.encode("utf-8")  # would raise UnicodeEncodeError with a lone surrogate left
    assert r.stdout == "a\ufffdb" and r.error is not None and r.error.locals == {"x\ufffd": "\ufffd"}


# --------------------------------------------------------------------------- hygiene rules
def test_only_plain_text_sanitised_html_and_real_pngs_survive_a_frame():
    r = read_result(frame(outputs=copy.deepcopy(FORGED)))
    assert not r.is_malformed
    assert [o.mime for o in r.outputs] == ["text/html", "text/plain", "image/png"]
    html, plain, png = (o.data for o in r.outputs)
    assert plain == "plain\ufffd" and png == PNG
    assert html == '<table border="1"><tbody><tr><th>a</th><td>1\ufffd</td></tr></tbody></table>x'


def test_sanitize_drops_class_and_everything_that_runs_or_loads():
    clean = sanitize_html(HOSTILE_HTML)
    for bad in ("class=", "<script", "onclick", "onerror", "evil.example", "javascript:", "fetch(", "<img", "<a "):
        assert bad not in clean, bad
    clean.encode("utf-8")


def test_png_check():
    assert is_png_base64(PNG)
    assert not is_png_base64(base64.b64encode(b"GIF89a....").decode())
    assert not is_png_base64(PNG[:-2])  # padding missing
    assert not is_png_base64(PNG[:20] + " " + PNG[20:])
    assert not is_png_base64("\u0660" * 8)  # non-ASCII digits
    assert clean_output("image/png", 5) is None and clean_output(["text/plain"], "x") is None


def hand_made_run(outputs: list[RichOutput]) -> Run:
    """A record made without the sandbox (as a test, a plugin or a loaded file could)."""
    result = ExecutionResult(status="ok", exit_code=0, stdout=f"out{LONE}\n", outputs=outputs)
    it = Iteration(1, Candidate("print('out')\nshow()\n", 1), result, Verdict(True))
    return Run(task=Task("show a table"), iterations=[it], outcome="success")


FORGED_OUTPUTS = [RichOutput(o["mime"], o["data"]) for o in FORGED]


def test_static_html_and_panel_html_show_only_safe_outputs():
    from selfheal_jupyter.render.html import iteration_body_html, run_html

    for page in (
        run_html(hand_made_run(FORGED_OUTPUTS)),
        iteration_body_html(hand_made_run(FORGED_OUTPUTS).iterations[0]),
    ):  # the panel's
        page.encode("utf-8")
        for bad in (
            "fetch(",
            "<script",
            "onclick",
            "onerror",
            "svg",
            "evil.example",
            'class="dataframe',
            "jp-OutputArea",
            base64.b64encode(b"<script>").decode()[:8],
        ):
            assert bad not in page, bad
        assert f"data:image/png;base64,{PNG}" in page and page.count("<img") == 1
        assert "<td>1\ufffd</td>" in page


def test_export_notebook_nbconvert_page_and_json_keep_no_forged_output(tmp_path):
    import nbformat
    from nbconvert import HTMLExporter

    from selfheal_jupyter.notebook.export import export_run

    run = hand_made_run(FORGED_OUTPUTS)
    nb = nbformat.read(export_run(run, tmp_path / "run.ipynb"), as_version=4)
    nbformat.validate(nb)
    (cell,) = [c for c in nb.cells if c.cell_type == "code"]
    mimes = [m for o in cell.outputs if o.output_type == "display_data" for m in o.data]
    assert mimes == ["text/html", "text/plain", "image/png"]
    page, _ = HTMLExporter().from_notebook_node(nb)
    assert "fetch(" not in page and "api/kernels" not in page and "onclick" not in page
    assert "application/javascript" not in page and "svg onload" not in page

    record = json.loads(export_run(run, tmp_path / "run.json", as_json=True).read_text())
    outputs = record["iterations"][0]["result"]["outputs"]
    assert [o["mime"] for o in outputs] == ["text/html", "text/plain", "image/png"]
    assert "script" not in json.dumps(outputs)
