"""The runner: a small fork server that runs INSIDE the sandbox container.

Why a fork server: starting Python and importing pandas costs ~0.5 s; a container
costs ~0.4 s more. This process pays both once, then forks a fresh child per
candidate, so every candidate starts from the same clean, preloaded state (isolated
from the others) in a few milliseconds.

Protocol: frames of a 4-byte big-endian length followed by UTF-8 JSON, over the unix
socket given with ``--control PATH`` (the host listens on it, in a bind-mounted
directory), else — or when that socket cannot be reached, as on an engine that does
not share the host's files — over stdin/stdout (the container's attach stream). The
server first sends ``{"ready": true, "channel": "socket"|"stdio", ...}``; then, per
request ``{"op": "run", ...}`` it sends one result frame. While a run is going, a
``{"op": "cancel"}`` frame kills it. ``{"op": "put", "name", "data" (base64), "last"}``
frames (no answer) append to an input file for the next run, whose request then says
``"inputs_dir": null``; the files are removed after that run. EOF ends the server (so
a container whose host died stops by itself).

Everything this process sends out is JSON: text, base64 PNG, HTML. Nothing is
pickled on the way out. Standard library only (numpy / pandas / matplotlib are
preloaded when present). Python 3.11.
"""

from __future__ import annotations

import ast
import base64
import builtins
import gc
import io
import json
import linecache
import os
import pickle
import reprlib
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

RUNNER_PROTOCOL = 1
HEADER = struct.Struct(">I")
WORKDIR_ROOT = "/tmp"
RESERVED = ".selfheal"  # /tmp/.selfheal survives the per-run /tmp cleanup
#: Where ``put`` frames land: the host mounts a tmpfs here when inputs travel as frames
#: (in socket mode it is the read-only bind mount and receives no puts).
PUT_DIR = "/inputs"
MAX_RESULT_BYTES = 64 << 20
MAX_FIGURES = 20
MAX_LOCALS = 20
MAX_TEXT_REPR = 10_000
KILL_CODE = 128 + signal.SIGKILL

_short = reprlib.Repr()
_short.maxlevel = 2
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 8
_short.maxstring = 80
_short.maxother = 120


# --------------------------------------------------------------------------- frames
def write_frame(fd: int, obj: Any) -> None:
    data = json.dumps(obj, default=str).encode("utf-8")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FrameReader:
    """Length-prefixed JSON frames from a file descriptor, readable without blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.eof = False

    def feed(self) -> None:
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            self.eof = True
        self.buf += chunk

    def next(self) -> dict[str, Any] | None:
        if len(self.buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buf)
        if len(self.buf) < HEADER.size + size:
            return None
        data = bytes(self.buf[HEADER.size : HEADER.size + size])
        del self.buf[: HEADER.size + size]
        return json.loads(data)

    def wait(self) -> dict[str, Any] | None:
        """Block until a frame or EOF (None)."""
        while True:
            frame = self.next()
            if frame is not None or self.eof:
                return frame
            self.feed()


# --------------------------------------------------------------------------- preload
MPL_CACHE_DIR = "/opt/selfheal/matplotlib"  # a font cache made when the image was built


def preload() -> list[str]:
    """Import the common libraries once, so children get them for free."""
    os.environ["MPLBACKEND"] = "Agg"
    config_dir = os.environ["MPLCONFIGDIR"] = os.path.join(WORKDIR_ROOT, RESERVED, "matplotlib")
    if os.path.isdir(MPL_CACHE_DIR):
        shutil.copytree(MPL_CACHE_DIR, config_dir, dirs_exist_ok=True)
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
        import matplotlib.pyplot as plt

        plt.show = lambda *a, **k: None  # figures are collected after the run instead
        loaded.append("matplotlib")
    except Exception:
        pass
    return loaded


# --------------------------------------------------------------------------- memory
def _read_kv(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
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


# --------------------------------------------------------------------------- child side
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


def summarize_locals(frame_locals: dict[str, Any]) -> dict[str, str]:
    import types

    out: dict[str, str] = {}
    for name, value in frame_locals.items():
        if name.startswith("__") or isinstance(
            value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
        ):
            continue
        out[name] = short_repr(value)
        if len(out) >= MAX_LOCALS:
            break
    return out


def error_info(exc: BaseException, filename: str, lines: list[str]) -> dict[str, Any]:
    """Structured exception restricted to the candidate's own frames."""
    frames = []
    last_frame = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename:
            lineno = tb.tb_lineno
            src = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
            frames.append(
                {"file": filename, "line": lineno, "function": code.co_name, "source": src}
            )
            last_frame = tb.tb_frame
        tb = tb.tb_next
    line = frames[-1]["line"] if frames else None
    if isinstance(exc, SyntaxError) and exc.filename == filename and exc.lineno:
        line = exc.lineno
        src = (exc.text or "").strip() or (
            lines[line - 1].strip() if 0 < line <= len(lines) else ""
        )
        frames.append({"file": filename, "line": line, "function": "<module>", "source": src})
    try:
        message = str(exc) if not isinstance(exc, SyntaxError) else (exc.msg or str(exc))
    except Exception:
        message = "<str() of the exception failed>"
    return {
        "type": type(exc).__name__,
        "message": message,
        "line": line,
        "frames": frames,
        "locals": summarize_locals(last_frame.f_locals) if last_frame is not None else {},
    }


def print_traceback(exc: BaseException, filename: str) -> None:
    """What `python file.py` would show on stderr, minus frames outside the candidate.

    A chained exception that happened entirely inside a library (pandas raising a
    KeyError internally, then another) is dropped from the chain.
    """
    try:
        te = traceback.TracebackException.from_exception(exc)
        link: traceback.TracebackException | None = te
        while link is not None:
            link.stack = traceback.StackSummary.from_list(
                [f for f in link.stack if f.filename == filename]
            )
            for attr in ("__cause__", "__context__"):
                nxt = getattr(link, attr)
                if nxt is not None and not any(f.filename == filename for f in nxt.stack):
                    setattr(link, attr, None)
                    if attr == "__cause__":
                        link.__suppress_context__ = True
            link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
        sys.stderr.write("".join(te.format()))
    except Exception:
        pass


def rich_value(value: Any) -> list[dict[str, str]]:
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


def collect_figures() -> list[dict[str, str]]:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    for num in plt.get_fignums()[:MAX_FIGURES]:
        try:
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            out.append({"mime": "image/png", "data": base64.b64encode(buf.getvalue()).decode()})
        except Exception as exc:
            sys.stderr.write(f"[selfheal] figure {num} could not be rendered: {exc!r}\n")
    return out


def compare_detail(stmt: ast.stmt, ns: dict[str, Any], filename: str) -> str:
    """For a failing bare ``assert a == b``: the values of both sides."""
    test = getattr(stmt, "test", None)
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return ""
    try:
        left = eval(compile(ast.Expression(test.left), filename, "eval"), ns)
        right = eval(compile(ast.Expression(test.comparators[0]), filename, "eval"), ns)
    except BaseException:
        return ""
    return f"left = {short_repr(left)}, right = {short_repr(right)}"


def run_tests(source: str, ns: dict[str, Any], skip_reason: str) -> list[dict[str, Any]]:
    """Run the user's tests one top-level statement at a time, in the candidate's namespace."""
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
            exec(compile(ast.Module([stmt], []), filename, "exec"), ns)
            results.append({"source": text, "passed": True, "line": stmt.lineno, "message": ""})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(exc, AssertionError) and not str(exc):
                detail = compare_detail(stmt, ns, filename)
                msg = f"AssertionError ({detail})" if detail else "AssertionError"
            results.append({"source": text, "passed": False, "line": stmt.lineno, "message": msg})
    return results


def load_inputs(req: dict[str, Any], ns: dict[str, Any]) -> None:
    directory = req.get("inputs_dir") or "/inputs"
    for name, fname in (req.get("inputs") or {}).items():
        try:
            with open(os.path.join(directory, fname), "rb") as f:
                ns[name] = pickle.load(f)
        except Exception as exc:
            hint = ""
            if "__main__" in str(exc):
                hint = (" (a class or function defined in the notebook itself cannot be sent "
                        "into the sandbox: pass plain data such as a dict, list or DataFrame)")
            raise RuntimeError(
                f"input {name!r} could not be loaded inside the sandbox: "
                f"{type(exc).__name__}: {exc}{hint}"
            ) from None


def run_candidate(req: dict[str, Any]) -> dict[str, Any]:
    """Run one candidate in this (child) process and describe what happened."""
    filename = req.get("filename") or "candidate.py"
    code = req.get("code", "")
    lines = code.splitlines()
    linecache.cache[filename] = (len(code), None, [ln + "\n" for ln in lines], filename)
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins, "__file__": filename}
    result: dict[str, Any] = {"exit_code": 0, "error": None, "outputs": [], "tests": []}
    failure = ""
    try:
        load_inputs(req, ns)
    except RuntimeError as exc:
        result["error"] = {"type": "InputError", "message": str(exc), "line": None,
                           "frames": [], "locals": {}}
        result["exit_code"] = 1
        failure = "an input could not be loaded"
        sys.stderr.write(f"{exc}\n")
    if not failure:
        try:
            tree = ast.parse(code, filename)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, filename, "exec"), ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), ns)
                if value is not None:
                    result["outputs"].extend(rich_value(value))
        except SystemExit as exc:
            code_ = exc.code
            if code_ is None or code_ == 0:
                pass
            else:
                result["exit_code"] = code_ if isinstance(code_, int) else 1
                result["error"] = error_info(exc, filename, lines)
                result["error"]["message"] = str(code_)
                failure = f"the program exited with SystemExit({code_!r})"
                if not isinstance(code_, int):
                    sys.stderr.write(f"{code_}\n")
        except BaseException as exc:
            result["exit_code"] = 1
            result["error"] = error_info(exc, filename, lines)
            failure = f"the program raised {type(exc).__name__}"
            print_traceback(exc, filename)
    if req.get("tests"):
        result["tests"] = run_tests(req["tests"], ns, failure)
    result["outputs"].extend(collect_figures())
    return result


def _prefault() -> None:
    """Touch, while idle, the memory every run writes to (copy-on-write faults after the
    fork), so that the candidate does not pay for them."""
    try:
        ns: dict[str, Any] = {"__builtins__": builtins}
        tree = ast.parse("x = [1, 'a', 2.0]\nx", "<prefault>")
        tree.body.pop()
        exec(compile(tree, "<prefault>", "exec"), ns)
        json.loads(json.dumps({"x": ns["x"], "y": None}))
        linecache.cache.pop("<prefault>", None)
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.get_fignums()
    except Exception:
        pass


def zygote_main(req_r: int, out_w: int, err_w: int, res_w: int, workdir: str,
                soft_cap: int) -> None:
    """The pre-forked child: set up everything, wait for the request, run it; never returns.

    Doing the set-up (and the fork itself) before the request arrives keeps both off
    the path between "request sent" and "result back".
    """
    status = 0
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (null, out_w, err_w):
            os.close(fd)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # the kernel OOM killer picks this child, not the server
        except OSError:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:  # what was printed before a timeout or a crash is not lost in a buffer
                stream.reconfigure(line_buffering=True)
            except Exception:
                pass
        os.makedirs(workdir, exist_ok=True)
        os.chdir(workdir)
        if soft_cap:
            try:
                resource.setrlimit(resource.RLIMIT_DATA, (soft_cap, soft_cap))
            except (ValueError, OSError):
                pass
        _prefault()
        chunks = []
        while chunk := os.read(req_r, 1 << 20):
            chunks.append(chunk)
        os.close(req_r)
        if not chunks:
            os._exit(0)  # the server is going away
        req = json.loads(b"".join(chunks))
        sys.argv = [req.get("filename") or "candidate.py"]
        sys.path[0] = workdir  # like `python candidate.py` run from its own directory
        result = run_candidate(req)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        data = json.dumps(result, default=str).encode("utf-8")
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(res_w, view):]
        status = result["exit_code"] if isinstance(result["exit_code"], int) else 1
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
        status = 70
    finally:
        os._exit(status & 0xFF if status >= 0 else 1)


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

    def frame(self) -> dict[str, Any] | None:
        """The child's result frame, once complete."""
        if len(self.data) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.data)
        if len(self.data) < HEADER.size + size:
            return None
        try:
            return json.loads(bytes(self.data[HEADER.size : HEADER.size + size]))
        except ValueError:
            return None


class Zygote:
    """A forked child waiting for its request, with the pipes that lead to it."""

    def __init__(self, pid: int, req_w: int, out_r: int, err_r: int, res_r: int) -> None:
        self.pid, self.req_w, self.out_r, self.err_r, self.res_r = pid, req_w, out_r, err_r, res_r


class Server:
    def __init__(self, sweep: bool, memory_bytes: int, control: str | None = None) -> None:
        self.sweep = sweep and os.getuid() != 0  # never kill(-1) as root (e.g. on a host)
        self.memory_bytes = memory_bytes
        self.channel = "stdio"
        if control:
            # A unix socket the host listens on (in the read-only bind mount): frames then
            # go host <-> runner directly instead of through dockerd and the shim.
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(control)
            except OSError as exc:  # an engine that does not share the host's files
                sock.close()
                sys.stderr.write(f"selfheal runner: cannot reach the control socket {control} "
                                 f"({type(exc).__name__}: {exc}); frames go over stdin/stdout\n")
                sys.stderr.flush()
            else:
                self._sock = sock  # keep the object alive: it owns the descriptor
                self.in_fd = self.out_fd = sock.fileno()
                self.channel = "socket"
        if self.channel == "stdio":
            self.in_fd, self.out_fd = 0, os.dup(1)
        os.dup2(2, 1)  # a stray print in the server can never corrupt the frame stream
        self.stdin = FrameReader(self.in_fd)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.runs = 0
        self.prep_s = 0.0  # how long the clean-up and fork after the last run took
        self.zygote: Zygote | None = None
        self.put_dir = PUT_DIR if os.access(PUT_DIR, os.W_OK) else os.path.join(
            WORKDIR_ROOT, RESERVED, "inputs")
        self.put_error = ""  # why a put failed; the next run reports it

    # -- lifecycle -------------------------------------------------------------
    def serve(self, loaded: list[str], preload_s: float) -> None:
        self._prefork()
        write_frame(self.out_fd, {
            "ready": True, "protocol": RUNNER_PROTOCOL, "pid": os.getpid(),
            "python": sys.version.split()[0], "preloaded": loaded, "preload_s": preload_s,
            "channel": self.channel,
        })
        while True:
            req = self.stdin.wait()
            if req is None:
                break
            op = req.get("op")
            if op == "run":
                t0 = time.monotonic()
                result = self.run(req)
                result["server_s"] = round(time.monotonic() - t0, 6)
                result["prep_s"] = self.prep_s
                try:
                    write_frame(self.out_fd, result)
                except OSError:
                    break  # the host went away mid-run: nobody to answer
                t0 = time.monotonic()
                self._after_run()
                self.prep_s = round(time.monotonic() - t0, 6)
            elif op == "put":
                self.put(req)
            elif op == "ping":
                write_frame(self.out_fd, {"pong": True, "runs": self.runs})
            elif op == "cancel":
                continue  # arrived after its run had finished
            else:
                write_frame(self.out_fd, {"status": "error", "message": f"unknown op {op!r}"})
        if self.zygote is not None:
            kill_child(self.zygote.pid)

    def put(self, req: dict[str, Any]) -> None:
        """Append one chunk of an input file (inputs sent as frames, no shared files)."""
        name = str(req.get("name") or "")
        if not name or os.path.basename(name) != name or name.startswith("."):
            self.put_error = f"the host sent an input with the bad file name {name!r}"
            return
        try:
            data = base64.b64decode(req.get("data") or "", validate=True)
            os.makedirs(self.put_dir, exist_ok=True)
            with open(os.path.join(self.put_dir, name), "ab") as f:
                f.write(data)
        except (OSError, ValueError) as exc:
            self.put_error = (f"an input could not be stored inside the sandbox ({exc}); "
                              "pass smaller inputs or raise the memory limit")

    def _clear_puts(self) -> None:
        try:
            for entry in os.listdir(self.put_dir):
                os.unlink(os.path.join(self.put_dir, entry))
        except OSError:
            pass

    def _soft_cap(self) -> int:
        """RLIMIT_DATA for a child: its inherited data plus what the container has left."""
        if not self.memory_bytes:
            return 0
        status = _read_kv("/proc/self/status")
        vm_data = status.get("VmData", 0) * 1024
        rss = status.get("VmRSS", 0) * 1024
        return vm_data + max(self.memory_bytes - rss - (32 << 20), 16 << 20)

    def _prefork(self) -> None:
        """Fork the next child now, while nobody waits for it."""
        self.runs += 1
        workdir = os.path.join(WORKDIR_ROOT, f"run{self.runs}")
        req_r, req_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        soft_cap = self._soft_cap()
        pid = -1
        for attempt in range(50):  # right after a fork bomb the pids limit can still be full
            try:
                pid = os.fork()
                break
            except BlockingIOError:
                time.sleep(0.02)
        if pid == 0:
            for fd in {req_w, out_r, err_r, res_r, self.in_fd, self.out_fd, self.wake_r,
                       self.wake_w} - {0}:
                os.close(fd)
            zygote_main(req_r, out_w, err_w, res_w, workdir, soft_cap)
        for fd in (req_r, out_w, err_w, res_w):
            os.close(fd)
        if pid < 0:
            for fd in (req_w, out_r, err_r, res_r):
                os.close(fd)
            self.zygote = None
            return
        self.zygote = Zygote(pid, req_w, out_r, err_r, res_r)

    def _after_run(self) -> None:
        """Leave the container as it was (no process, no file of the candidate), fork anew."""
        if self.sweep:
            try:
                for entry in os.listdir(WORKDIR_ROOT):
                    if entry != RESERVED:
                        path = os.path.join(WORKDIR_ROOT, entry)
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path, ignore_errors=True)
                        else:
                            os.unlink(path)
            except OSError:
                pass
        self._clear_puts()
        self._reap_all()
        self._prefork()

    def _sweep(self, pid: int) -> None:
        kill_child(pid)
        if self.sweep:
            try:
                os.kill(-1, signal.SIGKILL)  # every process but us and init: grandchildren too
            except ProcessLookupError:
                pass

    def _reap_all(self) -> None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass

    # -- one run ---------------------------------------------------------------
    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        cap = int(req.get("output_bytes") or (1 << 20))
        timeout = float(req.get("timeout_s") or 30.0)
        if req.get("inputs") and req.get("inputs_dir") is None:
            req = dict(req, inputs_dir=self.put_dir)  # the files came as put frames
        if self.put_error:
            message, self.put_error = self.put_error, ""
            if self.zygote is not None:  # never used: _after_run forks a fresh one
                kill_child(self.zygote.pid)
                for fd in (self.zygote.req_w, self.zygote.out_r, self.zygote.err_r,
                           self.zygote.res_r):
                    os.close(fd)
                self.zygote = None
            return {"status": "error", "exit_code": None, "stdout": "", "stderr": "",
                    "error": {"type": "InputError", "message": message, "line": None,
                              "frames": [], "locals": {}},
                    "outputs": [], "tests": [], "message": f"The program was not run: "
                    f"{message}.", "run_s": 0.0}
        if self.zygote is None:  # the fork after the last run failed: try again now
            self._reap_all()
            self._prefork()
        z = self.zygote
        self.zygote = None
        if z is None:
            return {"status": "error", "exit_code": None, "stdout": "", "stderr": "",
                    "error": {"type": "SandboxError", "message": "could not fork a child "
                              "(the process limit is full)", "line": None, "frames": [],
                              "locals": {}},
                    "outputs": [], "tests": [], "message": "The sandbox could not start the "
                    "program: its process limit is full.", "run_s": 0.0}
        out, err, res = Capture(cap), Capture(cap), Capture(MAX_RESULT_BYTES)
        pipes = {z.out_r: out, z.err_r: err, z.res_r: res}
        for fd in pipes:
            os.set_blocking(fd, False)
        oom_before = oom_kills()
        t0 = time.monotonic()
        payload = json.dumps(req).encode("utf-8")
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(z.req_w, view):]
        except OSError:
            pass  # the child died before reading; the reap below tells why
        os.close(z.req_w)
        deadline = t0 + timeout
        reason = ""  # why we killed it: timeout / output_limit / killed
        wait_status: int | None = None
        child: dict[str, Any] | None = None
        while True:
            child = res.frame()
            if child is not None:
                break
            wait_status = self._reap(z.pid)
            if wait_status is not None:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not reason:
                reason = "timeout"
                kill_child(z.pid)
            watch = list(pipes) + [self.wake_r] + ([] if self.stdin.eof else [self.in_fd])
            wait = 0.05 if reason else max(remaining, 0.001)
            ready, _, _ = select.select(watch, [], [], wait)
            for fd in ready:
                if fd == self.wake_r:
                    self._drain_wake()
                elif fd == self.in_fd:
                    self.stdin.feed()
                    while (frame := self.stdin.next()) is not None:
                        if frame.get("op") == "cancel" and not reason:
                            reason = "killed"
                            kill_child(z.pid)
                    if self.stdin.eof and not reason:
                        reason = "killed"
                        kill_child(z.pid)
                elif fd in pipes:
                    over = self._read(fd, pipes)
                    if over and not reason and fd != z.res_r:
                        reason = "output_limit"
                        kill_child(z.pid)
        duration = time.monotonic() - t0
        self._sweep(z.pid)
        for fd in list(pipes):  # whatever was written before the end
            for _ in range(64):
                if fd not in pipes or self._read(fd, pipes) is None:
                    break
        for fd in list(pipes):
            os.close(fd)
        if child is None:
            child = res.frame()
        if child is not None:
            wait_status = None  # the child's own report is authoritative
        elif wait_status is None:
            wait_status = self._wait(z.pid)
        return self._describe(req, child, wait_status, reason, out, err, res, oom_before,
                              duration, cap, timeout)

    def _reap(self, pid: int) -> int | None:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        return status if done else None

    def _wait(self, pid: int) -> int:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _read(self, fd: int, pipes: dict[int, Capture]) -> bool | None:
        """Read what is there; None when nothing is left (EOF or would block)."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        if not chunk:
            os.close(fd)
            del pipes[fd]
            return None
        return pipes[fd].add(chunk)

    def _describe(self, req, child, wait_status, reason, out, err, res, oom_before, duration,
                  cap, timeout):
        result: dict[str, Any] = {
            "status": "ok", "exit_code": 0, "error": None, "outputs": [], "tests": [],
            "stdout_truncated": out.total > cap, "stderr_truncated": err.total > cap,
            "run_s": round(duration, 6), "message": "",
        }
        if res.total > res.cap:
            err.add(b"\n[selfheal: the result was too large to return; outputs dropped]\n")
        signum = 0
        if child is not None:
            result.update({k: child[k] for k in ("error", "outputs", "tests") if k in child})
            exit_code = child.get("exit_code", 0)
        else:
            ws = wait_status or 0
            signum = os.WTERMSIG(ws) if os.WIFSIGNALED(ws) else 0
            exit_code = 128 + signum if signum else os.WEXITSTATUS(ws)
        result["exit_code"] = exit_code
        limit_mb = self.memory_bytes >> 20
        if reason == "timeout":
            result["status"] = "timeout"
            result["message"] = (f"The program was still running after {timeout:g} s and was "
                                 "stopped. Look for an endless loop or work too slow for the "
                                 "limit, or raise the timeout.")
        elif reason == "output_limit":
            result["status"] = "output_limit"
            result["message"] = (f"The program wrote more than {cap} bytes of output and was "
                                 "stopped. Print less (a summary, .head(), a count).")
        elif reason == "killed":
            result["status"] = "killed"
            result["message"] = "The run was cancelled and the program was stopped."
        elif signum == signal.SIGKILL and oom_kills() > oom_before:
            result["status"] = "oom"
            result["message"] = (f"The program used more than the memory limit ({limit_mb} MB) "
                                 "and the kernel killed it. Use less memory (smaller data, "
                                 "chunks, dtypes) or raise the memory limit.")
        elif child is not None and (child.get("error") or {}).get("type") == "MemoryError":
            result["status"] = "oom"
            result["message"] = (f"The program ran out of memory (limit {limit_mb} MB): an "
                                 "allocation raised MemoryError. Use less memory or raise "
                                 "the limit.")
        elif signum:
            name = signal.Signals(signum).name
            result["status"] = "error"
            result["error"] = {"type": name, "message": f"the process was killed by {name}",
                               "line": None, "frames": [], "locals": {}}
            result["message"] = f"The program died from signal {name}."
        elif child is None:
            result["status"] = "ok" if exit_code == 0 else "error"
            if exit_code:
                result["message"] = f"The program ended with exit code {exit_code} (os._exit?)."
        elif child.get("error"):
            result["status"] = "error"
        result["stdout"] = out.text("stdout")
        result["stderr"] = err.text("stderr")
        return result


def kill_child(pid: int) -> None:
    if pid <= 0:
        return
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> None:
    args = sys.argv[1:]
    sweep = "--sweep" in args
    memory_bytes = int(args[args.index("--memory-bytes") + 1]) if "--memory-bytes" in args else 0
    control = args[args.index("--control") + 1] if "--control" in args else None
    t0 = time.monotonic()
    os.makedirs(os.path.join(WORKDIR_ROOT, RESERVED), exist_ok=True)
    loaded = preload()
    gc.collect()
    gc.freeze()  # children then never touch (copy) the preloaded objects' pages
    server = Server(sweep=sweep, memory_bytes=memory_bytes, control=control)
    server.serve(loaded, round(time.monotonic() - t0, 3))


if __name__ == "__main__":
    main()
