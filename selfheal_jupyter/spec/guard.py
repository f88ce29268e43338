"""The user's spec: what a repair of the user's own code must keep.

Why a module of its own: when a task starts from the user's code (``%%heal``, the
autoheal button, ``selfheal run --code``), the asserts in that code, its test
functions and the ``--tests`` block say what "correct" means. A model that makes the
run pass by changing them produces a wrong answer presented as a right one — the
worst outcome this tool can have. So the spec is extracted once from the original
code, and every candidate is compared against it *statically* (Python's AST; the
candidate is never trusted to report on itself):

- ``assert_removed`` / ``assert_changed``: every original assert condition must still
  be an assert condition, AST-equal (only the message may change), and the literal the
  user gave a name it compares with (``expected = 10``), or a name its computation is
  given (``scores = [3, 4, 5]`` of ``mean = average(scores)``), still that name's value
  there;
- ``assert_silenced``: the condition survives, but not as an assert (a print, an ``if``);
- ``test_removed``: a ``test_*`` function, or a top-level call of one, is gone;
- ``failure_swallowed``: an assert, or the statement that failed in the user's run, is
  now inside a ``try`` whose handler does not re-raise (or ``contextlib.suppress``);
- ``bare_except``: a new ``except: pass`` / ``except Exception: pass``;
- ``early_exit``: a new ``sys.exit()`` / ``exit()`` / ``os._exit()``;
- ``hard_coded``: the value an assert expects is written in where the user's code
  computes it (a name the user's code derives assigned that literal, or an expression
  that reads no variable such as ``int("4")``; a function that reads none of its
  inputs, whatever it returns, or returns that literal in place of a body that
  computed; a special case for the asserted input; or a blank filled with it while the
  data it was to be computed from stays unread). Filling a blank the user left (an
  empty right-hand side, ``...``, ``pass``, a placeholder value, ``raise
  NotImplementedError``) with a literal is an answer, not a cheat
  (:mod:`selfheal_jupyter.spec.answer_blanks`).
- ``assert_moved``: a top-level assert of the user's is now inside a block;
- ``assert_outlived``: a name a top-level assert of the user's reads is bound again
  after it (a later ``def``, assignment or import at top level, or a ``global``
  declaration in a function), where the user's code did not: the assert then checks a
  value the program no longer has (a right function asserted, a wrong one kept);
- ``dynamic_binding``: a name is bound where no reading of the code can follow it
  (``globals()``, ``vars()``, ``setattr`` on a module, ``sys.modules``, ``exec`` /
  ``eval``), where the user's code did not (:mod:`selfheal_jupyter.spec.dynamic`);
- ``forced_comparison``: a class of the candidate's makes comparisons lie (a new
  subclass of a plain type such as ``float`` that overrides a comparison, or a
  comparison / truth / hash method whose result ignores what it compares).

The static rules are one half. The other: the user's top-level asserts and top-level
calls of their test functions are evaluated by the sandbox's checker, not by the
candidate, on the candidate's values as data (:func:`checked_statements` says which
statements of a candidate, and with which of the user's code).

Nothing here runs code or knows the loop; QA calls :func:`extract` and :func:`check`.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

from ..model import SpecViolation
from ..source_lines import source_lines
from . import answer_blanks
from .kept import Expectation, Spec, SpecAssert
from .rules import (
    _check_asserted_inputs,
    _check_asserts,
    _check_dynamic_binding,
    _check_expected_values,
    _check_failing,
    _check_forced_comparisons,
    _check_hard_coding,
    _check_outlived,
    _check_silencers,
    _check_tests,
    _constant,
)
from .syntax import ASSERT_LINE as _ASSERT_LINE
from .syntax import NO_VALUE as _NO_VALUE
from .syntax import WRITTEN_IN
from .syntax import call_name as _call_name
from .syntax import functions as _functions
from .syntax import imported_modules as _imported_modules
from .syntax import key as _key
from .syntax import literal as _literal
from .syntax import reads_nothing as _reads_nothing
from .syntax import runnable_tests as _runnable_tests
from .syntax import source as _source
from .syntax import statement_at as _statement_at
from .syntax import swallowing_guard as _swallowing_guard
from .syntax import top_level_test_calls as _top_level_test_calls
from .syntax import walk as _walk


# ----------------------------------------------------------------------------- the spec
def _expectation(test: ast.expr, modules: Iterable[str] = ()) -> Expectation | None:
    """What ``test`` expects of what: a literal's value, or WRITTEN_IN for an expression
    whose value is fixed where it is written but that no fold reads (``math.pi * 4``)."""
    subject: ast.expr | None = None
    value: Any = _NO_VALUE
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        left, right = test.left, test.comparators[0]
        if isinstance(right, ast.Call) and _call_name(right)[1] == "approx" and right.args:
            right = right.args[0]
        lv, rv = _literal(left), _literal(right)
        if rv is _NO_VALUE and lv is _NO_VALUE:
            fixed_left, fixed_right = _reads_nothing(left, modules), _reads_nothing(right, modules)
            lv = WRITTEN_IN if fixed_left and not fixed_right else lv
            rv = WRITTEN_IN if fixed_right and not fixed_left else rv
        if rv is not _NO_VALUE and lv is _NO_VALUE:
            subject, value = left, rv
        elif lv is not _NO_VALUE and rv is _NO_VALUE:
            subject, value = right, lv
    elif isinstance(test, ast.Call) and _call_name(test)[1] in {"isclose", "allclose"} and len(test.args) >= 2:
        a, b = test.args[0], test.args[1]
        if _literal(b) is not _NO_VALUE and _literal(a) is _NO_VALUE:
            subject, value = a, _literal(b)
        elif _literal(a) is not _NO_VALUE and _literal(b) is _NO_VALUE:
            subject, value = b, _literal(a)
    elif (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Call)
        and _call_name(test.left)[1] == "abs"
        and test.left.args
        and isinstance(test.left.args[0], ast.BinOp)
        and isinstance(test.left.args[0].op, ast.Sub)
    ):
        diff = test.left.args[0]
        if _literal(diff.right) is not _NO_VALUE and _literal(diff.left) is _NO_VALUE:
            subject, value = diff.left, _literal(diff.right)
    elif isinstance(test, ast.Name):
        subject, value = test, True  # `assert found`: the name must end up true
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name):
        subject, value = test.operand, False
    if subject is None or value is _NO_VALUE:
        return None
    functions: set[str] = set()
    arguments: list[Any] = []
    argument_names: set[str] = set()
    called: set[int] = set()
    for node in ast.walk(subject):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            functions.add(node.func.attr)  # a method of an object the assert reads
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            functions.add(node.func.id)
            called.add(id(node.func))
            for arg in node.args:
                v = _literal(arg)
                if v is not _NO_VALUE:
                    arguments.append(v)
                elif isinstance(arg, ast.Name):
                    argument_names.add(arg.id)
    names = {
        n.id
        for n in ast.walk(subject)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in called
    }
    return Expectation(
        value, frozenset(names), frozenset(functions), tuple(arguments), _source(test), frozenset(argument_names)
    )


def _user_constants(tree: ast.Module, node: ast.Assert) -> ast.expr:
    """A top-level assert's condition with each name the user bound once before it to a
    literal of their own (``expected = 10`` … ``assert result == expected``) as that
    literal: the value it expects, which a repair may not write in either (read only when
    the condition as written expects none; a placeholder, ``answer = 0``, is a blank to
    fill, not a value)."""
    before = tree.body[: tree.body.index(node)]

    class Constants(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.expr:
            value: Any = _constant(before, name.id) if isinstance(name.ctx, ast.Load) else _NO_VALUE
            if value is _NO_VALUE or answer_blanks.is_placeholder_value(value):
                return name
            return ast.copy_location(ast.Constant(value), name)

    return Constants().visit(copy.deepcopy(node.test))


def _asserts_by_line(code: str) -> list[ast.Assert]:
    """Asserts of code that does not parse: each ``assert`` line parsed on its own."""
    out: list[ast.Assert] = []
    for number, line in enumerate(source_lines(code), 1):
        if not _ASSERT_LINE.match(line):
            continue
        try:
            node = ast.parse(line.strip()).body[0]
        except SyntaxError:
            continue
        if isinstance(node, ast.Assert):
            ast.increment_lineno(node, number - 1)
            out.append(node)
    return out


def extract(code: str, tests: str | None = None, failing_lines: Iterable[int] = ()) -> Spec:
    """The spec of the user's ``code`` (plus the expectations of their ``tests``).

    ``failing_lines``: lines of ``code`` where the user's own run failed (its frames);
    the statements there may not be wrapped in a swallowing ``try`` by a repair.
    """
    spec = Spec(code=code)
    tree, spec.source = answer_blanks.parse_with_blanks(code)
    spec.parsed = tree is not None
    if tree is None:
        lines = source_lines(code)
        for assert_node in _asserts_by_line(code):
            top = not lines[assert_node.lineno - 1][:1].isspace()
            spec.asserts.append(
                SpecAssert(
                    _key(assert_node.test),
                    _source(assert_node.test),
                    assert_node.lineno,
                    statement=_source(assert_node),
                    top_level=top,
                )
            )
            exp = _expectation(assert_node.test)
            if exp is not None:
                spec.expectations.append(exp)
    else:
        modules = _imported_modules(tree)
        for node, parents in _walk(tree):
            if isinstance(node, ast.Assert):
                swallowed = _swallowing_guard(node, parents, any_handler=False) is not None
                spec.asserts.append(
                    SpecAssert(
                        _key(node.test),
                        _source(node.test),
                        node.lineno,
                        swallowed,
                        statement=_source(node),
                        top_level=len(parents) == 1,
                    )
                )
                exp = _expectation(node.test, modules)
                if exp is None and len(parents) == 1 and isinstance(tree, ast.Module):
                    exp = _expectation(_user_constants(tree, node))
                if exp is not None:
                    spec.expectations.append(dataclasses.replace(exp, source=_source(node.test)))
        spec.test_functions = [name for name in _functions(tree) if name.startswith("test")]
        spec.test_calls = _top_level_test_calls(tree, spec.test_functions)
        spec.test_sources = _runnable_tests(tree, spec.test_calls)
        for line in sorted(set(failing_lines)):
            stmt = _statement_at(tree, line)
            if stmt is not None and not isinstance(stmt, ast.Assert):
                spec.failing[_key(stmt)] = _source(stmt)
    if tests and tests.strip():
        try:
            test_tree = ast.parse(tests)
        except SyntaxError:
            test_tree = None
        for node in ast.walk(test_tree) if test_tree is not None else ():
            if isinstance(node, ast.Assert):
                exp = _expectation(node.test)
                if exp is not None:
                    spec.expectations.append(exp)
    spec.asserts.sort(key=lambda a: a.line)
    return spec


# ----------------------------------------------------------------------------- the check
def check(spec: Spec, candidate: str) -> list[SpecViolation]:
    """Every way ``candidate`` breaks ``spec`` (empty: it keeps it).

    A candidate that does not parse is left to QA's pre-check (it cannot run anyway).
    """
    try:
        tree = ast.parse(candidate)
    except (SyntaxError, ValueError):
        return []
    original_tree: ast.AST | None = None
    if spec.parsed:
        original_tree, _ = answer_blanks.parse_with_blanks(spec.source or spec.code)
    out: list[SpecViolation] = []
    out += _check_asserts(spec, tree)
    out += _check_tests(spec, tree)
    out += _check_failing(spec, tree)
    out += _check_silencers(original_tree, tree)
    out += _check_hard_coding(spec, original_tree, tree)
    out += _check_outlived(spec, original_tree, tree)
    out += _check_expected_values(spec, original_tree, tree)
    out += _check_asserted_inputs(spec, original_tree, tree)
    out += _check_dynamic_binding(spec, original_tree, tree)
    if not spec.empty:
        out += _check_forced_comparisons(original_tree, tree)
    return out


def checked_statements(spec: Spec, candidate: str) -> list[tuple[int, int, str]]:
    """The candidate's top-level statements that are one of the user's top-level asserts,
    or a call of one of the user's test functions, as ``(line, column, the user's code)``:
    the sandbox's checker runs the user's code there, on the candidate's values as data,
    instead of the candidate's own statement."""
    try:
        tree = ast.parse(candidate)
    except (SyntaxError, ValueError):
        return []
    wanted: dict[str, list[SpecAssert]] = {}
    for a in spec.asserts:
        if a.top_level and a.statement:
            wanted.setdefault(a.condition, []).append(a)
    out: list[tuple[int, int, str]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assert) and wanted.get(_key(stmt.test)):
            out.append((stmt.lineno, stmt.col_offset, wanted[_key(stmt.test)].pop(0).statement))
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id in spec.test_sources
            and not stmt.value.args
            and not stmt.value.keywords
        ):
            name = stmt.value.func.id
            out.append((stmt.lineno, stmt.col_offset, f"{spec.test_sources[name]}\n{name}()\n"))
    return out
