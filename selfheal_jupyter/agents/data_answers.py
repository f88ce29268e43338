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


def _plain(*names: str) -> bool:
    """Names a program can quote inside its f-string as they are (Python 3.11: no
    backslash, no quote of the f-string's own kind, no brace)."""
    return all(not set(name) & set('"\\{}\n\r') for name in names)


def _lines(line: str, pairs: str) -> str:
    """A program that prints ``line`` for each of ``pairs``: one generator expression, so
    that running it in the notebook (Insert below) binds no name there (a frame bound as
    ``part`` would be the next question's data)."""
    return f'print("\\n".join(\n    f"{line}"\n    for {pairs}\n))\n'


def extreme(source: str, group: str, target: str, measure: str, high: bool, how: str) -> str:
    """Each ``group`` with the ``target`` whose ``measure``, aggregated by ``how``, is the
    highest (lowest): one line each."""
    pick = "idxmax" if high else "idxmin"
    if not _plain(source, group, target, measure):
        return ""
    return _lines(
        f"{{key}}: {{part.loc[part[{measure!r}].{pick}(), {target!r}]}}",
        f"key, part in {source}.groupby([{group!r}, {target!r}], sort=False)[{measure!r}]"
        f".agg({how!r}).reset_index().groupby({group!r}, sort=False)",
    )


def aggregate(source: str, group: str, measure: str, how: str) -> str:
    """Each ``group`` with its total (``how="sum"``) or average ``measure``."""
    value = "round(float(value), 2)" if how == "mean" else "value"
    if not _plain(source, group, measure):
        return ""
    return _lines(
        f"{{key}}: {{{value}}}", f"key, value in {source}.groupby({group!r})[{measure!r}].agg({how!r}).items()"
    )


def count(source: str, group: str) -> str:
    """Each ``group`` with how many rows it has."""
    if not _plain(source, group):
        return ""
    return _lines("{key}: {rows}", f"key, rows in {source}.groupby({group!r}).size().items()")


def weekdays(frame: str, column: str, counting: bool) -> str:
    """Each weekday (by name) that ``frame[column]`` holds, with its count when asked."""
    if not _plain(frame, column):
        return ""
    days = f"pd.to_datetime({frame}[{column!r}], errors='coerce').dropna().dt.day_name().value_counts()"
    head = "import pandas as pd\n\n"
    if counting:
        return head + _lines("{day}: {rows}", f"day, rows in {days}.items()")
    return head + f'print("\\n".join({days}.index))\n'
