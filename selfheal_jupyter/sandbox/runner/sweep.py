"""Ending a run's processes and wiping what it wrote (between runs, in a template)."""

import os
import signal

#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent: int) -> "int | None":
    """``name`` in the directory ``parent`` opened as a directory (never through a
    symlink), made searchable first if the program locked it; None if it cannot be."""
    for attempt in (0, 1):
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except PermissionError:
            if attempt:
                return None
            try:
                os.chmod(name, 0o700, dir_fd=parent)
            except OSError:
                return None
            continue
        except OSError:
            return None
        try:
            os.fchmod(fd, 0o700)  # writable: its entries can be unlinked
        except OSError:
            pass
        return fd
    return None


def _remove_tree(name: str, parent: int) -> None:
    """Remove the directory ``name`` under ``parent`` and all it holds, whatever its
    depth: a loop over a stack of open descriptors, not a recursion (a tree deeper than
    Python's recursion limit crashed the recursive ``shutil.rmtree``), each step
    relative to its directory's descriptor (no path length limit, no symlink followed)."""
    top = _open_dir(name, parent)
    if top is None:
        return
    chain = [(top, name)]
    stuck: set = set()  # directories that could not be opened or emptied: skipped
    while chain:
        fd, _ = chain[-1]
        descend = None
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except OSError:
            entries = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if descend is None and entry.inode() not in stuck:
                        descend = entry
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass
        if descend is not None:
            child = _open_dir(descend.name, fd)
            if child is None:
                stuck.add(descend.inode())
            else:
                chain.append((child, descend.name))
            continue
        os.close(fd)
        _, done = chain.pop()
        above = chain[-1][0] if chain else parent
        try:
            os.rmdir(done, dir_fd=above)
        except OSError:
            try:
                stuck.add(os.stat(done, dir_fd=above, follow_symlinks=False).st_ino)
            except OSError:
                pass


def wipe(root: str) -> None:
    """Remove everything under ``root``, whatever modes the program left."""
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    try:
        with os.scandir(root_fd) as it:
            entries = list(it)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    _remove_tree(entry.name, root_fd)
                else:
                    os.unlink(entry.name, dir_fd=root_fd)
            except OSError:
                pass
    except OSError:
        pass
    finally:
        os.close(root_fd)


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
