"""The server: PID 1 of the container. It reads the host's frames, starts the two
templates, has each run forked, watches it (output caps, timeout, cancel) and answers
with its result. Protocol and principals: see the package's docstring."""

import base64
import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from .frames import MAX_RESULT_BYTES, FrameReader, write_frame
from .hardening import install_seccomp, set_dumpable
from .layout import MPL_CONFIG_DIR, MQUEUE_ROOT, PUT_DIR, PUT_FALLBACK_DIR, SHM_ROOT, WORKDIR_ROOT
from .libraries import matplotlib_environment, needs_libraries, preload
from .memory import oom_kills, read_kv
from .outcome import Capture, describe_result, failed_result
from .principals import RunIds, acting_as, drop_to_server, end_all, seal, signal_all
from .sweep import leftovers, remove_entry, remove_owned, still_used
from .template import Template
from .watch import Watch

RUNNER_PROTOCOL = 2


class Prepared:
    """The next run: its uids, its candidate (forked by the template, idle until the
    request comes) and the server's ends of its pipes."""

    def __init__(self, uids: "list[int]", workdir: str, msg: dict, fds: list) -> None:
        self.uids = uids  # the candidate's, then the checker's
        self.workdir = workdir
        self.candidate = int(msg["candidate"])
        self.request_w, self.out_r, self.err_r, self.report_r = fds


class TemplateLink:
    """The server's end of one template: its socket, its pid, its next run's processes."""

    def __init__(self, kind: str, sock: socket.socket, pid: int) -> None:
        self.kind, self.sock, self.pid = kind, sock, pid
        self.next: Prepared | None = None


class Server:
    """PID 1: the host's channel, the templates, and one run at a time."""

    def __init__(self, memory_bytes: int, control: "str | None", nproc: int = 0) -> None:
        self.ids = RunIds()
        self.memory_bytes = memory_bytes
        self.nproc = nproc  # processes per program's uid (0: the container's pids cgroup holds it)
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
                sys.stderr.write(
                    f"selfheal runner: control socket {control} unreachable "
                    f"({exc.strerror or exc}); using stdin/stdout\n"
                )
        if self.channel == "stdio":
            self.out_fd = os.dup(1)
        os.dup2(2, 1)  # a stray print in the server can never corrupt the frame stream
        self.host = FrameReader(self.in_fd)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.runs = 0
        self.prep_s = 0.0
        self.templates: dict[str, TemplateLink] = {}
        self.exits: dict = {}
        self.put_dir = ""
        self.put_error = ""
        self.put_files: list[str] = []
        self.template_lost = False
        # what each run tries beyond its folder, seen from here (see ``watch``)
        self.watch = Watch([WORKDIR_ROOT, SHM_ROOT] + ([PUT_DIR] if os.path.isdir(PUT_DIR) else []))

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
                with contextlib.suppress(OSError):
                    os.close(fd)
            try:
                Template(theirs).serve()
            finally:
                os._exit(0)
        theirs.close()
        self.templates[kind] = TemplateLink(kind, ours, pid)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)

    def _tell(self, link: "TemplateLink", msg: dict) -> bool:
        try:
            link.sock.sendall(json.dumps(msg).encode())
            return True
        except OSError:
            self.template_lost = True
            return False

    def _template_message(self, link: "TemplateLink", want: str, timeout: float = 30.0) -> "tuple[dict, list] | None":
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
        uids = [self.ids.take(), self.ids.take()]
        workdir = os.path.join(WORKDIR_ROOT, f"run{self.runs}")
        if None in uids or not self._tell(
            link,
            {
                "op": "prepare",
                "workdir": workdir,
                "uid": uids[0],
                "checker_uid": uids[1],
                "soft_cap": self._soft_cap(link),
                "nproc": self.nproc,
            },
        ):
            return  # no id left (the host then replaces the container) or no template
        got = self._template_message(link, "prepared")
        if got is not None and len(got[1]) == 4:
            link.next = Prepared(uids, workdir, *got)  # type: ignore[arg-type]  # no None

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

    def _reap_for(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a child's exit (a SIGCHLD), then reap orphans."""
        if select.select([self.wake_r], [], [], seconds)[0]:
            self._drain_wake()
        self._reap_orphans()

    def end_run(self, p: "Prepared", checked: bool) -> str:
        """Nothing of the run outlives it: every process of its uids killed and gone,
        what they wrote removed by its owner; why the container is dirty, or ''.
        ``checked``: a checker was started (else its uid never had a process)."""
        uids = p.uids if checked else p.uids[:1]
        runner = {os.getpid(), *(link.pid for link in self.templates.values())}
        if not end_all(uids, self.ids.reaper, runner, self._reap_for):
            return "processes of the run could not be ended"
        for path in self.put_files:  # the run's inputs (the server's own files)
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.put_files = []
        roots = [WORKDIR_ROOT, SHM_ROOT] + ([PUT_DIR] if os.access(PUT_DIR, os.W_OK) else [])
        for _ in range(3):  # each uid may have written into the other's directories
            gone = True
            for uid in reversed(uids):
                # the checker's pass needs the run's group to enter the run's directories
                with acting_as(uid, p.uids[0] if uid != p.uids[0] else None):
                    for root in roots:
                        gone = remove_owned(root, uid, p.uids[0]) and gone
            if gone:
                break
        # The runner's own entries: matplotlib's directory, the idle candidates' workdirs.
        keep = {MPL_CONFIG_DIR, *(link.next.workdir for link in self.templates.values() if link.next is not None)}
        for path in leftovers(roots, keep):  # none of the run's uids': ours (as above)
            remove_entry(path)
        left = leftovers(roots, keep)
        return f"{left[0]} could not be removed" if left else still_used(roots)

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
        status = read_kv(f"/proc/{link.pid}/status")
        vm_data = status.get("VmData", 0) * 1024
        rss = status.get("VmRSS", 0) * 1024
        return vm_data + max(self.memory_bytes - rss - (32 << 20), 16 << 20)

    # -- lifecycle --------------------------------------------------------------
    def serve(self, hello: dict, await_host: bool = False, hello_within: float = 0.0) -> None:
        """``await_host``: say ready only in answer to the host's ``hello`` frames, each
        time one comes (an engine whose attach stream drops what was written before it
        joined the container's output: Kubernetes); the answer names the hello's ``n``.
        ``hello_within``: seconds to wait for the host's first frame before exiting (0:
        no bound). A host that died between starting the container and attaching to it
        closes no stdin, and nothing else would ever end the container."""
        for link in self.templates.values():
            self.prepare(link)
        ready = {
            "ready": True,
            "protocol": RUNNER_PROTOCOL,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "channel": self.channel,
            **hello,
        }
        if not await_host:
            write_frame(self.out_fd, ready)
        elif hello_within and not select.select([self.in_fd], [], [], hello_within)[0]:
            sys.stderr.write(f"selfheal runner: no host attached within {hello_within:g} s; exiting\n")
            return
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
            elif op == "hello":
                write_frame(self.out_fd, {**ready, "n": req.get("n")})
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
            path = os.path.join(directory, name)
            with open(path, "ab") as f:
                f.write(data)
            self.put_dir = directory
            if path not in self.put_files:
                self.put_files.append(path)
        except (OSError, ValueError) as exc:
            self.put_error = (
                f"input file {name!r} could not be received in the sandbox ({getattr(exc, 'strerror', None) or exc})"
            )

    # -- one run ----------------------------------------------------------------
    def run(self, req: dict, link: "TemplateLink") -> dict:
        cap = int(req.get("output_bytes") or (1 << 20))
        timeout = float(req.get("timeout_s") or 30.0)
        if link.next is None and not self.template_lost:
            self.prepare(link)
        p = link.next
        link.next = None
        if p is None or p.candidate < 0:
            return failed_result(
                "the sandbox could not start the program (its process limit is full, or its supervisor died)"
            )
        tests = str(req.get("tests") or "")
        asserts = [[int(line), int(col), str(text)] for line, col, text in req.get("asserts") or []]
        put_dir, put_error, self.put_dir, self.put_error = self.put_dir, self.put_error, "", ""
        if put_error:
            result = failed_result(put_error)
            result["error"]["type"] = "InputError"
            result["message"] = (
                f"The inputs did not reach the sandbox: {put_error}. Pass smaller inputs or raise the memory limit."
            )
            result["dirty"] = bool(self.end_run(p, checked=False)) or self.template_lost
            for fd in (p.request_w, p.out_r, p.err_r, p.report_r):
                os.close(fd)
            return result
        request = {k: req.get(k) for k in ("code", "filename", "prelude", "inputs", "inputs_dir")}
        request.update(tests=bool(tests or asserts), asserts=asserts)
        if not req.get("inputs_dir"):
            request["inputs_dir"] = put_dir or PUT_DIR
        out, err = Capture(cap), Capture(cap)
        report, checker_report = Capture(MAX_RESULT_BYTES), Capture(MAX_RESULT_BYTES)
        pipes = {p.out_r: out, p.err_r: err, p.report_r: report}
        pids = [p.candidate]
        if tests or asserts:
            checker = self.start_checker(link)
            if checker is not None:
                pid, (chk_req, chk_report, chk_out, chk_err) = checker
                pids.append(pid)
                pipes.update({chk_report: checker_report, chk_out: out, chk_err: err})
                self._send_request(
                    chk_req,
                    {  # the sources its names rule reads
                        "tests": tests,
                        "asserts": asserts,
                        "code": req.get("code"),
                        "prelude": req.get("prelude"),
                        "inputs": list(req.get("inputs") or {}),
                    },
                )
        for fd in pipes:
            os.set_blocking(fd, False)
        self.watch.start()  # every process of the run exists now; the candidate waits for its request
        oom_before = oom_kills()
        t0 = time.monotonic()
        self._send_request(p.request_w, request)
        deadline = t0 + timeout
        reason = ""

        def stop(why: str) -> None:
            nonlocal reason
            if not reason:
                reason = why
                for uid in p.uids:  # the candidate, the checker and all they started
                    signal_all(uid, self.ids.reaper)

        while not set(pids) <= set(self.exits) and not self.template_lost:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop("timeout")
            watch = list(pipes) + [self.wake_r, link.sock.fileno()] + ([] if self.host.eof else [self.in_fd])
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
        # no writer of the pipes is left after this: read them to their end
        dirty = self.end_run(p, checked=len(pids) > 1)
        tried = self.watch.stop({p.workdir})
        if dirty:
            sys.stderr.write(f"selfheal runner: {dirty}; the container will be replaced\n")
        for fd in list(pipes):
            for _ in range(4096):
                if fd not in pipes or self._read(fd, pipes, block=True) is None:
                    break
        for fd in list(pipes):
            os.close(fd)
        result = describe_result(
            status_word,
            reason,
            out,
            err,
            report.frame(),
            checker_report.frame() if tests or asserts else None,
            tests,
            oom_before,
            duration,
            cap,
            timeout,
            self.memory_bytes,
            asserts,
        )
        result["tried"] = tried
        if dirty or self.template_lost or self.ids.left() < 2:
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
                    view = view[os.write(fd, view) :]
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


def main() -> None:
    args = sys.argv[1:]
    memory_bytes = int(args[args.index("--memory-bytes") + 1]) if "--memory-bytes" in args else 0
    control = args[args.index("--control") + 1] if "--control" in args else None
    nproc = int(args[args.index("--nproc") + 1]) if "--nproc" in args else 0
    hello_within = float(args[args.index("--hello-within") + 1]) if "--hello-within" in args else 0.0
    sealed = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--seal"]
    t0 = time.monotonic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # PID 1 gets no signal it does not handle
    cannot = seal([*sealed, MQUEUE_ROOT]) or drop_to_server()  # first of all: root no longer than needed
    if cannot:
        sys.stderr.write(f"selfheal runner: {cannot}\n")
        sys.exit(1)
    set_dumpable(False)  # no ptrace, no /proc/<pid>/mem of the runner by the program
    refused = install_seccomp()
    server = Server(memory_bytes=memory_bytes, control=control, nproc=nproc)
    matplotlib_environment()
    gc.collect()
    gc.freeze()
    server.start_template("light")  # the standard library only: small, quick to fork and end
    loaded = preload()
    gc.collect()
    gc.freeze()  # children then never touch (copy) the preloaded objects' pages
    server.start_template("heavy")
    server.serve(
        {
            "preloaded": loaded,
            "preload_s": round(time.monotonic() - t0, 3),
            "seccomp": not refused,
            "seccomp_error": refused,
        },
        await_host="--await-host" in args,
        hello_within=hello_within,
    )
