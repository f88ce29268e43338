"""What a run tried beyond its own folder, seen by the server from outside the run's
processes, for the review ("what it tried in the sandbox").

* network: the kernel's counters of the container's network namespace
  (``/proc/net/snmp``, ``snmp6``): an attempt to reach an address the sandbox has no
  route to (``OutNoRoutes``: every address but its own, since it has no network), a TCP
  connection opened, a UDP datagram sent. The runner itself speaks no IP (its channels
  are pipes and a unix socket), so every count is the run's.
* processes: task ids the container's pid namespace handed out
  (``/proc/sys/kernel/ns_last_pid``): each process or thread the run started. The
  runner forks nothing while a run lasts (the run's processes were forked before).
* files: entries created in the folders every uid may write (``/tmp``, ``/dev/shm``,
  the inputs' folder) other than the run's own working folder, as inotify events
  queued to the server's descriptor when they are created.

Why the program cannot hide them: it runs under a uid of its own with no capability,
so it can neither reset the namespace's counters nor reach the server's inotify
descriptor (the server is another uid, not dumpable, and ``ptrace`` is denied); the
kernel counts an attempt or queues an event when it happens, so a file deleted at once
or a thread that ends at once still leaves its trace. What cannot be read (another
kernel, e.g. gVisor, without one of these files) is simply not reported."""

import contextlib
import ctypes
import ctypes.util
import os
import struct

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000
IN_CREATE = 0x100
IN_MOVED_TO = 0x80
IN_Q_OVERFLOW = 0x4000
IN_ISDIR = 0x40000000
_EVENT = struct.Struct("iIII")
#: At most this many paths are named in a result.
NAMED_FILES = 5

#: (file, row, counter) of the network namespace's counters that count an attempt.
NETWORK_COUNTERS = {
    "no_route": [("/proc/net/snmp", "Ip", "OutNoRoutes"), ("/proc/net/snmp6", "", "Ip6OutNoRoutes")],
    "tcp": [("/proc/net/snmp", "Tcp", "ActiveOpens")],
    "udp": [
        ("/proc/net/snmp", "Udp", "OutDatagrams"),
        ("/proc/net/snmp", "UdpLite", "OutDatagrams"),
        ("/proc/net/snmp6", "", "Udp6OutDatagrams"),
        ("/proc/net/snmp6", "", "UdpLite6OutDatagrams"),
    ],
}


def _counters() -> "dict | None":
    """{(file, row, counter): value} of the namespace's counters (None: unreadable)."""
    found = {}
    for path in ("/proc/net/snmp", "/proc/net/snmp6"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if path.endswith("6"):
            for line in lines:
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    found[(path, "", parts[0])] = int(parts[1])
            continue
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            keys, numbers = names.split(), values.split()
            if not keys or keys[0] != (numbers[0] if numbers else None):
                continue
            for key, number in zip(keys[1:], numbers[1:], strict=False):
                with contextlib.suppress(ValueError):
                    found[(path, keys[0].rstrip(":"), key)] = int(number)
    return found or None


def _last_pid() -> "int | None":
    try:
        with open("/proc/sys/kernel/ns_last_pid") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 1 << 22


class Watch:
    """The server's watch over one run at a time: :meth:`start` before the program's
    request is sent, :meth:`stop` once every process of the run has ended."""

    def __init__(self, roots: "list[str]") -> None:
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        self.roots: dict = {}
        if self.fd >= 0:
            for root in roots:
                wd = _libc.inotify_add_watch(self.fd, root.encode(), IN_CREATE | IN_MOVED_TO)
                if wd >= 0:
                    self.roots[wd] = root
        self.before: dict | None = None
        self.first_pid: int | None = None

    def _events(self) -> "tuple[list[str], bool]":
        """Paths created since the last read, and whether the queue overflowed."""
        paths: list = []
        overflow = False
        if self.fd < 0:
            return paths, overflow
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")
                offset += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                elif wd in self.roots and name:
                    kind = "/" if mask & IN_ISDIR else ""
                    paths.append(os.path.join(self.roots[wd], name.decode("utf-8", "replace")) + kind)
        return paths, overflow

    def start(self) -> None:
        self._events()  # what the server and the templates made before: not the run's
        self.before = _counters()
        self.first_pid = _last_pid()

    def stop(self, own: "set[str]") -> list:
        """What the run tried (the ``tried`` list of its result); ``own``: paths that are
        the run's own or the runner's (its working folder)."""
        tried = []
        after = _counters()
        if self.before is not None and after is not None:
            counts = {
                what: sum(max(after.get(key, 0) - self.before.get(key, 0), 0) for key in keys)
                for what, keys in NETWORK_COUNTERS.items()
            }
            total = sum(counts.values())
            if total:
                said = []
                if counts["no_route"]:
                    said.append(f"{counts['no_route']} to an address outside it")
                if counts["tcp"]:
                    said.append(f"{counts['tcp']} TCP connection{'s' if counts['tcp'] != 1 else ''} opened")
                if counts["udp"]:
                    said.append(f"{counts['udp']} UDP datagram{'s' if counts['udp'] != 1 else ''} sent")
                tried.append(
                    {
                        "kind": "network",
                        "count": total,
                        "evidence": f"{total} attempt{'s' if total != 1 else ''} ({', '.join(said)}), refused: "
                        "the sandbox has no network (counted by the kernel for its network namespace)",
                    }
                )
        last = _last_pid()
        if self.first_pid is not None and last is not None and last != self.first_pid:
            started = last - self.first_pid if last > self.first_pid else _pid_max() - self.first_pid + last
            tried.append(
                {
                    "kind": "process",
                    "count": started,
                    "evidence": f"{started} new task id{'s' if started != 1 else ''} in the sandbox's process "
                    "namespace (each process or thread gets one)",
                }
            )
        paths, overflow = self._events()
        theirs = [p for p in dict.fromkeys(paths) if p.rstrip("/") not in own]
        if theirs or overflow:
            named = ", ".join(theirs[:NAMED_FILES]) + (", …" if len(theirs) > NAMED_FILES or overflow else "")
            tried.append(
                {
                    "kind": "files",
                    "count": len(theirs),
                    "evidence": f"created {named} (inotify events of the folders every user of the sandbox may "
                    "write, queued to the server)",
                }
            )
        self.before = self.first_pid = None
        return tried
