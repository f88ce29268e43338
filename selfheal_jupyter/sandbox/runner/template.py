"""The templates: forked before any request exists, they fork every run's processes,
each as the uid the server gave it (see ``principals``)."""

import contextlib
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
from collections.abc import Callable

from .candidate import candidate_main
from .checker import checker_main
from .layout import FD_REPORT, FD_REQUEST, FD_RPC_IN, FD_RPC_OUT, WORKDIR_ROOT
from .principals import acting_as, become
from .type_table import TYPES


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


def _child_setup(soft_cap: int, nproc: int = 0) -> None:
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
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_DATA, (soft_cap, soft_cap))
    if nproc:  # counted per uid, and the program's uid is its own: its processes and threads
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


class Template:
    """Forks the processes of every run from a state that never held a request."""

    def __init__(self, sock: socket.socket) -> None:
        TYPES.freeze()  # the table of types, as the modules are before any program
        self.sock = sock
        self.children: set = set()
        self.rpc_ends: list = []
        self.workdir = WORKDIR_ROOT
        self.uid = self.checker_uid = -1  # the current run's; uid is also the run's gid
        self.nproc = 0  # the current run's processes per uid (0: the container's pids cgroup holds them)

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
                    os._exit(0)  # the server is gone, and the container with it
                msg = json.loads(data)
                if msg["op"] == "checker":
                    self._checker()
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

    def _prepare(self, msg: dict) -> None:
        """The next run's candidate, idle until its request comes, as the run's uid, in a
        working directory of its own (the checker, of the run's group, may enter it)."""
        self.uid, self.checker_uid = int(msg["uid"]), int(msg["checker_uid"])
        self.workdir = str(msg["workdir"])
        try:
            with acting_as(self.uid, gid=self.uid):  # the directory is the run's group's
                os.mkdir(self.workdir, 0o770)
                os.chmod(self.workdir, 0o770)  # whatever the umask
        except OSError:
            self._send({"op": "prepared", "candidate": -1})  # the server tries again
            return
        soft_cap = int(msg.get("soft_cap") or 0)
        nproc = self.nproc = int(msg.get("nproc") or 0)
        cand_req, out, err, report = os.pipe(), os.pipe(), os.pipe(), os.pipe()
        to_checker, to_program = os.pipe(), os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        workdir, uid = self.workdir, self.uid
        candidate = self._fork(
            {
                null: 0,
                out[1]: 1,
                err[1]: 2,
                cand_req[0]: FD_REQUEST,
                report[1]: FD_REPORT,
                to_checker[1]: FD_RPC_OUT,
                to_program[0]: FD_RPC_IN,
            },
            lambda: _candidate_entry(uid, soft_cap, workdir, nproc),
        )
        self._send({"op": "prepared", "candidate": candidate}, [cand_req[1], out[0], err[0], report[0]])
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
        workdir, uid, gid, nproc = self.workdir, self.checker_uid, self.uid, self.nproc
        pid = self._fork(
            {
                null: 0,
                out[1]: 1,
                err[1]: 2,
                req[0]: FD_REQUEST,
                report[1]: FD_REPORT,
                rpc_out: FD_RPC_OUT,
                rpc_in: FD_RPC_IN,
            },
            lambda: _checker_entry(uid, gid, workdir, nproc),
        )
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
                with contextlib.suppress(BaseException):
                    traceback.print_exc()
            os._exit(70)
        self.children.add(pid)
        return pid


def _candidate_entry(uid: int, soft_cap: int, workdir: str, nproc: int) -> None:
    # Dumpable: its /proc entries are its own uid's, which no other run has.
    become(uid, uid, dumpable=True)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the kernel OOM killer picks the program, not the runner
    except OSError:
        pass
    _child_setup(soft_cap, nproc)
    candidate_main(workdir)


def _checker_entry(uid: int, gid: int, workdir: str, nproc: int) -> None:
    become(uid, gid, dumpable=False)
    _child_setup(0, nproc)  # the tests are a program too: held like the candidate
    checker_main(workdir)
