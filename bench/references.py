"""Do the correct references still pass? (issue 41, point 3: false rejections)

    python bench/references.py [--corpus NAME ...] [--json FILE]

A checker that trusts only data must not reject a correct program. This runs every
correct reference of the project's corpora through the real sandbox, as the tools judge
it, and prints per corpus how many pass, then each one that does not and why:

- ``exercises`` / ``notebooks``: the reference under the hidden grader (``selfheal
  eval``'s score) and, for the exercises, under its starter's own asserts checked
  where they stand by the checker (what QA runs in a heal);
- ``repair``: ``solution_ref.py`` of every gradable task under its grader;
  ``repair-excluded``: the same for the tasks left out as needing an in-process grader
  (``repair.NEEDS_IN_PROCESS_GRADER``), to see which could come back;
- ``spec-corpus``: every correct solution of ``tests/spec_corpus`` with the original
  cell's asserts checked by the checker;
- ``humaneval``: the 164 canonical solutions under their hidden tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.eval import benchmarks, humaneval, repair, scoring
from selfheal_jupyter.sandbox.docker import DockerSandbox
from selfheal_jupyter.spec import guard as spec
from tests.unit.test_spec_corpus import load_corpus

CORPORA = ("exercises", "notebooks", "repair", "repair-excluded", "spec-corpus", "humaneval")


def _checked(result) -> tuple[bool, str]:
    """Ran to its end and every check the checker ran held."""
    bad = [t for t in result.tests if not t.passed]
    if result.status != "ok":
        return False, f"{result.status}: {result.error.type if result.error else ''} {result.stderr[-200:]}"
    return not bad, "; ".join(f"{t.source[:60]} -> {t.message[:120]}" for t in bad)


def run(box: DockerSandbox, corpus: str) -> list[tuple[str, bool, str]]:
    limits = SelfHeal(**scoring.HIDDEN_OPTIONS).limits()
    rows: list[tuple[str, bool, str]] = []
    if corpus in ("exercises", "notebooks"):
        for p in benchmarks.load(corpus):
            graded = scoring.score(box, p, p.hidden["solution"], limits=limits)
            rows.append((f"{p.id} (grader)", graded.passed, graded.detail))
            if corpus == "exercises":
                user = spec.extract(p.initial_code)
                asserts = spec.checked_statements(user, p.hidden["solution"])
                ok, why = _checked(box.execute(p.hidden["solution"], asserts=asserts))
                rows.append((f"{p.id} (its asserts)", ok, why))
    elif corpus in ("repair", "repair-excluded"):
        problems = repair.load() if corpus == "repair" else _excluded_repair_problems()
        for p in problems:
            reference = (Path(p.hidden["dir"]) / "solution_ref.py").read_text()
            graded = scoring.score(box, p, reference, limits=limits)
            rows.append((p.id, graded.passed, graded.detail))
    elif corpus == "spec-corpus":
        for ex in load_corpus():
            user = spec.extract(ex.original)
            for i, program in enumerate(ex.legit):
                ok, why = _checked(box.execute(program, asserts=spec.checked_statements(user, program)))
                rows.append((f"{ex.name} #{i}", ok, why))
    elif corpus == "humaneval":
        records = {r["task_id"]: r for r in humaneval.records()}
        for p in humaneval.load():
            code = records[p.id]["prompt"] + records[p.id]["canonical_solution"]
            graded = scoring.score(box, p, code, limits=limits)
            rows.append((p.id, graded.passed, graded.detail))
    return rows


def _excluded_repair_problems() -> list:
    """The repair tasks left out of the benchmark, loaded as the benchmark loads the rest."""
    excluded = repair.NEEDS_IN_PROCESS_GRADER
    try:
        repair.NEEDS_IN_PROCESS_GRADER = frozenset()  # read by repair.task_dirs()
        return [p for p in repair.load() if p.id in excluded]
    finally:
        repair.NEEDS_IN_PROCESS_GRADER = excluded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="*", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--json", type=Path, help="also write every row here")
    args = parser.parse_args()
    box = DockerSandbox.from_config(SelfHeal(pool_size=1))
    box.start()
    table: dict[str, list] = {}
    try:
        for corpus in args.corpus:
            table[corpus] = run(box, corpus)
    finally:
        box.close()
    print(f"{'corpus':<18}{'checked':>9}{'passed':>8}{'failed':>8}")
    for corpus, rows in table.items():
        passed = sum(ok for _, ok, _ in rows)
        print(f"{corpus:<18}{len(rows):>9}{passed:>8}{len(rows) - passed:>8}")
    for corpus, rows in table.items():
        for name, ok, why in rows:
            if not ok:
                print(f"  {corpus}: {name}: {why}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
