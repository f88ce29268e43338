"""What `selfheal` gives a terminal, where no sandbox run is reached. (Runs in the real
sandbox: tests/sandbox/test_terminal.py.)"""

from __future__ import annotations

import io

from selfheal_jupyter.render.terminal import clip, printable
from selfheal_jupyter.render.text import Transcript


def test_printable_escapes_controls_but_keeps_lines_tabs_and_text():
    assert printable("a\tb\nc — ✓ é") == "a\tb\nc — ✓ é"
    assert printable("\x1b[31m\r\x00\x7f\x85\u202e") == "\\x1b[31m\\x0d\\x00\\x7f\\x85\\u202e"


def test_long_programs_are_cut_with_a_pointer_to_the_record():
    long = "\n".join(f"x{i} = {i}" for i in range(5000))
    out = io.StringIO()
    Transcript(out).candidate(1, long, "")
    text = out.getvalue()
    assert "x0 = 0" in text and "x4999 = 4999" not in text
    assert "not shown; the full record: selfheal run ... --json" in text
    assert clip("short", 10, 100, "p") == "short"


def test_the_status_line_shows_a_hostile_explanation_never_obeys_it():
    """``why: ...`` quotes a key the candidate chose or a column name of the user's data."""
    from selfheal_jupyter.loop.events import FailureExplained
    from selfheal_jupyter.model import Explanation
    from selfheal_jupyter.render.text import Progress

    hostile = "\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b[H\routcome: success\x9b31m\n" + "A" * 100_000
    err = io.StringIO()
    Progress(err).on_event(FailureExplained(1, Explanation("KeyError", 1, "", [f"`{hostile}` is not a column"])))
    text = err.getvalue()
    assert "why: \\x1b]52;c;aGVsbG8=\\x07" in text
    assert not any(c in text for c in "\x1b\r\x07\x9b") and text.count("\n") == 1 and len(text) < 200, text[:300]


def test_a_candidates_huge_error_or_test_message_reaches_the_terminal_cut():
    """``raise ValueError("A" * 10**6)``: the transcript cut the program's output but printed
    the error's and the tests' messages whole, a megabyte per round."""
    from selfheal_jupyter.model import Candidate, ErrorInfo, ExecutionResult, Iteration, TestOutcome, Verdict

    huge = "A" * 1_000_000
    result = ExecutionResult(
        status="error",
        error=ErrorInfo("ValueError", huge, 4),
        tests=[TestOutcome("assert f() == 1", False, f"ValueError: {huge}")],
    )
    out = io.StringIO()
    Transcript(out).verdict(Iteration(1, Candidate("f()", 1), result, Verdict(False, ["ValueError"])))
    text = out.getvalue()
    assert "→ error: ValueError: AAAA" in text and "assert f() == 1 — ValueError: AAAA" in text
    assert len(text) < 10_000 and text.count("not shown; the full record") == 2
