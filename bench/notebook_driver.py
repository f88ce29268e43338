"""One notebook case through the loop of whichever checkout is on PYTHONPATH (for
``bench/notebooks_speed.py``, which runs two checkouts side by side).

It uses only what every checkout since the notebooks benchmark has: the magics' own
``heal_task`` / ``agent_task``, the context's ``for_cell`` / ``for_task``, ``build_loop``
and the loop's events (matched by class name, so an event a checkout lacks is simply never
seen). The earlier cells run in a ``__main__`` of their own, as a kernel runs them.

    PYTHONPATH=CHECKOUT python bench/notebook_driver.py CASE_DIR SETTINGS_JSON

prints one JSON line: the run record (outputs trimmed), the moments, the code to grade.
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import sys
import time
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

MAX_BYTES = 50 << 20


def cells(text: str) -> list[str]:
    out: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.strip() == "# %%":
            out.append([])
        elif out:
            out[-1].append(line)
    return ["".join(c).strip("\n") + "\n" for c in out]


def main() -> None:
    case, settings = Path(sys.argv[1]), json.loads(sys.argv[2])
    from selfheal_jupyter.config import SelfHeal
    from selfheal_jupyter.factory import build_loop
    from selfheal_jupyter.notebook import arguments, context

    notebook = cells((case / "notebook.py").read_text(encoding="utf-8"))
    question = case / "question.txt"
    earlier = notebook if question.is_file() else notebook[:-1]
    main_module = types.ModuleType("__main__")
    sys.modules["__main__"] = main_module
    for number, source in enumerate(earlier, 1):
        filename = f"<notebook {case.name} cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, filename, "exec"), main_module.__dict__)
    ns = main_module.__dict__
    if question.is_file():
        text = question.read_text(encoding="utf-8").strip()
        task = arguments.agent_task(SimpleNamespace(tests=None, inputs=None, plan=None, plan_only=None), text, ns, [])
        task.context = context.for_task(text, ns, max_bytes=MAX_BYTES)
        from selfheal_jupyter.notebook import controller

        derive = getattr(controller, "derive_checks", None)  # what the magic adds, where it does
        if derive is not None:
            task.data_checks = derive(SimpleNamespace(user_ns=ns), task)
    else:
        hint = (case / "hint.txt").read_text(encoding="utf-8").split() if (case / "hint.txt").is_file() else []
        task = arguments.heal_task(SimpleNamespace(hint=hint, tests=None, inputs=None), notebook[-1], ns, [])
        task.context = context.for_cell(notebook[-1], ns, max_bytes=MAX_BYTES)
    loop = build_loop(SelfHeal(**settings))
    started = time.monotonic()
    moments: dict[str, float] = {}
    verdicts: dict[int, float] = {}

    def on_event(event: Any) -> None:
        now = time.monotonic() - started
        kind = type(event).__name__
        if kind == "FailureExplained" and event.explanation.diagnosis:
            moments.setdefault("explained_s", now)
            moments.setdefault("first_feedback_s", now)
        elif kind == "CandidateReady" and event.candidate.iteration >= 1:
            moments.setdefault("first_feedback_s", now)
        elif kind == "ModelWaiting":
            moments.setdefault("waited_s", now)
        elif kind == "VerdictReady":
            verdicts[event.iteration.index] = now

    run = loop.run(task, on_event=on_event)
    final = run.final_iteration
    if final is not None and run.outcome == "success":
        moments["pass_s"] = verdicts.get(final.index, time.monotonic() - started)
    record = run.to_dict()
    for it in record.get("iterations") or []:
        result = it.get("result") or {}
        result["outputs"] = []
    best = run.best_attempt
    code = run.final_code or (best.candidate.code if best is not None else None)
    if code is None and run.iterations:
        code = run.iterations[-1].candidate.code
    print(json.dumps({"run": record, "moments": moments, "code": code, "wall_s": time.monotonic() - started}))


if __name__ == "__main__":
    main()
