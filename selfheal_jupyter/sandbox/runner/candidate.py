"""The candidate: one program run as ``python3 FILE`` would run it, in a fresh process."""

import __future__

import ast
import atexit
import builtins
import contextlib
import gc
import json
import linecache
import os
import pickle
import signal
import sys
import threading
import traceback
import types
import warnings
from importlib.machinery import SourceFileLoader
from typing import Any

from .describe import collect_figures, error_info, rich_value, safe_str
from .frames import read_all, write_frame
from .layout import CANDIDATE_FILE, FD_REPORT, FD_REQUEST, FD_RPC_IN, FD_RPC_OUT, NOTEBOOK_FILE, enter_workdir
from .program_rpc import ProgramObjects

#: Python's default recursion limit, which the candidate must see as its own.
DEFAULT_RECURSION_LIMIT = 1000
#: The builtin MemoryError, taken before any program runs: only this very class raised
#: by the program makes a run ``oom`` (a class of the program's named so does not).
_MEMORY_ERROR = MemoryError
_STARTUP_WARNING_FILTERS = list(warnings.filters)
#: The runner package's name and folder where it runs (``selfheal_runner`` in the image).
_PACKAGE = __package__ or ""
_RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))


def load_inputs(req: dict, ns: dict) -> None:
    directory = req.get("inputs_dir") or os.environ.get("SELFHEAL_PUT_DIR", "")
    for name, fname in (req.get("inputs") or {}).items():
        try:
            with open(os.path.join(directory, os.path.basename(fname)), "rb") as f:
                ns[name] = pickle.load(f)
        except Exception as exc:
            hint = ""
            if "__main__" in str(exc):
                hint = (
                    " (a class or function defined in the notebook itself cannot be sent "
                    "into the sandbox: pass plain data such as a dict, list or DataFrame)"
                )
            raise InputError(
                f"input {name!r} could not be loaded inside the sandbox: {type(exc).__name__}: {exc}{hint}"
            ) from None


class InputError(Exception):
    pass


def _without_runner_frames(tb: Any) -> Any:
    """The traceback with the runner's own frames left out (they are not the program's)."""
    kept = []
    while tb is not None:
        if os.path.dirname(tb.tb_frame.f_code.co_filename) != _RUNNER_DIR:
            kept.append(tb)
        tb = tb.tb_next
    for entry, after in zip(kept, kept[1:] + [None], strict=False):
        entry.tb_next = after
    return kept[0] if kept else None


def _print_exception(exc: BaseException) -> None:
    """What ``python3 FILE`` prints for an uncaught exception (through sys.excepthook)."""
    tb = None if isinstance(exc, SyntaxError) else _without_runner_frames(exc.__traceback__)
    exc.__traceback__ = tb  # the hook prints the exception's own traceback
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exception(type(exc), exc, tb)


def _stack_depth() -> int:
    depth = 0
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class Program:
    """One candidate, run as ``python3 FILE`` would run it, in this (fresh) process."""

    def __init__(self, req: dict, workdir: str) -> None:
        self.req = req
        self.filename = os.path.basename(str(req.get("filename") or CANDIDATE_FILE)) or CANDIDATE_FILE
        self.path = os.path.join(workdir, self.filename)
        self.workdir = workdir
        self.code = str(req.get("code") or "")
        self.error: dict | None = None
        self.outputs: list = []
        self.exit_code = 0
        self.interrupted = False
        self.memory_error = False
        self.failure = ""
        self.asserts = {(int(line), int(col)) for line, col, _ in req.get("asserts") or []}
        self.objects: ProgramObjects | None = None
        self.main = types.ModuleType("__main__")  # the module the program's code runs in

    def module(self) -> dict:
        mod = self.main
        mod.__dict__.update(
            __file__=self.path,
            __builtins__=builtins,
            __cached__=None,
            __loader__=SourceFileLoader("__main__", self.path),
            __annotations__={},
        )
        sys.modules["__main__"] = mod
        # The runner's own modules are no program's to import (under python3 there are none).
        for name in [n for n in sys.modules if n == _PACKAGE or n.startswith(f"{_PACKAGE}.")]:
            del sys.modules[name]
        sys.argv = [self.filename]
        sys.orig_argv = [sys.orig_argv[0], self.filename]
        sys.path[0] = self.workdir
        return mod.__dict__

    def run(self) -> None:
        with open(self.path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(self.code)
        ns = self.module()
        prelude = self.req.get("prelude")
        if prelude:
            lines = [ln + "\n" for ln in str(prelude).splitlines()]
            linecache.cache[NOTEBOOK_FILE] = (len(prelude), None, lines, NOTEBOOK_FILE)
        warnings.filters[:] = _STARTUP_WARNING_FILTERS  # type: ignore[index]  # a list at run time
        warnings._filters_mutated()  # type: ignore[attr-defined]
        warnings.onceregistry.clear()  # type: ignore[attr-defined]
        # The runner's frames below the program count too: raise the limit by as many, so
        # the program can recurse exactly as deep as under python3.
        sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT + _stack_depth() + 1)
        try:
            if prelude:
                exec(compile(str(prelude), NOTEBOOK_FILE, "exec", dont_inherit=True), ns)
            load_inputs(self.req, ns)
            self._execute(ns)
        except InputError as exc:
            self.error = {"type": "InputError", "message": str(exc), "line": None, "frames": [], "locals": {}}
            self.exit_code = 1
            self.failure = "an input could not be loaded"
            sys.stderr.write(f"{exc}\n")
        except SystemExit as exc:
            self._exit(exc)
        except BaseException as exc:
            self.error = error_info(exc, (self.path, NOTEBOOK_FILE), self.filename)
            self.exit_code = 1
            self.interrupted = isinstance(exc, KeyboardInterrupt)
            self.memory_error = type(exc) is _MEMORY_ERROR
            self.failure = f"the program raised {type(exc).__name__}"
            _print_exception(exc)
            del exc

    def _execute(self, ns: dict) -> None:
        tree = ast.parse(self.code, self.path)
        body = tree.body
        last: ast.Expr | None = None
        if (len(body) > 1 or (body and not _is_docstring(body[0]))) and (
            body and isinstance(body[-1], ast.Expr) and (body[-1].lineno, body[-1].col_offset) not in self.asserts
        ):
            last = body.pop()  # type: ignore[assignment]  # checked just above
        code = compile(tree, self.path, "exec", dont_inherit=True)
        if not self.asserts:
            exec(code, ns)
        else:
            self._execute_checked(tree.body, ns, code.co_flags & _FUTURE_FLAGS)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), self.path, "eval", dont_inherit=True), ns)
            if value is not None:
                self.outputs.extend(rich_value(value))

    def _execute_checked(self, body: list, ns: dict, flags: int) -> None:
        """The program a run of statements at a time: at each of the user's top-level
        asserts (and calls of their test functions) it waits while the checker evaluates
        the user's code on the program's values as data, then goes on or raises there,
        as the statement would have."""
        chunk: list = []
        for stmt in body + [None]:
            if stmt is not None and (stmt.lineno, stmt.col_offset) not in self.asserts:
                chunk.append(stmt)
                continue
            if chunk:
                exec(compile(ast.Module(chunk, []), self.path, "exec", flags=flags, dont_inherit=True), ns)
                chunk = []
            if stmt is not None:
                self._checkpoint(stmt, ns)

    def _checkpoint(self, stmt: ast.stmt, ns: dict) -> None:
        objects = self._objects()
        write_frame(FD_RPC_OUT, {"checkpoint": [stmt.lineno, stmt.col_offset]})
        told = objects.serve(FD_RPC_IN, FD_RPC_OUT)
        if told is not None and told.get("passed") is True:
            return
        escaped, objects.escaped = objects.escaped, None
        if told is None:
            exc: BaseException = RuntimeError("the user's assert could not be checked")
        elif told.get("from_program") and escaped is not None:
            exc = escaped
        else:
            kind = builtins.__dict__.get(str(told.get("type")))
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                kind = AssertionError
            message = str(told.get("message") or "")
            exc = kind(message) if message else kind()
        # Raised by a statement at the assert's line, so the frames are the program's.
        raise_stmt = ast.copy_location(ast.Raise(exc=ast.Name("__selfheal_raised__", ast.Load()), cause=None), stmt)
        ast.fix_missing_locations(raise_stmt)
        ns["__selfheal_raised__"] = exc
        try:
            exec(compile(ast.Module([raise_stmt], []), self.path, "exec", dont_inherit=True), ns)
        finally:
            ns.pop("__selfheal_raised__", None)

    def _objects(self) -> ProgramObjects:
        if self.objects is None:
            self.objects = ProgramObjects(self.main)
        return self.objects

    def _exit(self, exc: SystemExit) -> None:
        code = exc.code
        if code is None:
            self.exit_code = 0
        elif isinstance(code, int):
            self.exit_code = code & 0xFF
        else:
            with contextlib.suppress(BaseException):
                sys.stderr.write(f"{code}\n")
            self.exit_code = 1
        if self.exit_code:
            self.error = error_info(exc, (self.path, NOTEBOOK_FILE), self.filename)
            self.error["message"] = safe_str(exc)
            self.failure = f"the program exited with SystemExit({code!r})"

    def finish(self, tests: bool) -> None:
        """Threads, the tests, atexit, the report; then exit as Python would. Never returns."""
        try:
            threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads
        except BaseException:
            pass
        if tests:
            ready = not self.failure and not self.interrupted
            try:
                write_frame(FD_RPC_OUT, {"ready": ready, "reason": self.failure})
                if ready:
                    self._objects().serve(FD_RPC_IN, FD_RPC_OUT)
            except BaseException:
                pass
        self.outputs.extend(collect_figures())  # before atexit: pyplot closes them there
        with contextlib.suppress(BaseException):
            write_frame(FD_REPORT, {"error": self.error, "outputs": self.outputs, "memory_error": self.memory_error})
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        _clear_main()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        if self.interrupted:  # like Python: die from the signal, after reporting
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(self.exit_code)


def _clear_main() -> None:
    """What Python's shutdown does to ``__main__``: names starting with one underscore
    first, then the rest but ``__builtins__``; finalizers and ``__del__`` run now."""
    try:
        ns = sys.modules["__main__"].__dict__
        for only_private in (True, False):
            for name in list(ns):
                if not isinstance(name, str) or name == "__builtins__":
                    continue
                if not only_private or (name.startswith("_") and not name.startswith("__")):
                    ns[name] = None
        gc.collect()
    except BaseException:
        pass


_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def candidate_main(workdir: str) -> None:
    raw = read_all(FD_REQUEST)
    if not raw:
        os._exit(0)  # the server is going away
    enter_workdir(workdir)  # made by the template, owned by this run's uid
    req = json.loads(raw)
    program = Program(req, workdir)
    program.run()
    program.finish(bool(req.get("tests")))
