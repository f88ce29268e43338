"""One notebook case through the loop of whichever checkout is on PYTHONPATH (for
``bench/notebooks_speed.py``, which runs two checkouts side by side).

It uses only what every checkout since the notebooks benchmark has: the magics' own
``heal_task`` / ``agent_task``, the context's ``for_cell`` / ``for_task``, ``build_loop``
and the loop's events (matched by class name, so an event a checkout lacks is simply never
seen). The earlier cells run in a ``__main__`` of their own, as a kernel runs them.

    PYTHONPATH=CHECKOUT python bench/notebook_driver.py CASE_DIR SETTINGS_JSON

prints one JSON line: the run record (outputs trimmed), the moments, the code to grade,
and each model request as the loop saw it (:func:`timed_requests`: when it was sent, its
first and last streamed text, its usage, and what the server's ``/metrics`` counters moved
by: prompt tokens read and reused, seconds, drafts accepted), for ``bench/model_speed.py``.
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
COUNTERS = {
    "prompt_n": "llamacpp:prompt_tokens_total",
    "cached_n": "llamacpp:prompt_tokens_cached_total",
    "prompt_s": "llamacpp:prompt_seconds_total",
    "predicted_n": "llamacpp:tokens_predicted_total",
    "predicted_s": "llamacpp:tokens_predicted_seconds_total",
    "drafted": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
}
"""llama.cpp's own counters (a server without ``/metrics`` gives none)."""


def counters(root: str) -> dict[str, float]:
    import urllib.request

    try:
        with urllib.request.urlopen(root + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    values = dict(line.rpartition(" ")[::2] for line in text.splitlines() if not line.startswith("#"))
    return {key: float(values.get(name, 0) or 0) for key, name in COUNTERS.items()}


def server_threads(root: str) -> str:
    """``generation/batch`` threads of the embedded server answering at ``root`` (its
    command line; "" when it is not a process of this machine we can read)."""
    import subprocess

    port = root.rsplit(":", 1)[-1]
    found = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    pid = found.partition("pid=")[2].partition(",")[0]
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except (OSError, ValueError):
        return ""
    if "--auto-threads" in args:  # the shared supervisor: its backend holds the counts
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        args = Path(f"/proc/{children[0]}/cmdline").read_bytes().decode().split("\0") if children else args
    pick = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--threads", "--batch-threads")}
    return f"{pick.get('--threads', '?')}/{pick.get('--batch-threads', '?')}"


def timed_requests(llm: Any, started: float) -> list[dict[str, Any]]:
    """Record each request ``llm`` sends (it is wrapped in place); the list fills as the
    run goes. Times are seconds since ``started``."""
    requests: list[dict[str, Any]] = []
    chat = llm.chat
    root = llm.endpoint.base_url.rstrip("/").removesuffix("/v1")

    def timed(messages: Any, *, on_token: Any = None, **kwargs: Any) -> Any:
        before = counters(root)
        seen: dict[str, float] = {}

        def token(text: str) -> None:
            now = time.monotonic() - started
            seen.setdefault("first_s", now)
            seen["last_s"] = now
            seen["chunks"] = seen.get("chunks", 0) + 1
            if on_token is not None:
                on_token(text)

        record: dict[str, Any] = {
            "sent_s": time.monotonic() - started,
            "stop": kwargs.get("stop"),
            "temperature": kwargs.get("temperature"),
            "max_tokens": llm.max_tokens,
            "messages": list(messages),  # bench/model_speed.py --replay sends them again
        }
        requests.append(record)
        try:
            reply = chat(messages, on_token=token, **kwargs)
        except BaseException as exc:
            record["error"] = type(exc).__name__
            raise
        finally:
            record.update(seen, done_s=time.monotonic() - started)
            after = counters(root)
            record["server"] = {k: after[k] - before.get(k, 0) for k in after}
        record.update(
            prompt=reply.usage.prompt_tokens,
            completion=reply.usage.completion_tokens,
            finish=reply.finish_reason,
            chars=len(reply.text),
            tail=_after_program(reply.text),
        )
        return reply

    llm.chat = timed
    return requests


def _after_program(text: str) -> int:
    """Characters of a reply after its first program's closing fence (0: none)."""
    opened = text.find("```")
    closed = text.find("```", opened + 3) if opened >= 0 else -1
    return max(0, len(text) - closed - 3) if closed >= 0 else 0


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
    requests = timed_requests(loop.llm, started)
    threads = server_threads(loop.llm.endpoint.base_url.rstrip("/").removesuffix("/v1"))
    moments: dict[str, Any] = {}
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
            moments.setdefault("verdicts_s", []).append(now)

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
    print(
        json.dumps(
            {"run": record, "moments": moments, "code": code, "wall_s": time.monotonic() - started,
             "requests": requests, "threads": threads}
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
