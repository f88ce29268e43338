"""The runner: the process that runs INSIDE each sandbox container, as its PID 1.

Why a fork server: starting Python and importing pandas costs ~0.5 s and a container
~0.4 s more. This process pays both once; every candidate then starts as a fork.

Three kinds of process, and why each exists (the candidate is hostile):

* **server** (PID 1): talks to the host and decides the verdict. As PID 1 it gets no
  signal it has no handler for, it is not dumpable (no ``ptrace``, no
  ``/proc/1/mem``) and a seccomp filter denies ``ptrace`` and ``process_vm_*`` to
  every process in the container. It has seen every request, so nothing is ever
  forked from it after the start.
* **template**: forked once, right after the preload, before any request exists. It
  forks the processes of every run, so each starts from a state that never held
  another run's code, data or output. It reaps them and reports their real exit
  status to the server; between runs it kills every leftover process and wipes
  ``/tmp`` and ``/dev/shm``.
* per run, the **candidate** (runs the program as the real ``__main__``, with
  Python's own exit, thread and ``atexit`` semantics) and, when there are tests, the
  **checker**: a separate, non-dumpable process that runs the tests. Names the tests
  read from the program reach it over a JSON RPC (plain values by value, other
  objects as remote references), so no ``__eq__`` trick, patched ``unittest`` or
  forged frame can change a test's outcome.

Status and exit code come from the candidate's wait status as the template saw it;
what the candidate itself reports (error details, figures) is description only.

Protocol with the host: frames of a 4-byte big-endian length and UTF-8 JSON, over the
unix socket ``--control PATH`` when it can be reached (a local engine), else over
stdin/stdout, i.e. the container's attach stream (any Docker-API engine). The server
sends ``{"ready": true, ...}``, then one result frame per ``{"op": "run"}``;
``{"op": "put"}`` frames carry input files when there is no shared directory;
``{"op": "cancel"}`` stops a run; EOF ends the server. Nothing is pickled on the way
out. Standard library only; numpy / pandas / matplotlib are preloaded when present.
"""

import ast
import atexit
import base64
import builtins
import ctypes
import ctypes.util
import gc
import io
import json
import linecache
import os
import pickle
import platform
import reprlib
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types
import warnings
from importlib.machinery import SourceFileLoader
from typing import Any, Callable

RUNNER_PROTOCOL = 2
HEADER = struct.Struct(">I")
WORKDIR_ROOT = "/tmp"
SHM_ROOT = "/dev/shm"
MPL_CACHE_DIR = "/opt/selfheal/matplotlib"  # a font cache made when the image was built
MPL_CONFIG_DIR = os.path.join(WORKDIR_ROOT, ".matplotlib")
NOTEBOOK_FILE = "<notebook>"
#: Where put frames land: a tmpfs the host mounts when inputs travel as frames (in
#: socket mode it is the read-only bind mount, and no put arrives).
PUT_DIR = "/inputs"
PUT_FALLBACK_DIR = os.path.join(WORKDIR_ROOT, ".inputs")
MAX_RESULT_BYTES = 64 << 20
MAX_FIGURES = 20
MAX_LOCALS = 20
MAX_TEXT_REPR = 10_000
#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20
#: Python's default recursion limit, which the candidate must see as its own.
DEFAULT_RECURSION_LIMIT = 1000
#: Descriptors of a run's processes after the set-up (0-2 are stdin/stdout/stderr).
FD_REQUEST, FD_REPORT, FD_RPC_OUT, FD_RPC_IN = 3, 4, 5, 6

_short = reprlib.Repr()
_short.maxlevel = 2
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 8
_short.maxstring = 80
_short.maxother = 120
_STARTUP_WARNING_FILTERS = list(warnings.filters)
#: The runner package's name where it runs (``selfheal_runner`` in the image).
_PACKAGE = __package__ or ""


# --------------------------------------------------------------------------- frames
def write_frame(fd: int, obj: Any) -> None:
    data = json.dumps(obj, default=str).encode("utf-8", errors="surrogatepass")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
    """Length-prefixed JSON frames from a file descriptor."""

    def __init__(self, fd: int, limit: int = MAX_RESULT_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self.buf = bytearray()
        self.eof = False
        self.total = 0

    def feed(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.total += len(chunk)
        self.buf += chunk

    def next(self) -> "dict[str, Any] | None":
        if len(self.buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buf)
        if size > self.limit:
            self.eof = True  # not a peer that follows the protocol
            self.buf.clear()
            return None
        if len(self.buf) < HEADER.size + size:
            return None
        data = bytes(self.buf[HEADER.size : HEADER.size + size])
        del self.buf[: HEADER.size + size]
        try:
            frame = json.loads(data)
        except ValueError:
            return {"op": "malformed"}
        return frame if isinstance(frame, dict) else {"op": "malformed"}

    def wait(self) -> "dict[str, Any] | None":
        """Block until a frame or EOF (None)."""
        while True:
            frame = self.next()
            if frame is not None or self.eof:
                return frame
            self.feed()


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


# --------------------------------------------------------------------------- protection
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
#: Syscalls no process in the sandbox may make: tracing or reading another process's
#: memory (the runner's), and System V / POSIX message-queue IPC objects (they would
#: outlive a run). By architecture: (audit arch, {name: number}).
DENIED_SYSCALLS = {
    "x86_64": (0xC000003E, {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                            "kcmp": 312, "pidfd_getfd": 438, "shmget": 29, "semget": 64,
                            "msgget": 68, "mq_open": 240}),
    "aarch64": (0xC00000B7, {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                             "kcmp": 272, "pidfd_getfd": 438, "shmget": 194, "semget": 190,
                             "msgget": 186, "mq_open": 180}),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def set_dumpable(flag: bool) -> None:
    _libc.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0)


def install_seccomp() -> str:
    """Deny DENIED_SYSCALLS with EPERM to this process and all it forks; '' or why not."""
    arch = DENIED_SYSCALLS.get(platform.machine())
    if arch is None:
        return f"no syscall filter for {platform.machine()}"
    audit_arch, numbers = arch
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    jge = 0x35  # BPF_JMP|BPF_JGE|BPF_K
    deny = SECCOMP_RET_ERRNO | EPERM
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, deny), (ld, 0, 0, 0),
            (jge, 0, 1, 0x40000000), (ret, 0, 0, deny)]  # other ABIs and x32: denied
    for nr in sorted(numbers.values()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    prog.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs failed (errno {ctypes.get_errno()})"
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp failed (errno {ctypes.get_errno()})"
    return ""


# --------------------------------------------------------------------------- preload
def preload() -> list:
    """Import the common libraries once, so every run gets them for free."""
    loaded = []
    for name in ("numpy", "pandas"):
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401

        loaded.append("matplotlib")
    except Exception:
        pass
    return loaded


def matplotlib_environment() -> None:
    """Agg, and a config directory holding the font cache made when the image was built
    (for both templates: a light run may import matplotlib itself)."""
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = MPL_CONFIG_DIR
    if os.path.isdir(MPL_CACHE_DIR):
        shutil.copytree(MPL_CACHE_DIR, MPL_CONFIG_DIR, dirs_exist_ok=True)
    else:
        os.makedirs(MPL_CONFIG_DIR, exist_ok=True)


# --------------------------------------------------------------------------- memory
def _read_kv(path: str) -> dict:
    out: dict = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[-1].isdigit():
                    out[parts[0].rstrip(":")] = int(parts[-1])
    except OSError:
        pass
    return out


def oom_kills() -> int:
    """How many processes the kernel OOM killer killed in this container's cgroup."""
    v1 = _read_kv("/sys/fs/cgroup/memory/memory.oom_control")
    if "oom_kill" in v1:
        return v1["oom_kill"]
    return _read_kv("/sys/fs/cgroup/memory.events").get("oom_kill", 0)


# --------------------------------------------------------------------------- descriptions
def short_repr(value: Any) -> str:
    """A one-line summary of a value, never long, never raising."""
    try:
        cls = type(value)
        mod = cls.__module__ or ""
        if mod.startswith("pandas") and cls.__name__ == "DataFrame":
            cols = list(value.columns)
            more = f" +{len(cols) - 10} more" if len(cols) > 10 else ""
            return f"DataFrame shape={value.shape} columns={cols[:10]!r}{more}"
        if mod.startswith("pandas") and cls.__name__ == "Series":
            return f"Series name={value.name!r} len={len(value)} dtype={value.dtype}"
        if mod.startswith("numpy") and cls.__name__ == "ndarray":
            return f"ndarray shape={value.shape} dtype={value.dtype} {_short.repr(value)}"[:160]
        text = _short.repr(value)
    except Exception as exc:  # a user __repr__ may raise anything
        text = f"<{type(value).__name__}: repr failed with {type(exc).__name__}>"
    return text if len(text) <= 160 else text[:157] + "..."


def safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:
        return f"<str() of the {type(exc).__name__} failed>"


def summarize_locals(frame_locals: dict) -> dict:
    out: dict = {}
    for name, value in frame_locals.items():
        if name.startswith("__") or isinstance(
            value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
        ):
            continue
        out[name] = short_repr(value)
        if len(out) >= MAX_LOCALS:
            break
    return out


def _source_line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


def error_info(exc: BaseException, own_files: "tuple[str, ...]", shown: str) -> dict:
    """Structured exception restricted to the program's own frames (and the notebook's)."""
    frames = []
    last_frame = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in own_files:
            name = shown if code.co_filename != NOTEBOOK_FILE else NOTEBOOK_FILE
            frames.append({"file": name, "line": tb.tb_lineno, "function": code.co_name,
                           "source": _source_line(code.co_filename, tb.tb_lineno)})
            last_frame = tb.tb_frame
        tb = tb.tb_next
    # the program's own line, even when the failure is inside a notebook function
    line = next((f["line"] for f in reversed(frames) if f["file"] == shown), None)
    if isinstance(exc, SyntaxError) and exc.filename in own_files and exc.lineno:
        line = exc.lineno
        src = (exc.text or "").strip() or _source_line(exc.filename, exc.lineno)
        name = shown if exc.filename != NOTEBOOK_FILE else NOTEBOOK_FILE
        frames.append({"file": name, "line": line, "function": "<module>", "source": src})
    if isinstance(exc, SyntaxError):
        message = exc.msg or safe_str(exc)
    else:
        message = safe_str(exc)
    return {
        "type": type(exc).__name__,
        "message": message,
        "line": line,
        "frames": frames,
        "locals": summarize_locals(last_frame.f_locals) if last_frame is not None else {},
    }


def rich_value(value: Any) -> list:
    """What a notebook would display for the value of the last expression."""
    out = []
    html = getattr(value, "_repr_html_", None)
    if callable(html) and not isinstance(value, type):
        try:
            text = html()
            if isinstance(text, str) and text:
                out.append({"mime": "text/html", "data": text})
        except Exception:
            pass
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    if len(text) > MAX_TEXT_REPR:
        text = text[:MAX_TEXT_REPR] + "\n...[truncated]"
    out.append({"mime": "text/plain", "data": text})
    return out


def collect_figures() -> list:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    try:
        numbers = plt.get_fignums()[:MAX_FIGURES]
    except Exception:
        return []
    for num in numbers:
        try:
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            out.append({"mime": "image/png", "data": base64.b64encode(buf.getvalue()).decode()})
        except Exception as exc:
            sys.stderr.write(f"[selfheal] figure {num} could not be rendered: {exc!r}\n")
    return out


# --------------------------------------------------------------------------- value codec
# Values cross between the program and the checker as tagged JSON. Only these exact
# types travel by value and are rebuilt from plain data on the other side; anything
# else (functions, classes, instances, subclasses of the above) is a reference.
MAX_ENCODED_ITEMS = 500_000
_DTYPE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789[], :<>|=/._-+")


#: Items of a program's iterable sent to the tests per request.
ITER_CHUNK = 1000


class _Budget:
    """How many more items one value may encode (a cap on what crosses)."""

    def __init__(self) -> None:
        self.left = MAX_ENCODED_ITEMS


class Unencodable(Exception):
    pass


def _dtype_ok(text: Any) -> str:
    if not isinstance(text, str) or len(text) > 64 or not set(text) <= _DTYPE_CHARS:
        raise ValueError(f"unexpected dtype {text!r}")
    return text


class Codec:
    """Encode / decode values; ``ref_of`` / ``deref`` link references to objects."""

    def __init__(self, ref_of: Callable[[Any], dict], deref: Callable[[dict], Any],
                 by_name: bool = False) -> None:
        self.ref_of = ref_of
        self.deref = deref
        self.by_name = by_name  # library classes travel by name (tests -> program only)

    # -- out
    def encode(self, value: Any, budget: "_Budget | None" = None) -> Any:
        budget = budget or _Budget()
        try:
            return self._enc(value, budget, 0)
        except (Unencodable, RecursionError):
            return self.ref_of(value)

    def _enc(self, x: Any, b: _Budget, depth: int) -> Any:
        b.left -= 1
        if b.left < 0 or depth > 100:
            raise Unencodable
        t = type(x)
        if x is None or t is bool or t is int or t is str:
            return x
        if t is float:
            return x if x == x and x not in (float("inf"), float("-inf")) else {"$": "float", "v": repr(x)}
        if t in (list, tuple, set, frozenset):
            return {"$": t.__name__, "v": [self._enc(i, b, depth + 1) for i in x]}
        if t is dict:
            return {"$": "dict", "v": [[self._enc(k, b, depth + 1), self._enc(v, b, depth + 1)]
                                       for k, v in x.items()]}
        if t in (bytes, bytearray):
            return {"$": t.__name__, "v": base64.b64encode(x).decode()}
        if t is complex:
            return {"$": "complex", "v": [repr(x.real), repr(x.imag)]}
        if t is range:
            return {"$": "range", "v": [x.start, x.stop, x.step]}
        mod = getattr(t, "__module__", "") or ""
        if mod in ("decimal", "fractions", "datetime", "uuid") and t.__name__ in (
                "Decimal", "Fraction", "datetime", "date", "time", "timedelta", "UUID"):
            if t.__name__ == "timedelta":
                return {"$": "timedelta", "v": [x.days, x.seconds, x.microseconds]}
            return {"$": t.__name__, "v": x.isoformat() if hasattr(x, "isoformat") else str(x)}
        if mod == "numpy" or mod.startswith("numpy."):
            return self._enc_numpy(x, b, depth)
        if mod.startswith("pandas"):
            return self._enc_pandas(x, b, depth)
        if isinstance(x, type) and self.by_name:
            spec = f"{getattr(x, '__module__', '')}:{getattr(x, '__qualname__', '')}"
            if _local_class(spec) is x:  # a library's class: the program can import it
                return {"$": "class", "v": spec}
        try:
            is_exception_class = isinstance(x, type) and issubclass(x, BaseException)
        except Exception:
            is_exception_class = False
        if is_exception_class:
            return {"$": "excclass", "name": x.__qualname__, "module": x.__module__,
                    "base": _builtin_base(x).__name__}
        return self.ref_of(x)

    def _enc_numpy(self, x: Any, b: _Budget, depth: int) -> Any:
        import numpy as np

        if type(x) is np.ndarray and x.dtype.kind in "biufcUSO":
            b.left -= x.size
            if b.left < 0:
                raise Unencodable
            return {"$": "ndarray", "dtype": x.dtype.str, "shape": list(x.shape),
                    "v": self._enc(x.tolist(), b, depth + 1)}
        if isinstance(x, np.generic) and type(x).__module__ == "numpy" and x.dtype.kind in "biufc":
            return {"$": "npscalar", "dtype": x.dtype.str, "v": self._enc(x.item(), b, depth + 1)}
        return self.ref_of(x)

    def _enc_pandas(self, x: Any, b: _Budget, depth: int) -> Any:
        import pandas as pd

        t = type(x)
        if t is pd.DataFrame:
            b.left -= x.size
            if b.left < 0 or not x.columns.is_unique:
                raise Unencodable
            cols = [self._enc_column(x.iloc[:, i], b, depth) for i in range(x.shape[1])]
            return {"$": "DataFrame", "columns": self._enc_pandas(x.columns, b, depth + 1),
                    "index": self._enc_pandas(x.index, b, depth + 1), "cols": cols}
        if t is pd.Series:
            b.left -= len(x)
            return {"$": "Series", "name": self._enc(x.name, b, depth + 1),
                    "index": self._enc_pandas(x.index, b, depth + 1),
                    "col": self._enc_column(x, b, depth)}
        if t is pd.RangeIndex:
            return {"$": "RangeIndex", "v": [x.start, x.stop, x.step],
                    "name": self._enc(x.name, b, depth + 1)}
        if t is pd.MultiIndex:
            return {"$": "MultiIndex", "v": self._enc(list(x), b, depth + 1),
                    "names": self._enc(list(x.names), b, depth + 1)}
        if t is pd.Index or t.__name__ in ("DatetimeIndex", "CategoricalIndex"):
            return {"$": "Index", "dtype": str(x.dtype), "v": self._enc(x.tolist(), b, depth + 1),
                    "name": self._enc(x.name, b, depth + 1)}
        if t is pd.Timestamp:
            return {"$": "Timestamp", "v": x.isoformat()}
        if t is pd.Timedelta:
            return {"$": "Timedelta", "v": x.value}
        if x is pd.NaT:
            return {"$": "NaT"}
        if x is pd.NA:
            return {"$": "NA"}
        return self.ref_of(x)

    def _enc_column(self, s: Any, b: _Budget, depth: int) -> dict:
        return {"dtype": str(s.dtype), "v": self._enc(s.tolist(), b, depth + 1)}

    # -- in
    def decode(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v
        if isinstance(v, list):  # never produced by encode; be strict
            raise ValueError("untagged list")
        tag = v.get("$")
        d = self.decode
        if tag in ("ref", "cref"):
            return self.deref(v)
        if tag == "class":  # only the program side receives these: it may import
            import importlib

            module, _, qualname = str(v["v"]).partition(":")
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
            return target
        if tag == "float":
            return float(v["v"])
        if tag in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](
                d(i) for i in v["v"])
        if tag == "dict":
            return {d(k): d(val) for k, val in v["v"]}
        if tag in ("bytes", "bytearray"):
            data = base64.b64decode(v["v"], validate=True)
            return data if tag == "bytes" else bytearray(data)
        if tag == "complex":
            return complex(float(v["v"][0]), float(v["v"][1]))
        if tag == "range":
            return range(*[int(i) for i in v["v"]])
        if tag in ("Decimal", "Fraction"):
            import decimal
            import fractions

            return (decimal.Decimal if tag == "Decimal" else fractions.Fraction)(str(v["v"]))
        if tag in ("datetime", "date", "time"):
            import datetime

            return getattr(datetime, tag).fromisoformat(str(v["v"]))
        if tag == "timedelta":
            import datetime

            return datetime.timedelta(*[int(i) for i in v["v"]])
        if tag == "UUID":
            import uuid

            return uuid.UUID(str(v["v"]))
        if tag == "excclass":
            return exception_class(str(v["module"]), str(v["name"]), str(v["base"]))
        if tag in ("ndarray", "npscalar"):
            import numpy as np

            dtype = np.dtype(_dtype_ok(v["dtype"]))
            if tag == "npscalar":
                return dtype.type(d(v["v"]))
            shape = tuple(int(i) for i in v["shape"])
            if dtype.kind == "O":
                nested = d(v["v"])
                arr = np.empty(shape, dtype=object)
                for idx in np.ndindex(*shape):
                    item = nested
                    for i in idx:
                        item = item[i]
                    arr[idx] = item
                return arr
            return np.array(d(v["v"]), dtype=dtype).reshape([int(i) for i in v["shape"]])
        return self._dec_pandas(tag, v)

    def _dec_pandas(self, tag: Any, v: dict) -> Any:
        import pandas as pd

        d = self.decode
        if tag == "Timestamp":
            return pd.Timestamp(str(v["v"]))
        if tag == "Timedelta":
            return pd.Timedelta(int(v["v"]))
        if tag == "NaT":
            return pd.NaT
        if tag == "NA":
            return pd.NA
        if tag == "RangeIndex":
            return pd.RangeIndex(*[int(i) for i in v["v"]], name=d(v["name"]))
        if tag == "MultiIndex":
            return pd.MultiIndex.from_tuples(d(v["v"]), names=d(v["names"]))
        if tag == "Index":
            return pd.Index(d(v["v"]), dtype=_dtype_ok(v["dtype"]), name=d(v["name"]))
        if tag == "Series":
            return pd.Series(self._dec_column(v["col"]), index=d(v["index"]), name=d(v["name"]))
        if tag == "DataFrame":
            columns = d(v["columns"])
            index = d(v["index"])
            data = {i: pd.Series(self._dec_column(c), index=index) for i, c in enumerate(v["cols"])}
            frame = pd.DataFrame(data, index=index)
            frame.columns = columns
            return frame
        raise ValueError(f"unknown value tag {tag!r}")

    def _dec_column(self, col: dict) -> Any:
        import pandas as pd

        return pd.array(self.decode(col["v"]), dtype=_dtype_ok(col["dtype"]))


def _builtin_base(cls: type) -> type:
    for base in cls.__mro__:
        if getattr(builtins, base.__name__, None) is base:
            return base
    return Exception


_EXCEPTION_CLASSES: dict = {}


def describe_exception(exc: BaseException) -> dict:
    """An exception as it crosses the RPC (either way)."""
    cls = type(exc)
    return {"module": cls.__module__, "name": cls.__qualname__,
            "base": _builtin_base(cls).__name__, "message": safe_str(exc)}


def raise_described(info: dict) -> None:
    """Raise on this side the exception ``describe_exception`` gave on the other."""
    raise exception_class(str(info.get("module")), str(info.get("name")),
                          str(info.get("base")))(str(info.get("message", "")))


def exception_class(module: str, name: str, base: str) -> type:
    """A local stand-in for an exception class the program defined (one per name)."""
    builtin = getattr(builtins, name, None)
    if module == "builtins" and isinstance(builtin, type) and issubclass(builtin, BaseException):
        return builtin
    if module != "__main__":
        known = _local_class(f"{module}:{name}")
        if known is not None and issubclass(known, BaseException):
            return known
    key = (module, name)
    if key not in _EXCEPTION_CLASSES:
        parent = getattr(builtins, base, Exception)
        if not (isinstance(parent, type) and issubclass(parent, BaseException)):
            parent = Exception
        _EXCEPTION_CLASSES[key] = type(name.rsplit(".", 1)[-1], (parent,), {"__module__": module})
    return _EXCEPTION_CLASSES[key]


# --------------------------------------------------------------------------- RPC: program side
#: Names Python itself defines in a module: the tests keep their own.
MODULE_DUNDERS = frozenset({"__name__", "__doc__", "__file__", "__loader__", "__spec__",
                            "__package__", "__builtins__", "__cached__", "__annotations__"})

class ProgramObjects:
    """Serve the checker's requests from the program's namespace, after the program ran."""

    MAX_REFS = 100_000

    def __init__(self, ns: dict) -> None:
        self.ns = ns
        self.objects: list = []
        self.ids: dict = {}
        self.codec = Codec(self.ref_of, self.deref)

    def ref_of(self, obj: Any) -> dict:
        if isinstance(obj, TestsFunction):
            return {"$": "cref", "id": obj.ref}
        key = id(obj)
        if key not in self.ids:
            if len(self.objects) >= self.MAX_REFS:
                raise RuntimeError("too many objects referenced by the tests")
            self.ids[key] = len(self.objects)
            self.objects.append(obj)
        try:
            text = short_repr(obj)
        except BaseException:
            text = "<object>"
        cls = type(obj)
        if isinstance(obj, type):  # the tests use their own copy when they have the module
            text = f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"
            return {"$": "ref", "id": self.ids[key], "class": text, "type": cls.__qualname__,
                    "module": cls.__module__, "callable": True, "repr": repr(text)}
        return {"$": "ref", "id": self.ids[key], "type": cls.__qualname__,
                "module": getattr(cls, "__module__", ""), "callable": callable(obj),
                "repr": text}

    def deref(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return TestsFunction(self, v)
        return self.objects[int(v["id"])]

    def serve(self, rpc_in: int, rpc_out: int) -> None:
        self.reader = FrameReader(rpc_in)
        self.out = rpc_out
        while True:
            req = self.reader.wait()
            if req is None or req.get("op") == "done":
                return
            if not self.answer(req):
                return

    def answer(self, req: dict) -> bool:
        try:
            value = self.handle(req)
            if isinstance(value, _Called):  # mutable arguments travel back (in-place changes)
                reply = {"ok": self.codec.encode(value.result), "after": value.after(self.codec)}
            else:
                reply = {"ok": self.ref_of(value.obj) if isinstance(value, _Ref)
                         else self.codec.encode(value)}
        except BaseException as exc:  # SystemExit from a called function included
            reply = {"raise": describe_exception(exc)}
        try:
            write_frame(self.out, reply)
        except OSError:
            return False
        return True

    def callback(self, ref: int, args: tuple, kwargs: dict) -> Any:
        """Call a function of the tests' (they passed it to the program)."""
        write_frame(self.out, {"callback": ref, "args": self.codec.encode(list(args)),
                               "kwargs": self.codec.encode(dict(kwargs))})
        while True:
            frame = self.reader.wait()
            if frame is None:
                raise RuntimeError("the tests went away during a callback")
            if "op" in frame:  # the callback asks the program something first
                self.answer(frame)
                continue
            if "raise" in frame:
                raise_described(frame["raise"])
            return self.codec.decode(frame.get("ok"))

    def handle(self, req: dict) -> Any:
        op = req.get("op")
        dec = self.codec.decode
        if op == "names":
            return {n: self.ns[n] for n in req["names"]
                    if isinstance(n, str) and n in self.ns and n not in MODULE_DUNDERS}
        if op == "module":
            return _Ref(sys.modules["__main__"])
        if op == "import" and req.get("name") in PROGRAM_STATE_MODULES:
            import importlib

            return _Ref(importlib.import_module(str(req["name"])))
        if "ref" not in req:
            raise ValueError(f"request {op!r} names no object")
        target: Any = self.objects[int(req["ref"])]
        if op == "call":
            args, kwargs = dec(req["args"]), dec(req["kwargs"])
            return _Called(target(*args, **kwargs), args, kwargs)
        if op == "getattr":
            return getattr(target, str(req["name"]))
        if op == "setattr":
            setattr(target, str(req["name"]), dec(req["value"]))
            return None
        if op == "getitem":
            return target[dec(req["key"])]
        if op == "setitem":
            target[dec(req["key"])] = dec(req["value"])
            return None
        if op == "delitem":
            del target[dec(req["key"])]
            return None
        if op == "len":
            return int(len(target))
        if op == "iter":
            return _Ref(iter(target))
        if op == "next":  # the next items of an iterator made by "iter", a chunk at a time
            import itertools

            return list(itertools.islice(target, ITER_CHUNK))
        if op == "str":
            return str(target)
        if op == "repr":
            return repr(target)
        if op == "binop":
            other = dec(req["other"])
            method = getattr(target, str(req["name"]))
            result = method(other)
            if result is NotImplemented:
                raise TypeError(f"unsupported operand for {req['name']}: "
                                f"{type(target).__name__} and {type(other).__name__}")
            return result
        if op == "compare":  # both sides are the program's own objects
            other = self.objects[int(req["other"])]
            return bool(_COMPARE[str(req["name"])](target, other))
        raise ValueError(f"unknown request {op!r}")


class TestsFunction:
    """A function of the tests, seen from the program: calling it calls back."""

    def __init__(self, objects: ProgramObjects, info: dict) -> None:
        self.objects = objects
        self.ref = int(info["id"])
        self.__name__ = str(info.get("name") or "function")
        self.__qualname__ = str(info.get("qualname") or self.__name__)
        self.__doc__ = info.get("doc")
        self.__module__ = "selfheal_tests"
        signature = _parse_signature(str(info.get("signature") or ""))
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.objects.callback(self.ref, args, kwargs)


def _parse_signature(text: str) -> Any:
    """An inspect.Signature from its text, when its defaults are plain literals."""
    if not text.startswith("("):
        return None
    try:
        import inspect

        tree = ast.parse(f"def f{text}: pass")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                return None  # only literals may be evaluated
        ns: dict = {}
        exec(compile(tree, "<signature>", "exec", dont_inherit=True), {"__builtins__": {}}, ns)
        return inspect.signature(ns["f"])
    except Exception:
        return None


_MUTABLE = (list, dict, set, bytearray)


class _Called:
    """A call's result, and its mutable arguments as they are after the call."""

    def __init__(self, result: Any, args: list, kwargs: dict) -> None:
        self.result, self.args, self.kwargs = result, args, kwargs

    def after(self, codec: "Codec") -> dict:
        return {"args": [codec.encode(a) if type(a) in _MUTABLE else None for a in self.args],
                "kwargs": {k: codec.encode(v) for k, v in self.kwargs.items()
                           if type(v) in _MUTABLE}}


class _Ref:
    """Forces an object to travel as a reference (the program's module)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


# --------------------------------------------------------------------------- RPC: checker side
class ProgramLink:
    """The checker's end: asks the program's process for names, calls, attributes."""

    def __init__(self, rpc_out: int, rpc_in: int) -> None:
        self.out = rpc_out
        self.reader = FrameReader(rpc_in)
        self.remotes: dict = {}
        self.modules: dict = {}
        self.local: list = []
        self.after: "dict | None" = None
        self.codec = Codec(self.ref_of, self.remote, by_name=True)
        self.closed = False

    def ref_of(self, obj: Any) -> dict:
        if isinstance(obj, Remote):
            return {"$": "ref", "id": object.__getattribute__(obj, "_id")}
        if callable(obj):  # a function of the tests, called back by the program
            self.local.append(obj)
            try:
                import inspect

                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = ""
            return {"$": "cref", "id": len(self.local) - 1,
                    "name": str(getattr(obj, "__name__", "function")),
                    "qualname": str(getattr(obj, "__qualname__", "function")),
                    "doc": getattr(obj, "__doc__", None) if isinstance(
                        getattr(obj, "__doc__", None), str) else None,
                    "signature": signature}
        raise TypeError(f"a {type(obj).__name__} from the tests cannot be passed to the program; "
                        "pass plain data (numbers, strings, lists, dicts, arrays, DataFrames)")

    def remote(self, v: dict) -> Any:
        if v.get("$") == "cref":
            return self.local[int(v["id"])]
        key = int(v["id"])
        if v.get("class"):
            local = _local_class(str(v["class"]))
            if local is not None:
                return local
        if key not in self.remotes:
            self.remotes[key] = Remote(self, key, f"{v.get('module', '')}:{v.get('type', '')}",
                                       str(v.get("repr", "")), bool(v.get("callable")))
        return self.remotes[key]

    def encode(self, value: Any) -> Any:
        """A test-side value for the program; program objects travel as references."""
        try:
            return self.codec._enc(value, _Budget(), 0)
        except Unencodable:
            raise TypeError("a value from the tests is too large to pass to the program") from None

    def ask(self, op: str, **fields: Any) -> Any:
        if self.closed:
            raise RuntimeError("the program's process is gone")
        try:
            write_frame(self.out, {"op": op, **fields})
        except OSError:
            self.closed = True
            raise RuntimeError("the program's process ended during the tests") from None
        while True:
            reply = self.reader.wait()
            if reply is None:
                self.closed = True
                raise RuntimeError("the program's process ended during the tests")
            if "callback" not in reply:
                break
            self.call_back(reply)
        if "raise" in reply:
            raise_described(reply["raise"])
        self.after = reply.get("after") if isinstance(reply.get("after"), dict) else None
        return self.codec.decode(reply.get("ok"))

    def copy_back(self, args: tuple, kwargs: dict) -> None:
        """The program changed a list / dict / set it was passed: change the tests' too."""
        after, self.after = self.after, None
        if not after:
            return
        pairs = list(zip(args, after.get("args") or []))
        pairs += [(kwargs[k], v) for k, v in (after.get("kwargs") or {}).items() if k in kwargs]
        for local, new in pairs:
            if new is None or type(local) not in _MUTABLE:
                continue
            value = self.codec.decode(new)
            if type(value) is not type(local):
                continue
            if isinstance(local, dict):
                local.clear()
                local.update(value)
            elif isinstance(local, set):
                local.clear()
                local.update(value)
            else:
                local[:] = value

    def call_back(self, frame: dict) -> None:
        try:
            fn = self.local[int(frame["callback"])]
            value = fn(*self.codec.decode(frame["args"]), **self.codec.decode(frame["kwargs"]))
            reply = {"ok": self.encode(value)}
        except BaseException as exc:
            reply = {"raise": describe_exception(exc)}
        write_frame(self.out, reply)

    def program_module(self, name: str) -> Any:
        if name not in self.modules:
            self.modules[name] = self.ask("import", name=name)
        return self.modules[name]

    def done(self) -> None:
        try:
            write_frame(self.out, {"op": "done"})
        except OSError:
            pass


class Remote:
    """An object of the program, seen from the checker. Comparisons with plain values
    are never delegated to the program: a remote object equals only itself, or another
    remote object the program says it equals."""

    __slots__ = ("_link", "_id", "_type", "_repr", "_callable")

    def __init__(self, link: ProgramLink, ref: int, type_name: str, text: str,
                 is_callable: bool) -> None:
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_id", ref)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_repr", text)
        object.__setattr__(self, "_callable", is_callable)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105
        """The library class of the same name, so ``isinstance(x, plt.Axes)`` works in a
        test (the program's own classes and unknown ones stay ``Remote``). This is a claim
        of the program's and only answers type checks: values are still compared here."""
        return _local_class(object.__getattribute__(self, "_type")) or Remote

    def _ask(self, op: str, **fields: Any) -> Any:
        return object.__getattribute__(self, "_link").ask(
            op, ref=object.__getattribute__(self, "_id"), **fields)

    def _enc(self, value: Any) -> Any:
        return object.__getattribute__(self, "_link").encode(value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._ask("setattr", name=name, value=self._enc(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._ask("call", args=self._enc(list(args)), kwargs=self._enc(dict(kwargs)))
        object.__getattribute__(self, "_link").copy_back(args, kwargs)
        return result

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key=self._enc(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ask("setitem", key=self._enc(key), value=self._enc(value))

    def __delitem__(self, key: Any) -> None:
        self._ask("delitem", key=self._enc(key))

    def __len__(self) -> int:
        n = self._ask("len")
        if type(n) is not int:
            raise TypeError("len() of a program object did not give an int")
        return n

    def __iter__(self) -> Any:
        iterator = self._ask("iter")
        while True:
            chunk = iterator._ask("next")
            if type(chunk) is not list:
                raise TypeError("the program's iterator did not give plain items")
            if not chunk:
                return
            yield from chunk

    def __contains__(self, item: Any) -> bool:
        return any(item == x for x in self)  # compared here, on plain values

    def __bool__(self) -> bool:
        raise TypeError(
            f"a {object.__getattribute__(self, '_type')} object of the program cannot be used "
            "as a truth value in a test; compare a plain value (e.g. `x == 3`, `len(x) > 0`)")

    def __repr__(self) -> str:
        return object.__getattribute__(self, "_repr") or "<program object>"

    def __str__(self) -> str:
        text = self._ask("str")
        return text if type(text) is str else repr(self)

    def __hash__(self) -> int:
        return hash(("selfheal-remote", object.__getattribute__(self, "_id")))

    def _compare(self, other: Any, name: str) -> Any:
        if not isinstance(other, Remote):
            return NotImplemented
        result = self._ask("compare", name=name, other=object.__getattribute__(other, "_id"))
        return result is True

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, Remote) and object.__getattribute__(other, "_id") == \
                object.__getattribute__(self, "_id"):
            return True
        return self._compare(other, "==")

    def __ne__(self, other: Any) -> Any:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")


def _local_class(spec: str) -> "type | None":
    module, _, qualname = spec.partition(":")
    if not module or module == "__main__" or not qualname:
        return None
    target: Any = sys.modules.get(module)
    if target is None:
        return None
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


#: Modules whose state the program's process owns (a test that seeds ``random`` or
#: closes pyplot's figures means the program's), given to the tests as the program's.
PROGRAM_STATE_MODULES = ("random", "numpy.random", "matplotlib.pyplot")
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


def _binop(name: str) -> Callable:
    def method(self: Remote, other: Any) -> Any:
        return self._ask("binop", name=name, other=self._enc(other))
    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift"):
    setattr(Remote, f"__{_name}__", _binop(f"__{_name}__"))
    setattr(Remote, f"__r{_name}__", _binop(f"__r{_name}__"))


# --------------------------------------------------------------------------- the checker
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
    _enter(workdir)
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


# --------------------------------------------------------------------------- the candidate
def load_inputs(req: dict, ns: dict) -> None:
    directory = req.get("inputs_dir") or os.environ.get("SELFHEAL_PUT_DIR", "")
    for name, fname in (req.get("inputs") or {}).items():
        try:
            with open(os.path.join(directory, os.path.basename(fname)), "rb") as f:
                ns[name] = pickle.load(f)
        except Exception as exc:
            hint = ""
            if "__main__" in str(exc):
                hint = (" (a class or function defined in the notebook itself cannot be sent "
                        "into the sandbox: pass plain data such as a dict, list or DataFrame)")
            raise InputError(
                f"input {name!r} could not be loaded inside the sandbox: "
                f"{type(exc).__name__}: {exc}{hint}"
            ) from None


class InputError(Exception):
    pass


def _runner_frames_to_skip(tb: Any) -> Any:
    """The traceback from the program's first frame on (the runner's own are not shown)."""
    here = __file__ if "__file__" in globals() else ""
    while tb is not None and tb.tb_frame.f_code.co_filename == here:
        tb = tb.tb_next
    return tb


def _print_exception(exc: BaseException) -> None:
    """What ``python3 FILE`` prints for an uncaught exception (through sys.excepthook)."""
    tb = None if isinstance(exc, SyntaxError) else _runner_frames_to_skip(exc.__traceback__)
    exc.__traceback__ = tb  # the hook prints the exception's own traceback
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:
        try:
            traceback.print_exception(type(exc), exc, tb)
        except BaseException:
            pass


def _stack_depth() -> int:
    depth = 0
    frame: "types.FrameType | None" = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class Program:
    """One candidate, run as ``python3 FILE`` would run it, in this (fresh) process."""

    def __init__(self, req: dict, workdir: str) -> None:
        self.req = req
        self.filename = os.path.basename(str(req.get("filename") or "candidate.py")) or "candidate.py"
        self.path = os.path.join(workdir, self.filename)
        self.workdir = workdir
        self.code = str(req.get("code") or "")
        self.error: "dict | None" = None
        self.outputs: list = []
        self.exit_code = 0
        self.interrupted = False
        self.failure = ""

    def module(self) -> dict:
        mod = types.ModuleType("__main__")
        mod.__dict__.update(__file__=self.path, __builtins__=builtins, __cached__=None,
                            __loader__=SourceFileLoader("__main__", self.path),
                            __annotations__={})
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
            self.error = {"type": "InputError", "message": str(exc), "line": None, "frames": [],
                          "locals": {}}
            self.exit_code = 1
            self.failure = "an input could not be loaded"
            sys.stderr.write(f"{exc}\n")
        except SystemExit as exc:
            self._exit(exc)
        except BaseException as exc:
            self.error = error_info(exc, (self.path, NOTEBOOK_FILE), self.filename)
            self.exit_code = 1
            self.interrupted = isinstance(exc, KeyboardInterrupt)
            self.failure = f"the program raised {type(exc).__name__}"
            _print_exception(exc)
            del exc

    def _execute(self, ns: dict) -> None:
        tree = ast.parse(self.code, self.path)
        body = tree.body
        last: "ast.Expr | None" = None
        if len(body) > 1 or (body and not _is_docstring(body[0])):
            if body and isinstance(body[-1], ast.Expr):
                last = body.pop()  # type: ignore[assignment]  # checked just above
        exec(compile(tree, self.path, "exec", dont_inherit=True), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), self.path, "eval",
                                 dont_inherit=True), ns)
            if value is not None:
                self.outputs.extend(rich_value(value))

    def _exit(self, exc: SystemExit) -> None:
        code = exc.code
        if code is None:
            self.exit_code = 0
        elif isinstance(code, int):
            self.exit_code = code & 0xFF
        else:
            try:
                sys.stderr.write(f"{code}\n")
            except BaseException:
                pass
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
                    ProgramObjects(sys.modules["__main__"].__dict__).serve(FD_RPC_IN, FD_RPC_OUT)
            except BaseException:
                pass
        self.outputs.extend(collect_figures())  # before atexit: pyplot closes them there
        try:
            write_frame(FD_REPORT, {"error": self.error, "outputs": self.outputs})
        except BaseException:
            pass
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
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


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
        stmt.value.value, str)


def candidate_main(workdir: str) -> None:
    raw = read_all(FD_REQUEST)
    if not raw:
        os._exit(0)  # the server is going away
    _enter(workdir)  # made now: another template's wipe may have run since the fork
    req = json.loads(raw)
    program = Program(req, workdir)
    program.run()
    program.finish(bool(req.get("tests")))


# --------------------------------------------------------------------------- the template
def _move_fds(mapping: dict) -> None:
    """Put descriptors at fixed numbers ({source: target}) and close every other one."""
    import fcntl

    high = {src: fcntl.fcntl(src, fcntl.F_DUPFD, 256) for src in mapping}
    for src, dup in high.items():
        target = mapping[src]
        os.dup2(dup, target, inheritable=target <= 2)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = max(mapping.values()) + 1
    os.closerange(top, limit if limit != resource.RLIM_INFINITY else 65536)


def _child_setup(soft_cap: int) -> None:
    os.setpgid(0, 0)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stream in (sys.stdout, sys.stderr):
        try:  # what was printed before a timeout or a crash is not lost in a buffer
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=True)
        except Exception:
            pass
    if soft_cap:
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (soft_cap, soft_cap))
        except (ValueError, OSError):
            pass


def _wipe(root: str) -> None:
    """Remove everything under ``root``, whatever modes the program left."""
    def unlock(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        except OSError:
            pass
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass

    try:
        entries = os.listdir(root)
    except OSError:
        return
    for entry in entries:
        path = os.path.join(root, entry)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, onerror=unlock)
            else:
                os.unlink(path)
        except OSError:
            pass


def _used_bytes(root: str) -> int:
    try:
        st = os.statvfs(root)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class Template:
    """Forks the processes of every run from a state that never held a request."""

    def __init__(self, sock: socket.socket, sweep: bool) -> None:
        self.sock = sock
        self.sweep = sweep
        self.children: set = set()
        self.rpc_ends: list = []
        self.workdir = WORKDIR_ROOT
        self.protect: "set[int]" = set()  # the other template and its idle candidate

    def serve(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        while True:
            ready, _, _ = select.select([self.sock.fileno(), wake_r], [], [])
            if wake_r in ready:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self._reap()
            if self.sock.fileno() in ready:
                data = self.sock.recv(65536)
                if not data:
                    self._kill_all()
                    os._exit(0)
                msg = json.loads(data)
                self.protect = {int(p) for p in msg.get("protect") or ()}
                if msg["op"] == "checker":
                    self._checker()
                elif msg["op"] == "sweep":
                    self._close_rpc_ends()
                    self._kill_all()
                    self._send({"op": "swept"})
                elif msg["op"] == "prepare":
                    self._close_rpc_ends()
                    self._prepare(msg)

    def _send(self, msg: dict, fds: "list | None" = None) -> None:
        data = json.dumps(msg).encode()
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.sendall(data)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                self.children.discard(pid)
                self._send({"op": "exit", "pid": pid, "status": status})

    def _others(self) -> list:
        """Live processes but PID 1, this one and the protected (zombies do not count)."""
        keep = {1, os.getpid(), *self.protect}
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in keep:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                out.append(int(entry))
        return out

    def _kill_all(self) -> None:
        """Every process but the server, the templates and the other template's idle
        candidate: the run's, and whatever it left (a fork bomb included)."""
        if not self.sweep:
            for pid in list(self.children):
                kill_group(pid)
            self._reap()
            return
        for _ in range(200):
            others = self._others()
            if not others:
                break
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self._reap()
            time.sleep(0.0005)
        self._reap()

    def _clean(self) -> str:
        """Wipe /tmp and /dev/shm; why the container is dirty, or ''."""
        if not self.sweep:
            return ""
        roots = [WORKDIR_ROOT, SHM_ROOT] + ([PUT_DIR] if os.access(PUT_DIR, os.W_OK) else [])
        for root in roots:
            _wipe(root)
        for root in roots:
            used = _used_bytes(root)
            if used > DIRTY_BYTES:
                return f"{root} still uses {used >> 10} KiB after the wipe"
        return ""

    def _prepare(self, msg: dict) -> None:
        self._kill_all()
        dirty = self._clean()
        self.workdir = os.path.join(WORKDIR_ROOT, f"run{msg['runs']}")
        soft_cap = int(msg.get("soft_cap") or 0)
        cand_req, out, err, report = os.pipe(), os.pipe(), os.pipe(), os.pipe()
        to_checker, to_program = os.pipe(), os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        workdir = self.workdir
        candidate = self._fork({null: 0, out[1]: 1, err[1]: 2, cand_req[0]: FD_REQUEST,
                                report[1]: FD_REPORT, to_checker[1]: FD_RPC_OUT,
                                to_program[0]: FD_RPC_IN},
                               lambda: _candidate_entry(soft_cap, workdir))
        self._send({"op": "prepared", "candidate": candidate, "dirty": dirty},
                   [cand_req[1], out[0], err[0], report[0]])
        for fd in [null, *cand_req, *out, *err, *report, to_checker[1], to_program[0]]:
            os.close(fd)
        self.rpc_ends = [to_program[1], to_checker[0]]  # for a checker, if the run has tests

    def _close_rpc_ends(self) -> None:
        for fd in self.rpc_ends:
            os.close(fd)
        self.rpc_ends = []

    def _checker(self) -> None:
        """Fork the checker of the current run, linked to its program."""
        if not self.rpc_ends:
            self._send({"op": "checker_ready", "pid": -1})
            return
        req, report, out, err = os.pipe(), os.pipe(), os.pipe(), os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        rpc_out, rpc_in = self.rpc_ends
        pid = self._fork({null: 0, out[1]: 1, err[1]: 2, req[0]: FD_REQUEST, report[1]: FD_REPORT,
                          rpc_out: FD_RPC_OUT, rpc_in: FD_RPC_IN},
                         lambda: _checker_entry(self.workdir))
        self._send({"op": "checker_ready", "pid": pid}, [req[1], report[0], out[0], err[0]])
        for fd in [null, *req, *report, *out, *err]:
            os.close(fd)
        self._close_rpc_ends()

    def _fork(self, fds: dict, entry: Callable[[], None]) -> int:
        for _ in range(50):  # right after a fork bomb the pids limit can still be full
            try:
                pid = os.fork()
                break
            except BlockingIOError:
                time.sleep(0.02)
        else:
            return -1
        if pid == 0:
            try:
                _move_fds(fds)
                entry()
            except BaseException:
                try:
                    traceback.print_exc()
                except BaseException:
                    pass
            os._exit(70)
        self.children.add(pid)
        return pid


def _candidate_entry(soft_cap: int, workdir: str) -> None:
    set_dumpable(True)  # its own /proc entries are its own; seccomp still denies ptrace
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the kernel OOM killer picks the program, not the runner
    except OSError:
        pass
    _child_setup(soft_cap)
    candidate_main(workdir)


def _checker_entry(workdir: str) -> None:
    _child_setup(0)
    checker_main(workdir)


def _enter(workdir: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)


def kill_group(pid: int) -> None:
    if pid <= 0:
        return
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# --------------------------------------------------------------------------- server side
class Capture:
    """Bytes read from one pipe, kept up to a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> bool:
        """Keep the chunk; True when the cap has been passed."""
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        return self.total > self.cap

    def text(self, label: str) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.total > self.cap:
            text += f"\n[selfheal: {label} truncated after {self.cap} bytes]"
        return text

    def frame(self) -> "dict | None":
        if len(self.data) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.data)
        if len(self.data) < HEADER.size + size:
            return None
        try:
            frame = json.loads(bytes(self.data[HEADER.size : HEADER.size + size]))
        except ValueError:
            return None
        return frame if isinstance(frame, dict) else None


class Prepared:
    """The processes of the next run (forked by the template) and the server's pipe ends."""

    def __init__(self, msg: dict, fds: list) -> None:
        self.candidate = int(msg["candidate"])
        self.dirty = str(msg.get("dirty") or "")
        self.request_w, self.out_r, self.err_r, self.report_r = fds


class TemplateLink:
    """The server's end of one template: its socket, its pid, its next run's processes."""

    def __init__(self, kind: str, sock: socket.socket, pid: int) -> None:
        self.kind, self.sock, self.pid = kind, sock, pid
        self.next: "Prepared | None" = None


def needs_libraries(req: dict) -> bool:
    """Whether a run imports anything beyond the standard library (or loads inputs):
    then it starts from the template with numpy / pandas / matplotlib preloaded; else
    from the light one, whose processes fork and exit several times faster."""
    if req.get("inputs"):
        return True
    for key in ("prelude", "code", "tests"):
        try:
            tree = ast.parse(str(req.get(key) or ""))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(n.split(".")[0] not in sys.stdlib_module_names for n in names):
                return True
    return False


class Server:
    def __init__(self, sweep: bool, memory_bytes: int, control: "str | None") -> None:
        self.sweep = sweep and os.getuid() != 0  # never kill(-1) as root (e.g. on a host)
        self.memory_bytes = memory_bytes
        self.channel = "stdio"
        self.in_fd, self.out_fd = 0, 1
        if control:
            # A unix socket the host listens on, in a directory it shares with us: frames
            # then go host <-> runner directly, without the engine in between.
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(control)
                self._sock = sock  # keep the object alive: it owns the descriptor
                self.in_fd = self.out_fd = sock.fileno()
                self.channel = "socket"
            except OSError as exc:
                sys.stderr.write(f"selfheal runner: control socket {control} unreachable "
                                 f"({exc.strerror or exc}); using stdin/stdout\n")
        if self.channel == "stdio":
            self.out_fd = os.dup(1)
        os.dup2(2, 1)  # a stray print in the server can never corrupt the frame stream
        self.host = FrameReader(self.in_fd)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.runs = 0
        self.prep_s = 0.0
        self.templates: "dict[str, TemplateLink]" = {}
        self.exits: dict = {}
        self.put_dir = ""
        self.put_error = ""
        self.template_lost = False

    # -- template ---------------------------------------------------------------
    def start_template(self, kind: str) -> None:
        """Fork a template from this process as it is now (``light``: before the preload,
        ``heavy``: after it)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            for link in self.templates.values():
                link.sock.close()
            for fd in {self.in_fd, self.out_fd, self.wake_r, self.wake_w} - {0, 1, 2}:
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                Template(theirs, self.sweep).serve()
            finally:
                os._exit(0)
        theirs.close()
        self.templates[kind] = TemplateLink(kind, ours, pid)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)

    def _protect(self, link: "TemplateLink") -> list:
        """The other templates and their idle candidates: a sweep must not touch them."""
        out = []
        for other in self.templates.values():
            if other is not link:
                out.append(other.pid)
                if other.next is not None:
                    out.append(other.next.candidate)
        return out

    def _tell(self, link: "TemplateLink", msg: dict) -> bool:
        try:
            link.sock.sendall(json.dumps({**msg, "protect": self._protect(link)}).encode())
            return True
        except OSError:
            self.template_lost = True
            return False

    def _template_message(self, link: "TemplateLink", want: str,
                          timeout: float = 30.0) -> "tuple[dict, list] | None":
        """Messages from a template until one of kind ``want`` (exits are recorded)."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([link.sock.fileno(), self.wake_r], [], [], left)
            if self.wake_r in ready:
                self._drain_wake()
                self._reap_orphans()
            if link.sock.fileno() in ready:
                got = self._recv_template(link)
                if got is None:
                    return None
                if got[0].get("op") == want:
                    return got

    def _recv_template(self, link: "TemplateLink") -> "tuple[dict, list] | None":
        try:
            data, fds, _flags, _addr = socket.recv_fds(link.sock, 65536, 16)
        except OSError:
            data, fds = b"", []
        if not data:
            self.template_lost = True
            return None
        msg = json.loads(data)
        if msg.get("op") == "exit":
            self.exits[int(msg["pid"])] = int(msg["status"])
        return msg, fds

    def prepare(self, link: "TemplateLink") -> None:
        self.runs += 1
        self.exits.clear()
        link.next = None
        if not self._tell(link, {"op": "prepare", "runs": self.runs,
                                 "soft_cap": self._soft_cap(link)}):
            return
        got = self._template_message(link, "prepared")
        link.next = Prepared(*got) if got is not None and len(got[1]) == 4 else None

    def sweep_run(self, link: "TemplateLink") -> None:
        if self._tell(link, {"op": "sweep"}):
            self._template_message(link, "swept")

    def _reap_orphans(self) -> None:
        """Processes reparented to PID 1 (us) when their parent died; and the templates."""
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if any(pid == link.pid for link in self.templates.values()):
                self.template_lost = True

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _soft_cap(self, link: "TemplateLink") -> int:
        """RLIMIT_DATA for a run: the template's data plus what the container has left."""
        if not self.memory_bytes:
            return 0
        status = _read_kv(f"/proc/{link.pid}/status")
        vm_data = status.get("VmData", 0) * 1024
        rss = status.get("VmRSS", 0) * 1024
        return vm_data + max(self.memory_bytes - rss - (32 << 20), 16 << 20)

    # -- lifecycle --------------------------------------------------------------
    def serve(self, hello: dict) -> None:
        for link in self.templates.values():
            self.prepare(link)
        write_frame(self.out_fd, {"ready": True, "protocol": RUNNER_PROTOCOL, "pid": os.getpid(),
                                  "python": sys.version.split()[0], "channel": self.channel,
                                  **hello})
        while True:
            req = self.host.wait()
            if req is None:
                break
            op = req.get("op")
            if op == "run":
                t0 = time.monotonic()
                link = self.templates["heavy" if needs_libraries(req) else "light"]
                result = self.run(req, link)
                result["server_s"] = round(time.monotonic() - t0, 6)
                result["prep_s"] = self.prep_s
                try:
                    write_frame(self.out_fd, result)
                except OSError:
                    break  # the host went away mid-run: nobody to answer
                t0 = time.monotonic()
                self.prepare(link)
                self.prep_s = round(time.monotonic() - t0, 6)
            elif op == "put":
                self.put(req)
            elif op == "cancel":
                continue  # arrived after its run had finished
            else:
                write_frame(self.out_fd, {"status": "error", "message": f"unknown op {op!r}"})
        for link in self.templates.values():
            link.sock.close()

    def put(self, req: dict) -> None:
        """A chunk of an input file sent over the frames (no directory shared with the host):
        appended to the file in PUT_DIR (a tmpfs the host mounts then) for the next run."""
        name = os.path.basename(str(req.get("name") or ""))
        if not name or self.put_error:
            return
        try:
            data = base64.b64decode(str(req.get("data") or ""), validate=True)
            directory = PUT_DIR if os.access(PUT_DIR, os.W_OK) else PUT_FALLBACK_DIR
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, name), "ab") as f:
                f.write(data)
            self.put_dir = directory
        except (OSError, ValueError) as exc:
            self.put_error = (f"input file {name!r} could not be received in the sandbox "
                              f"({getattr(exc, 'strerror', None) or exc})")

    # -- one run ----------------------------------------------------------------
    def run(self, req: dict, link: "TemplateLink") -> dict:
        cap = int(req.get("output_bytes") or (1 << 20))
        timeout = float(req.get("timeout_s") or 30.0)
        if link.next is None and not self.template_lost:
            self.prepare(link)
        p = link.next
        link.next = None
        if p is None or p.candidate < 0:
            return self._failed("the sandbox could not start the program (its process limit "
                                 "is full, or its supervisor died)")
        tests = str(req.get("tests") or "")
        put_dir, put_error, self.put_dir, self.put_error = self.put_dir, self.put_error, "", ""
        if put_error:
            result = self._failed(put_error)
            result["error"]["type"] = "InputError"
            result["message"] = (f"The inputs did not reach the sandbox: {put_error}. Pass "
                                 "smaller inputs or raise the memory limit.")
            return result
        request = {k: req.get(k) for k in ("code", "filename", "prelude", "inputs", "inputs_dir")}
        request["tests"] = bool(tests)
        if not req.get("inputs_dir"):
            request["inputs_dir"] = put_dir or PUT_DIR
        out, err = Capture(cap), Capture(cap)
        report, checker_report = Capture(MAX_RESULT_BYTES), Capture(MAX_RESULT_BYTES)
        pipes = {p.out_r: out, p.err_r: err, p.report_r: report}
        pids = [p.candidate]
        if tests:
            checker = self.start_checker(link)
            if checker is not None:
                pid, (chk_req, chk_report, chk_out, chk_err) = checker
                pids.append(pid)
                pipes.update({chk_report: checker_report, chk_out: out, chk_err: err})
                self._send_request(chk_req, {"tests": tests})
        for fd in pipes:
            os.set_blocking(fd, False)
        oom_before = oom_kills()
        t0 = time.monotonic()
        self._send_request(p.request_w, request)
        deadline = t0 + timeout
        reason = ""

        def stop(why: str) -> None:
            nonlocal reason
            if not reason:
                reason = why
                for pid in pids:
                    kill_group(pid)

        while not set(pids) <= set(self.exits) and not self.template_lost:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop("timeout")
            watch = list(pipes) + [self.wake_r, link.sock.fileno()] + (
                [] if self.host.eof else [self.in_fd])
            ready, _, _ = select.select(watch, [], [], 0.05 if reason else max(remaining, 0.001))
            for fd in ready:
                if fd == self.wake_r:
                    self._drain_wake()
                    self._reap_orphans()
                elif fd == link.sock.fileno():
                    self._recv_template(link)
                elif fd == self.in_fd:
                    self.host.feed()
                    while (frame := self.host.next()) is not None:
                        if frame.get("op") == "cancel":
                            stop("killed")
                    if self.host.eof:
                        stop("killed")
                elif fd in pipes:
                    over = self._read(fd, pipes)
                    if over and pipes.get(fd) in (out, err):
                        stop("output_limit")
        duration = time.monotonic() - t0
        status_word = self.exits.get(p.candidate)
        for fd in list(pipes):  # usually every writer is gone already
            while fd in pipes and self._read(fd, pipes) is not None:
                pass
        if pipes:  # something the program started still holds a pipe: end it first
            self.sweep_run(link)
            for fd in list(pipes):
                for _ in range(4096):
                    if fd not in pipes or self._read(fd, pipes, block=True) is None:
                        break
        for fd in list(pipes):
            os.close(fd)
        result = self._describe(status_word, reason, out, err, report.frame(),
                                checker_report.frame() if tests else None, tests, oom_before,
                                duration, cap, timeout)
        if p.dirty or self.template_lost:
            result["dirty"] = True
        return result

    def start_checker(self, link: "TemplateLink") -> "tuple[int, list] | None":
        if not self._tell(link, {"op": "checker"}):
            return None
        got = self._template_message(link, "checker_ready")
        if got is None or int(got[0].get("pid", -1)) < 0 or len(got[1]) != 4:
            return None
        return int(got[0]["pid"]), got[1]

    def _send_request(self, fd: int, obj: Any) -> None:
        try:
            if obj is not None:
                data = json.dumps(obj).encode("utf-8", errors="surrogatepass")
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:
            pass  # the process died before reading; its exit status tells why
        os.close(fd)

    def _read(self, fd: int, pipes: dict, block: bool = False) -> "bool | None":
        """Read what is there; None when nothing is left (EOF, or would block)."""
        if block:
            select.select([fd], [], [], 1.0)
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        if not chunk:
            os.close(fd)
            del pipes[fd]
            return None
        return pipes[fd].add(chunk)

    def _failed(self, message: str) -> dict:
        return {"status": "error", "exit_code": None, "stdout": "", "stderr": "",
                "error": {"type": "SandboxError", "message": message, "line": None,
                          "frames": [], "locals": {}},
                "outputs": [], "tests": [], "message": f"The sandbox failed: {message}.",
                "run_s": 0.0, "dirty": True}

    def _describe(self, wait_status: "int | None", reason: str, out: Capture, err: Capture,
                  report: "dict | None", checked: "dict | None", tests: str, oom_before: int,
                  duration: float, cap: int, timeout: float) -> dict:
        result: dict = {
            "status": "ok", "exit_code": 0, "error": None, "outputs": [], "tests": [],
            "stdout_truncated": out.total > cap, "stderr_truncated": err.total > cap,
            "run_s": round(duration, 6), "message": "",
        }
        if report is not None:  # the program's own description: details, never the verdict
            error = report.get("error")
            result["error"] = error if isinstance(error, dict) else None
            outputs = report.get("outputs")
            result["outputs"] = outputs if isinstance(outputs, list) else []
        if tests:
            result["tests"] = _test_outcomes(checked, tests, reason)
        signum = 0
        if wait_status is None:
            exit_code: "int | None" = None
        elif os.WIFSIGNALED(wait_status):
            signum = os.WTERMSIG(wait_status)
            exit_code = 128 + signum
        else:
            exit_code = os.WEXITSTATUS(wait_status)
        result["exit_code"] = exit_code
        limit_mb = self.memory_bytes >> 20
        error_type = (result["error"] or {}).get("type")
        if reason == "timeout":
            result.update(status="timeout", error=None, message=(
                f"The program was still running after {timeout:g} s and was stopped. Look for "
                "an endless loop, a thread that never ends, or work too slow for the limit, "
                "or raise the timeout."))
        elif reason == "output_limit":
            result.update(status="output_limit", message=(
                f"The program wrote more than {cap} bytes of output and was stopped. Print "
                "less (a summary, .head(), a count)."))
        elif reason == "killed":
            result.update(status="killed",
                          message="The run was cancelled and the program was stopped.")
        elif wait_status is None:
            result.update(status="error", error={
                "type": "SandboxError", "message": "the program's exit was not observed",
                "line": None, "frames": [], "locals": {}}, message=(
                "The sandbox lost track of the program (its supervisor was killed); the "
                "container will be replaced."))
        elif signum == signal.SIGKILL and oom_kills() > oom_before:
            result.update(status="oom", message=(
                f"The program used more than the memory limit ({limit_mb} MB) and the kernel "
                "killed it. Use less memory (smaller data, chunks, dtypes) or raise the "
                "memory limit."))
        elif exit_code and error_type == "MemoryError":
            result.update(status="oom", message=(
                f"The program ran out of memory (limit {limit_mb} MB): an allocation raised "
                "MemoryError. Use less memory or raise the limit."))
        elif signum and not (signum == signal.SIGINT and error_type == "KeyboardInterrupt"):
            name = signal.Signals(signum).name
            result.update(status="error", error={
                "type": name, "message": f"the process was killed by {name}", "line": None,
                "frames": [], "locals": {}}, message=f"The program died from signal {name}.")
        elif exit_code:
            result["status"] = "error"
            if not result["error"]:
                result["message"] = f"The program ended with exit code {exit_code}."
        else:
            result["error"] = None  # exit status 0: whatever the program claimed, it passed
        result["stdout"] = out.text("stdout")
        result["stderr"] = err.text("stderr")
        return result


def _test_outcomes(checked: "dict | None", tests: str, reason: str) -> list:
    """The checker's outcomes; when it reported nothing usable, every test failed."""
    outcomes = checked.get("tests") if isinstance(checked, dict) else None
    if isinstance(outcomes, list) and all(isinstance(t, dict) for t in outcomes):
        return outcomes
    why = {"timeout": "the run timed out", "killed": "the run was cancelled",
           "output_limit": "the output limit was reached"}.get(
        reason, "the test process ended without a report")
    return [{"source": tests.strip(), "passed": False, "line": 1, "message": f"not run: {why}"}]


def main() -> None:
    args = sys.argv[1:]
    sweep = "--sweep" in args
    memory_bytes = int(args[args.index("--memory-bytes") + 1]) if "--memory-bytes" in args else 0
    control = args[args.index("--control") + 1] if "--control" in args else None
    t0 = time.monotonic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # PID 1 gets no signal it does not handle
    set_dumpable(False)  # no ptrace, no /proc/<pid>/mem of the runner by the program
    refused = install_seccomp()
    server = Server(sweep=sweep, memory_bytes=memory_bytes, control=control)
    matplotlib_environment()
    gc.collect()
    gc.freeze()
    server.start_template("light")  # the standard library only: small, quick to fork and end
    loaded = preload()
    gc.collect()
    gc.freeze()  # children then never touch (copy) the preloaded objects' pages
    server.start_template("heavy")
    server.serve({"preloaded": loaded, "preload_s": round(time.monotonic() - t0, 3),
                  "seccomp": not refused, "seccomp_error": refused})
