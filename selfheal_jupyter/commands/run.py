"""``selfheal run "TASK"``: the loop from a terminal.

``--json`` prints the run record (``Run.to_dict()``); otherwise a readable
transcript, with progress on stderr while it waits. Exit code 0 on success, 1 for
any other outcome, 2 for bad input (empty task, tests that do not parse, an input
file that is not a readable pickle). Ctrl-C stops the run cleanly (outcome
``cancelled``; every container is removed).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

from ..config import SelfHeal
from . import command_settings
from ..errors import BadInput, SelfHealError
from ..loop.stated import stated_checks, with_stated
from ..model import Run, Task
from ..render.text import Progress, Transcript


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
        "--code", metavar="FILE",
        help="start from this program (iteration 0) and repair it; TASK then says what it "
        "does wrong (the program is no answer even if it runs), or is \"\" to only make "
        "it run and pass --tests",
    )
    p.add_argument("--max-iterations", type=int, metavar="N", help="most developer → QA rounds")
    p.add_argument("--no-plan", action="store_true", help="skip the planner")
    p.add_argument("--model", help="model name at the endpoint")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds one candidate may run")
    p.add_argument("--memory", metavar="M", help="memory limit of the sandbox, e.g. 512m")
    p.add_argument("--llm-timeout", type=float, metavar="S", help="seconds one LLM request may take")
    p.add_argument("--image", help="sandbox image")
    p.add_argument("--runtime", help="Docker runtime of the sandbox, e.g. runsc (gVisor)")
    p.add_argument("--json", action="store_true", help="print the run record as JSON")
    p.set_defaults(handler=handle)


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
        except Exception as exc:  # noqa: BLE001 - any unpickling failure
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


def build_task(args: argparse.Namespace) -> Task:
    """The task the arguments describe; raises BadInput for anything unusable."""
    prompt = (args.task or "").strip()
    code = _read_text(args.code, "--code") if getattr(args, "code", None) else None
    tests = _read_text(args.tests, "--tests") if args.tests else None
    stated = stated_checks(prompt, code) if code is not None else []
    task = Task(
        prompt=prompt,
        inputs=load_inputs(args.input),
        tests=with_stated(tests, stated),
        stated=stated,
        initial_code=code,
        # With --code, a task text says what the program does wrong or still lacks.
        given_is_wrong=code is not None and bool(prompt),
    )
    from ..loop.orchestrator import validate_task  # imports openai: only when a task runs

    validate_task(task)
    return task


RUN_FLAGS = {
    "max_iterations": "max_iterations",
    "model": "model",
    "base_url": "base_url",
    "timeout": "timeout_s",
    "memory": "memory",
    "llm_timeout": "llm_timeout_s",
    "image": "image",
    "runtime": "runtime",
}


def build_settings(args: argparse.Namespace) -> SelfHeal:
    return command_settings(args, RUN_FLAGS, **({"auto_plan": False} if args.no_plan else {}))


def execute(task: Task, settings: SelfHeal, progress: Progress | None,
            cancel: threading.Event | None = None) -> Run:
    """Build the loop and run the task; Ctrl-C or ``cancel`` stops it. Failures become a
    recorded run."""
    from ..factory import build_loop

    on_event = progress.on_event if progress else None
    if progress:
        progress.status("starting the model endpoint and the sandbox…")
    try:
        loop = build_loop(settings)
    except SelfHealError as exc:
        run = Run(task=task, outcome="error", error=str(exc))
        return run
    from ..notebook.controller import run_loop

    on_interrupt = (lambda: progress.status("stopping…")) if progress else None
    return run_loop(loop, task, on_event, on_interrupt=on_interrupt, cancel=cancel)


def handle(args: argparse.Namespace) -> int:
    task = build_task(args)
    settings = build_settings(args)
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
    if args.json:
        json.dump(run.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        assert transcript is not None
        transcript.finish(run)
        if transcript.closed:
            raise BrokenPipeError
    return 0 if run.outcome == "success" else 1
