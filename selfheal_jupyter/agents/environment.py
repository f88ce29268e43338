"""What the agents tell the model about where its program will run.

The sandbox image's requirements file is the single source of truth for the
installed libraries, so the prompt never promises a library the image lacks.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
REQUIREMENTS_FILES = (
    _PACKAGE_DIR / "sandbox" / "requirements.txt",
    _PACKAGE_DIR.parent / "sandbox" / "requirements.txt",
)
FALLBACK_LIBRARIES = ("numpy", "pandas", "matplotlib")
_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:==\s*([^\s;#]+))?")


def parse_requirements(text: str, *, first_group: bool = False) -> list[str]:
    """``name version`` (or ``name``) per requirement line, in file order.

    ``first_group``: only the first block of consecutive requirement lines — in the
    image's file, what candidates import (their pinned dependencies follow after a
    blank line and are not worth prompt tokens on every call).
    """
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line and first_group and out:
            break
        if not line or line.startswith("-"):
            continue
        match = _REQ_RE.match(line)
        if match:
            name, version = match.groups()
            out.append(f"{name} {version}" if version else name)
    return out


@lru_cache(maxsize=1)
def installed_libraries() -> tuple[str, ...]:
    """The libraries the sandbox image has, from its requirements file."""
    for path in REQUIREMENTS_FILES:
        try:
            libs = parse_requirements(path.read_text(encoding="utf-8"), first_group=True)
        except OSError:
            continue
        if libs:
            return tuple(libs)
    return FALLBACK_LIBRARIES


def environment_text(libraries: tuple[str, ...] | list[str] | None = None) -> str:
    """The rules of the sandbox, as prompt lines."""
    libs = ", ".join(libraries or installed_libraries())
    return (
        "The program runs as a script with Python 3.11 in an isolated sandbox:\n"
        f"- Installed libraries (besides the standard library): {libs}. Nothing else "
        "can be installed.\n"
        "- There is no network: do not download anything or call web APIs.\n"
        "- There is no user: never call input().\n"
        "- Import only what the program uses.\n"
        "- Print every result the task asks for with print(); matplotlib figures are captured "
        "automatically (no need for plt.show() or savefig).\n"
        "- Only the current working directory (a temporary directory) is writable."
    )
