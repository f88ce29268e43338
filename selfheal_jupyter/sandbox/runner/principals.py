"""Who runs as whom: the server and its templates as one uid, each run's candidate and
checker as two uids of their own that no process in this container has had before.

The kernel then keeps the principals apart without any list to keep up to date: a
process may signal, trace or open ``/proc/PID/{mem,fd,environ,...}`` of another only
when they share a uid (or it holds a capability; candidates hold none). Ending a run is
``kill(-1, SIGKILL)`` with the run's uid as the effective one: it reaches every process
of that uid in the container, in whatever state (stopped, traced, leaderless, in a
session or group of its own), and no other.

The container starts the runner as root with only CAP_SETUID and CAP_SETGID; the server
keeps those two (and nothing else) as an unprivileged uid, and every candidate and
checker drops them for good under no_new_privs.
"""

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from .hardening import CAP_SETGID, CAP_SETUID, effective_capabilities, keep_capabilities, set_capabilities, set_dumpable

#: The server and its templates: the image's unprivileged user (nobody / nogroup).
SERVER_ID = 65534
#: ids below this are the image's system users: never given to a run.
FIRST_RUN_ID = 1000
#: The most ids one container hands out (two per run).
ID_BUDGET = 1 << 24
#: How long ending a run may take before its container counts as dirty.
END_TIMEOUT_S = 10.0


def _mapped(path: str) -> "list[tuple[int, int]]":
    """The ids this container's user namespace maps, as [start, end) ranges."""
    ranges = []
    try:
        with open(path) as f:
            for line in f:
                inside, _outside, count = (int(x) for x in line.split())
                ranges.append((inside, inside + count))
    except (OSError, ValueError):
        ranges.append((0, 1 << 16))
    return ranges


def id_range() -> "tuple[int, int]":
    """The largest range of ids mapped for users and groups alike (Docker: nearly all
    of 2**32; a remapped or rootless engine: usually 65,536)."""
    best = (0, 0)
    for ulo, uhi in _mapped("/proc/self/uid_map"):
        for glo, ghi in _mapped("/proc/self/gid_map"):
            lo, hi = max(ulo, glo, FIRST_RUN_ID), min(uhi, ghi, 1 << 31)
            if hi - lo > best[1] - best[0]:
                best = (lo, hi)
    return best


class RunIds:
    """Fresh ids for this container's runs, from a random start: never one twice, and
    (where the engine maps all ids) unlikely to meet another container's."""

    def __init__(self, span: "tuple[int, int] | None" = None) -> None:
        lo, hi = span or id_range()
        budget = min((hi - lo) // 2, ID_BUDGET)
        # os.urandom, not the random module: a preloaded ``random`` would hand every
        # forked program the same generator state.
        start = lo + int.from_bytes(os.urandom(8), "big") % max(hi - lo - budget, 1)
        if start == SERVER_ID:
            start += 1
        #: The real uid the server takes while it ends a run: no process ever has it.
        self.reaper = start
        self.next, self.end = start + 1, start + budget

    def left(self) -> int:
        return self.end - self.next

    def take(self) -> "int | None":
        """An id no process of this container has had; None when the budget is spent."""
        while self.next < self.end:
            taken, self.next = self.next, self.next + 1
            if taken != SERVER_ID:
                return taken
        return None


def seal(paths: "list[str]") -> str:
    """As root, before anything else: each of ``paths`` root's alone (a file the engine
    mounts writable for every uid, such as Kubernetes' /dev/termination-log on the node's
    disk, that no program may fill; a folder such as /dev/mqueue where what a run makes
    would outlive it). '' or why not."""
    for path in paths:
        try:
            os.chmod(path, 0o600)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"the runner could not seal {path} ({exc.strerror or exc})"
    return ""


def drop_to_server() -> str:
    """From root with CAP_SETUID and CAP_SETGID to SERVER_ID keeping just those two;
    '' or why not (then no run can be kept apart, and the server must not start)."""
    if os.getuid() != 0:
        return (
            f"the runner started as uid {os.getuid()}, not as root with CAP_SETUID and "
            "CAP_SETGID, so it cannot give each run a uid of its own"
        )
    try:
        keep_capabilities(True)
        os.setgroups([])
        os.setresgid(SERVER_ID, SERVER_ID, SERVER_ID)
        os.setresuid(SERVER_ID, SERVER_ID, SERVER_ID)
        keep_capabilities(False)
        set_capabilities(CAP_SETUID, CAP_SETGID)
    except OSError as exc:
        return (
            f"the runner could not become uid {SERVER_ID} keeping CAP_SETUID and "
            f"CAP_SETGID ({exc.strerror or exc}): the container must grant both"
        )
    set_dumpable(False)  # a change of uid resets it: say it again
    return ""


def become(uid: int, gid: int, dumpable: bool) -> None:
    """This (forked) process becomes ``uid``:``gid`` for good, with no capability."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    set_capabilities()
    if effective_capabilities():
        raise OSError("capabilities survived the change of uid")
    set_dumpable(dumpable)


@contextmanager
def acting_as(uid: int, gid: "int | None" = None, real: int = SERVER_ID) -> Iterator[None]:
    """The server or a template, briefly with ``uid``'s rights over files and processes
    (and group ``gid``'s, when given).

    The real and saved uids stay ``real`` and SERVER_ID: ``uid``'s processes may signal
    a process only by its real or saved uid, so they cannot signal this one meanwhile.
    """
    if gid is not None:
        os.setresgid(SERVER_ID, gid, SERVER_ID)
    os.setresuid(real, uid, SERVER_ID)
    try:
        yield
    finally:
        os.setresuid(SERVER_ID, SERVER_ID, SERVER_ID)
        if gid is not None:
            os.setresgid(SERVER_ID, SERVER_ID, SERVER_ID)


def signal_all(uid: int, reaper: int) -> None:
    """SIGKILL to every process of ``uid``, acting as ``reaper`` (a uid nothing else has).
    ``kill(-1)`` reaches exactly the processes this one may signal: ``uid``'s."""
    with acting_as(uid, real=reaper), suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def processes_of(uids: "list[int]", runner: "set[int]") -> "list[int]":
    """The processes (zombies included) whose real uid is one of ``uids``; the pids in
    ``runner`` (this process and the templates, alive) are not looked at."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in runner:
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) in uids:
                            found.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


def end_all(
    uids: "list[int]", reaper: int, runner: "set[int]", reap: Callable[[float], None], timeout: float = END_TIMEOUT_S
) -> bool:
    """Kill every process of ``uids`` and wait until none is left, not even a zombie
    (``reap(seconds)`` waits for a child's exit and reaps; orphans are the server's).
    False if some were still there after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        for uid in uids:
            signal_all(uid, reaper)
        if not processes_of(uids, runner):
            return True
        if time.monotonic() > end:
            return False
        reap(0.005)
