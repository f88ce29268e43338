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
   ``docker build`` ``FROM`` the local base that adds the runner package (every file of
   ``runner/``) at :data:`RUNNER_DIR`. Works offline: the base is local, nothing is pulled.

:data:`IMAGE_VERSION` hashes every input (requirements, apt packages, image
environment, this build's version, the name and bytes of every file of the runner
package) and is carried as the label
``selfheal.version``: an image whose label differs is stale and gets rebuilt.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.utils import parse_repository_tag

from ..errors import ImageBuildError, ImageMissing
from . import rootfs
from .rootfs import APT_PACKAGES, MPL_CACHE_DIR, apt_mirror, os_codename

__all__ = [
    "IMAGE_VERSION",
    "ImageStatus",
    "image_ref",
    "image_status",
    "build_image",
    "ensure_image",
    "image_version",
    "base_version",
    "RUNNER_DIR",
    "RUNNER_PATH",
    "RUNNER_COMMAND",
    "runner_files",
    "MPL_CACHE_DIR",
    "apt_mirror",
    "os_codename",
]

#: Bump when the build steps change in a way the other inputs do not show.
BUILD_SCRIPT_VERSION = "2"  # 2: no setuid/setgid bits

#: The name of the image this module builds (``SelfHeal.image``'s default).
DEFAULT_IMAGE = "selfheal-sandbox"
#: Shared by every image name: the base depends only on its inputs.
BASE_REPO = f"{DEFAULT_IMAGE}-base"

#: Where the runner package lives inside the image. Its name is the one its modules
#: load under there (``selfheal_runner.server``...): a name no program imports.
RUNNER_DIR = "/opt/selfheal/selfheal_runner"
#: The file ``python3`` runs to start the runner (see the runner's ``__main__.py``).
RUNNER_PATH = f"{RUNNER_DIR}/__main__.py"
#: How a container starts its runner (options follow). By its path, with no ``-I`` or
#: ``-m``: the candidate then sees the flags and ``sys.path`` of ``python3 FILE``.
RUNNER_COMMAND = ("python3", "-B", RUNNER_PATH)

LABEL_VERSION = "selfheal.version"
LABEL_BASE = "selfheal.base"
LABEL_EXTRAS = "selfheal.extras"
LABEL_WITH = "selfheal.with"

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
#: The runner package on this side: the folder the image ships as RUNNER_DIR.
RUNNER_SOURCE_DIR = _HERE / "runner"

#: The runner layer; its text is part of the version hash. No RUN step: building it
#: starts no container (and ``-B`` with a read-only root: bytecode would not be kept).
_RUNNER_DOCKERFILE = """\
FROM {base_ref}
COPY runner/ {runner_dir}/
USER 65534:65534
"""

_LOCK_FILE = Path(tempfile.gettempdir()) / "selfheal-image-build.lock"

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
            out.add(" ".join(text.split()))
    return sorted(out)


def runner_files(root: Path = RUNNER_SOURCE_DIR) -> dict[str, bytes] | None:
    """Every ``.py`` file of the runner package ({relative POSIX path: bytes}, sorted by
    path), or None when the folder or its ``__main__.py`` is missing."""
    try:
        files = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in root.rglob("*.py")
            if path.is_file() and "__pycache__" not in path.parts
        }
    except OSError:
        return None
    if "__main__.py" not in files:
        return None
    return dict(sorted(files.items()))


def _runner_digest(files: dict[str, bytes]) -> str:
    """One hash of the names and bytes of the runner's files: any change gives a new one."""
    listing = sorted((name, hashlib.sha256(data).hexdigest()) for name, data in files.items())
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


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
            "mpl_cache": MPL_CACHE_DIR,
            "requirements": read_requirements(),
            "extras": normalise_requirements(extra_requirements or ()),
        }
    )


def image_version(extra_requirements: Iterable[str] | None = None, *, runner: dict[str, bytes] | None = None) -> str:
    """Hash of every input of the final image: the base's and the runner package's files.

    ``runner`` defaults to the files of the package's ``runner/`` (read now).
    """
    files = runner_files() if runner is None else runner
    return _digest(
        {
            "base": base_version(extra_requirements),
            "runner": _runner_digest(files) if files is not None else "missing",
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
    ``name:latest`` (current only if its label says the same version; ``ref`` is
    then the tag found). ``name`` with a tag (e.g. a ref that
    :func:`build_image` returned): that image, judged by the inputs its labels
    record (its extra requirements included).
    """
    repo, tag = parse_repository_tag(name)
    if tag:
        candidates, expected = [name], None
        wanted = name
    else:
        expected = image_version(extra_requirements)
        # a `--with` layer made on the current image is preferred (same version label)
        candidates = [f"{repo}:{expected}-with", f"{repo}:{expected}", f"{repo}:latest"]
        wanted = f"{repo}:{expected}"
    for ref in candidates:
        image = _get(client, ref)
        if image is not None:
            break
    else:
        return ImageStatus(False, False, wanted, None, None)
    labels = image.labels or {}
    version = labels.get(LABEL_VERSION)
    if expected is None:
        expected = image_version(_extras_of(labels))
    size = image.attrs.get("Size")
    current = version == expected
    return ImageStatus(
        present=True,
        current=current,
        ref=ref if current else wanted,  # `ref` exists; `wanted` may not
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
    repo, tag = parse_repository_tag(name)
    command = "selfheal sandbox build" + (f" --image {repo}" if repo != DEFAULT_IMAGE else "")
    how = f"Run `{command}` in a terminal"
    if extra_requirements:
        how = f"Run `{command} --requirements FILE` in a terminal (FILE: the same extra pip requirements)"
    if tag:
        how += " and use the image ref it prints"
    if status.present:
        raise ImageMissing(
            f"The sandbox image {name!r} is out of date (it was built as version "
            f"{status.version}; this selfheal-jupyter needs {status.ref}). {how} (seconds "
            "if only the runner changed, about 90 s otherwise), then try again."
        )
    raise ImageMissing(
        f"The sandbox image {status.ref} is not built yet. {how} (about 90 s, offline: it "
        "needs root, debootstrap and this machine's apt mirror), then try again."
    )


# --------------------------------------------------------------------------- packages

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?")


def dist_key(name: str) -> str:
    """A distribution name as pip compares them (``scikit_learn`` → ``scikit-learn``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def packages_of(requirements: Iterable[str]) -> dict[str, str]:
    """``{normalised name: version}`` of requirement strings (version "" when unpinned)."""
    out: dict[str, str] = {}
    for line in requirements:
        match = _PIN.match(line)
        if match:
            out[dist_key(match.group(1))] = match.group(2) or ""
    return out


def image_packages(client: docker.DockerClient, ref: str) -> dict[str, str]:
    """What the image ``ref`` has: its pinned requirements, extras and ``--with`` layers."""
    image = _get(client, ref)
    labels = (image.labels or {}) if image is not None else {}
    with_pins = _json_list(labels.get(LABEL_WITH))
    return packages_of(read_requirements() + _extras_of(labels) + with_pins)


def _json_list(text: str | None) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


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
        wanted = f"{repo}:{status.version}"
        if status.ref != wanted:  # only `latest` was left: restore the version tag
            client.api.tag(status.ref, repo, status.version)
            status.ref = wanted
        log(f"{status.describe()}; nothing to do.")
        return status
    runner = runner_files()
    if runner is None:
        raise ImageBuildError(
            f"The sandbox runner {RUNNER_SOURCE_DIR} is missing, so the image cannot be finished. "
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
        log("note: the runner or the requirements changed during the build; run `selfheal sandbox build` again")
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


def _build_base(client: docker.DockerClient, base_ref: str, extras: list[str], log: Log) -> None:
    """The slow stage (~70 s): a root filesystem made offline, then ``docker import``."""
    rootfs.check_tools()
    suite = os_codename()
    if not suite:
        raise ImageBuildError(
            "This machine's /etc/os-release names no VERSION_CODENAME, so the Debian "
            "suite of the sandbox image is unknown. Build on a Debian or Ubuntu host."
        )
    mirror = apt_mirror(suite)
    with rootfs.scratch_dir() as work, rootfs.sigterm_as_interrupt():
        root = rootfs.make_rootfs(work, suite, mirror, read_requirements() + extras, log)
        log(f"[4/5] docker import {base_ref}")
        _import(client, root, base_ref, suite)


def _import(client: docker.DockerClient, root: Path, base_ref: str, suite: str) -> None:
    """``tar | docker import`` with the image's environment and labels."""
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
        reply = client.api.import_image_from_stream(tar.stdout, repository=repo, tag=tag, changes=changes)
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
    if tar.returncode == 0 and _get(client, base_ref) is None:
        # Podman's Docker API (4.x) ignores the tag of an import and stores `:latest`:
        # find the image by its base label and give it the tag.
        for found in client.images.list(filters={"label": f"{LABEL_BASE}={tag}"}):
            client.api.tag(found.id, repo, tag)
            break
    if tar.returncode != 0 or _get(client, base_ref) is None:
        raise ImageBuildError(f"docker import of {base_ref} failed (tar exit {tar.returncode}).")


def _build_runner_layer(
    client: docker.DockerClient,
    base_ref: str,
    ref: str,
    runner: dict[str, bytes],
    extras: list[str],
    log: Log,
) -> None:
    """``FROM base`` + the runner package: the cheap stage (about a second)."""
    log(f"[5/5] runner layer {ref} (FROM {base_ref}, {RUNNER_DIR})")
    dockerfile = _RUNNER_DOCKERFILE.format(base_ref=base_ref, runner_dir=RUNNER_DIR)
    context = io.BytesIO()
    files = [("Dockerfile", dockerfile.encode())]
    files += [(f"runner/{name}", data) for name, data in sorted(runner.items())]
    with tarfile.open(fileobj=context, mode="w") as tar:
        folder = tarfile.TarInfo("runner")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
        tar.addfile(folder)
        for filename, data in files:
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


#: Seconds after which a stale image of this repository is removed by a build.
STALE_AFTER_S = 24 * 3600


def _age_s(image: Any) -> float:
    created = str((image.attrs or {}).get("Created", ""))
    try:
        when = datetime.datetime.fromisoformat(created[:26].rstrip("Z") + "+00:00")
    except ValueError:
        return float("inf")
    return (datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()


def _prune(client: docker.DockerClient, repo: str, *, keep: str, log: Log) -> None:
    """Untag stale images of ``repo`` a day old or more, never ``keep``, then base
    images that no tagged image was built on (best effort: an image a container still
    runs is kept). Younger stale images stay: another installed version of this
    package (a second venv, a second checkout) may be using them right now."""
    for image in client.images.list(name=repo):
        labels = image.labels or {}
        if keep in image.tags or labels.get(LABEL_VERSION) == image_version(_extras_of(labels)):
            continue
        if _age_s(image) < STALE_AFTER_S:
            continue
        for tag in image.tags:
            if parse_repository_tag(tag)[0] != repo:
                continue  # the same image under another name (the build cache shares ids)
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(tag)
                log(f"removed stale image {tag}")
    # A base stays while any tagged image (of any name, stale or not) was built on it:
    # rebuilding that image's runner layer then takes a second, not a debootstrap.
    keep_bases = {base_version()}
    for image in client.images.list(filters={"label": LABEL_VERSION}):
        if image.tags:
            keep_bases.add((image.labels or {}).get(LABEL_BASE, ""))
    with contextlib.suppress(docker.errors.APIError):  # left untagged by a --rebuild
        client.images.prune(filters={"dangling": True, "label": LABEL_BASE})
    for image in client.images.list(name=BASE_REPO):
        for tag in image.tags:
            if parse_repository_tag(tag)[1] not in keep_bases:
                with contextlib.suppress(docker.errors.APIError):
                    client.images.remove(tag)
                    log(f"removed unused base image {tag}")


# --------------------------------------------------------------------------- --with


_WITH_DOCKERFILE = """\
FROM {base_ref}
USER 0
COPY site/ {site}/
USER 65534:65534
"""


def kernel_pins(packages: Iterable[str], have: dict[str, str]) -> list[str]:
    """``name==version`` at this Python's (the kernel's) versions for ``packages`` and
    the dependencies the image lacks. Raises :class:`ImageBuildError` for a package
    this Python does not have (and that carries no ``==VERSION``)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    pins: dict[str, str] = {}
    todo = [(spec, True) for spec in packages]
    while todo:
        spec, asked = todo.pop(0)
        name, _, version = spec.partition("==")
        name = name.strip()
        key = dist_key(name)
        if key in pins:
            continue
        if not version:
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                if not asked:
                    continue  # an optional dependency this Python does not have
                raise ImageBuildError(
                    f"{name} is not installed in this Python ({sys.executable}), so its "
                    f"version is unknown. Install it in your kernel first (pip install "
                    f"{name}), or give one: --with {name}==VERSION."
                ) from None
        if key in have and (not asked or have[key] == version):
            continue  # the image has it (a dependency is used at the image's version)
        pins[key] = f"{name}=={version}"
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            requires = []
        for line in requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append((req.name, False))
    return sorted(pins.values())


def build_with_layer(
    client: docker.DockerClient,
    name: str,
    packages: list[str],
    *,
    log: Log = print,
) -> str:
    """Add ``packages`` (at this Python's versions, wheels from PyPI) as a layer on the
    current image; the base is not rebuilt. Cached: the same set is built once. The
    result is tagged ``name:<version>-with``, which runs from then on. Returns its ref."""
    repo, tag = parse_repository_tag(name)
    if tag:
        raise ImageBuildError(f"Give the image name without a tag ({repo!r}, not {name!r}).")
    base_ref = ensure_image(client, repo)
    labels = _get(client, base_ref).labels or {}  # type: ignore[union-attr]
    have = image_packages(client, base_ref)
    pins = kernel_pins(packages, have)
    if not pins:
        log(f"{base_ref} already has {', '.join(packages)}; nothing to do.")
        return base_ref
    all_with = sorted({*(_json_list(labels.get(LABEL_WITH))), *pins})
    version = labels.get(LABEL_VERSION) or image_version()
    ref = f"{repo}:{version}-with-{_digest(all_with)}"
    if _get(client, ref) is None:
        started = time.monotonic()
        log(f"adding {', '.join(pins)} as a layer on {base_ref}")
        with tempfile.TemporaryDirectory(prefix="selfheal-with-") as tmp:
            work = Path(tmp)
            py = json.loads(
                client.containers.run(
                    base_ref,
                    ["python3", "-c", _PROBE],
                    remove=True,
                    network_mode="none",
                ).decode()
            )
            site_path = f"/usr/local/lib/python{py['version']}/dist-packages"
            requirements = work / "requirements.txt"
            requirements.write_text("\n".join(pins) + "\n")
            command = rootfs.pip_command(work / "site", requirements, py) + ["--no-deps"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise ImageBuildError(
                    f"pip could not get wheels for {', '.join(pins)} (Python {py['version']}, "
                    f"manylinux): {done.stderr.strip()[-1500:]}"
                )
            dockerfile = _WITH_DOCKERFILE.format(base_ref=base_ref, site=site_path)
            (work / "Dockerfile").write_text(dockerfile)
            try:
                client.images.build(
                    path=str(work),
                    tag=ref,
                    labels={LABEL_WITH: json.dumps(all_with)},
                    rm=True,
                    forcerm=True,
                    pull=False,
                    network_mode="none",
                )
            except (docker.errors.BuildError, docker.errors.APIError) as exc:
                raise ImageBuildError(f"The layer {ref} failed to build: {exc}") from exc
        log(f"built {ref} in {time.monotonic() - started:.1f} s")
    else:
        log(f"reusing {ref}")
    client.api.tag(ref, repo, f"{version}-with", force=True)
    log(f"{repo}:{version}-with now runs the candidates (restart running kernels to use it)")
    return ref


_PROBE = (
    "import json, os, platform, sys;"
    "print(json.dumps({'version': '%d.%d' % sys.version_info[:2],"
    " 'machine': platform.machine(),"
    " 'glibc': os.confstr('CS_GNU_LIBC_VERSION').split()[-1]}))"
)
