"""Teaching mode on the project's own exercises: is a fix verified, do the hints point
at it, does the model's prose tell the change or say something wrong, how long until
the first hint.

    python bench/hints.py [--limit N] [--offset N] [--max-iterations 4] [--jsonl OUT] [--SelfHeal.x=VALUE ...]
    python bench/hints.py --SelfHeal.hint_prose=True      # also the writer's prose, on the same runs
    python bench/hints.py --judge OUT.jsonl                # today's prose checks over recorded hints

For each exercise (``selfheal_jupyter/eval/exercise_data``) the starter runs through the
real loop as ``%%hint`` runs it (iteration 0 is the student's code, their asserts are the
spec; the small-change search when the model's rounds verified nothing), with the
embedded model unless ``--SelfHeal.base_url`` names another endpoint; then levels 1 and 2
are built by ``teaching.session.HintSession`` as in the notebook, under ``SelfHeal``'s
settings (``--SelfHeal.x=VALUE`` as for ``selfheal``; ``hint_prose`` is off by default,
so the hints are the facts). With ``--SelfHeal.hint_prose=True`` the same run's hints are
also built with the hint writer's prose, and the table has a row for each: what the
default shows and what prose adds, on the same verified fixes. Printed per exercise as it
goes (and appended to ``--jsonl``, with every hint's text, every reply of the writer and
what ``--judge`` needs), then the table:

* fix verified: the loop found a passing program whose output something checked;
* level 1 names a changed line: the hint names a line the verified fix changes;
* prose asked / shown: the writer's replies, and those the checks let through;
* shown prose that tells the change: a shown reply the checks of
  ``teaching/prose.py`` find a problem with (0 by construction for today's code: the
  figure is for ``--judge`` over a record of older code), or that holds a changed line
  of the fix (its squashed text, a check apart from the leak check's own);
* seconds to the first hint: from the start of the run to level 1 built (with prose:
  plus the writer's level-1 reply).

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
from selfheal_jupyter.config import SelfHeal, split_trait_args
from selfheal_jupyter.errors import BadInput
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


def hints_of(session: HintSession, writer: RecordingWriter | None, started: float) -> tuple[list, float]:
    """Levels 1 and 2 (1 only without a verified fix) and the seconds to level 1."""
    first_s = 0.0
    for level in (1, 2) if session.facts.verified else (1,):
        session.next_hint(writer)
        if level == 1:
            first_s = time.monotonic() - started
    return session.hints, first_s


def measured(hints: list, facts: Facts, held: HeldFix | None, first_s: float, writer: RecordingWriter | None) -> dict:
    fix_lines = held.lines if held is not None else ()
    return {
        "level1_names_changed_line": bool(named_lines(hints[0].text, facts.failing_line) & set(facts.changed_lines)),
        "prose_asked": len(writer.replies) if writer is not None else 0,
        "prose_shown": sum(bool(h.prose) for h in hints),
        "shown_telling": sum(bool(h.prose) and squashed_fix_in(h.prose, fix_lines) for h in hints),
        "checks": [h.check for h in hints],
        "first_hint_s": round(first_s, 1),
        "hints": [{"level": h.level, "text": h.text, "prose": h.prose, "check": h.check} for h in hints],
        "replies": writer.replies if writer is not None else [],
    }


def run_bench(args: argparse.Namespace, traits: dict) -> list[dict]:
    settings = SelfHeal(**{"max_iterations": args.max_iterations, "auto_plan": False, **traits})
    loop = build_loop(settings)
    rows = []
    chosen = exercises.load()[args.offset :]
    for problem in chosen[: args.limit]:
        started = time.monotonic()
        run = loop.run(problem.task())
        if not run.verified and run.outcome != "error":  # as %%hint does
            found = run
            run = small_fix.search(found, lambda code, found=found: loop.recheck(found, code))
        ran_s = time.monotonic() - started
        session = HintSession(problem.initial_code or "", Policy())
        session.attach(run)
        hints, first_s = hints_of(session, None, started)  # the facts: what the default shows
        facts, held = session.facts, session._held
        row = {
            "id": problem.id,
            "outcome": run.outcome,
            "run_error": run.error,
            "verified": facts.verified,
            "iterations": len(run.iterations),
            "run_s": round(ran_s, 1),
            **measured(hints, facts, held, first_s, None),
            "changed_lines": facts.changed_lines,
            "kinds": [c.kind for c in facts.changes],
            # what --judge needs
            "cell": problem.initial_code or "",
            "fix": held.code if held is not None else None,
            "error": [facts.error_type, facts.error_message, facts.failing_line, facts.failed_test],
            "values": [list(v) for v in facts.values],
        }
        if settings.hint_prose:  # the same run's hints with the writer's prose
            writer = RecordingWriter(loop.llm)
            with_prose = HintSession(problem.initial_code or "", Policy())
            with_prose.attach(run)
            asked = time.monotonic()
            hints, first_s = hints_of(with_prose, writer, asked)
            row["prose"] = measured(hints, facts, held, ran_s + first_s, writer)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
    return rows


TELLS = ("it holds a line of the fix", "it tells the student what to change", "it names a", "it names an")
"""The checks' findings that mean the prose tells the change (the others: it names code,
a line, an error or a number that is not the cell's or not computed: it is wrong)."""


def judge(path: str) -> list[dict]:
    """Today's checks over the prose a recorded run showed (its rows need ``cell``,
    ``fix``, ``error`` and ``values``, as the rows of older code had them)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if not row.get("fix"):
            rows.append(
                {**row, "prose_shown": 0, "shown_telling": 0, "judged": [], "judged_tells": 0, "judged_wrong": 0}
            )
            continue
        error_type, message, failing, failed_test = row["error"]
        changes, lines, introduced, removed, moved = changes_of(row["cell"], row["fix"])
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
        held = HeldFix(code=row["fix"], diff="", lines=lines, introduced=introduced, removed=removed, moved=moved)
        shown = [h for h in row["hints"] if h["prose"]]
        judged = [prose.problems(h["prose"], facts=facts, held=held) for h in shown]
        row.update(
            judged_tells=sum(any(p.startswith(TELLS) for p in j) for j in judged),
            judged_wrong=sum(any(not p.startswith(TELLS) for p in j) for j in judged),
            prose_shown=len(shown),
            shown_telling=sum(
                bool(j) or squashed_fix_in(h["prose"], lines) for h, j in zip(shown, judged, strict=True)
            ),
            judged=judged,
        )
        rows.append(row)
        print(json.dumps({"id": row["id"], "shown": [h["prose"] for h in shown], "judged": judged}), flush=True)
    return rows


def table_row(label: str, rows: list[dict]) -> str:
    verified = [r for r in rows if r["verified"]]
    median = statistics.median(r["first_hint_s"] for r in rows) if rows else 0
    return (
        f"| {label} | {len(rows)} | {len(verified)} | {sum(r['level1_names_changed_line'] for r in verified)} of "
        f"{len(verified)} | {sum(r.get('prose_asked', 0) for r in rows)} / {sum(r['prose_shown'] for r in rows)} | "
        f"{sum(r['shown_telling'] for r in rows)} | {median:.0f} |"
    )


def main() -> int:
    try:
        argv, traits = split_trait_args(sys.argv[1:])
    except BadInput as exc:
        print(f"bench/hints.py: {exc}", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(epilog="Also any SelfHeal option as --SelfHeal.<name>=<value>.")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--offset", type=int, default=0, help="skip the first N exercises")
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--judge", default=None, help="a JSONL of recorded hints to judge with today's checks")
    args = ap.parse_args(argv)
    rows = judge(args.judge) if args.judge else run_bench(args, traits)
    print()
    print(
        "| hints | exercises | fix verified | level 1 names a changed line | prose asked / shown "
        "| shown prose that tells the change | median s to first hint |"
    )
    print("|---|---|---|---|---|---|---|")
    if args.judge:
        print(table_row("recorded", rows))
        print()
        print(
            f"Shown prose the checks find telling the change: {sum(r['judged_tells'] for r in rows)}; "
            f"naming code, a line, an error or a number not in the cell or not computed: "
            f"{sum(r['judged_wrong'] for r in rows)} (of {sum(r['prose_shown'] for r in rows)} shown)."
        )
        return 0
    print(table_row("facts (hint_prose off, the default)", rows))
    with_prose = [{**r, **r["prose"]} for r in rows if "prose" in r]
    if with_prose:
        print(table_row("with prose (hint_prose on, same runs)", with_prose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
