"""Removing what a run wrote, acting as the run's own uids (between runs, in the server).

A run's processes can write only where every uid may (``/tmp``, ``/dev/shm``, the
inputs tmpfs): whatever they left there is owned by the run's uids, so it is found by
its owner, not guessed from names, and removed with the owner's own rights."""

import os
import shutil
import stat
from typing import Any

#: Bytes a wiped tmpfs may still report as used before the container counts as dirty.
DIRTY_BYTES = 1 << 20


def _remove_tree(path: str) -> None:
    """Remove ``path`` (its owner's), whatever modes the program left on it."""
    def unlock(func: Any, failed: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            os.chmod(failed, 0o700)
        except OSError:
            pass
        try:
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)
        except OSError:
            pass

    try:
        os.chmod(path, 0o700)
        shutil.rmtree(path, onerror=unlock)
    except OSError:
        pass


def remove_owned(root: str, uid: int) -> None:
    """Remove everything under ``root`` that ``uid`` owns; call it acting as ``uid``.
    Another uid's directory is searched (when ``uid`` may) for what ``uid`` put there."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid:
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(entry.path)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
        elif stat.S_ISDIR(st.st_mode):
            remove_owned(entry.path, uid)


def owned_left(roots: "list[str]", uids: "list[int]") -> str:
    """Why the container is dirty (something of ``uids`` is still there), or ''."""
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            try:
                owner = entry.stat(follow_symlinks=False).st_uid
            except OSError:
                continue
            if owner in uids:
                return f"{entry.path} of uid {owner} could not be removed"
    return ""


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
