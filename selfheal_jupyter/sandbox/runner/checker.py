"""The checker: the user's asserts (at the program's top level, where they stand) and the
tests (after the program), evaluated here against the program's names.

Where each name a test reads comes from is decided here, from the sources the host
sent (the program, its prelude, the names of its inputs), never from what the program
says: builtins are the checker's own; a name the program binds at top level by an
import is the checker's own import of the same module; a name it binds otherwise (def,
class, assignment, an input) is the program's value, fetched over the RPC as data or a
handle (a module it imports stays the checker's even if it also assigns the name). The
tests' ``random``, ``numpy.random`` and ``pyplot`` are the checker's own
(its generators reseeded when it starts: the program's process began from the same
state); a test that seeds one, or closes pyplot's figures, does so in the program too."""

import ast
import builtins
import importlib
import json
import linecache
import operator
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from .checker_rpc import ProgramLink, Remote, install_type_checks, type_of
from .codec import MUTABLE
from .describe import safe_str, short_repr
from .end_check import HeldNames
from .frames import read_all, write_frame
from .layout import FD_REPORT, FD_REQUEST, FD_RPC_IN, FD_RPC_OUT, enter_workdir
from .program_rpc import FORWARDED, MODULE_DUNDERS

TESTS_FILE = "tests.py"
ASSERTS_FILE = "<the user's asserts>"
#: The builtin of the tests that ``type(x)`` in their text calls (``TypeOf``).
TYPE_OF = "__selfheal_type_of__"

_COMPARE: "dict[type, Callable[[Any, Any], Any]]" = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


class ProgramNames:
    """The names a program binds at top level, read from its source text."""

    def __init__(self) -> None:
        self.own: set[str] = set()
        self.imported: dict[str, tuple[str, str | None, bool]] = {}
        self.star: list[str] = []

    @classmethod
    def of(cls, sources: "list[str]", inputs: "list[str]") -> "ProgramNames":
        names = cls()
        names.own.update(n for n in inputs if isinstance(n, str))
        for source in sources:
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError):
                continue
            names._visit(tree.body)
        return names

    def _visit(self, body: "list[ast.stmt]") -> None:
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.own.add(node.name)
                stack.extend(node.decorator_list)
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imported[alias.asname] = (alias.name, None, False)
                    else:
                        top = alias.name.split(".")[0]
                        self.imported[top] = (alias.name, None, True)
                continue
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        if not node.level and node.module:
                            self.star.append(node.module)
                    elif node.level or not node.module:
                        self.own.add(alias.asname or alias.name)  # the program's own package
                    else:
                        self.imported[alias.asname or alias.name] = (node.module, alias.name, False)
                continue
            if isinstance(node, _SCOPES):
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.own.add(node.id)
            elif (
                isinstance(node, ast.ExceptHandler)
                and node.name
                or isinstance(node, (ast.MatchAs, ast.MatchStar))
                and node.name
            ):
                self.own.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self.own.add(node.rest)
            stack.extend(ast.iter_child_nodes(node))

    @classmethod
    def bound_after(cls, source: str, line: int, col: int) -> "set[str]":
        """The names the program binds again after its statement at ``line``/``col`` where
        its text shows it: a later top-level def, class, assignment, import or del, or a
        ``global`` declaration anywhere. The spec guard judges exactly those (a rebinding
        the user's own code has is the user's spec, a new one a violation); the end check
        (``outlived``) is for what no statement shows."""
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return set()
        for i, stmt in enumerate(tree.body):
            if (stmt.lineno, stmt.col_offset) == (line, col):
                names = cls()
                names._visit(tree.body[i + 1 :])
                declared = {
                    n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names
                }
                return names.own | set(names.imported) | declared
        return set()

    def resolve(self, wanted: "list[str]", link: ProgramLink) -> dict:
        """The values of ``wanted`` for a test: the checker's own builtins and imports,
        the program's values of what it defines. A module the program imports stays the
        checker's even if the program also assigns the name (``np = fake``); a library
        function it imports and also defines itself is its own definition."""
        out: dict = {}
        fetch = []
        for name in wanted:
            if name in MODULE_DUNDERS or name == "__program__" or hasattr(builtins, name):
                continue
            found = self._library(name)
            if found is not _MISSING and (name not in self.own or isinstance(found, types.ModuleType)):
                out[name] = found
            elif name in self.own or name in self.imported:
                fetch.append(name)  # its own, or a module of its own the checker cannot import
        if fetch:
            got = link.ask("names", names=fetch)
            if isinstance(got, dict):
                out.update({k: v for k, v in got.items() if k in fetch})
        return out

    def _library(self, name: str) -> Any:
        if name in self.imported:
            module_name, attr, top = self.imported[name]
            try:
                module = importlib.import_module(module_name)
                if top:
                    return sys.modules[module_name.split(".")[0]]
                if attr is None:
                    return module
                if hasattr(module, attr):
                    return getattr(module, attr)
                return importlib.import_module(f"{module_name}.{attr}")
            except Exception:
                return _MISSING
        if name in self.own:
            return _MISSING
        for module_name in self.star:
            try:
                module = importlib.import_module(module_name)
            except Exception:
                continue
            public = getattr(module, "__all__", None)
            listed = (name in public) if isinstance(public, (list, tuple)) else not name.startswith("_")
            if listed and hasattr(module, name):
                return getattr(module, name)
        return _MISSING


_MISSING = object()


# ----------------------------------------------------------------------------- random, pyplot
def own_modules(link: ProgramLink) -> Callable[[], None]:
    """The tests' ``random``, ``numpy.random`` and ``pyplot`` are the checker's own. Its
    generators are reseeded from fresh entropy (the program's process started from this
    one's state); a test's seeding or figure reset (``FORWARDED``) reaches the program's
    too. Returns the check to call after an import (a test may import numpy)."""
    done: set = set()

    def wrap(module: Any, module_name: str, name: str) -> None:
        own = getattr(module, name)

        def both(*args: Any, **kwargs: Any) -> None:
            if not any(type(a) is Remote for a in (*args, *kwargs.values())):
                own(*args, **kwargs)
            link.forward(module_name, name, args, kwargs)

        setattr(module, name, both)

    def check() -> None:
        for module_name, names in FORWARDED.items():
            module = sys.modules.get(module_name)
            if module is None or module_name in done:
                continue
            done.add(module_name)
            if "seed" in names:
                module.seed()  # fresh entropy
            for name in names:
                if callable(getattr(module, name, None)):
                    wrap(module, module_name, name)

    check()
    return check


def tests_builtins(after_import: Callable[[], None]) -> dict:
    """The builtins the tests see: the checker's own, with an import that notices numpy."""
    real_import = builtins.__import__

    def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        module = real_import(name, globals, locals, fromlist, level)
        after_import()
        return module

    return dict(builtins.__dict__, __import__=_import, **{TYPE_OF: type_of})


# ----------------------------------------------------------------------------- statements
class CompareFailed(AssertionError):
    """A bare ``assert a OP b`` that failed; ``detail`` shows both sides' values."""

    def __init__(self, detail: str) -> None:
        super().__init__()
        self.detail = detail


class TypeOf(ast.NodeTransformer):
    """``type(x)`` in the tests' text becomes ``__selfheal_type_of__(type, x)``: the
    same call, but of one of the program's objects it gives the program's class (which
    Python's ``type`` cannot: the object here is a handle)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "type"
            and len(node.args) == 1
            and not isinstance(node.args[0], ast.Starred)
            and not node.keywords
        ):
            call = ast.Call(ast.Name(TYPE_OF, ast.Load()), [node.func, node.args[0]], [])
            return ast.fix_missing_locations(ast.copy_location(call, node))
        return node


def run_statement(stmt: ast.stmt, ns: dict, filename: str) -> None:
    """Run one statement; a bare ``assert a OP b`` evaluates each side once, here."""
    stmt = TypeOf().visit(stmt)
    test = stmt.test if isinstance(stmt, ast.Assert) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        left = _eval(test.left, ns, filename)
        right = _eval(test.comparators[0], ns, filename)
        if not _COMPARE[type(test.ops[0])](left, right):
            assert isinstance(stmt, ast.Assert)
            if stmt.msg is not None:
                raise AssertionError(_eval(stmt.msg, ns, filename))
            raise CompareFailed(f"left = {short_repr(left)}, right = {short_repr(right)}")
        return
    exec(compile(ast.Module([stmt], []), filename, "exec", dont_inherit=True), ns)


def _eval(expr: ast.expr, ns: dict, filename: str) -> Any:
    return eval(compile(ast.Expression(expr), filename, "eval", dont_inherit=True), ns)


def failure_message(exc: BaseException) -> str:
    if isinstance(exc, CompareFailed):
        return f"AssertionError ({exc.detail})"
    message = safe_str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def free_names(tree: ast.AST) -> list:
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def run_tests(source: str, ns: dict, skip_reason: str) -> list:
    """Run the tests one top-level statement at a time in ``ns``."""
    lines = source.splitlines()
    linecache.cache[TESTS_FILE] = (len(source), None, [ln + "\n" for ln in lines], TESTS_FILE)
    try:
        tree = ast.parse(source, TESTS_FILE)
    except SyntaxError as exc:
        return [
            {
                "source": source.strip(),
                "passed": False,
                "line": exc.lineno,
                "message": f"the tests do not parse: SyntaxError: {exc.msg}",
            }
        ]
    results = []
    for stmt in tree.body:
        text = ast.get_source_segment(source, stmt) or ast.unparse(stmt)
        if skip_reason:
            results.append({"source": text, "passed": False, "line": stmt.lineno, "message": f"not run: {skip_reason}"})
            continue
        try:
            run_statement(stmt, ns, TESTS_FILE)
            results.append({"source": text, "passed": True, "line": stmt.lineno, "message": ""})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            results.append({"source": text, "passed": False, "line": stmt.lineno, "message": failure_message(exc)})
    return results


# ----------------------------------------------------------------------------- the user's asserts
class Checker:
    """One run's checks: the user's asserts as the program reaches them, then the tests."""

    def __init__(self, request: dict, link: ProgramLink) -> None:
        self.link = link
        self.tests = str(request.get("tests") or "")
        self.asserts = [(int(line), int(col), str(text)) for line, col, text in request.get("asserts") or []]
        self.shown = {line: _last_statement(text) for line, _col, text in self.asserts}
        code = str(request.get("code") or "")
        self.rebound_visibly = {
            (line, col): ProgramNames.bound_after(code, line, col) for line, col, _text in self.asserts
        }
        inputs = request.get("inputs")
        self.names = ProgramNames.of(
            [str(request.get("prelude") or ""), str(request.get("code") or "")],
            list(inputs) if isinstance(inputs, (list, dict)) else [],
        )
        self.after_import = own_modules(link)
        self.builtins = tests_builtins(self.after_import)
        self.held = HeldNames()  # the callables of the asserts that held

    def namespace(self, source: str) -> dict:
        ns: dict = {"__name__": "selfheal_tests", "__builtins__": self.builtins}
        try:
            wanted = free_names(ast.parse(source))
        except SyntaxError:
            wanted = []
        ns.update(self.names.resolve(wanted, self.link))
        return ns

    def check_assert(self, line: int, col: int, text: str) -> "tuple[dict, dict]":
        """The user's assert (or test function and its call), evaluated here against the
        program's values as they are now: its outcome, and what the program is told (go
        on, or raise at that line)."""
        outcome = {"source": self.shown[line], "line": line, "passed": True, "message": ""}
        ns: dict = {}
        try:
            body = ast.parse(text).body
            ns = self.namespace(text)
            read = dict(ns)
            copies = {k: (v, self._encoded(v)) for k, v in ns.items() if k in self.names.own and type(v) in MUTABLE}
            try:
                for stmt in body:
                    run_statement(stmt, ns, ASSERTS_FILE)
            finally:
                self._copy_back(ns, copies)
            visible = self.rebound_visibly.get((line, col), set())  # the spec guard's
            self.held.keep(outcome, {k: v for k, v in read.items() if k not in visible}, ns)
            return outcome, {"passed": True}
        except BaseException as exc:
            outcome.update(passed=False, message=failure_message(exc))
            kind = "AssertionError" if isinstance(exc, AssertionError) else type(exc).__name__
            message = "" if isinstance(exc, CompareFailed) else safe_str(exc)
            return outcome, {"passed": False, "type": kind, "message": message, "from_program": exc is self.link.raised}

    def _encoded(self, value: Any) -> str:
        try:
            return json.dumps(self.link.encode(value), sort_keys=True)
        except Exception:
            return ""

    def _copy_back(self, ns: dict, copies: dict) -> None:
        """A list / dict / set of the program's the user's code changed in place here
        (``assert stack.pop() == 3``): change the program's too, as running it there would."""
        for name, (value, before) in copies.items():
            if ns.get(name) is value and before and self._encoded(value) != before:
                self.link.ask("update", name=name, value=self.link.encode(value))

    def run(self) -> list:
        results = []
        pending = list(self.asserts)
        hello = self.link.reader.wait()
        while isinstance(hello, dict) and "checkpoint" in hello:
            if not pending or hello.get("checkpoint") != list(pending[0][:2]):
                hello = {"ready": False, "reason": "the program's process broke the protocol"}
                break
            line, col, text = pending.pop(0)
            outcome, told = self.check_assert(line, col, text)
            results.append(outcome)
            self.link.resume(told)
            hello = self.link.reader.wait()
        if hello is None:
            skip = "the program did not run to its end"
        elif not hello.get("ready"):
            skip = str(hello.get("reason") or "the program failed")
        else:
            skip = ""
        self.held.confirm(self.link, not skip, skip)
        for line, _col, _text in pending:
            results.append(
                {
                    "source": self.shown[line],
                    "line": line,
                    "passed": False,
                    "message": f"not run: {skip or 'the program never reached it'}",
                }
            )
        if self.tests:
            ns = {}
            if not skip:
                try:
                    ns = self.namespace(self.tests)
                    ns["__program__"] = self.link.ask("module")
                except BaseException as exc:
                    skip = f"the program's names could not be read ({safe_str(exc)})"
            results += run_tests(self.tests, ns, skip)
        return results


def _last_statement(text: str) -> str:
    """What a check is shown as: the assert, or the call of the user's test function."""
    try:
        body = ast.parse(text).body
        return (ast.get_source_segment(text, body[-1]) or text) if body else text
    except SyntaxError:
        return text


def checker_main(workdir: str) -> None:
    """Run the checks against the program over the RPC link; report outcomes to the server."""
    request = json.loads(read_all(FD_REQUEST) or b"null")
    if not request:
        os._exit(0)
    enter_workdir(workdir)
    install_type_checks()
    link = ProgramLink(FD_RPC_OUT, FD_RPC_IN)
    results = Checker(request, link).run()
    write_frame(FD_REPORT, {"tests": results})
    link.done()
    os._exit(0)
