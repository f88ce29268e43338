"""Teaching mode on the project's own exercises: is a fix verified, do the hints point
at it, does the model's prose tell the change or say something wrong, how long until
the first hint.

    python bench/hints.py [--limit N] [--offset N] [--max-iterations 4] [--jsonl OUT] [--model NAME]
    python bench/hints.py --judge OUT.jsonl      # today's prose checks over recorded hints

For each exercise (``selfheal_jupyter/eval/exercise_data``) the starter runs through the
real loop as ``%%hint`` runs it (iteration 0 is the student's code, their asserts are the
spec), with the embedded model unless ``--base-url`` names another endpoint; then levels
1 and 2 are built by ``teaching.session.HintSession`` as in the notebook, with the hint
writer's prose. Printed per exercise as it goes (and appended to ``--jsonl``, with every
hint's text and every reply of the writer, to be read), then the table:

* fix verified: the loop found a passing program whose output something checked;
* level 1 names a changed line: the hint names a line the verified fix changes;
* prose asked / shown: the writer's replies, and those the checks let through;
* shown prose that tells the change: a shown reply the checks of
  ``teaching/prose.py`` find a problem with (0 by construction for today's code: the
  figure is for ``--judge`` over a record of older code), or that holds a changed line
  of the fix (its squashed text, a check apart from the leak check's own);
* seconds to the first hint: from the start of the run to level 1 shown.

"Shown prose that is wrong" needs a reader: the JSONL holds every shown reply.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfheal_jupyter.agents.hint_writer import HintAsk, HintWriter
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.eval import exercises
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.teaching import prose, small_fix
from selfheal_jupyter.teaching.facts import Facts, HeldFix, changes_of
from selfheal_jupyter.teaching.policy import Policy
from selfheal_jupyter.teaching.session import HintSession


class RecordingWriter(HintWriter):
    """The hint writer, keeping every reply (shown or dropped) for the record."""

    def __init__(self, llm) -> None:  # type: ignore[no-untyped-def]
        super().__init__(llm)
        self.replies: list[str] = []

    def write(self, ask: HintAsk, *, cancel=None) -> str:  # type: ignore[no-untyped-def]
        text = super().write(ask, cancel=cancel)
        self.replies.append(text)
        return text


def squashed_fix_in(text: str, fix_lines: list[str] | tuple[str, ...]) -> bool:
    flat = re.sub(r"\s+", "", text)
    return any(len(re.sub(r"\s+", "", line)) >= 6 and re.sub(r"\s+", "", line) in flat for line in fix_lines)


def named_lines(text: str, failing: int | None) -> set[int]:
    """The cell's lines a level-1 hint names as where the problem is."""
    if "The problem is on that line." in text and failing:
        return {failing}
    said = re.search(r"(?:starts|is) on lines? ([\d, and]+)", text)
    return {int(n) for n in re.findall(r"\d+", said[1])} if said else set()


def run_bench(args: argparse.Namespace) -> list[dict]:
    options = {"max_iterations": args.max_iterations, "auto_plan": False}
    if args.model:
        options["model"] = args.model
    if args.base_url:
        options["base_url"] = args.base_url
    settings = SelfHeal(**options)
    loop = build_loop(settings)
    rows = []
    chosen = exercises.load()[args.offset :]
    for problem in chosen[: args.limit]:
        started = time.monotonic()
        run = loop.run(problem.task())
        if not run.verified and run.outcome != "error":  # as %%hint does
            found = run
            run = small_fix.search(found, lambda code, found=found: loop.recheck(found, code))
        session = HintSession(problem.initial_code or "", Policy())
        session.attach(run)
        writer = RecordingWriter(loop.llm)
        first_s = None
        for _level in (1, 2) if session.facts.verified else (1,):
            session.next_hint(writer if args.prose else None)
            if first_s is None:
                first_s = time.monotonic() - started
        hints, facts = session.hints, session.facts
        held = session._held
        fix_lines = held.lines if held is not None else ()
        row = {
            "id": problem.id,
            "outcome": run.outcome,
            "verified": facts.verified,
            "level1_names_changed_line": bool(
                named_lines(hints[0].text, facts.failing_line) & set(facts.changed_lines)
            ),
            "prose_asked": len(writer.replies),
            "prose_shown": sum(bool(h.prose) for h in hints),
            "shown_telling": sum(bool(h.prose) and squashed_fix_in(h.prose, fix_lines) for h in hints),
            "checks": [h.check for h in hints],
            "first_hint_s": round(first_s or 0.0, 1),
            "iterations": len(run.iterations),
            "hints": [{"level": h.level, "text": h.text, "prose": h.prose, "check": h.check} for h in hints],
            "replies": writer.replies,
            "changed_lines": facts.changed_lines,
            "kinds": [c.kind for c in facts.changes],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
    return rows


def judge(path: str) -> list[dict]:
    """Today's checks over the prose a recorded run showed (its rows need ``cell``,
    ``fix``, ``error`` and ``values``, as the rows of older code had them)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if not row.get("fix"):
            rows.append({**row, "prose_shown": 0, "shown_telling": 0, "judged": []})
            continue
        error_type, message, failing, failed_test = row["error"]
        changes, lines, introduced, removed = changes_of(row["cell"], row["fix"])
        facts = Facts(
            cell=row["cell"],
            error_type=error_type,
            error_message=message,
            failing_line=failing,
            failed_test=failed_test,
            changes=changes,
            values=[tuple(v) for v in row["values"]],
            verified=row["verified"],
        )
        held = HeldFix(code=row["fix"], diff="", lines=lines, introduced=introduced, removed=removed)
        shown = [h for h in row["hints"] if h["prose"]]
        judged = [prose.problems(h["prose"], facts=facts, held=held) for h in shown]
        row.update(
            prose_shown=len(shown),
            shown_telling=sum(
                bool(j) or squashed_fix_in(h["prose"], lines) for h, j in zip(shown, judged, strict=True)
            ),
            judged=judged,
        )
        rows.append(row)
        print(json.dumps({"id": row["id"], "shown": [h["prose"] for h in shown], "judged": judged}), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--offset", type=int, default=0, help="skip the first N exercises")
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--model", default=None)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--no-prose", dest="prose", action="store_false", help="facts only (no hint writer)")
    ap.add_argument("--judge", default=None, help="a JSONL of recorded hints to judge with today's checks")
    args = ap.parse_args()
    rows = judge(args.judge) if args.judge else run_bench(args)
    verified = [r for r in rows if r["verified"]]
    print()
    print(
        "| exercises | fix verified | level 1 names a changed line | prose asked / shown "
        "| shown prose that tells the change | median s to first hint |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| {len(rows)} | {len(verified)} | {sum(r['level1_names_changed_line'] for r in verified)} of "
        f"{len(verified)} | {sum(r.get('prose_asked', 0) for r in rows)} / {sum(r['prose_shown'] for r in rows)} | "
        f"{sum(r['shown_telling'] for r in rows)} | "
        f"{statistics.median(r['first_hint_s'] for r in rows) if rows else 0:.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
