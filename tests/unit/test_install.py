"""What an install gives JupyterLab: the labextension, enabled, from the install itself.

The panel's Insert below / Replace this cell work after a cell has ended only through the
labextension, so an install that leaves it out breaks them silently. These tests look at
what `jupyter labextension list` reports for the environment the tests run in (the README's
`make test` installs the package editable, as `make demo` does) and for a fresh virtual
environment that got the built wheel; the browser tests use the same check before they
start JupyterLab, with no extension path of their own.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "selfheal_jupyter" / "labextension"
NAME = "selfheal-jupyter"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def labextension_list(python: str = sys.executable) -> str:
    """What `jupyter labextension list` prints for ``python``'s environment, uncoloured."""
    env = dict(os.environ)
    env.pop("JUPYTER_PATH", None)
    done = subprocess.run(
        [python, "-m", "jupyter", "labextension", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    return ANSI.sub("", done.stdout + done.stderr)


def installed_extension_dir(listing: str) -> Path | None:
    """The folder the listing names for the extension (the header line above its entry)."""
    folder = None
    for line in listing.splitlines():
        if line.startswith("/"):
            folder = Path(line.strip())
        elif line.strip().startswith(f"{NAME} ") and folder is not None:
            return folder / NAME
    return None


def assert_extension_installed(python: str = sys.executable) -> Path:
    """Fail unless ``python``'s JupyterLab lists the extension enabled and OK, with the
    files of this checkout (an editable install copies them at install time)."""
    listing = labextension_list(python)
    entry = [line for line in listing.splitlines() if line.strip().startswith(f"{NAME} ")]
    assert entry, f"`jupyter labextension list` shows no {NAME}; reinstall: pip install -e .\n{listing}"
    assert "enabled" in entry[0] and "OK" in entry[0], entry[0]
    folder = installed_extension_dir(listing)
    assert folder is not None and folder.is_dir(), listing
    for relative in ("package.json", "static/remoteEntry.js"):
        assert filecmp.cmp(folder / relative, SOURCE / relative, shallow=False), (
            f"the installed {folder / relative} differs from the checkout's; reinstall: pip install -e ."
        )
    return folder


def test_the_install_gives_jupyterlab_the_extension_enabled():
    pytest.importorskip("jupyterlab")
    folder = assert_extension_installed()
    assert Path(sys.prefix) in folder.parents, f"{folder} is not in this environment ({sys.prefix})"


def test_a_fresh_environment_with_the_wheel_gets_the_extension(tmp_path):
    """`pip install selfheal-jupyter` from the built wheel: the extension comes with it."""
    pytest.importorskip("jupyterlab")
    root = SOURCE.parent.parent
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(root)], check=True, timeout=600
    )
    (wheel,) = wheels.glob("selfheal_jupyter-*.whl")
    # The fresh environment borrows JupyterLab from this one; its own data folder
    # (sys.prefix/share/jupyter) is the only place the extension can come from.
    target = tmp_path / "env"
    venv.create(target, system_site_packages=True, with_pip=True)
    python = str(target / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", str(wheel)], check=True, timeout=600
    )
    assert_extension_installed(python)
    # This JupyterLab also sees the test environment's own copy, so check that the wheel
    # put one in the fresh environment's data folder, which Jupyter searches there.
    own = target / "share" / "jupyter" / "labextensions" / NAME
    for relative in ("package.json", "install.json", "static/remoteEntry.js"):
        assert filecmp.cmp(own / relative, SOURCE / relative, shallow=False), relative
    paths = subprocess.run(
        [python, "-m", "jupyter", "--paths", "--json"], capture_output=True, text=True, check=True, timeout=120
    )
    assert str(target / "share" / "jupyter") in json.loads(paths.stdout)["data"]
