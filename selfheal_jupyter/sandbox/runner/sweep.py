"""Ending a run's processes and wiping what it wrote (between runs, in a template)."""

import os
import shutil
import signal
from typing import Any

#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20


def wipe(root: str) -> None:
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


def used_bytes(root: str) -> int:
    try:
        st = os.statvfs(root)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def wipe_all(roots: "list[str]") -> str:
    """Wipe every root; why the container is dirty afterwards, or ''."""
    for root in roots:
        wipe(root)
    for root in roots:
        used = used_bytes(root)
        if used > DIRTY_BYTES:
            return f"{root} still uses {used >> 10} KiB after the wipe"
    return ""


def live_processes(keep: "set[int]") -> list:
    """Live processes but those in ``keep`` (zombies do not count)."""
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


def kill_group(pid: int) -> None:
    if pid <= 0:
        return
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
