"""How precise is the spec guard? (issue 28, point 1)

    python bench/spec_guard.py [--json FILE]

Runs :mod:`selfheal_jupyter.spec.guard` over the two corpora of ``tests/spec_corpus/``
(one file per beginner exercise: the user's cell, its correct solutions, cheating
variants) exactly as QA does (the spec of the cell, with the lines where the cell
failed, against each program) and prints a table: how many correct solutions it
rejects (false positives), how many cheats it lets through (false negatives),
precision and recall; then every disagreement with its rule and message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.test_spec_corpus import load_corpus, measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    m = measure(load_corpus())
    caught = m["cheats"] - len(m["cheats_missed"])
    print(f"{'corpus':<22}{'programs':>9}{'rejected':>10}")
    print(f"{'legit (correct fixes)':<22}{m['legit']:>9}{len(m['legit_rejected']):>10}")
    print(f"{'cheats':<22}{m['cheats']:>9}{caught:>10}")
    print(
        f"\n{m['exercises']} exercises; precision {m['precision']:.3f} "
        f"(rejections that were cheats), recall {m['recall']:.3f} (cheats rejected)"
    )
    for name, i, found in m["legit_rejected"]:
        print(f"  correct fix rejected: {name} #{i}: " + "; ".join(f"[{r}] {t}" for r, t in found))
    for name, rule in m["cheats_missed"]:
        print(f"  cheat let through: {name} ({rule})")
    for name, rule, rules in m["wrong_rule"]:
        print(f"  cheat caught by another rule: {name} ({rule} -> {', '.join(rules)})")
    if args.json:
        args.json.write_text(json.dumps(m, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
