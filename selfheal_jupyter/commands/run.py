"""``selfheal run "TASK"``: the loop from a terminal.

``--json`` prints the run record (``Run.to_dict()``); otherwise a readable
transcript, with progress on stderr while it waits. Exit code 0 on success, 1 for
any other outcome, 2 for bad input (empty task, tests that do not parse, an input
file that is not a readable pickle) or when the instructor's policy (``SELFHEAL_POLICY``)
does not allow it. Ctrl-C stops the run cleanly (outcome
``cancelled``; every container is removed).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

from ..config import SelfHeal
from ..errors import BadInput, SelfHealError
from ..flags import add_to_parser
from ..model import Run, Task
from ..render.text import Progress, Transcript
from . import command_settings, for_terminal

RUN_FLAGS = (
    *("max_iterations", "no_plan", "model", "base_url", "timeout", "memory", "llm_timeout", "image", "runtime"),
    *("sandbox_backend", "kubeconfig", "kubernetes_namespace"),
)
"""The SelfHeal options `selfheal run` offers as flags (selfheal_jupyter.flags)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="plan, write, run (in the sandbox) and repair a program for TASK",
        description="Run one task through planner → developer → QA until a candidate passes.",
    )
    p.add_argument("task", help="what the program should do")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH.pkl",
        help="a pickled value the program sees as the global NAME (repeatable)",
    )
    p.add_argument("--tests", metavar="FILE", help="Python file of asserts the program must pass")
    p.add_argument(
        "--code",
        metavar="FILE",
        help="start from this program (iteration 0) and repair it; TASK then says what it "
        'does wrong (the program is no answer even if it runs), or is "" to only make '
        "it run and pass --tests",
    )
    add_to_parser(p, RUN_FLAGS)
    p.add_argument("--json", action="store_true", help="print the run record as JSON")
    p.set_defaults(handler=handle, flags=RUN_FLAGS)


def load_inputs(specs: list[str]) -> dict[str, Any]:
    """``NAME=PATH.pkl`` → values (the user's own files, unpickled on the host)."""
    inputs: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise BadInput(f"--input {spec!r}: write it as NAME=PATH.pkl, e.g. --input df=sales.pkl")
        if not name.isidentifier():
            raise BadInput(f"--input {spec!r}: {name!r} is not a valid Python variable name.")
        try:
            with open(path, "rb") as fh:
                inputs[name] = pickle.load(fh)
        except OSError as exc:
            raise BadInput(f"--input {name}: cannot read {path} ({exc.strerror or exc}).") from None
        except Exception as exc:
            raise BadInput(
                f"--input {name}: {path} is not a readable pickle ({type(exc).__name__}: {exc}). "
                "Write it with pickle.dump(value, f) or DataFrame.to_pickle(path)."
            ) from None
    return inputs


def _read_text(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{what} {path}: cannot be read ({exc}).") from None


def build_task(args: argparse.Namespace, *, max_code_bytes: int = 0) -> Task:
    """The task the arguments describe; raises BadInput for anything unusable (also a
    program, task or tests larger than ``max_code_bytes``)."""
    prompt = (args.task or "").strip()
    code = _read_text(args.code, "--code") if getattr(args, "code", None) else None
    tests = _read_text(args.tests, "--tests") if args.tests else None
    from ..loop.task_admission import repair_task

    return repair_task(
        prompt, code, tests, inputs=load_inputs(args.input), origin="selfheal run", max_code_bytes=max_code_bytes
    )


def build_settings(args: argparse.Namespace) -> SelfHeal:
    return command_settings(args, RUN_FLAGS)


def execute(task: Task, settings: SelfHeal, progress: Progress | None, cancel: threading.Event | None = None) -> Run:
    """Run the task where the settings say (here, or the class service: this process then
    needs no engine and no key); Ctrl-C or ``cancel`` stops it. Failures become a
    recorded run."""
    from ..runner import Pump, runner_for

    on_event = progress.on_event if progress else None
    on_interrupt = (lambda: progress.status("stopping…")) if progress else None
    try:
        runner = runner_for(settings)
        if progress and runner.preparing:
            progress.status(runner.preparing)
        runner.start()
    except SelfHealError as exc:
        return Run(task=task, outcome="error", error=str(exc))
    pump: Pump[Run] = Pump(
        lambda emit, stop: runner.full(task, "run", emit, stop), on_event, cancel=cancel, on_interrupt=on_interrupt
    )
    return pump.run_sync()


def admit_by_policy() -> None:
    """With ``SELFHEAL_POLICY`` set, the instructor's policy applies here too (a terminal
    in a class image); it allows ``selfheal run`` only in ``full`` mode. Raises
    ``PolicyBlocked`` (exit code 2, one line naming the policy)."""
    from ..teaching.policy import ENV_VAR, kernel_gate

    if os.environ.get(ENV_VAR):
        kernel_gate().admit("run")


def handle(args: argparse.Namespace) -> int:
    admit_by_policy()
    settings = build_settings(args)
    task = build_task(args, max_code_bytes=settings.max_code_bytes)
    progress = Progress(sys.stderr)
    # A reader that has gone (`| head`) stops the run: nobody will read the rest.
    cancel = threading.Event()
    transcript = None if args.json else Transcript(sys.stdout, on_closed=cancel.set)
    if transcript is not None:
        progress.transcript = transcript
    try:
        run = execute(task, settings, progress, cancel)
    finally:
        progress.clear()
    from ..runner import note_kept

    note_kept(run, "this record's iterations" if args.json else "the transcript above")
    run.error = for_terminal(run.error, RUN_FLAGS)
    if args.json:
        json.dump(run.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        assert transcript is not None
        transcript.finish(run)
        if transcript.closed:
            raise BrokenPipeError
    return 0 if run.outcome == "success" else 1
