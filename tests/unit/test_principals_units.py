"""The runner's principals and its wipe, on the host, without Docker: which ids a
container hands out, and that what a run wrote is found by its owner, not by name.
(That the kernel then keeps the principals apart is tested through the real sandbox:
tests/sandbox/test_separation.py.)"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from selfheal_jupyter.sandbox.runner import principals, sweep


def test_ids_are_fresh_within_the_mapped_range_and_never_the_runner_s():
    ids = principals.RunIds(span=(65530, 65540))
    handed = [ids.take() for _ in range(20)]
    taken = [i for i in handed if i is not None]
    assert len(taken) == len(set(taken)) and ids.reaper not in taken
    assert principals.SERVER_ID not in taken and ids.reaper != principals.SERVER_ID
    assert all(65530 <= i < 65540 for i in taken)
    assert handed[-1] is None and ids.left() == 0  # spent: the container is then replaced


def test_two_containers_start_their_ids_far_apart():
    full = (principals.FIRST_RUN_ID, 1 << 31)
    starts = {principals.RunIds(span=full).reaper for _ in range(50)}
    assert len(starts) == 50
    assert all(principals.FIRST_RUN_ID <= s < (1 << 31) - principals.ID_BUDGET for s in starts)


def test_the_mapped_ranges_are_read_as_the_kernel_writes_them(tmp_path):
    remapped = tmp_path / "uid_map"
    remapped.write_text("         0     100000      65536\n")
    assert principals._mapped(str(remapped)) == [(0, 65536)]
    full = tmp_path / "full"
    full.write_text("         0          0 4294967295\n")
    assert principals._mapped(str(full)) == [(0, 4294967295)]


def _tree(root: Path) -> None:
    """What a run might leave: nested, locked, a symlink out, a fifo."""
    (root / "run1" / "deep" / "er").mkdir(parents=True)
    (root / "run1" / "deep" / "er" / "f").write_text("x")
    os.chmod(root / "run1" / "deep" / "er", 0)
    os.chmod(root / "run1" / "deep", 0)
    (root / "left.txt").write_text("secret")
    (root / "out").symlink_to("/etc/passwd")
    os.mkfifo(root / "pipe")


def test_a_hard_link_to_the_runner_s_file_is_a_leftover_the_runner_removes(tmp_path):
    """Where the kernel allows hard links to others' files (fs.protected_hardlinks=0),
    a run could leave one under a name of its choosing: not the run's to remove (the
    file is not its), so the runner removes every entry that is not its own."""
    ours = tmp_path / ".matplotlib"
    ours.write_text("font cache")
    os.link(ours, tmp_path / "a-name-that-carries-a-secret")
    left = sweep.leftovers([str(tmp_path)], keep={str(ours)})
    assert left == [str(tmp_path / "a-name-that-carries-a-secret")]
    for path in left:
        sweep.remove_entry(path)
    assert sweep.leftovers([str(tmp_path)], keep={str(ours)}) == [] and ours.exists()


def test_the_wipe_removes_what_the_uid_owns_whatever_its_modes(tmp_path):
    _tree(tmp_path)
    me = os.getuid()
    assert len(sweep.leftovers([str(tmp_path)], keep=set())) == 4
    assert sweep.remove_owned(str(tmp_path), me, os.getgid()) is True
    assert list(tmp_path.iterdir()) == []
    assert sweep.leftovers([str(tmp_path)], keep=set()) == []
    assert Path("/etc/passwd").exists()  # the symlink went, not what it pointed to


def test_the_wipe_leaves_what_another_uid_owns(tmp_path):
    _tree(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    other = os.getuid() + 12345
    sweep.remove_owned(str(tmp_path), other, other)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    kept = {str(tmp_path / "run1"), str(tmp_path / "pipe")}
    assert sorted(sweep.leftovers([str(tmp_path)], kept)) == [str(tmp_path / "left.txt"), str(tmp_path / "out")]
    for path in (tmp_path / "run1" / "deep", tmp_path / "run1" / "deep" / "er"):
        os.chmod(path, stat.S_IRWXU)  # let pytest clean up


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another uid needs root")
def test_the_wipe_finds_its_files_inside_another_uid_s_directory_it_could_write(tmp_path):
    other = 4_000_001
    for name, mode in (("shared", 0o777), ("closed", 0o755)):
        foreign = tmp_path / name
        foreign.mkdir()
        (foreign / "mine.txt").write_text("x")  # (root put it there in the closed one)
        (foreign / "theirs.txt").write_text("y")
        os.chown(foreign, other, other)
        os.chown(foreign / "theirs.txt", other, other)
        os.chmod(foreign, mode)
    assert sweep.remove_owned(str(tmp_path), os.getuid(), os.getgid()) is True
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["theirs.txt"]
    assert sorted(p.name for p in (tmp_path / "closed").iterdir()) == ["mine.txt", "theirs.txt"]
