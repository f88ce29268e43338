"""Build what the sandbox needs to grade one candidate with a benchmark's hidden tests.

Why this shape: the candidate is hostile. It runs as the program (the real
``__main__``); the benchmark's grader runs as the program's *tests*, which the runner
executes in a separate checker process that never runs candidate code. The grader calls
the candidate's functions over a JSON boundary (plain values come back rebuilt from
data, anything else as an opaque handle; comparisons, operators, builtins, libraries and
random draws are the checker's own), so it cannot read the grading code, patch the test
framework, return an object whose ``__eq__`` always says yes, or pin the grader's
random inputs. A pass is every grader statement passing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

_HEADER = """\
import sys as _sys, types as _types, json as _json
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 3000))
"""

_MODULE = """\
_m = _types.ModuleType({name!r})
_m.__path__ = []
_sys.modules[{name!r}] = _m
exec(compile({source!r}, {filename!r}, "exec"), _m.__dict__)
if "." in {name!r}:
    setattr(_sys.modules[{name!r}.rsplit(".", 1)[0]], {name!r}.rsplit(".", 1)[1], _m)
"""


@dataclass(frozen=True)
class HiddenRun:
    """The grader (run as tests, in the checker) and a prelude run before the program."""

    tests: str
    prelude: str = ""


def grader(check: str, *, modules: dict[str, str] | None = None, program_as: str | None = None) -> str:
    """The grader's source.

    ``modules`` maps module names to sources the grader imports (parents first), made
    importable in the checker only; ``program_as`` also makes the candidate's module
    importable under that name (``__program__``, a remote view of it); ``check`` must
    raise on failure and sees ``_sys`` and ``_json``.
    """
    mods = "".join(
        _MODULE.format(name=name, source=src, filename=name.replace(".", "/") + ".py")
        for name, src in (modules or {}).items()
    )
    alias = f"_sys.modules[{program_as!r}] = __program__\n" if program_as else ""
    return _HEADER + mods + alias + check


def json_literal(value: object) -> str:
    """A Python expression for a JSON-able value (for embedding in generated code)."""
    return f"_json.loads({json.dumps(value)!r})"
