"""QA: a static pre-check, then the sandbox run with the user's tests and spec.

Why a pre-check: a syntax error or an undefined name is certain to fail, and finding
it with ``compile()`` and pyflakes costs a millisecond instead of a sandbox run. Its
failure is reported as a ``blocked`` :class:`ExecutionResult` shaped like the runtime
error would be, so the feedback reads the same either way.

QA finds the facts (the run, the spec a repair must keep and how a candidate breaks it,
what a program shows on its checks); :mod:`selfheal_jupyter.loop.verdict` decides from
them whether the program passed.
"""

from __future__ import annotations

import ast
import builtins
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from pyflakes import checker as pyflakes_checker
from pyflakes import messages as pyflakes_messages

from ..errors import BadInput
from ..model import (
    CANDIDATE_FILE,
    ErrorInfo,
    ExecutionResult,
    Frame,
    Limits,
    NotebookContext,
    SpecViolation,
    Task,
)
from ..nesting import nesting_note, too_deep
from ..sandbox.base import Sandbox
from ..spec import guard as spec_mod
from ..spec import notebook_data
from ..spec.behaviour import Observation, observation, observing_tests

FILENAME = CANDIDATE_FILE
"""The file name candidates run under in the sandbox (frames refer to it)."""


def check_tests(tests: str | None) -> None:
    """Raise :class:`BadInput` when the user's tests do not parse."""
    if tests is None or not tests.strip():
        return
    try:
        ast.parse(tests, "tests")
    except SyntaxError as exc:
        raise BadInput(
            f"The tests do not parse: {exc.msg} (line {exc.lineno}: {(exc.text or '').strip()}). "
            "Fix the test code (plain Python statements such as `assert result == 42`) "
            "and run again."
        ) from None


def _source_line(code: str, line: int | None) -> str:
    lines = code.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def _blocked(code: str, etype: str, message: str, line: int | None, note: str) -> ExecutionResult:
    frames = [Frame(FILENAME, line, "<module>", _source_line(code, line))] if line else []
    return ExecutionResult(
        status="blocked",
        exit_code=None,
        error=ErrorInfo(type=etype, message=message, line=line, frames=frames),
        message=note,
    )


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _assigned_names(targets: list[ast.expr]) -> set[str]:
    out: set[str] = set()
    for target in targets:
        for n in ast.walk(target):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
    return out


def _bound_by_definition(stmt: ast.stmt) -> set[str]:
    """The names a top-level ``def``, ``class`` or import binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in stmt.names}
    return set()


def overwritten_input(tree: ast.Module, inputs: Iterable[str]) -> tuple[str, int, int] | None:
    """An input the program replaces before ever reading it (``sales = pd.DataFrame(...)``).

    Small models like to invent sample data instead of using the user's; the run
    would then "pass" on made-up numbers. ``df = df.dropna()`` reads ``df`` first and
    is fine. A definition or an import of an input's name replaces it wherever it stands:
    every later read gets the candidate's object (``class sales(metaclass=...)`` that
    iterates as rigged numbers) in place of the user's data.
    """
    names = set(inputs)
    read: set[str] = set()
    for stmt in tree.body:
        defined = _bound_by_definition(stmt) & names
        if defined:
            return min(defined), stmt.lineno, stmt.end_lineno or stmt.lineno
        if isinstance(stmt, ast.Assign):
            targets, value = list(stmt.targets), stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            targets, value = [], None
        if value is not None:
            value_reads = _loaded_names(value)
            for name in sorted((_assigned_names(targets) & names) - read - value_reads):
                return name, stmt.lineno, stmt.end_lineno or stmt.lineno
        read |= _loaded_names(stmt)
    return None


REMOVED_NOTE = "# (selfheal removed an assignment here: `{name}` already holds the user's data)"
_REMOVED_NOTE_LINE = re.compile(
    "^" + r"[A-Za-z_][A-Za-z0-9_]*".join(map(re.escape, REMOVED_NOTE.split("{name}"))) + "$"
)


def is_removed_note(line: str) -> bool:
    """``line`` is a note :func:`strip_input_overwrites` wrote (the tool's, not the model's)."""
    return bool(_REMOVED_NOTE_LINE.match(line.strip()))


def strip_input_overwrites(code: str, inputs: Iterable[str]) -> tuple[str, list[str]]:
    """Remove top-level statements that replace an input with made-up data.

    Small models keep writing ``df = pd.DataFrame({...example...})`` even when told
    the input exists; the run would then use invented numbers. A plain assignment
    (``name = ...``, nothing else on its lines) that overwrites an input before the
    program ever reads it is replaced by a one-line comment, so the program works on
    the user's data. Anything less clear-cut is left to :func:`precheck` to refuse.
    Returns the new code and the names whose assignment was removed.
    """
    names = set(inputs)
    removed: list[str] = []
    if not names:
        return code, removed
    for _ in range(20):
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return code, removed
        found = overwritten_input(tree, names)
        if found is None:
            return code, removed
        name, line, end = found
        stmt = next(s for s in tree.body if s.lineno == line)
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        else:
            return code, removed
        simple = (
            all(isinstance(t, ast.Name) for t in targets)
            and stmt.col_offset == 0
            and not any(
                other is not stmt and other.lineno <= end and (other.end_lineno or 0) >= line for other in tree.body
            )
        )
        if not simple:
            return code, removed
        lines = code.splitlines(keepends=True)
        note = REMOVED_NOTE.format(name=name)
        said = line >= 2 and lines[line - 2].strip() == note  # a program copied from the last round
        lines[line - 1 : end] = [] if said else [note + "\n"]
        code = "".join(lines)
        removed.append(name)
    return code, removed


TOO_DEEP = "TooDeeplyNested"
"""The error type of a program the pre-check does not read: it nests deeper than the
tool's readers go (:mod:`selfheal_jupyter.nesting`)."""


def unreadable(code: str) -> ExecutionResult | None:
    """A ``blocked`` result when ``code`` nests too deep for any of the tool's readers
    (then nothing else reads it: not pyflakes, the spec guard nor the diagnosis), else None."""
    found = too_deep(code)
    if found is None:
        return None
    return _blocked(
        code,
        TOO_DEEP,
        f"the program nests {nesting_note(found)}: write that expression in smaller steps "
        "(intermediate variables, or sum() over a list)",
        found.line,
        "Not run: the program nests too deep for the static pre-check to read.",
    )


def precheck(code: str, defined: Iterable[str] = (), inputs: Iterable[str] = ()) -> ExecutionResult | None:
    """A ``blocked`` result when the code cannot run (or would ignore an input), else None."""
    deep = unreadable(code)
    if deep is not None:
        return deep
    try:
        tree = ast.parse(code, FILENAME)
        compile(tree, FILENAME, "exec", dont_inherit=True)
    except SyntaxError as exc:
        etype = type(exc).__name__  # SyntaxError, IndentationError, TabError
        return _blocked(
            code,
            etype,
            exc.msg or str(exc),
            exc.lineno,
            "Not run: the program does not compile.",
        )
    except ValueError as exc:  # e.g. null bytes in the source
        return _blocked(code, "SyntaxError", str(exc), None, "Not run: the program does not compile.")
    replaced = overwritten_input(tree, inputs)
    if replaced is not None:
        name, line, end = replaced
        where = f"lines {line}-{end}" if end > line else f"line {line}"
        return _blocked(
            code,
            "InputOverwritten",
            f"{where} replace the input {name!r}, which already holds the user's real "
            f"data, with made-up values. Delete {where} and use {name} directly",
            line,
            "Not run: the program would ignore the user's data.",
        )
    found = pyflakes_checker.Checker(tree, filename=FILENAME, builtins=set(defined) | set(inputs))
    # pyflakes reads function bodies after the whole module: a global that a ``del``
    # removes at the end (a cell cleaning up its helpers) reads as never defined there,
    # though the function ran before it. Such a name was defined: the run says the rest.
    deleted = {
        t.id for node in ast.walk(tree) if isinstance(node, ast.Delete) for t in node.targets if isinstance(t, ast.Name)
    }
    undefined = [
        m for m in found.messages if isinstance(m, pyflakes_messages.UndefinedName) and m.message_args[0] not in deleted
    ]
    if not undefined:
        return None
    undefined.sort(key=lambda m: (m.lineno, m.col))
    first = undefined[0]
    message = f"name {first.message_args[0]!r} is not defined"
    others = sorted({m.message_args[0] for m in undefined[1:]} - {first.message_args[0]})
    if others:
        message += f" (also undefined: {', '.join(repr(n) for n in others)})"
    return _blocked(
        code,
        "NameError",
        message,
        first.lineno,
        "Not run: the static pre-check found a name that is never defined.",
    )


def failing_lines(result: ExecutionResult | None) -> list[int]:
    """Lines of the candidate where its run failed (the failing frame and its callers)."""
    if result is None or result.error is None:
        return []
    lines = [f.line for f in result.error.frames if f.file == FILENAME and f.line]
    if result.error.line:
        lines.append(result.error.line)
    return sorted(set(lines))


class QA:
    """Checks and runs candidates in one sandbox with one set of limits."""

    def __init__(self, sandbox: Sandbox, limits: Limits) -> None:
        self.sandbox = sandbox
        self.limits = limits

    @staticmethod
    def defined_names(inputs: Mapping[str, Any]) -> set[str]:
        return set(inputs) | set(dir(builtins)) | {"__file__", "__name__"}

    def precheck(self, code: str, inputs: Mapping[str, Any], defined: Iterable[str] = ()) -> ExecutionResult | None:
        """``inputs``: names holding the user's data (never to be replaced); ``defined``:
        other names the sandbox defines before the program (the notebook's context)."""
        return precheck(code, self.defined_names(inputs) | set(defined), inputs=inputs)

    def run(
        self,
        code: str,
        inputs: Mapping[str, Any],
        tests: str | None,
        cancel: threading.Event | None = None,
        prelude: str | None = None,
        asserts: list[tuple[int, int, str]] | None = None,
    ) -> ExecutionResult:
        """The sandbox run; raises SandboxError when the sandbox itself fails. ``asserts``:
        the user's checks the sandbox's checker evaluates at their place in ``code``
        (:func:`selfheal_jupyter.spec.guard.checked_statements`)."""
        extra: dict[str, Any] = {"prelude": prelude} if prelude else {}
        if asserts:
            extra["asserts"] = asserts
        return self.sandbox.execute(
            code,
            inputs=dict(inputs),
            limits=self.limits,
            tests=tests or None,
            cancel=cancel,
            **extra,
        )

    def observe(
        self,
        code: str,
        inputs: Mapping[str, Any],
        tests: str | None,
        cancel: threading.Event | None = None,
        prelude: str | None = None,
    ) -> Observation | None:
        """What ``code`` shows on ``tests`` (a second, ordinary sandbox run); None when
        it did not run cleanly (an empty observation: it ran and shows nothing)."""
        result = self.run(code, inputs, observing_tests(tests), cancel=cancel, prelude=prelude)
        return observation(result, tests)

    @staticmethod
    def spec_for(task: Task, first: ExecutionResult | None) -> spec_mod.Spec | None:
        """The spec a repair must keep: None unless the task started from the user's code.

        ``first`` is the run of the user's code itself (round 0): the statement it failed
        at may not be hidden behind a ``try`` by a repair.
        """
        if task.initial_code is None or not task.initial_code.strip():
            return None
        return spec_mod.extract(task.initial_code, task.tests, failing_lines(first))

    @staticmethod
    def spec_asserts(spec: spec_mod.Spec | None, code: str) -> list[tuple[int, int, str]] | None:
        """The user's checks in ``code`` the sandbox's checker evaluates (None: no spec)."""
        return None if spec is None else spec_mod.checked_statements(spec, code)

    @staticmethod
    def check_spec(
        spec: spec_mod.Spec | None, code: str, context: NotebookContext | None = None
    ) -> list[SpecViolation] | None:
        """None when there is no spec; else every way ``code`` breaks it, its notebook
        data included (:mod:`selfheal_jupyter.spec.notebook_data`). A task in words
        (``%%agent``) has no code of the user's to keep, but the notebook data its words
        name is theirs all the same: its rules apply as to a heal."""
        if spec is None:
            if context is not None and context.data_names():
                return notebook_data.check(context, "", code)
            return None
        return spec_mod.check(spec, code) + notebook_data.check(context, spec.code, code)
