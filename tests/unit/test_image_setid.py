"""No setuid/setgid bit in the sandbox image: the build clears them, and the built image
(checked by ``find`` inside a container of it, as root so that no directory is
unreadable) holds none."""

from __future__ import annotations

import os
import stat

from selfheal_jupyter.sandbox.rootfs import drop_setid_bits


def test_drop_setid_bits_clears_files_and_directories_and_leaves_symlinks(tmp_path):
    (tmp_path / "usr/bin").mkdir(parents=True)
    su = tmp_path / "usr/bin/su"
    su.write_text("")
    os.chmod(su, 0o4755)
    wall = tmp_path / "usr/bin/wall"
    wall.write_text("")
    os.chmod(wall, 0o2755)
    mail = tmp_path / "var/mail"
    mail.mkdir(parents=True)
    os.chmod(mail, 0o2775)
    plain = tmp_path / "usr/bin/ls"
    plain.write_text("")
    os.chmod(plain, 0o755)
    (tmp_path / "usr/bin/su-link").symlink_to(su)
    assert drop_setid_bits(tmp_path) == ["/usr/bin/su", "/usr/bin/wall", "/var/mail"]
    assert stat.S_IMODE(su.stat().st_mode) == 0o755
    assert stat.S_IMODE(wall.stat().st_mode) == 0o755
    assert stat.S_IMODE(mail.stat().st_mode) == 0o775
    assert stat.S_IMODE(plain.stat().st_mode) == 0o755
    assert drop_setid_bits(tmp_path) == []
