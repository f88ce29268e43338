"""The checker: runs the tests one statement at a time against the program's names."""

import ast
import builtins
import json
import linecache
import os
import sys
from typing import Any, Callable

from .checker_rpc import ProgramLink
from .describe import safe_str, short_repr
from .frames import read_all, write_frame
from .layout import FD_REPORT, FD_REQUEST, FD_RPC_IN, FD_RPC_OUT, enter_workdir
from .program_rpc import PROGRAM_STATE_MODULES

#: Packages the tests import as they are, but with these submodules the program's.
_VIEWED_PACKAGES = {"numpy": {"random": "numpy.random"},
                    "matplotlib": {"pyplot": "matplotlib.pyplot"}}


def forwarding_import(link: "ProgramLink") -> Callable:
    """An ``__import__`` for the tests: stateful modules are the program's."""
    real_import = builtins.__import__

    def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        module = real_import(name, globals, locals, fromlist, level)
        if level:
            return module
        if name in PROGRAM_STATE_MODULES and (fromlist or "." not in name):
            return link.program_module(name)
        top = name.split(".", 1)[0]
        if top in _VIEWED_PACKAGES and (not fromlist or name == top):
            return _PackageView(sys.modules[top], link, _VIEWED_PACKAGES[top])
        return module

    return _import


class _PackageView:
    """A package for the tests, whose stateful submodules are the program's."""

    def __init__(self, package: Any, link: "ProgramLink", forwarded: dict) -> None:
        self._package = package
        self._link = link
        self._forwarded = forwarded

    def __getattr__(self, name: str) -> Any:
        if name in self._forwarded:
            return self._link.program_module(self._forwarded[name])
        return getattr(self._package, name)


def free_names(tree: ast.AST) -> list:
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def compare_detail(stmt: ast.stmt, ns: dict, filename: str) -> str:
    """For a failing bare ``assert a == b``: the values of both sides."""
    test = getattr(stmt, "test", None)
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return ""
    try:
        left = eval(compile(ast.Expression(test.left), filename, "eval", dont_inherit=True), ns)
        right = eval(compile(ast.Expression(test.comparators[0]), filename, "eval",
                             dont_inherit=True), ns)
    except BaseException:
        return ""
    return f"left = {short_repr(left)}, right = {short_repr(right)}"


def run_tests(source: str, ns: dict, skip_reason: str) -> list:
    """Run the tests one top-level statement at a time in ``ns``."""
    filename = "tests.py"
    lines = source.splitlines()
    linecache.cache[filename] = (len(source), None, [ln + "\n" for ln in lines], filename)
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        return [{"source": source.strip(), "passed": False, "line": exc.lineno,
                 "message": f"the tests do not parse: SyntaxError: {exc.msg}"}]
    results = []
    for stmt in tree.body:
        text = ast.get_source_segment(source, stmt) or ast.unparse(stmt)
        if skip_reason:
            results.append({"source": text, "passed": False, "line": stmt.lineno,
                            "message": f"not run: {skip_reason}"})
            continue
        try:
            exec(compile(ast.Module([stmt], []), filename, "exec", dont_inherit=True), ns)
            results.append({"source": text, "passed": True, "line": stmt.lineno, "message": ""})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            message = safe_str(exc)
            msg = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
            if isinstance(exc, AssertionError) and not message:
                detail = compare_detail(stmt, ns, filename)
                msg = f"AssertionError ({detail})" if detail else "AssertionError"
            results.append({"source": text, "passed": False, "line": stmt.lineno, "message": msg})
    return results


def checker_main(workdir: str) -> None:
    """Run the tests against the program over the RPC link; report outcomes to the server."""
    request = json.loads(read_all(FD_REQUEST) or b"null")
    if not request:
        os._exit(0)
    enter_workdir(workdir)
    source = str(request.get("tests") or "")
    link = ProgramLink(FD_RPC_OUT, FD_RPC_IN)
    hello = link.reader.wait()
    skip = ""
    ns: dict = {"__name__": "selfheal_tests",
                "__builtins__": dict(builtins.__dict__, __import__=forwarding_import(link))}
    if hello is None:
        skip = "the program did not run to its end"
    elif not hello.get("ready"):
        skip = str(hello.get("reason") or "the program failed")
    else:
        try:
            names = free_names(ast.parse(source))
        except SyntaxError:
            names = []
        try:
            ns.update(link.ask("names", names=names))
            ns["__program__"] = link.ask("module")
        except BaseException as exc:
            skip = f"the program's names could not be read ({safe_str(exc)})"
    results = run_tests(source, ns, skip)
    write_frame(FD_REPORT, {"tests": results})
    link.done()
    os._exit(0)
