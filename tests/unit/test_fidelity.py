"""The fidelity corpus itself: its intended differences and the normalisation, without
the sandbox. (The differential run: tests/sandbox/test_fidelity.py.)"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parents[1] / "fidelity"
PROGRAMS = sorted(p.name for p in CORPUS.glob("*.py"))
README = Path(__file__).parents[2] / "README.md"


@dataclass(frozen=True)
class Intended:
    """A difference that is there on purpose, and what the sandbox gives instead.

    ``expect`` maps a compared field (status, exit_code, error, stdout, stderr; after
    normalisation) to the sandbox's value: a string or number to be equal, a compiled
    pattern to match in full. Every field not in ``expect`` must still equal python3's.
    """

    reason: str
    expect: dict[str, Any]


_LINE_BUFFERED = (
    "stdout is line-buffered (python3 block-buffers a pipe), so what a program printed "
    "before a timeout, a crash, a signal or os._exit is kept for the feedback."
)

RECURSION_REASON = (
    "The runner's own frames below the program count toward Python's recursion limit; "
    "the limit is raised by their number, so a program recurses exactly as deep as under "
    "python3, but sys.getrecursionlimit() shows the raised value (about 1012)."
)

INTENDED_DIFFERENCES: dict[str, Intended] = {
    "recursion_900.py": Intended(RECURSION_REASON, {"stdout": re.compile(r"10[0-9][0-9] 900\n")}),
    "sys_flags.py": Intended(
        RECURSION_REASON, {"stdout": re.compile(r"0 1 0 0 0\n0 0 False False 0 1\nTrue False 10[0-9][0-9]\n")}
    ),
    "limit_no_network.py": Intended(
        "The sandbox has no network: its only interface is the loopback.", {"stdout": "['lo']\n"}
    ),
    "limit_readonly_root.py": Intended(
        "The root filesystem is read-only and the user is not root: only the working directory (a tmpfs) is writable.",
        {"stdout": "False False True\n"},
    ),
    "limit_nonroot_user.py": Intended(
        "The program runs as an unprivileged uid (and gid) of its own, which no other "
        "process in its container has had; not root, and not the runner's 65534.",
        {"stdout": re.compile(r"(?!65534 )([1-9][0-9]{3,9}) \1 False\n")},
    ),
    "limit_memory.py": Intended(
        "Memory is limited (512 MB by default): a larger allocation raises MemoryError and the run's status is oom.",
        {
            "status": "oom",
            "exit_code": 1,
            "error": "MemoryError",
            "stdout": "",
            "stderr": "Traceback (most recent call last):\n"
            '  File "limit_memory.py", line 2, in <module>\n'
            "    block = bytes(600 * 2**20)\n"
            "            ^^^^^^^^^^^^^^^^^^\n"
            "MemoryError\n",
        },
    ),
    "limit_pids.py": Intended(
        "Processes are limited (64 per container by default): fork fails with EAGAIN.",
        {"stdout": "fork failed: BlockingIOError\n"},
    ),
    "limit_output.py": Intended(
        "Output is capped (1 MiB per stream by default): the program is killed there and "
        "the run's status is output_limit.",
        {
            "status": "output_limit",
            "exit_code": 128 + signal.SIGKILL,
            "stdout": re.compile(
                r"(?:y{1023}\n){1024}\n"
                r"\[selfheal: stdout truncated after 1048576 bytes\]"
            ),
        },
    ),
    "os_exit_5.py": Intended(_LINE_BUFFERED, {"stdout": "buffered, lost\n"}),
    "signal_sigterm_self.py": Intended(_LINE_BUFFERED, {"stdout": "buffered, lost\n"}),
    "stdout_os_write_order.py": Intended(
        _LINE_BUFFERED, {"stdout": "printed first\nwritten second, arrives first\nprinted third\n"}
    ),
    "stdio_state.py": Intended(
        _LINE_BUFFERED, {"stdout": "False False False\nTrue True\nutf-8 surrogateescape backslashreplace\nTrue 1 2 0\n"}
    ),
    "preloaded_with_a_library.py": Intended(
        "A program that imports anything beyond the standard library starts from a process "
        "with numpy, pandas and matplotlib already imported (a fork server's speed: "
        "`import pandas` costs nothing), and `sys.modules` shows them. A program that "
        "imports only the standard library starts from one that imported none of them.",
        {"stdout": "[0.0, 0.0] ['pandas', 'matplotlib.pyplot']\n"},
    ),
    "gc_state.py": Intended(
        "The preloaded objects sit in the garbage collector's permanent generation "
        "(gc.freeze(), so forks do not copy their pages): gc.get_freeze_count() is not 0.",
        {"stdout": re.compile(r"True \(700, 10, 10\) [1-9][0-9]*\n")},
    ),
}

_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def normalise(text: str, name: str, dirs: dict[str, str]) -> str:
    """Remove what differs between two installations, never what the program did.

    ``dirs`` maps directories (longest first wins) to placeholders such as ``<stdlib>``.
    """
    # The program's own file, wherever it was: /tmp/tmpab12/NAME.py, /tmp/run3/NAME.py.
    text = re.sub(r"(?<![\w.\-])/(?:[^\s\"':/]+/)*" + re.escape(name) + r"(?![\w.])", name, text)
    for directory in sorted(dirs, key=len, reverse=True):
        text = text.replace(directory.rstrip("/") + "/", dirs[directory] + "/")
    # Line numbers inside the standard library (a different patch release of it).
    text = re.sub(r'(File "<stdlib>/[^"]+", line )\d+', r"\1N", text)
    return _ADDRESS.sub("0xADDR", text)


def exception_type(stderr: str) -> str | None:
    """The type named by the last traceback on ``stderr`` (last dotted component)."""
    lines = stderr.splitlines()
    start, prefix = None, ""
    for i, line in enumerate(lines):
        if line == "Traceback (most recent call last):":
            start, prefix = i, ""
        elif line == "  + Exception Group Traceback (most recent call last):":
            start, prefix = i, "  | "
    if start is None:  # a SyntaxError is reported without the header
        start = next((i - 1 for i, ln in enumerate(lines) if ln.startswith('  File "')), None)
        if start is None:
            return None
    for line in lines[start + 1 :]:
        if not line.startswith(prefix):
            continue
        body = line[len(prefix) :]
        if body and not body[0].isspace():
            match = re.match(r"([A-Za-z_][\w.]*)(?::|$)", body)
            return match.group(1).rsplit(".", 1)[-1] if match else None
    return None


# --------------------------------------------------------------------------- the tests
def test_the_corpus_is_large_enough():
    assert len(PROGRAMS) >= 45
    assert set(INTENDED_DIFFERENCES) <= set(PROGRAMS)


def test_readme_lists_every_intended_difference():
    text = README.read_text(encoding="utf-8")
    for name, intended in INTENDED_DIFFERENCES.items():
        row = f"| `{name}` | {intended.reason} |"
        assert row in text, f"README.md lacks the row: {row}"


# --------------------------------------------------------------------------- the helpers
def test_normalise_keeps_what_the_program_did():
    dirs = {"/usr/lib/python3.11": "<stdlib>", "/usr/local/lib/python3.11/dist-packages": "<site>"}
    text = (
        '  File "/tmp/run3/p.py", line 4, in <module>\n'
        '  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode\n'
        '  File "/usr/local/lib/python3.11/dist-packages/pandas/core/frame.py", line 9\n'
        "/tmp/x/p.py:3: UserWarning: w\n<function f at 0x7f12ab34cd56>\nline 4 of p.py.bak\n"
    )
    assert normalise(text, "p.py", dirs) == (
        '  File "p.py", line 4, in <module>\n'
        '  File "<stdlib>/json/decoder.py", line N, in decode\n'
        '  File "<site>/pandas/core/frame.py", line 9\n'
        "p.py:3: UserWarning: w\n<function f at 0xADDR>\nline 4 of p.py.bak\n"
    )


def test_exception_type_of_a_traceback():
    chained = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "a.py", line 3\n    f()\n'
        "json.decoder.JSONDecodeError: Expecting value\nnote: a note\n"
    )
    assert exception_type(chained) == "JSONDecodeError"
    assert (
        exception_type('Traceback (most recent call last):\n  File "a.py"\nKeyboardInterrupt\n') == "KeyboardInterrupt"
    )
    assert (
        exception_type("  File \"a.py\", line 2\n    x = [\n        ^\nSyntaxError: '[' was never closed\n")
        == "SyntaxError"
    )
    assert (
        exception_type(
            "  + Exception Group Traceback (most recent call last):\n"
            '  |   File "a.py", line 1\n  | ExceptionGroup: eg (1 sub-exception)\n'
            "  +-+---------------- 1 ----------------\n    | ValueError: v\n"
        )
        == "ExceptionGroup"
    )
    assert exception_type("fatal: configuration missing\n") is None
