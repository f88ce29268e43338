"""Removing what a run wrote, acting as the run's own uids (between runs, in the server).

A run's processes can write only where every uid may (``/tmp``, ``/dev/shm``, the
inputs tmpfs): whatever they left there is owned by the run's uids, so it is found by
its owner and removed with the owner's own rights. Then every entry there but the
runner's own must be gone (a hard link to a runner file, where the kernel allows one,
is the runner's to remove), or the container counts as dirty."""

import contextlib
import os
import stat

#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent: int) -> "int | None":
    """``name`` in the directory ``parent`` opened as a directory (never through a
    symlink), made searchable and writable first if the program locked it."""
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
            os.fchmod(fd, 0o700)  # its entries can be unlinked
        except OSError:
            pass
        return fd
    return None


def _remove_tree(path: str) -> bool:
    """Remove the directory ``path`` (its owner's), whatever modes and depth the program
    left; whether it is gone. A loop over a stack of open descriptors, not a recursion
    (a tree deeper than Python's recursion limit made the recursive removal raise and
    the next honest run fail), each step relative to its directory's descriptor (no
    path length limit, no symlink followed)."""
    head, name = os.path.split(path.rstrip("/"))
    try:
        parent = os.open(head or "/", _DIR_FLAGS)
    except OSError:
        return False
    try:
        top = _open_dir(name, parent)
        if top is None:
            return False
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
                with contextlib.suppress(OSError):
                    stuck.add(os.stat(done, dir_fd=above, follow_symlinks=False).st_ino)
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
            return False
        except FileNotFoundError:
            return True
        except OSError:
            return False
    finally:
        os.close(parent)


def remove_owned(root: str, uid: int, gid: int) -> bool:
    """Remove everything under ``root`` that ``uid`` owns; call it acting as ``uid`` in
    group ``gid``. Another uid's directory is searched only when ``uid`` could have
    written into it (for what ``uid`` put there). Whether all of it is gone."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return True
    gone = True
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid:
            if stat.S_ISDIR(st.st_mode):
                gone = _remove_tree(entry.path) and gone
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    gone = False
        elif stat.S_ISDIR(st.st_mode) and (
            st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid == gid)
        ):
            gone = remove_owned(entry.path, uid, gid) and gone
    return gone


def leftovers(roots: "list[str]", keep: "set[str]") -> "list[str]":
    """Every entry directly under ``roots`` but the runner's own (``keep``)."""
    found = []
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        found += [path for path in (os.path.join(root, n) for n in names) if path not in keep]
    return found


def remove_entry(path: str) -> None:
    """Remove one entry (a file, link, or directory tree) as this process may."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            _remove_tree(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def still_used(roots: "list[str]") -> str:
    """Why the container is dirty (a tmpfs still holds data after the wipe), or ''."""
    for root in roots:
        used = used_bytes(root)
        if used > DIRTY_BYTES:
            return f"{root} still uses {used >> 10} KiB after the wipe"
    return ""


def used_bytes(root: str) -> int:
    try:
        st = os.statvfs(root)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize
