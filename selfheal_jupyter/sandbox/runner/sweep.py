"""Removing what a run wrote, acting as the run's own uids (between runs, in the server).

A run's processes can write only where every uid may (``/tmp``, ``/dev/shm``, the
inputs tmpfs): whatever they left there is owned by the run's uids, so it is found by
its owner and removed with the owner's own rights. Then every entry there but the
runner's own must be gone (a hard link to a runner file, where the kernel allows one,
is the runner's to remove), or the container counts as dirty."""

import os
import stat

#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20


def _remove_tree(path: str) -> bool:
    """Remove the directory ``path`` (its owner's), whatever modes the program left
    on it, with few system calls (each one is dear under gVisor); whether it is gone."""
    try:
        entries = list(os.scandir(path))
    except PermissionError:
        try:
            os.chmod(path, 0o700)
            entries = list(os.scandir(path))
        except OSError:
            return False
    except OSError:
        return False
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(entry.path)
            else:
                os.unlink(entry.path)
        except PermissionError:  # a directory locked by its owner (us): open it, retry
            try:
                os.chmod(path, 0o700)
                os.unlink(entry.path)
            except OSError:
                pass
        except OSError:
            pass
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False


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
                st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid == gid)):
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
