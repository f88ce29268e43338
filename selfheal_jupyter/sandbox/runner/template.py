"""The templates: forked before any request exists, they fork every run's processes."""

import io
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback
from typing import Callable

from .candidate import candidate_main
from .checker import checker_main
from .hardening import set_dumpable
from .layout import FD_REPORT, FD_REQUEST, FD_RPC_IN, FD_RPC_OUT, PUT_DIR, SHM_ROOT, WORKDIR_ROOT
from .sweep import kill_group, live_processes, wipe_all


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

    def _kill_all(self) -> None:
        """Every process but the server, the templates and the other template's idle
        candidate: the run's, and whatever it left (a fork bomb included)."""
        if not self.sweep:
            for pid in list(self.children):
                kill_group(pid)
            self._reap()
            return
        for _ in range(200):
            others = live_processes(keep={1, os.getpid(), *self.protect})
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
        return wipe_all(roots)

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
