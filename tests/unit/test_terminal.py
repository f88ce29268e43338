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
