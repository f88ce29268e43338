"""Make the sandbox's root filesystem offline: debootstrap, pip wheels, strip, compile,
no setuid/setgid bits.

The slow half of the image build (:mod:`.image` turns the result into an image).
Everything comes from the machine's own package sources: the Debian archive its
apt uses (read from the apt sources, so no host name is written into the
repository) and the PyPI index its pip uses. Runs as root (debootstrap and chroot
need it) in a scratch directory on a tmpfs that is removed whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import ImageBuildError

#: Debian packages of the root (``--include``); minbase brings the rest.
APT_PACKAGES: tuple[str, ...] = ("python3",)

#: A prebuilt matplotlib font cache inside the image (read-only). Copy it into
#: ``$MPLCONFIGDIR`` before importing matplotlib to skip its font scan.
MPL_CACHE_DIR = "/opt/selfheal/matplotlib"

#: Every step's output goes here (kept after the build, for when a step fails).
BUILD_LOG = Path(tempfile.gettempdir()) / "selfheal-image-build.log"

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MIN_TMPFS_FREE = 2 << 30  # bytes a build needs in its scratch directory
_MIRROR_SCHEMES = ("http://", "https://", "file:/")

#: Emptied in the root filesystem: nothing a candidate needs.
_STRIP_CONTENTS = (
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/log",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
)

Log = Callable[[str], None]


# --------------------------------------------------------------------------- sources


def os_codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    """The distribution suite of this machine (``VERSION_CODENAME``), if it says one."""
    try:
        text = os_release.read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME":
            return value.strip().strip("\"'") or None
    return None


def apt_mirror(
    suite: str,
    *,
    sources_dir: Path = Path("/etc/apt/sources.list.d"),
    sources_list: Path = Path("/etc/apt/sources.list"),
) -> str:
    """The archive URI this machine's apt uses for ``suite``.

    Looks at deb822 ``*.sources`` files first (``URIs:`` of an enabled ``deb``
    stanza listing the suite), then classic ``sources.list`` and ``*.list`` lines.
    ``$SELFHEAL_APT_MIRROR`` overrides. Raises :class:`ImageBuildError` if none.
    """
    override = os.environ.get("SELFHEAL_APT_MIRROR", "").strip()
    if override:
        return override
    in_dir = sources_dir.is_dir()
    for path in sorted(sources_dir.glob("*.sources")) if in_dir else []:
        uri = _mirror_from_deb822(_read(path), suite)
        if uri:
            return uri
    for path in [sources_list, *(sorted(sources_dir.glob("*.list")) if in_dir else [])]:
        uri = _mirror_from_classic(_read(path), suite)
        if uri:
            return uri
    raise ImageBuildError(
        f"No apt source for the suite {suite!r} was found in {sources_dir}/*.sources or "
        f"{sources_list}, so debootstrap has no mirror to build the sandbox image from. "
        "Add the Debian archive to the apt sources, or set SELFHEAL_APT_MIRROR to its "
        "URI, then run `selfheal sandbox build` again."
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _mirror_from_deb822(text: str, suite: str) -> str | None:
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:  # continuation line
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if suite not in fields.get("suites", "").split():
            continue
        for uri in fields.get("uris", "").split():
            if uri.startswith(_MIRROR_SCHEMES):
                return uri
    return None


def _mirror_from_classic(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
            while words and not words[0].endswith("]"):
                words.pop(0)
            words = words[1:]
        if len(words) >= 2 and words[1] == suite and words[0].startswith(_MIRROR_SCHEMES):
            return words[0]
    return None


# --------------------------------------------------------------------------- the root


def check_tools() -> None:
    """Root and the tools the build runs, or an error that says how to get them."""
    if os.geteuid() != 0:
        raise ImageBuildError(
            "Building the sandbox image needs root (debootstrap and chroot do). Run "
            "`sudo selfheal sandbox build` once; using the image afterwards does not."
        )
    for tool in ("debootstrap", "chroot", "tar", "umount"):
        if shutil.which(tool) is None:
            raise ImageBuildError(
                f"{tool!r} is not installed, and the offline image build needs it. On "
                "Debian/Ubuntu, as root: apt-get install -y debootstrap, then run "
                "`selfheal sandbox build` again."
            )


def make_rootfs(work: Path, suite: str, mirror: str, requirements: list[str], log: Log) -> Path:
    """debootstrap + pip + strip + compile into ``work/rootfs``; returns that path."""
    BUILD_LOG.write_text("")
    root = work / "rootfs"
    t0 = time.monotonic()
    log(f"[1/5] debootstrap {suite} (minbase + {', '.join(APT_PACKAGES)}) into {root}")
    include = f"--include={','.join(APT_PACKAGES)}"
    run(["debootstrap", "--variant=minbase", include, suite, str(root), mirror], "debootstrap")
    py = probe_python(root)
    site = root / "usr/local/lib" / f"python{py['version']}" / "dist-packages"
    log(
        f"      {time.monotonic() - t0:.0f} s. [2/5] pip: wheels for Python {py['version']} "
        f"on {py['machine']} (glibc {py['glibc']}) into /{site.relative_to(root)}"
    )
    t1 = time.monotonic()
    requirements_file = work / "requirements.txt"
    requirements_file.write_text("\n".join(requirements) + "\n")
    run(pip_command(site, requirements_file, py), "pip install")
    log(f"      {time.monotonic() - t1:.0f} s. [3/5] strip docs/caches/tests, compile bytecode")
    strip(root, site)
    # Bytecode now, by the root's own Python: a read-only container cannot write it.
    in_root(root, ["python3", "-m", "compileall", "-q", "-j0", "/" + str(site.relative_to(root))], "compileall")
    if (site / "matplotlib").is_dir():
        in_root(
            root,
            ["python3", "-c", "import matplotlib.font_manager"],
            "matplotlib font cache",
            env={"MPLCONFIGDIR": MPL_CACHE_DIR},
        )
    dropped = drop_setid_bits(root)
    log(
        f"      setuid/setgid bits dropped from {len(dropped)} paths ({', '.join(dropped[:4])}"
        f"{', ...' if len(dropped) > 4 else ''})"
    )
    return root


def probe_python(root: Path) -> dict[str, str]:
    """The root's Python version, CPU and glibc: what its wheels must be built for."""
    code = (
        "import json, os, platform, sys;"
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2],"
        " 'machine': platform.machine(),"
        " 'glibc': os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}))"
    )
    return json.loads(in_root(root, ["python3", "-c", code], "probe python", capture=True))


def pip_command(site: Path, requirements: Path, py: dict[str, str]) -> list[str]:
    """Host pip, installing wheels built for the root's Python, CPU and glibc (it is
    faster than pip inside the root, which would also need the host's CA bundle)."""
    major, minor = (int(x) for x in py["glibc"].split(".")[:2])
    machine = py["machine"]
    platforms = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
    platforms.append(f"manylinux2014_{machine}")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--target",
        str(site),
        "--only-binary=:all:",
        "--python-version",
        py["version"],
        "--implementation",
        "cp",
    ]
    for platform_tag in platforms:
        command += ["--platform", platform_tag]
    return command + ["-r", str(requirements)]


def strip(root: Path, site: Path) -> None:
    """Remove what no candidate needs: apt caches, docs, locales, test suites."""
    for rel in _STRIP_CONTENTS:
        directory = root / rel
        if directory.is_dir():
            for child in directory.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    for leftover in (root / "var/cache/debconf").glob("*-old"):
        leftover.unlink()
    for private in ("etc/resolv.conf", "etc/hostname"):  # copied from the host
        path = root / private
        if path.is_file() and not path.is_symlink():
            path.write_text("")
    shutil.rmtree(site / "bin", ignore_errors=True)  # scripts with the host's shebang
    for tests in sorted(site.rglob("tests"), key=lambda p: len(p.parts), reverse=True):
        if tests.is_dir() and not tests.is_symlink():
            shutil.rmtree(tests)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def drop_setid_bits(root: Path) -> list[str]:
    """Clear every setuid and setgid bit under ``root`` (files and directories, symlinks
    left alone); returns the paths changed, relative to ``root``.

    A candidate runs with no-new-privileges and no capabilities, so these bits do not
    raise it today; without them (su, mount, passwd, chfn...) nothing in the image can
    raise anyone, whatever flag a future engine or runtime drops.
    """
    changed = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode) or not mode & (stat.S_ISUID | stat.S_ISGID):
                continue
            os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
            changed.append("/" + os.path.relpath(path, root))
    return sorted(changed)


# --------------------------------------------------------------------------- processes


def in_root(
    root: Path,
    argv: list[str],
    step: str,
    *,
    env: dict[str, str] | None = None,
    capture: bool = False,
) -> str:
    """Run a command in the root filesystem (its own Python, not the host's)."""
    environment = {"PATH": _PATH, "LANG": "C.UTF-8", "HOME": "/root", **(env or {})}
    return run(["chroot", str(root), *argv], step, env=environment, capture=capture)


def run(argv: list[str], step: str, *, env: dict[str, str] | None = None, capture: bool = False) -> str:
    """Run one build step, its output appended to :data:`BUILD_LOG`; on any
    interruption the step is stopped before the exception goes on."""
    with open(BUILD_LOG, "ab") as log_file:
        log_file.write(f"\n$ {' '.join(argv)}\n".encode())
        log_file.flush()
        # Started from a worker thread: an interruption's handler runs in this thread only,
        # so it never lands inside Popen after the exec, where the process would be lost.
        with ThreadPoolExecutor(1) as starter:
            starting = starter.submit(
                subprocess.Popen,
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture else log_file,
                stderr=log_file,
                env=env,
                start_new_session=True,  # its own process group, stopped as a whole
            )
            try:
                proc = starting.result()
                out, _ = proc.communicate()
            except BaseException:
                with contextlib.suppress(Exception):  # a step that never started has nothing to stop
                    _stop(starting.result())
                raise
    if proc.returncode != 0:
        tail = BUILD_LOG.read_text(errors="replace").splitlines()[-15:]
        raise ImageBuildError(
            f"The image build step {step!r} failed (exit {proc.returncode}). Last lines of "
            f"the build log {BUILD_LOG}:\n" + "\n".join(tail)
        )
    return out.decode() if capture and out else ""


def _stop(proc: subprocess.Popen) -> None:
    """Stop a step and everything it started (debootstrap runs wget, dpkg...)."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    deadline = time.monotonic() + 5  # let the rest of the group go too
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM unwind like Ctrl-C, so the scratch directory is removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A build directory on a tmpfs when one has room (2x faster than disk), removed
    afterwards whatever happens."""
    parent = Path(tempfile.gettempdir())
    shm = Path("/dev/shm")
    with contextlib.suppress(OSError):
        if os.access(shm, os.W_OK) and shutil.disk_usage(shm).free >= _MIN_TMPFS_FREE:
            parent = shm
    path = Path(tempfile.mkdtemp(prefix="selfheal-build-", dir=parent))
    try:
        yield path
    finally:
        remove_tree(path)


def mounts_under(path: Path) -> list[str]:
    """Mount points inside ``path`` (from /proc/self/mounts)."""
    prefix = str(path.resolve()).rstrip("/") + "/"
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 1:
                target = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
                if (target + "/").startswith(prefix):
                    found.append(target)
    return found


def remove_tree(path: Path) -> None:
    """Delete a build directory, first unmounting anything mounted inside it (an
    interrupted debootstrap leaves /proc mounted in the root): never delete through
    a mount."""
    for target in sorted(set(mounts_under(path)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)
    left = mounts_under(path)
    if left:
        raise ImageBuildError(f"Could not unmount {', '.join(left)}; remove {path} by hand after unmounting.")
    shutil.rmtree(path, ignore_errors=True)
