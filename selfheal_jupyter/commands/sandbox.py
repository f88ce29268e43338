"""``selfheal sandbox build | doctor | exec``: the sandbox from a terminal.

``exec --json`` is the sandbox's black-box interface: one file in, one
``ExecutionResult`` out as JSON (``status``, ``exit_code``, ``stdout``, ``stderr``,
``duration_s``, ``error`` = ``{type, message, line, frames, locals}`` or null,
``outputs``, plus ``tests``, truncation flags and ``message``). Several files run in
order through one warm pool (as the loop's candidates do) and give JSON Lines: one
compact result per file and line, in order, each with ``file`` added.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import BadInput, SandboxError, SelfHealError
from ..flags import add_to_parser
from ..model import ErrorInfo, ExecutionResult
from ..render.terminal import MAX_CHARS, MAX_LINES, clip, printable
from . import command_settings, for_terminal

FULL_RESULT = "the full result: the same command with --json"
SANDBOX_FLAGS = ("timeout", "memory", "image", "runtime", "sandbox_backend", "kubeconfig", "kubernetes_namespace")
"""The SelfHeal options `selfheal sandbox` offers as flags (selfheal_jupyter.flags)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sandbox",
        help="build, check and use the Docker sandbox",
        description="The hardened Docker sandbox every candidate runs in.",
    )
    actions = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)

    build = actions.add_parser(
        "build",
        help="build the sandbox image offline (a no-op when it is current)",
        description="Build the sandbox image from this machine's apt mirror and PyPI wheels; "
        "nothing is pulled from a registry. Idempotent: a current image is left alone.",
    )
    build.add_argument("--rebuild", action="store_true", help="build again even if current")
    add_to_parser(build, ("image",))
    build.add_argument(
        "--requirements",
        type=Path,
        metavar="FILE",
        help="extra pip requirements to add to the image (then run it with the printed ref)",
    )
    build.add_argument(
        "--with",
        dest="with_packages",
        nargs="+",
        metavar="PKG",
        help="add packages (at this Python's versions, or PKG==VERSION) as a cached layer "
        "on the current image, e.g. --with scikit-learn seaborn; the base is not rebuilt",
    )
    build.set_defaults(handler=cmd_build, flags=SANDBOX_FLAGS)

    doctor = actions.add_parser(
        "doctor",
        help="say whether the sandbox works, and what to do if not",
        description="Checks the Docker engine, the image, and runs a hardened print(1). "
        "Exit code 0 only if all of them hold.",
    )
    add_to_parser(doctor, ("image", "runtime"))
    doctor.set_defaults(handler=cmd_doctor, flags=SANDBOX_FLAGS)

    run = actions.add_parser(
        "exec",
        help="run Python files in the sandbox",
        description="Run FILE in a fresh hardened container and report what happened. "
        "With several files, run them in order through one warm pool of containers "
        "(each in a process of its own, as the loop runs candidates); with --json, print "
        "one JSON result per line as each finishes. Exit code: 0 if every program ran "
        "without error, 1 if one did not, 2 if the sandbox itself could not run them.",
    )
    run.add_argument("files", type=Path, nargs="+", metavar="FILE", help="the Python file(s) to run, in this order")
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH.pkl",
        help="a pickle file whose value becomes the global NAME (repeatable); "
        "copied in as bytes, never unpickled on the host",
    )
    run.add_argument("--tests", type=Path, metavar="FILE", help="test code run after each FILE")
    add_to_parser(run, SANDBOX_FLAGS)
    run.add_argument(
        "--json", action="store_true", help="print the result as JSON (several files: one compact result per line)"
    )
    run.set_defaults(handler=cmd_exec, flags=SANDBOX_FLAGS)


# --------------------------------------------------------------------------- build
def cmd_build(args: argparse.Namespace) -> int:
    from ..sandbox import image
    from ..sandbox.engine import connect, gone, lost

    extras = None
    if args.requirements is not None:
        try:
            extras = image.normalise_requirements(args.requirements.read_text(encoding="utf-8").splitlines())
        except OSError as exc:
            raise BadInput(
                f"Cannot read the requirements file {args.requirements} ({exc.strerror}). "
                "Give a pip requirements file, one requirement per line."
            ) from exc
    name = command_settings(args, SANDBOX_FLAGS).image
    if args.with_packages and extras:
        raise BadInput("--with adds to the standard image; build --requirements apart.")
    client = connect()
    try:
        status = image.build_image(
            client,
            name,
            rebuild=args.rebuild,
            extra_requirements=extras,
            log=lambda line: print(line, flush=True),
        )  # build_image logs its outcome on every path ("nothing to do" / "built ...")
        if extras:
            print(f"run it with: --image {status.ref}")
        if args.with_packages:
            image.build_with_layer(client, name, args.with_packages, log=lambda line: print(line, flush=True))
    except Exception as exc:
        if gone(exc):  # the engine stopped answering in the middle of the build
            raise lost(client, exc, during="the image build", again="run `selfheal sandbox build` again") from exc
        raise
    return 0


# --------------------------------------------------------------------------- doctor
PROBE = """\
import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
try:
    open("/probe", "w")
    root_writable = True
except OSError:
    root_writable = False
print(json.dumps({
    "uid": os.getuid(),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "root_writable": root_writable,
    "cap_eff": status["CapEff"].strip(),
    "host_env": sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k),
}))
"""


def cmd_doctor(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Each check in plain words; the first failure says what to do."""
    from ..sandbox import image
    from ..sandbox.docker import DockerSandbox
    from ..sandbox.engine import connect

    try:
        client = connect()
        version = client.version()
        out(f"ok    Docker engine reachable (engine {version.get('Version')}, API {version.get('ApiVersion')})")
    except SelfHealError as exc:
        out(f"FAIL  Docker engine: {exc}")
        return 1
    settings = command_settings(args, SANDBOX_FLAGS)
    status = image.image_status(client, settings.image)
    if not status.current:
        out(f"FAIL  image: {status.describe()}")
        return 1
    out(f"ok    {status.describe()}")
    try:
        with DockerSandbox.from_config(settings, pool_size=1, client=client) as sb:
            first = sb.execute("print(1)")
            probe = sb.execute(PROBE)
    except SelfHealError as exc:
        out(f"FAIL  hardened run: {exc}")
        return 1
    if first.status != "ok" or first.stdout != "1\n":
        out(
            f"FAIL  hardened print(1) gave status {first.status!r}, stdout {first.stdout!r}, "
            f"stderr {first.stderr[-300:]!r}. Rebuild the image: selfheal sandbox build --rebuild"
        )
        return 1
    how = (
        "frames over a unix socket in a shared directory"
        if sb.channel == "socket"
        else "frames and inputs over the attach stream: the engine does not share this machine's files"
    )
    runtime = f", runtime {settings.runtime}" if settings.runtime else ""
    out(f"ok    hardened print(1) ran ({first.duration_s * 1000:.0f} ms{runtime}; {how})")
    try:
        facts = json.loads(probe.stdout)
    except ValueError:
        out(f"FAIL  hardening probe did not answer ({probe.status}: {probe.stderr[-300:]})")
        return 1
    problems = []
    if facts["uid"] == 0:
        problems.append("runs as root")
    if facts["interfaces"] != ["lo"]:
        problems.append(f"has network interfaces {facts['interfaces']}")
    if facts["root_writable"]:
        problems.append("its root filesystem is writable")
    if int(facts["cap_eff"], 16):
        problems.append(f"keeps capabilities {facts['cap_eff']}")
    if facts["host_env"]:
        problems.append(f"sees host variables {facts['host_env']}")
    if problems:
        out(
            "FAIL  hardening: the container " + "; ".join(problems) + ". This engine does "
            "not enforce the sandbox flags; do not run untrusted code here."
        )
        return 1
    out(f"ok    hardened: user {facts['uid']}, network only 'lo', read-only root, no capabilities, no host environment")
    return 0


# --------------------------------------------------------------------------- exec
def parse_inputs(specs: list[str]) -> dict[str, Any]:
    from ..sandbox.serialize import PickleFile, check_name

    inputs: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            raise BadInput(f"--input {spec!r} should look like NAME=PATH.pkl, e.g. df=data.pkl.")
        check_name(name)
        if not Path(path).is_file():
            raise BadInput(f"--input {name}: no file at {path}. Give the path of a pickle file.")
        inputs[name] = PickleFile(Path(path))
    return inputs


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"Cannot read {path}: {exc}. Give a UTF-8 Python file.") from exc


def cmd_exec(args: argparse.Namespace) -> int:
    from ..factory import new_sandbox

    programs = [(path, read_text(path)) for path in args.files]  # all readable before a run
    tests = read_text(args.tests) if args.tests else None
    inputs = parse_inputs(args.input)
    settings = command_settings(args, SANDBOX_FLAGS)
    batch = len(programs) > 1
    all_ok = True
    failure: SandboxError | None = None
    # One file: no container is kept warm for a next run that will not come.
    with new_sandbox(settings, pool_size=1 if batch else 0) as sb:
        for path, code in programs:
            if failure is None:
                try:
                    result = sb.execute(code, inputs=inputs, tests=tests, filename=path.name)
                except SandboxError as exc:  # the sandbox itself failed, e.g. its engine stopped
                    failure = exc
                    print(f"selfheal: {for_terminal(str(exc), SANDBOX_FLAGS)}", file=sys.stderr)
                    result = sandbox_failed(exc, ran=True)
            else:
                result = sandbox_failed(failure, ran=False)
            all_ok = all_ok and result.ok
            if args.json and batch:
                line = {"file": str(path), **result.to_dict()}
                sys.stdout.write(json.dumps(line) + "\n")
            elif args.json:
                json.dump(result.to_dict(), sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                sys.stdout.write(printable((f"=== {path}\n" if batch else "") + summary(result)))
            sys.stdout.flush()  # each result as soon as it is known
    if failure is not None:
        return 2
    return 0 if all_ok else 1


def sandbox_failed(exc: SandboxError, *, ran: bool) -> ExecutionResult:
    """The result of a file the sandbox could not run to its end (``ran``: it was running)
    or could not start, because the sandbox itself failed: status ``error``, the reason."""
    reason = for_terminal(str(exc), SANDBOX_FLAGS)
    said = reason if ran else f"Not run: the sandbox failed on an earlier file. {reason}"
    return ExecutionResult(status="error", error=ErrorInfo(type=type(exc).__name__, message=said), message=said)


def summary(result: ExecutionResult) -> str:
    """A readable account of one run for a terminal (the caller escapes its control
    characters: stdout, messages and names come from the candidate)."""
    lines = [f"status: {result.status} (exit code {result.exit_code}, {result.duration_s:.3f} s)"]
    if result.message:
        lines.append(result.message)
    if result.stdout:
        lines += ["--- stdout ---", clip(result.stdout.rstrip("\n"), MAX_LINES, MAX_CHARS, FULL_RESULT)]
    if result.stderr:
        lines += ["--- stderr ---", clip(result.stderr.rstrip("\n"), MAX_LINES, MAX_CHARS, FULL_RESULT)]
    if result.error:
        e = result.error
        lines.append(f"--- error: {e.type}: {e.message}" + (f" (line {e.line})" if e.line else ""))
        for f in e.frames:
            lines.append(f"  {f.file}:{f.line} in {f.function}: {f.source}")
        for name, value in e.locals.items():
            lines.append(f"  {name} = {value}")
    if result.tests:
        passed = sum(t.passed for t in result.tests)
        lines.append(f"--- tests: {passed}/{len(result.tests)} passed")
        for t in result.tests:
            mark = "pass" if t.passed else "FAIL"
            lines.append(f"  {mark}  {t.source}" + (f"  — {t.message}" if t.message else ""))
    for o in result.outputs:
        lines.append(f"--- output {o.mime} ({len(o.data)} characters)")
    return "\n".join(lines) + "\n"
