"""Render metric summaries as plain-text tables (for the terminal and the report)."""

from __future__ import annotations

from typing import Any

ROWS: tuple[tuple[str, str], ...] = (
    ("problems", "problems"),
    ("solved", "solved (hidden tests)"),
    ("pass@1", "pass@1"),
    ("spec_kept", "spec kept (of successes)"),
    ("false_success", "false success (QA yes, hidden no)"),
    ("verified", "successes verified (checks ran)"),
    ("unverified_success", "successes that only ran"),
    ("esr", "ESR (QA passed)"),
    ("ari", "ARI (rounds to success)"),
    ("ied", "IED (errors/line, 1st)"),
    ("err", "ERR (error reduction)"),
    ("esr_s", "ESR_s (within limits)"),
    ("rounds_distribution", "LLM rounds: count"),
    ("tokens_per_solved", "tokens per solved"),
    ("wall_s_per_problem", "wall s per problem"),
    ("infra_errors", "infrastructure errors"),
)


def fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("pass@1", "esr", "esr_s", "spec_kept"):
        return f"{value:.1%}"
    if key == "rounds_distribution":
        return " ".join(f"{k}:{v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def summary_table(summary: dict[str, dict[str, Any]]) -> str:
    """One block per benchmark; one column per condition."""
    blocks = []
    for bench, conds in summary.items():
        names = [c for c in conds if not c.startswith("_")]
        header = [bench, *[_label(c, conds[c]) for c in names]]
        rows = [[label, *[fmt(key, conds[c].get(key)) for c in names]] for key, label in ROWS]
        blocks.append(_grid(header, rows))
    return "\n\n".join(blocks)


def _label(condition: str, data: dict[str, Any]) -> str:
    extra = f" (max {data.get('max_iterations')})" if condition == "loop" else ""
    if data.get("derived"):
        extra += " [from loop round 1]"
    return condition + extra


def compare_table(
    a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], names: tuple[str, str] = ("A", "B")
) -> str:
    """Two result files side by side: per benchmark and condition, A | B."""
    blocks = []
    for bench in sorted(set(a) | set(b)):
        conds = [c for c in dict.fromkeys([*a.get(bench, {}), *b.get(bench, {})]) if not c.startswith("_")]
        header = [bench]
        for c in conds:
            header += [f"{c} {names[0]}", f"{c} {names[1]}"]
        rows = []
        for key, label in ROWS:
            row = [label]
            for c in conds:
                for side in (a, b):
                    row.append(fmt(key, side.get(bench, {}).get(c, {}).get(key)))
            rows.append(row)
        blocks.append(_grid(header, rows))
    return "\n\n".join(blocks)
