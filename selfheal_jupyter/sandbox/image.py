"""Build the sandbox image offline, and tell whether the image present is current.

No container registry can be reached, so nothing is pulled. The image is made in two
stages so that changing the runner costs a second, not a minute and a half:

1. **base** (``selfheal-sandbox-base:<base hash>``): ``debootstrap --variant=minbase``
   a Debian root filesystem from the machine's own apt mirror (read from the apt
   sources, never written into the repository) on a tmpfs; the host's ``pip``
   installs the pinned wheels of ``requirements.txt`` into the root's
   ``dist-packages`` for the root's Python and CPU; apt caches, docs, man pages,
   locales and test suites are stripped; bytecode is compiled inside the root (a
   read-only container cannot write it later) and matplotlib's font cache is made;
   ``tar | docker import``. Reused while its inputs are unchanged.
2. **runner layer** (``selfheal-sandbox:<IMAGE_VERSION>`` and ``:latest``): a tiny
   ``docker build`` ``FROM`` the local base that adds ``runner.py`` at
   :data:`RUNNER_PATH`. Works offline: the base is local, nothing is pulled.

:data:`IMAGE_VERSION` hashes every input (requirements, apt packages, image
environment, this build's version, the runner's source) and is carried as the label
``selfheal.version``: an image whose label differs is stale and gets rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import docker
import docker.errors
from docker.utils import parse_repository_tag

from ..config import DEFAULT_IMAGE
from ..errors import ImageBuildError, ImageMissing

#: Bump when the build steps change in a way the other inputs do not show.
BUILD_SCRIPT_VERSION = "1"

#: Debian packages of the base (``--include``); minbase brings the rest.
APT_PACKAGES: tuple[str, ...] = ("python3",)

#: Shared by every image name: the base depends only on its inputs.
BASE_REPO = f"{DEFAULT_IMAGE}-base"

#: Where the runner lives inside the image.
RUNNER_PATH = "/opt/selfheal/runner.py"

#: A prebuilt matplotlib font cache (read-only). Copy it into ``$MPLCONFIGDIR``
#: before importing matplotlib to skip the ~0.1 s font scan.
MPL_CACHE_DIR = "/opt/selfheal/matplotlib"

LABEL_VERSION = "selfheal.version"
LABEL_BASE = "selfheal.base"
LABEL_EXTRAS = "selfheal.extras"

#: Environment of every container of the image (nothing comes from the host).
IMAGE_ENV: dict[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/tmp",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/.matplotlib",
    "PYTHONDONTWRITEBYTECODE": "1",
}

_HERE = Path(__file__).resolve().parent
REQUIREMENTS_FILE = _HERE / "requirements.txt"
RUNNER_FILE = _HERE / "runner.py"

#: The runner layer; its text is part of the version hash.
_RUNNER_DOCKERFILE = """\
FROM {base_ref}
COPY runner.py {runner_path}
RUN ["python3", "-m", "compileall", "-q", "{runner_dir}"]
USER 65534:65534
"""

_BUILD_LOG = Path(tempfile.gettempdir()) / "selfheal-image-build.log"
_LOCK_FILE = Path(tempfile.gettempdir()) / "selfheal-image-build.lock"
_MIN_TMPFS_FREE = 2 << 30  # bytes a build needs in its scratch directory

Log = Callable[[str], None]


# --------------------------------------------------------------------------- inputs


def read_requirements(path: Path = REQUIREMENTS_FILE) -> list[str]:
    """The requirement lines of a pip requirements file (comments and blanks dropped)."""
    return normalise_requirements(path.read_text(encoding="utf-8").splitlines())


def normalise_requirements(lines: Iterable[str]) -> list[str]:
    """Sorted, de-duplicated requirement strings, so that order and comments do not
    change the image version."""
    out: set[str] = set()
    for line in lines:
        text = line.split(" #", 1)[0].strip()
        if text and not text.startswith("#"):
            out.add(re.sub(r"\s+", "", text) if not text.startswith("-") else text)
    return sorted(out)


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
    stanza listing the suite), then classic ``*.list`` lines and ``sources.list``.
    ``$SELFHEAL_APT_MIRROR`` overrides. Raises :class:`ImageBuildError` if none.
    """
    override = os.environ.get("SELFHEAL_APT_MIRROR", "").strip()
    if override:
        return override
    files_822 = sorted(sources_dir.glob("*.sources")) if sources_dir.is_dir() else []
    for path in files_822:
        uri = _mirror_from_deb822(_read(path), suite)
        if uri:
            return uri
    classic = sorted(sources_dir.glob("*.list")) if sources_dir.is_dir() else []
    for path in [sources_list, *classic]:
        uri = _mirror_from_classic(_read(path), suite)
        if uri:
            return uri
    raise ImageBuildError(
        f"No apt source for the suite {suite!r} was found in {sources_dir}/*.sources or "
        f"{sources_list}, so debootstrap has no mirror to build the sandbox image from. "
        "Add the Debian archive to the apt sources, or set SELFHEAL_APT_MIRROR to its "
        "URI, then run `selfheal sandbox build` again."
    )


_MIRROR_SCHEMES = ("http://", "https://", "file:/")


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


def _runner_source() -> bytes | None:
    try:
        return RUNNER_FILE.read_bytes()
    except OSError:
        return None


def _digest(payload: object) -> str:
    data = json.dumps(payload, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def base_version(extra_requirements: Iterable[str] | None = None) -> str:
    """Hash of what goes into the base image (not the runner)."""
    return _digest(
        {
            "build": BUILD_SCRIPT_VERSION,
            "suite": os_codename() or "unknown",
            "arch": os.uname().machine,
            "apt": list(APT_PACKAGES),
            "env": IMAGE_ENV,
            "requirements": read_requirements(),
            "extras": normalise_requirements(extra_requirements or ()),
        }
    )


def image_version(
    extra_requirements: Iterable[str] | None = None, *, runner: bytes | None = None
) -> str:
    """Hash of every input of the final image: the base's and the runner's source.

    ``runner`` defaults to the package's ``runner.py`` (read now).
    """
    source = _runner_source() if runner is None else runner
    return _digest(
        {
            "base": base_version(extra_requirements),
            "runner": hashlib.sha256(source).hexdigest() if source is not None else "missing",
            "dockerfile": _RUNNER_DOCKERFILE,
        }
    )


IMAGE_VERSION: str = image_version()


def image_ref(name: str = DEFAULT_IMAGE) -> str:
    """The tag to run: ``name:IMAGE_VERSION``, or ``name`` itself if it has a tag."""
    repo, tag = parse_repository_tag(name)
    return name if tag else f"{repo}:{IMAGE_VERSION}"


# --------------------------------------------------------------------------- status


@dataclass
class ImageStatus:
    """What the engine holds under an image name."""

    present: bool  # an image of this name exists (current or not)
    current: bool  # ... and its version label matches its inputs
    ref: str  # the tag to run (or to build, when not current)
    version: str | None  # the version label of the image found
    size_mb: float | None  # its size as `docker images` counts it

    def describe(self) -> str:
        """One plain sentence for a terminal."""
        if self.current:
            return f"image {self.ref} is present and current ({self.size_mb:.0f} MB)"
        if self.present:
            return (
                f"an image of this name is present but stale (version {self.version}, "
                f"needed {self.ref}); run `selfheal sandbox build`"
            )
        return f"image {self.ref} is not built; run `selfheal sandbox build`"


def _get(client: docker.DockerClient, ref: str) -> docker.models.images.Image | None:
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def _extras_of(labels: dict[str, str]) -> list[str]:
    try:
        value = json.loads(labels.get(LABEL_EXTRAS, "[]"))
    except ValueError:
        return []
    return [str(item) for item in value] if isinstance(value, list) else []


def image_status(
    client: docker.DockerClient,
    name: str = DEFAULT_IMAGE,
    *,
    extra_requirements: Iterable[str] | None = None,
) -> ImageStatus:
    """Is the image present, and built from today's inputs?

    ``name`` without a tag: looks for ``name:<version of the inputs>``, else
    ``name:latest`` (then reported stale). ``name`` with a tag (e.g. a ref that
    :func:`build_image` returned): that image, judged by the inputs its labels
    record (its extra requirements included).
    """
    repo, tag = parse_repository_tag(name)
    if tag:
        candidates, expected = [name], None
    else:
        expected = image_version(extra_requirements)
        candidates = [f"{repo}:{expected}", f"{repo}:latest"]
    for ref in candidates:
        image = _get(client, ref)
        if image is not None:
            break
    else:
        return ImageStatus(False, False, candidates[0], None, None)
    labels = image.labels or {}
    version = labels.get(LABEL_VERSION)
    if expected is None:
        expected = image_version(_extras_of(labels))
    size = image.attrs.get("Size")
    return ImageStatus(
        present=True,
        current=version == expected,
        ref=candidates[0],
        version=version,
        size_mb=round(size / 1e6, 1) if isinstance(size, (int, float)) else None,
    )


def ensure_image(
    client: docker.DockerClient,
    name: str = DEFAULT_IMAGE,
    *,
    extra_requirements: Iterable[str] | None = None,
) -> str:
    """The ref to run if the image is present and current; else :class:`ImageMissing`.

    Never builds: a notebook cell must not start a 90-second build by surprise.
    """
    status = image_status(client, name, extra_requirements=extra_requirements)
    if status.current:
        return status.ref
    how = "selfheal sandbox build"
    if extra_requirements:
        how += " with the same extra requirements"
    if status.present:
        raise ImageMissing(
            f"The sandbox image {name!r} is out of date (it was built as version "
            f"{status.version}; this selfheal-jupyter needs {status.ref}). Run `{how}` "
            "in a terminal (seconds if only the runner changed, about 90 s otherwise), "
            "then try again."
        )
    raise ImageMissing(
        f"The sandbox image {status.ref} is not built yet. Run `{how}` once in a terminal "
        "(about 90 s, offline: it needs root, debootstrap and this machine's apt mirror), "
        "then try again."
    )


# --------------------------------------------------------------------------- build


def build_image(
    client: docker.DockerClient,
    name: str = DEFAULT_IMAGE,
    *,
    rebuild: bool = False,
    extra_requirements: list[str] | None = None,
    log: Log = print,
) -> ImageStatus:
    """Make sure ``name:<version>`` exists and is current; build what is missing.

    A no-op when the current image exists (unless ``rebuild``, which rebuilds the
    base too). ``extra_requirements`` (pip requirement strings) go into the base,
    give a different version, and the result is not tagged ``latest``: pass the
    returned ``ref`` to whatever runs it. Raises :class:`ImageBuildError`.
    """
    extras = normalise_requirements(extra_requirements or ())
    repo, tag = parse_repository_tag(name)
    if tag:
        raise ImageBuildError(
            f"Give the image name without a tag ({repo!r}, not {name!r}): the build "
            "tags it with the version of its inputs."
        )
    status = image_status(client, repo, extra_requirements=extras)
    if status.current and not rebuild:
        log(f"{status.describe()}; nothing to do.")
        return status
    runner = _runner_source()
    if runner is None:
        raise ImageBuildError(
            f"The sandbox runner {RUNNER_FILE} is missing, so the image cannot be finished. "
            "Reinstall selfheal-jupyter (or restore the file), then run "
            "`selfheal sandbox build` again."
        )
    with _build_lock(log):
        status = image_status(client, repo, extra_requirements=extras)
        if status.current and not rebuild:  # another process built it meanwhile
            log(f"{status.describe()}; nothing to do.")
            return status
        started = time.monotonic()
        base_ref = f"{BASE_REPO}:{base_version(extras)}"
        if rebuild or _get(client, base_ref) is None:
            _build_base(client, base_ref, extras, log)
        else:
            log(f"reusing the base image {base_ref}")
        version = image_version(extras, runner=runner)
        ref = f"{repo}:{version}"
        _build_runner_layer(client, base_ref, ref, runner, extras, log)
        if not extras:
            client.api.tag(ref, repo, "latest", force=True)
        _prune(client, repo, keep=ref, log=log)
        status = image_status(client, ref)
        log(f"built {ref} ({status.size_mb or 0:.0f} MB) in {time.monotonic() - started:.1f} s")
    if not status.current:
        log(f"note: {RUNNER_FILE.name} or the requirements changed during the build; "
            "run `selfheal sandbox build` again")
    return status


@contextlib.contextmanager
def _build_lock(log: Log) -> Iterator[None]:
    """One build at a time on this machine (two would fight over the same tags)."""
    with open(_LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another sandbox image build is running; waiting for it ({_LOCK_FILE})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise ImageBuildError(
            "Building the sandbox image needs root (debootstrap and chroot do). Run "
            "`sudo selfheal sandbox build` once; using the image afterwards does not."
        )
    for tool in ("debootstrap", "chroot", "tar"):
        if shutil.which(tool) is None:
            raise ImageBuildError(
                f"{tool!r} is not installed, and the offline image build needs it. On "
                "Debian/Ubuntu, as root: apt-get install -y debootstrap, then run "
                "`selfheal sandbox build` again."
            )


def _build_base(
    client: docker.DockerClient, base_ref: str, extras: list[str], log: Log
) -> None:
    """debootstrap + pip + strip + compile + import: the slow stage (~80 s)."""
    _check_tools()
    suite = os_codename()
    if not suite:
        raise ImageBuildError(
            "This machine's /etc/os-release names no VERSION_CODENAME, so the Debian "
            "suite of the sandbox image is unknown. Build on a Debian or Ubuntu host."
        )
    mirror = apt_mirror(suite)
    _BUILD_LOG.write_text("")
    with _scratch_dir() as work, _sigterm_as_interrupt():
        root = work / "rootfs"
        t0 = time.monotonic()
        log(f"[1/5] debootstrap {suite} (minbase + {', '.join(APT_PACKAGES)}) into {root}")
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(APT_PACKAGES)}",
                suite,
                str(root),
                mirror,
            ],
            "debootstrap",
        )
        py = _probe_python(root)
        site = root / "usr/local/lib" / f"python{py['version']}" / "dist-packages"
        log(
            f"      {time.monotonic() - t0:.0f} s. [2/5] pip: wheels for Python "
            f"{py['version']} on {py['machine']} (glibc {py['glibc']}) into {site.relative_to(root)}"
        )
        t1 = time.monotonic()
        requirements = work / "requirements.txt"
        requirements.write_text("\n".join(read_requirements() + extras) + "\n")
        _run(_pip_command(site, requirements, py), "pip install")
        log(f"      {time.monotonic() - t1:.0f} s. [3/5] strip docs/caches/tests, compile bytecode")
        _strip(root, site)
        _in_root(root, ["python3", "-m", "compileall", "-q", "-j0", str(_inside(root, site))],
                 "compileall")
        if (site / "matplotlib").is_dir():
            _in_root(root, ["python3", "-c", "import matplotlib.font_manager"],
                     "matplotlib font cache", env={"MPLCONFIGDIR": MPL_CACHE_DIR})
        log(f"[4/5] docker import {base_ref}")
        _import(client, root, base_ref, extras, suite)


def _probe_python(root: Path) -> dict[str, str]:
    code = (
        "import json, os, platform, sys;"
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2],"
        " 'machine': platform.machine(),"
        " 'glibc': os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}))"
    )
    out = _in_root(root, ["python3", "-c", code], "probe python", capture=True)
    return json.loads(out)


def _pip_command(site: Path, requirements: Path, py: dict[str, str]) -> list[str]:
    """Host pip, installing wheels built for the image's Python, CPU and glibc."""
    major, minor = (int(x) for x in py["glibc"].split(".")[:2])
    machine = py["machine"]
    platforms = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
    platforms.append(f"manylinux2014_{machine}")
    command = [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--no-compile", "--disable-pip-version-check", "--no-warn-script-location",
        "--target", str(site),
        "--only-binary=:all:",
        "--python-version", py["version"],
        "--implementation", "cp",
    ]
    for platform_tag in platforms:
        command += ["--platform", platform_tag]
    return command + ["-r", str(requirements)]


#: Removed from the root filesystem: nothing a candidate needs.
_STRIP_CONTENTS = (
    "var/cache/apt", "var/lib/apt/lists", "var/log", "usr/share/doc", "usr/share/man",
    "usr/share/info", "usr/share/locale", "usr/share/lintian",
)


def _strip(root: Path, site: Path) -> None:
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
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def _import(
    client: docker.DockerClient, root: Path, base_ref: str, extras: list[str], suite: str
) -> None:
    repo, tag = parse_repository_tag(base_ref)
    changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
    changes += [
        "WORKDIR /tmp",
        'CMD ["python3"]',
        f"LABEL {LABEL_BASE}={tag}",
        f"LABEL selfheal.suite={suite}",
    ]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--one-file-system", "-C", str(root), "-c", "."],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert tar.stdout is not None
        reply = client.api.import_image_from_stream(
            tar.stdout, repository=repo, tag=tag, changes=changes
        )
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"docker import of {base_ref} failed: {exc}") from exc
    finally:
        if tar.poll() is None:
            tar.kill()
        tar.wait()
    for line in str(reply).splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(line)
            if isinstance(message, dict) and message.get("error"):
                raise ImageBuildError(f"docker import of {base_ref} failed: {message['error']}")
    if tar.returncode != 0 or _get(client, base_ref) is None:
        raise ImageBuildError(f"docker import of {base_ref} failed (tar exit {tar.returncode}).")


def _build_runner_layer(
    client: docker.DockerClient,
    base_ref: str,
    ref: str,
    runner: bytes,
    extras: list[str],
    log: Log,
) -> None:
    """``FROM base`` + the runner: the cheap stage (about a second)."""
    log(f"[5/5] runner layer {ref} (FROM {base_ref}, {RUNNER_PATH})")
    dockerfile = _RUNNER_DOCKERFILE.format(
        base_ref=base_ref, runner_path=RUNNER_PATH, runner_dir=os.path.dirname(RUNNER_PATH)
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for filename, data in (("Dockerfile", dockerfile.encode()), ("runner.py", runner)):
            info = tarfile.TarInfo(filename)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    repo, tag = parse_repository_tag(ref)
    try:
        client.images.build(
            fileobj=context,
            custom_context=True,
            tag=ref,
            labels={
                LABEL_VERSION: tag or "",
                LABEL_EXTRAS: json.dumps(extras),
            },
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
        )
    except docker.errors.BuildError as exc:
        tail = "".join(str(item.get("stream", item.get("error", ""))) for item in exc.build_log)
        raise ImageBuildError(f"The runner layer {ref} failed to build: {exc}\n{tail[-2000:]}") from exc
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"The runner layer {ref} failed to build: {exc}") from exc


def _prune(client: docker.DockerClient, repo: str, *, keep: str, log: Log) -> None:
    """Untag stale images of ``repo`` and bases nothing uses, never ``keep`` (best
    effort: an image a container still runs is kept)."""
    keep_bases = {base_version()}
    for image in client.images.list(name=repo):
        labels = image.labels or {}
        if keep in image.tags or labels.get(LABEL_VERSION) == image_version(_extras_of(labels)):
            keep_bases.add(labels.get(LABEL_BASE, ""))
            continue
        for tag in image.tags:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(tag)
                log(f"removed stale image {tag}")
    with contextlib.suppress(docker.errors.APIError):  # left untagged by a --rebuild
        client.images.prune(filters={"dangling": True, "label": LABEL_BASE})
    for image in client.images.list(name=BASE_REPO):
        for tag in image.tags:
            if parse_repository_tag(tag)[1] not in keep_bases:
                with contextlib.suppress(docker.errors.APIError):
                    client.images.remove(tag)
                    log(f"removed unused base image {tag}")


# --------------------------------------------------------------------------- processes


def _inside(root: Path, path: Path) -> str:
    return "/" + str(path.relative_to(root))


def _in_root(
    root: Path,
    argv: list[str],
    step: str,
    *,
    env: dict[str, str] | None = None,
    capture: bool = False,
) -> str:
    """Run a command in the new root filesystem (its own Python, not the host's)."""
    environment = {"PATH": IMAGE_ENV["PATH"], "LANG": "C.UTF-8", "HOME": "/root", **(env or {})}
    return _run(["chroot", str(root), *argv], step, env=environment, capture=capture)


def _run(
    argv: list[str], step: str, *, env: dict[str, str] | None = None, capture: bool = False
) -> str:
    """Run one build step, its output appended to the build log; on any interruption
    the step is stopped before the exception goes on."""
    with open(_BUILD_LOG, "ab") as log_file:
        log_file.write(f"\n$ {' '.join(argv)}\n".encode())
        log_file.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else log_file,
            stderr=log_file,
            env=env,
        )
        try:
            out, _ = proc.communicate()
        except BaseException:
            _stop(proc)
            raise
    if proc.returncode != 0:
        tail = _BUILD_LOG.read_text(errors="replace").splitlines()[-15:]
        raise ImageBuildError(
            f"The image build step {step!r} failed (exit {proc.returncode}). Last lines of "
            f"the build log {_BUILD_LOG}:\n" + "\n".join(tail)
        )
    return out.decode() if capture and out else ""


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
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
def _scratch_dir() -> Iterator[Path]:
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


def _mounts_under(path: Path) -> list[str]:
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
    for target in sorted(set(_mounts_under(path)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)
    left = _mounts_under(path)
    if left:
        raise ImageBuildError(
            f"Could not unmount {', '.join(left)}; remove {path} by hand after unmounting."
        )
    shutil.rmtree(path, ignore_errors=True)
