"""``selfheal eval report``: the table and a plot (pass rate per round, loop vs
baseline) in one self-contained HTML file (the PNG is embedded as base64)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from .table import summary_table


def plot_png(summary: dict[str, dict[str, Any]]) -> bytes:
    """Pass rate (hidden tests) by the round a run stopped at; one panel per benchmark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(summary)
    fig, axes = plt.subplots(1, max(1, len(benches)), figsize=(5 * max(1, len(benches)), 3.6), squeeze=False)
    for ax, bench in zip(axes[0], benches, strict=False):
        conds = {c: d for c, d in summary[bench].items() if not c.startswith("_")}
        width = max((len(d["pass_by_round"]) for d in conds.values()), default=1)
        for cond, data in conds.items():
            curve = list(data["pass_by_round"])
            if not curve:
                continue
            if cond == "baseline":  # one round: flat from there on
                curve = curve + [curve[-1]] * (width - len(curve))
                ax.plot(
                    range(len(curve)),
                    [100 * v for v in curve],
                    "--",
                    marker="s",
                    label=f"single pass ({data['pass@1']:.0%})",
                )
            else:
                ax.plot(range(len(curve)), [100 * v for v in curve], marker="o", label=f"{cond} ({data['pass@1']:.0%})")
        ax.set_title(f"{bench} (n={next(iter(conds.values()))['problems'] if conds else 0})")
        ax.set_xlabel("round the run stopped at (0 = given program)")
        ax.set_ylabel("solved by hidden tests (%)")
        ax.set_xticks(range(width))
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def render_html(summary: dict[str, dict[str, Any]], *, title: str = "selfheal eval") -> str:
    png = base64.b64encode(plot_png(summary)).decode("ascii")
    metas = {b: d.get("_meta", {}) for b, d in summary.items()}
    feedback = {
        b: {c: d.get("feedback") for c, d in conds.items() if not c.startswith("_")} for b, conds in summary.items()
    }
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}
pre{{background:#f6f8fa;padding:1em;overflow-x:auto}}</style></head>
<body><h1>{html.escape(title)}</h1>
<p>pass@1 is decided by each benchmark's hidden tests, run in the sandbox on the program a
run ended with. The loop's QA never saw them; its feedback came only from what a user
has (see "feedback used" below). ESR, ARI, IED, ERR and ESR_s are computed from the run
records by <code>selfheal_jupyter.metrics</code>. "spec kept" is the share of successes
that started from the user's code (repair, exercises) whose final program kept every
original assert and test (checked again from the record by
<code>selfheal_jupyter.spec.guard</code>); "false success" counts runs whose loop said success
while the hidden tests said no.</p>
<h2>Metrics</h2><pre>{html.escape(summary_table(summary))}</pre>
<h2>Pass rate per round, loop vs single pass</h2>
<img alt="pass rate per round" src="data:image/png;base64,{png}">
<h2>Feedback used by the loop's QA</h2><pre>{html.escape(json.dumps(feedback, indent=2))}</pre>
<h2>Model, image and package versions</h2><pre>{html.escape(json.dumps(metas, indent=2))}</pre>
</body></html>
"""


def write_report(summary: dict[str, dict[str, Any]], out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.html`` and ``summary.json`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / "report.html"
    json_path = out_dir / "summary.json"
    html_path.write_text(render_html(summary), encoding="utf-8")
    json_path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return html_path, json_path
