"""Teaching mode on the project's exercises and the notebooks' hint cells: is a fix
verified, and are the hints good ones — by the checks a program can make, and (for a
reader) every hint's text.

    python bench/hints.py [--limit N] [--offset N] [--max-iterations 4] [--jsonl OUT] [--SelfHeal.x=VALUE ...]
    python bench/hints.py --replay RUNS.jsonl --jsonl OUT   # the hints of recorded runs, by the code on PYTHONPATH
    python bench/hints.py --judge A.jsonl [B.jsonl ...]      # the checks on every shown hint, a row per file

The cases: each exercise (``selfheal_jupyter/eval/exercise_data``), each ``%%hint`` cell of
``notebooks/`` and the median cell of issue 49 (``middle = len(ordered) / 2``, fixed by
``//``). Each runs through the real loop as ``%%hint`` runs it (iteration 0 is the
student's code, their asserts are the spec; the small-change search when the model's
rounds verified nothing), with the embedded model unless ``--SelfHeal.base_url`` names
another endpoint; then levels 1 and 2 are built as in the notebook (``hint_prose`` off by
default: the facts; ``--SelfHeal.hint_prose=True`` adds a row with the writer's prose on
the same runs). Each row of ``--jsonl`` holds the run itself (``run``), every hint's text
and what ``--judge`` needs; ``--replay`` builds the hints again from those runs with
whatever code ``PYTHONPATH`` names — so an older commit's hints and today's come from the
very same verified runs, the model's run-to-run differences aside.

``--judge`` scores every shown hint (levels 1 and 2) with the checks a program can make:

* points at the line the fix changes: it names one of the lines the verified fix changes;
* names the value that differs (level 2): the first value it states ("`x` is `v`") is of a
  name whose value differs between the student's run and the verified run, as the two
  runs show at the changed lines and the failing line (``teaching/why.py``, run again here
  in the sandbox for every row, whatever code wrote the hint);
* states no changed token: no line of the fix, no token the fix brings that the cell
  does not have anywhere, no value the verified run holds where the student's differs
  (``teaching/prose.py``'s checks, the student's own code aside: a hint may quote it);
* no code not in the cell: every code span is the cell's text or a plain value;
* 20–160 words;
* a question or a next step the student can act on.

and, for the table of issue 35, a live run also prints the fix verified, level 1 naming a
changed line, the prose asked / shown, shown prose that tells the change and the seconds
to the first hint. "Correct", "plain language" and the other criteria educators use need
a reader: the JSONL holds every hint's text.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selfheal_jupyter.agents.hint_writer import HintAsk, HintWriter  # noqa: E402
from selfheal_jupyter.config import SelfHeal, split_trait_args  # noqa: E402
from selfheal_jupyter.errors import BadInput  # noqa: E402
from selfheal_jupyter.eval import exercises  # noqa: E402
from selfheal_jupyter.factory import build_loop  # noqa: E402
from selfheal_jupyter.model import Run, Task  # noqa: E402
from selfheal_jupyter.service_client import wire  # noqa: E402
from selfheal_jupyter.teaching import prose, small_fix  # noqa: E402
from selfheal_jupyter.teaching import session as sessions  # noqa: E402
from selfheal_jupyter.teaching.facts import Facts, HeldFix, changes_of  # noqa: E402
from selfheal_jupyter.teaching.policy import Policy  # noqa: E402

MEDIAN = """def median(values):
    ordered = sorted(values)
    middle = len(ordered) / 2
    return ordered[middle]

assert median([3, 1, 2]) == 2
"""
"""Issue 49's cell: the fix is ``//``; the value that differs is ``middle``."""


@dataclass
class Case:
    id: str
    task: Task


def cases() -> list[Case]:
    """The exercises, the notebooks' ``%%hint`` cells (each distinct one), and the median cell."""
    import nbformat

    found = [Case(p.id, p.task()) for p in exercises.load()]
    seen: set[str] = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            head, _, code = cell.source.partition("\n")
            if cell.cell_type == "code" and head.strip() == "%%hint" and code not in seen:
                seen.add(code)
                found.append(Case(f"{path.stem}:{len(seen)}", Task(prompt="", initial_code=code)))
    found.append(Case("issue49_median", Task(prompt="", initial_code=MEDIAN)))
    return found


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


def session_for(code: str, run: Run, loop) -> sessions.HintSession:  # type: ignore[no-untyped-def]
    """The hint session of ``run`` as the code on PYTHONPATH builds it: today's looks at
    the two runs (``examine``); an older tree's attaches the run as it did."""
    session = sessions.HintSession(code, Policy())
    examine = getattr(sessions, "examine", None)
    if examine is not None:
        examine(session, run, loop)
    else:
        session.attach(run)
    return session


def hints_of(session, writer: RecordingWriter | None, started: float) -> tuple[list, float]:  # type: ignore[no-untyped-def]
    """Levels 1 and 2 (1 only without a verified fix), and the seconds from ``started`` to level 1."""
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


def row_of(case_id: str, code: str, run: Run, loop, started: float, ran_s: float, prose_too: bool) -> dict:  # type: ignore[no-untyped-def]
    session = session_for(code, run, loop)
    hints, first_s = hints_of(session, None, started)  # the facts: what the default shows
    facts, held = session.facts, session._held
    row = {
        "id": case_id,
        "outcome": run.outcome,
        "run_error": run.error,
        "verified": facts.verified,
        "iterations": len(run.iterations),
        "run_s": round(ran_s, 1),
        **measured(hints, facts, held, first_s, None),
        "changed_lines": facts.changed_lines,
        "kinds": [c.kind for c in facts.changes],
        # what --judge and --replay need
        "cell": code,
        "tests": run.task.tests,
        "fix": held.code if held is not None else None,
        "error": [facts.error_type, facts.error_message, facts.failing_line, facts.failed_test],
        "values": [list(v) for v in facts.values],
        "run": wire.encode(replace(run, task=replace(run.task, context=None))),
    }
    if prose_too:  # the same run's hints with the writer's prose
        writer = RecordingWriter(loop.llm)
        with_prose = session_for(code, run, loop)
        hints, first_s = hints_of(with_prose, writer, time.monotonic())
        row["prose"] = measured(hints, facts, held, ran_s + first_s, writer)
    return row


def emit(row: dict, out: str | None) -> None:
    print(json.dumps({k: v for k, v in row.items() if k != "run"}), flush=True)
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


def run_bench(args: argparse.Namespace, traits: dict) -> list[dict]:
    settings = SelfHeal(**{"max_iterations": args.max_iterations, "auto_plan": False, **traits})
    loop = build_loop(settings)
    rows = []
    for case in cases()[args.offset :][: args.limit]:
        started = time.monotonic()
        run = loop.run(case.task)
        if not run.verified and run.outcome != "error":  # as %%hint does
            found = run
            run = small_fix.search(found, lambda code, found=found: loop.recheck(found, code))
        row = row_of(
            case.id, case.task.initial_code or "", run, loop, started, time.monotonic() - started, settings.hint_prose
        )
        rows.append(row)
        emit(row, args.jsonl)
    return rows


def replay(args: argparse.Namespace, traits: dict) -> list[dict]:
    """The hints of each recorded run, built again by the code on PYTHONPATH."""
    settings = SelfHeal(**{"auto_plan": False, **traits})
    loop = build_loop(settings)
    rows = []
    for line in Path(args.replay).read_text(encoding="utf-8").splitlines():
        recorded = json.loads(line)
        run = wire.decode(Run, recorded["run"], "run")
        started = time.monotonic()
        row = {**row_of(recorded["id"], recorded["cell"], run, loop, started, recorded["run_s"], settings.hint_prose)}
        row["first_hint_s"] = recorded["first_hint_s"]  # the live run's: a replay asks no model
        rows.append(row)
        emit(row, args.jsonl)
    return rows


# ---------------------------------------------------------------- the judge
TELLS = (
    "it holds a line of the fix",
    "it tells the student what to change",
    "it names a",
    "it names an",
    "it states a value",
)
"""The prose checks' findings that mean the prose tells the change (the others: it names
code, a line, an error or a number that is not the cell's or not computed: it is wrong)."""
_SPAN = re.compile(r"`([^`\n]+)`")
_STATED = re.compile(r"`([^`\n]+)` is `|Working out `([^`\n]+)` raises")
"""The first value a hint states: "`x` is `v`", or that working it out raises."""
_NEXT_STEP = re.compile(
    r"\?|(?:^|[.:!]\s+)(?:[Nn]ext step|[Ww]ork (?:it )?(?:out|through)|[Ll]ook at|[Tt]ry|[Cc]ompare)\b"
)
"""A question, or a sentence that starts with something to do."""


def _held(row: dict) -> tuple[Facts, HeldFix] | None:
    if not row.get("fix"):
        return None
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
    return facts, held


def differing(row: dict, loop):  # type: ignore[no-untyped-def]
    """What the row's two runs show (``teaching.why.Found``; None without a fix)."""
    from selfheal_jupyter.teaching import why

    both = _held(row)
    if both is None:
        return None
    facts, held = both
    run = Run(task=Task(prompt="", initial_code=row["cell"], tests=row.get("tests")))
    found = why.find(
        row["cell"],
        held.code,
        facts.changed_lines,
        facts.failing_line,
        lambda code, prelude: loop.execute(run, code, prelude=prelude),
    )
    return found


def _plain_value(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.endswith("...") or text.endswith("...]")
    return True


def hint_checks(text: str, level: int, row: dict, found) -> dict:  # type: ignore[no-untyped-def]
    """The program's checks on one shown hint (``found``: what the two runs show)."""
    both = _held(row)
    cell = row["cell"]
    flat_cell = re.sub(r"\s+", "", cell)
    said_lines = {
        int(n) for m in re.finditer(r"(?i)\blines? ((?:\d+(?:, | and )?)+)", text) for n in re.findall(r"\d+", m[1])
    }
    out = {
        "words": 20 <= len(text.split()) <= 160,
        "next_step": bool(_NEXT_STEP.search(text)),
        "own_code": all(re.sub(r"\s+", "", s) in flat_cell or _plain_value(s) for s in _SPAN.findall(text)),
    }
    if both is not None and found is not None:
        facts, held = both
        facts.differs = found.first
        verified = tuple((d.name, v) for d, v in zip(found.differs, found.verified, strict=True))
        out["points"] = bool(said_lines & set(facts.changed_lines))
        said = prose.says_the_fix(text, facts=facts, held=replace(held, verified_values=verified))
        out["no_change"] = not said and not squashed_fix_in(text, held.lines)
        if level == 2:
            stated = _STATED.search(text)
            out["value"] = bool(stated and (stated[1] or stated[2]) in {d.name for d in found.differs})
    return out


CHECKS = {
    "points": "points at a changed line",
    "value": "level 2 names the value that differs",
    "no_change": "states no changed token",
    "own_code": "no code not in the cell",
    "words": "20–160 words",
    "next_step": "a question or next step",
}


def judge(paths: list[str]) -> list[tuple[str, list[dict]]]:
    """Every shown hint of each file scored; the prose a live run showed judged by today's checks."""
    loop = build_loop(SelfHeal(auto_plan=False))
    judged = []
    for path in paths:
        rows = []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            found = differing(row, loop)
            row["differing"] = [d.name for d in found.differs] if found is not None else []
            row["judged_hints"] = [
                hint_checks(h["text"], h["level"], row, found) for h in row["hints"] if h["level"] in (1, 2)
            ]
            both = _held(row)
            shown = [h for h in row["hints"] if h["prose"]]
            said = [prose.problems(h["prose"], facts=both[0], held=both[1]) for h in shown] if both else []
            row["judged_tells"] = sum(any(p.startswith(TELLS) for p in f) for f in said)
            row["judged_wrong"] = sum(any(not p.startswith(TELLS) for p in f) for f in said)
            rows.append(row)
            print(json.dumps({"id": row["id"], "differing": row["differing"], "checks": row["judged_hints"]}))
        judged.append((Path(path).name, rows))
    return judged


def judge_table(judged: list[tuple[str, list[dict]]]) -> None:
    print()
    print("| hints | cases | fix verified | " + " | ".join(CHECKS.values()) + " |")
    print("|---|---|---|" + "---|" * len(CHECKS))
    for label, rows in judged:
        cells = []
        for key in CHECKS:
            scored = [h[key] for r in rows for h in r["judged_hints"] if key in h]
            cells.append(f"{sum(scored)} of {len(scored)}")
        print(f"| {label} | {len(rows)} | {sum(r['verified'] for r in rows)} | " + " | ".join(cells) + " |")


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
    ap.add_argument("--offset", type=int, default=0, help="skip the first N cases")
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--replay", default=None, help="a JSONL of recorded runs: their hints built again")
    ap.add_argument("--judge", nargs="+", default=None, help="JSONL files of recorded hints to score")
    args = ap.parse_args(argv)
    if args.judge:
        judge_table(judge(args.judge))
        return 0
    rows = replay(args, traits) if args.replay else run_bench(args, traits)
    print()
    print(
        "| hints | cases | fix verified | level 1 names a changed line | prose asked / shown "
        "| shown prose that tells the change | median s to first hint |"
    )
    print("|---|---|---|---|---|---|---|")
    print(table_row("facts (hint_prose off, the default)", rows))
    with_prose = [{**r, **r["prose"]} for r in rows if "prose" in r]
    if with_prose:
        print(table_row("with prose (hint_prose on, same runs)", with_prose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
