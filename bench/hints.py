"""Teaching mode on the project's own exercises: is a fix verified, do the hints point
at it, do they leak it, how long until the first hint.

    python bench/hints.py [--limit N] [--max-iterations 4] [--jsonl OUT] [--model NAME]

For each exercise (``selfheal_jupyter/eval/exercise_data``) the starter runs through the
real loop as ``%%hint`` runs it (iteration 0 is the student's code, their asserts are the
spec), with the embedded model unless ``--base-url`` names another endpoint; then levels
1 and 2 are written and checked as in the notebook. Printed per exercise as it goes
(and appended to ``--jsonl``), then the table:

* fix verified: the loop found a passing program whose output something checked;
* level 1 names a changed line: the hint names a line the verified fix changes;
* prose leaked (caught): the writer's text held a line of the fix and was asked again
  or cut back; shown with a fix line: a shown hint holds a changed line of the fix
  (its squashed text, a check apart from the leak check's own; goal 0);
* seconds to the first hint: from the start of the run to level 1 shown.
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

from selfheal_jupyter.agents.hint_facts import facts_of, leaks
from selfheal_jupyter.agents.hint_writer import HintWriter
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.eval import exercises
from selfheal_jupyter.factory import build_loop
from selfheal_jupyter.notebook.teaching import HintComposer, HintSession
from selfheal_jupyter.teaching.policy import Policy


class CountingWriter(HintWriter):
    """The hint writer, counting the replies that leaked (the composer asks again)."""

    leaked = 0

    def write(self, level, code, facts, *, leaked=None, cancel=None):  # type: ignore[no-untyped-def]
        text = super().write(level, code, facts, leaked=leaked, cancel=cancel)
        if leaks(text, facts.fix_lines):
            self.leaked += 1
        return text


def squashed_fix_in(text: str, fix_lines: list[str]) -> bool:
    flat = re.sub(r"\s+", "", text)
    return any(len(re.sub(r"\s+", "", line)) >= 6 and re.sub(r"\s+", "", line) in flat for line in fix_lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--offset", type=int, default=0, help="skip the first N exercises")
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--model", default=None)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--jsonl", default=None)
    args = ap.parse_args()
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
        session = HintSession(cell=problem.initial_code or "", run=run, facts=facts_of(run))
        writer = CountingWriter(loop.llm)
        composer = HintComposer(writer, Policy())
        hints = []
        first_s = None
        for level in (1, 2) if session.facts.verified else (1,):
            hints.append(composer.compose(level, session, None))
            session.hints.append(hints[-1])
            if first_s is None:
                first_s = time.monotonic() - started
        facts = session.facts
        said = re.search(r"(?:starts on lines?|lines? to look at:) ([\d, ]+)", hints[0].text)
        named = bool(said) and bool(set(facts.changed_lines) & {int(n) for n in re.findall(r"\d+", said[1])})
        row = {
            "id": problem.id,
            "outcome": run.outcome,
            "verified": facts.verified,
            "level1_names_changed_line": named,
            "prose_leaked": writer.leaked,
            "shown_with_fix_line": sum(squashed_fix_in(h.text, facts.fix_lines) for h in hints),
            "checks": [h.check for h in hints],
            "first_hint_s": round(first_s or 0.0, 1),
            "iterations": len(run.iterations),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
    verified = [r for r in rows if r["verified"]]
    print()
    print(
        "| exercises | fix verified | level 1 names a changed line | prose leaked (caught) "
        "| shown with a fix line | median s to first hint |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| {len(rows)} | {len(verified)} | {sum(r['level1_names_changed_line'] for r in verified)} of "
        f"{len(verified)} | {sum(r['prose_leaked'] for r in rows)} | "
        f"{sum(r['shown_with_fix_line'] for r in rows)} | "
        f"{statistics.median(r['first_hint_s'] for r in rows) if rows else 0:.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
