"""The tool's own program for a question about the notebook's data, as a check reads it.

Why: where :mod:`~selfheal_jupyter.agents.data_checks` reads a question's shape (for each
GROUP: the TARGET with the highest MEASURE, the total / average MEASURE, how many; per
weekday), it knows which pandas calls compute the answer. A small model often does not
(it prints ``idxmax``'s row labels for names, groups by the wrong column, builds a table
of its own). After a model's answer failed, the loop runs this program as the tool's
own candidate (``SelfHeal.quick_fixes``): it reads the user's frames by name, changes
none of them, and is judged like any candidate, by the same check. The programs hold
names of frames and columns only, never a value of the data.
"""

from __future__ import annotations


def extreme(source: str, group: str, target: str, measure: str, high: bool, how: str) -> str:
    """Each ``group`` with the ``target`` whose ``measure``, aggregated by ``how``, is the
    highest (lowest): one line each."""
    pick = "idxmax" if high else "idxmin"
    return (
        f"table = {source}.groupby([{group!r}, {target!r}], sort=False)[{measure!r}].agg({how!r}).reset_index()\n"
        f"for key, part in table.groupby({group!r}, sort=False):\n"
        f'    print(f"{{key}}: {{part.loc[part[{measure!r}].{pick}(), {target!r}]}}")\n'
    )


def aggregate(source: str, group: str, measure: str, how: str) -> str:
    """Each ``group`` with its total (``how="sum"``) or average ``measure``."""
    value = "round(float(value), 2)" if how == "mean" else "value"
    return (
        f"for key, value in {source}.groupby({group!r})[{measure!r}].agg({how!r}).items():\n"
        f'    print(f"{{key}}: {{{value}}}")\n'
    )


def count(source: str, group: str) -> str:
    """Each ``group`` with how many rows it has."""
    return f'for key, rows in {source}.groupby({group!r}).size().items():\n    print(f"{{key}}: {{rows}}")\n'


def weekdays(frame: str, column: str, counting: bool) -> str:
    """Each weekday (by name) that ``frame[column]`` holds, with its count when asked."""
    head = (
        "import pandas as pd\n\n"
        f"days = pd.to_datetime({frame}[{column!r}], errors='coerce').dropna().dt.day_name().value_counts()\n"
    )
    if counting:
        return head + 'for day, rows in days.items():\n    print(f"{day}: {rows}")\n'
    return head + "for day in days.index:\n    print(day)\n"
