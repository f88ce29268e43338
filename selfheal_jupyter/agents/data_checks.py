"""Checks QA derives from the notebook's own data for a plain question about it.

Why: a question in words (``%%agent For each month in sales, print the region with the
highest sales.``) has no asserts and no tests, so an answer that runs "passes" whatever
it prints — row numbers for months, ids for names, a table of its own. Where the
question has a shape this module reads (for each / per / by GROUP: the COLUMN with the
highest / lowest MEASURE, the total / average MEASURE, how many; per weekday), the
expected answer follows from the data itself, computed here on the host from the
user's live frames (read only) when the run starts. Each check says which terms a
printed line must show together: a group as the data names it with its answer, and no
other group or answer beside them (a line holding every name answers nothing). A
question that adds to the shape (a filter, a second group, a share, a rounding, a column
it does not read) or whose answer is no printed line (a plot, a function that returns) is
not checked: the check would compute the plain answer and refuse the right one.

What reaches the model is the check's description and, when it fails, how many rows
were not shown — never the expected values. Unlike QA's generated checks (soft: written
from the task's words) they hold the verdict: a program that prints something else is
no success (:func:`~selfheal_jupyter.loop.verdict.hold_data_checks`) and the next round
is told which checks failed; all passing makes the answer "verified by checks from your
data". Each check carries the tool's own program for the question as it reads it
(:mod:`~selfheal_jupyter.agents.data_answers`), run after a refused answer.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..model import DATA_CHECK_PREFIX, DataCheck, TestOutcome
from . import data_answers as answers

MAX_GROUPS = 24
"""More groups than this and the answer is a table, not lines to check."""
MAX_CHOICES = 200
"""The other answers a check keeps beside the groups' own (the column's most frequent
values): a line that shows every value shows some of these, and the lines stay quick to read."""
TRIGGERS = ("for each", "per", "by", "in each", "of each", "each", "for every", "every")
HIGH = ("highest", "largest", "biggest", "most", "top", "maximum", "max", "best")
LOW = ("lowest", "smallest", "least", "fewest", "minimum", "min", "worst")
MANY = ("most", "fewest", "least")
"""Superlatives that may count: "the region with the most sales" may be the most of them."""
SUM = ("total", "sum")
MEAN = ("average", "mean")
COUNT = ("how many", "count", "number of")
WEEKDAY = ("weekday", "day of the week", "days of the week", "weekdays")
QUALIFIERS = (
    *("only", "excluding", "exclude", "except", "without", "not", "other than", "minus", "net"),
    *("over", "under", "above", "below", "more than", "less than", "fewer than", "greater than"),
    *("at least", "at most", "between", "before", "after", "since", "until", "during", "within", "outside"),
    *("where", "whose", "when", "if", "unless", "first", "last", "previous", "next", "second", "third"),
    *("half", "quarter", "weekend", "weekends", "percentage", "percent", "share", "proportion", "ratio"),
    *("rate", "fraction", "rounded", "round", "thousands", "millions", "cumulative", "running"),
    *("distinct", "unique", "different", "median", "weighted", "growth", "change", "difference"),
    *("increase", "decrease"),
    *("ignoring", "ignore", "apart", "aside", "but", "leave", "leaving", "skip", "skipping", "drop", "dropping"),
    *("negative", "positive", "zero", "zeros", "nonzero", "non", "missing", "null", "nan", "empty", "valid"),
    *("latest", "earliest", "recent", "newest", "oldest", "current", "monthly", "daily", "weekly", "yearly"),
    *("annual", "annually", "quarterly", "hourly", "k", "thousand", "million", "billion", "usd", "eur"),
    *("dollars", "euros", "cents", "pct", "normalized", "normalised", "scaled", "capita"),
    *("squared", "square", "absolute", "tax", "plus", "times", "including", "overall", "grand", "twice"),
)
"""Words of a question that narrows or transforms what it asks (a filter, a share, a
rounding, a running total): the check would compute the plain answer instead."""
NOT_PRINTED = (
    *("plot", "plots", "chart", "graph", "histogram", "function", "return", "returns", "returning"),
    *("save", "file", "csv", "excel", "variable", "store", "new column", "add a column", "as a column"),
)
"""Words of a question whose answer is not printed lines (a plot, a function that
returns, a new column, a file): the check reads printed lines and would refuse the right
answer, and the tool's program only prints."""
ORDERED = (
    *("sorted", "sort", "order", "ordered", "ascending", "descending", "rank", "ranked", "ranking"),
    *("dict", "dictionary", "list", "json", "table", "dataframe", "series"),
)
"""Words of a question that asks for an order or a form: the check reads each group's
line in any order or form, but the tool's program prints plain lines in the data's own
order, so it offers none."""
PLAIN_FLOATS = 1e16
"""From here on Python prints a float with an exponent (2e+20), which the check's lines
do not read as a number."""
READ = frozenset(
    (
        *" ".join((*TRIGGERS, *HIGH, *LOW, *SUM, *MEAN, *COUNT, *WEEKDAY)).split(),
        *("a", "an", "the", "and", "is", "are", "was", "were", "be", "has", "have", "had", "did", "do"),
        *("does", "that", "which", "what", "who", "it", "its", "their", "they", "with", "in", "on", "at"),
        *("print", "show", "display", "give", "tell", "me", "find", "compute", "calculate", "get", "output"),
        *("please", "s", "name", "names", "value", "values", "row", "rows", "line", "lines", "data"),
        *("column", "columns", "each", "sold", "sell", "sells", "spent", "spend", "spends", "bought", "buy"),
        *("buys", "placed", "place", "places", "made", "make", "makes"),
    )
)
"""The words the tool's own program answers a question in full with: its shape's, and
words that ask nothing more of it."""
DATE_TEXT = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
ITEMS = re.compile(r"[,;]\s+|\s\|\s")
"""Where a line that names several groups splits into its items: a dict or a list printed
on one line (``{'jan': 'north', 'feb': 'north'}``), never a number's thousands comma."""
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w)|(?<![\w.])[-+]?\.\d+(?!\w)")
"""A printed number: 1,234.5 (a comma only between thousands, so "2021,15.0" is two), not
the digits inside a word ("q3"), and a date's "-05" is 5, not minus five."""


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.casefold().replace("'s ", " "))


def _forms(word: str) -> set[str]:
    out = {word}
    if word.endswith("ies"):
        out.add(word[:-3] + "y")
    elif word.endswith("s"):
        out.add(word[:-1])
    else:
        out.add(word + "s")
    return out


def _is_frame(value: Any) -> bool:
    return hasattr(value, "columns") and hasattr(value, "groupby") and hasattr(value, "dtypes")


def _column(frames: Mapping[str, Any], word: str) -> tuple[str, str] | None:
    """(frame, column) a word names (a column's name, case and number aside)."""
    for name, frame in frames.items():
        for column in frame.columns:
            if isinstance(column, str) and column.casefold() in _forms(word):
                return name, column
    return None


def _after(words: list[str], triggers: tuple[str, ...], frames: Mapping[str, Any]) -> tuple[str, str] | None:
    """The column named within three words after a trigger ("for each month", "by customer name")."""
    text = " ".join(words)
    for trigger in triggers:
        for m in re.finditer(rf"(?<!\w){re.escape(trigger)} ((?:\w+ ?){{1,3}})", text):
            for word in m.group(1).split():
                found = _column(frames, word)
                if found is not None:
                    return found
    return None


def _other_group(words: list[str], frames: Mapping[str, Any], group: tuple[str, str]) -> bool:
    """Whether the words group by a second column too: one right after a trigger or joined
    to it by "and" ("per month and region", "by month, then by region", "the highest sales
    per unit"; "sorted by sales" is an order). The check groups by one column only; its
    answer is not theirs."""
    text = " ".join(words)
    triggers = "|".join(re.escape(t) for t in TRIGGERS)
    for m in re.finditer(rf"(?<!\w)(?<!sorted )(?<!ordered )(?:{triggers}) (\w+)(?: and (\w+))?", text):
        for word in m.groups():
            found = _column(frames, word) if word else None
            if found is not None and found[1] != group[1]:
                return True
    return False


def _counts_a_column(words: list[str], frames: Mapping[str, Any]) -> bool:
    """ "how many units", "the number of regions": a column counted is its total or its
    distinct values, not the rows the check would count."""
    text = " ".join(words)
    for phrase in COUNT:
        for m in re.finditer(rf"(?<!\w){phrase} (?:the )?(\w+)", text):
            if _column(frames, m.group(1)) is not None:
                return True
    return False


def _superlative(words: list[str], frames: Mapping[str, Any]) -> tuple[str, str, str, bool, str] | None:
    """ "the REGION with the highest (total | average) SALES" → (frame, region, sales,
    highest?, "sum" | "mean" | "" when the words say neither)."""
    text = " ".join(words)
    extremes = "|".join(HIGH + LOW)
    means = "|".join(MEAN + SUM)
    m = re.search(rf"(\w+) (?:with|that has|having|who has) the ({extremes}) (?:({means}) )?(\w+)", text)
    if not m:
        return None
    target, measure = _column(frames, m.group(1)), _column(frames, m.group(4))
    if target is None or measure is None:
        return None
    how = "mean" if m.group(3) in MEAN else "sum" if m.group(3) else ""
    return target[0], target[1], measure[1] if measure[0] == target[0] else "", m.group(2) in HIGH, how


def _joined(frames: Mapping[str, Any], names: list[str]) -> tuple[Any, str] | None:
    """The frames ``names`` as one: itself, or two merged on the one column they share;
    with the expression a program reads it by. None where the merge would drop a group
    of the first (the group's) frame: a customer with no orders placed 0, spent 0, and
    is no line of the merged answer."""
    unique = list(dict.fromkeys(names))
    if len(unique) == 1:
        return frames[unique[0]], unique[0]
    if len(unique) != 2:
        return None
    left, right = frames[unique[0]], frames[unique[1]]
    shared = list(_shared(frames, unique))
    if len(shared) != 1 or not (left[shared[0]].is_unique or right[shared[0]].is_unique):
        return None  # many rows to many: the merge repeats each order once per duplicate customer
    if not left[shared[0]].isin(right[shared[0]]).all():
        return None
    return left.merge(right, on=shared[0]), f"{unique[0]}.merge({unique[1]}, on={shared[0]!r})"


def _number(value: Any) -> str:
    """A number term: whole numbers as integers, others with their digits (matched to the
    decimals printed)."""
    number = float(value)
    if math.isfinite(number) and number == int(number):
        return str(int(number))
    return repr(number)


def _dates(frame: Any) -> tuple[str, Any] | None:
    """The frame's one date column and its values as datetimes (a datetime column, or
    text dates)."""
    import pandas as pd

    found = []
    for column in frame.columns:
        series = frame[column]
        if str(series.dtype).startswith("datetime"):
            found.append((column, series))
        elif series.dtype == object or str(series.dtype) in ("str", "string"):
            sample = series.dropna().astype(str).head(20)
            if len(sample) and all(DATE_TEXT.match(v) for v in sample):
                parsed = pd.to_datetime(series, errors="coerce")
                if parsed.isna().sum() > series.isna().sum():
                    return None  # dates in several forms: pandas drops those unlike the first
                found.append((column, parsed))
    return found[0] if len(found) == 1 else None


def derive(question: str, values: Mapping[str, Any]) -> list[DataCheck]:
    """The checks ``question`` implies on ``values`` (the notebook's values it names);
    [] when it has no shape read here, or the data makes the answer ambiguous (ties)."""
    frames = {n: v for n, v in values.items() if _is_frame(v)}
    if not frames:
        return []
    try:
        checks = _derive(question, frames)
    except Exception:  # a question this cannot read is simply not checked
        return []
    words = _words(question)
    if _said(words, ORDERED) or _order(" ".join(words)) or not _all_read(words, frames):
        return [replace(check, program="") for check in checks]
    return checks


def _all_read(words: list[str], frames: Mapping[str, Any]) -> bool:
    """Whether every word of the question is one the shape is read from (:data:`READ`),
    a frame's or a column's name (or a part of one): the tool answers with its own
    program only then. A word beyond them may ask for more than the plain answer ("and
    how much it sold", "the grand total", "including tax", "in upper case"), which the
    check, reading one line per group, does not refuse, but the tool's program would not
    print."""
    names = {n.casefold() for n in frames}
    for frame in frames.values():
        for column in frame.columns:
            if isinstance(column, str):
                names |= {column.casefold(), *re.split(r"[_\s]+", column.casefold())}
    return all(_forms(word) & names or word in READ for word in words)


def _order(text: str) -> re.Match[str] | None:
    """ "from the most expensive category to the cheapest", "highest to lowest": an order
    of the lines asked for, not a superlative."""
    extremes = "|".join(HIGH + LOW)
    return re.search(rf"(?<!\w)(?:from )?(?:the )?(?:{extremes})(?: \w+){{0,3}}? to (?:the )?\w+", text)


def _qualified(words: list[str], frames: Mapping[str, Any]) -> bool:
    """Whether the question narrows or transforms the plain answer: a qualifier
    (:data:`QUALIFIERS`), a number ("in 2024", "top 3") or one of the data's own values
    ("for north only", "excluding jan"). Why: the check holds the verdict, so a check of
    the plain answer would refuse the right answer to such a question and verify the
    wrong one."""
    text = f" {' '.join(words)} "
    if any(w.isdigit() for w in words) or any(f" {q} " in text for q in QUALIFIERS):
        return True
    for frame in frames.values():
        for column in frame.columns:
            series = frame[column]
            if _numeric(series) or series.nunique() > 1000:
                continue
            for value in series.dropna().unique():
                said = " ".join(_words(str(value)))
                if len(said) >= 3 and f" {said} " in text:
                    return True
    return False


def _names_another_column(words: list[str], frames: Mapping[str, Any], used: set[Any]) -> bool:
    """Whether the words name a column the check does not read ("which region had the
    highest total sales in each month": the check of monthly totals reads no region; "per
    customer" beside a ``customer_id``): the question asks more than the check computes.
    A frame's name after "in" / "of" / "from" names no column here ("in sales"); elsewhere
    it may ("the count for each region in counts", a ``count`` column)."""
    for i, word in enumerate(words):
        forms = _forms(word)
        frame = any(name.casefold() in forms for name in frames)  # "orders", not ``order_id``
        if _frame_in_place(words, i, frames):
            continue
        for values in frames.values():
            for column in values.columns:
                if not isinstance(column, str) or column in used:
                    continue
                parts = set(re.split(r"[_\s]+", column.casefold()))
                if column.casefold() in forms or (not frame and len(parts) > 1 and parts & forms):
                    return True
    return False


def _frame_in_place(words: list[str], i: int, frames: Mapping[str, Any]) -> bool:
    """Whether ``words[i]`` names a frame where a frame is named: after "in" / "of" /
    "from" ("in sales" is the frame, not its ``sales`` column)."""
    return i > 0 and words[i - 1] in ("in", "of", "from") and any(n.casefold() in _forms(words[i]) for n in frames)


def _mentions(words: list[str], frames: Mapping[str, Any], column: str) -> int:
    """How many times the words name ``column``, a frame's name in place aside."""
    return sum(
        1 for i, word in enumerate(words) if column.casefold() in _forms(word) and not _frame_in_place(words, i, frames)
    )


def _said(words: list[str], kinds: tuple[str, ...]) -> list[str]:
    """The words of ``kinds`` the question says, each time it says one (phrases as one)."""
    text = " ".join(words)
    return [m.group() for k in kinds for m in re.finditer(rf"(?<!\w){re.escape(k)}(?!\w)", text)]


def _shared(frames: Mapping[str, Any], names: list[str]) -> set[Any]:
    """The columns two frames are joined on (none for one frame)."""
    unique = list(dict.fromkeys(names))
    if len(unique) != 2:
        return set()
    return set(frames[unique[0]].columns) & set(frames[unique[1]].columns)


def _frames_read(words: list[str], frames: Mapping[str, Any]) -> dict[str, Any] | None:
    """The frames the question reads: those it names, and those holding a column it
    names that none of those hold; None when a column it names is in two of them (which
    one the check read depended on the order of a set). Why: a notebook holds frames
    with the same columns (``recent = df[df.month != "mar"]``); "for each month in df"
    read ``recent`` in some kernels, and the tool's program answered for it, verified."""
    said = {name for name in frames if any(name.casefold() in _forms(w) for w in words)}
    columns = {
        name: {c for c in frame.columns if isinstance(c, str) and any(c.casefold() in _forms(w) for w in words)}
        for name, frame in frames.items()
    }
    held = set().union(*(columns[name] for name in said))
    kept = {name: frames[name] for name in sorted(frames) if name in said or columns[name] - held}
    for column in set().union(*(columns[name] for name in kept)):
        if sum(column in columns[name] for name in kept) > 1:
            return None
    return kept


def _derive(question: str, frames: Mapping[str, Any]) -> list[DataCheck]:
    words = _words(question)
    text = " ".join(words)
    read = _frames_read(words, frames)
    if not read or _qualified(words, frames) or _said(words, NOT_PRINTED):
        return []
    frames = read
    counting = bool(_said(words, COUNT))
    order = _order(text)
    unordered = _words(text[: order.start()] + text[order.end() :]) if order else words
    extremes, sums, means = _said(unordered, HIGH + LOW), _said(words, SUM), _said(words, MEAN)
    if any(w in text for w in WEEKDAY):
        # the weekdays (with their counts): a total, an average or a best per weekday is another answer
        if extremes or sums or means or (counting and _counts_a_column(words, frames)):
            return []
        if re.search(rf"(?<!\w)(?:{'|'.join(COUNT)}) (?:the )?(?:weekdays?|days?)(?!\w)", text):
            return []  # "how many weekdays are in visits": a number of days, not the rows per day
        return _per_weekday(frames, counting, words)
    group = _after(words, TRIGGERS, frames)
    if group is None or _other_group(words, frames, group):
        return []
    best = _superlative(words, frames)
    if best is not None:
        frame_name, target, measure, high, how = best
        joined = _joined(frames, [group[0], frame_name])
        if joined is None or not measure:
            return []
        # one superlative, at most the one total / average it ranks by, no count ("the
        # highest sales count"), and no column beside the three it reads
        used = {group[1], target, measure} | _shared(frames, [group[0], frame_name])
        if len(extremes) > 1 or len(sums + means) > (1 if how else 0) or counting:
            return []
        if _names_another_column(words, frames, used):
            return []
        many = bool(set(extremes) & set(MANY))
        checks = _extreme(joined, group, target, measure, high, how, many)
        if _mentions(words, frames, measure) > 1:  # "print the sales of the region with the highest sales"
            return [replace(check, program="") for check in checks]
        return checks
    if extremes:  # "the highest total sales per month", "which region had the highest total"
        return []
    agg = "sum" if sums else ""
    agg = "mean" if means else agg
    if agg:
        measured = _measure(words, frames, agg)
        if measured is None or (sums and means) or counting:
            return []
        joined = _joined(frames, [group[0], measured[0]])
        used = {group[1], measured[1]} | _shared(frames, [group[0], measured[0]])
        if joined is None or _names_another_column(words, frames, used):
            return []
        frame, source = joined
        values = frame.groupby(group[1])[measured[1]].agg(agg)
        what = f"each `{group[1]}` of `{group[0]}` with its {'total' if agg == 'sum' else 'average'} `{measured[1]}`"
        program = _keyed(frame, group[1], answers.aggregate(source, group[1], measured[1], agg))
        if any(isinstance(v, float) and abs(v) >= PLAIN_FLOATS for v in values.tolist()):
            program = ""  # it would print 2e+20, a number no line shows: its own check would refuse it
        return _rows(what, [[g, _number(v)] for g, v in values.items()], f"`{group[1]}`", program=program)
    if counting and not _counts_a_column(words, frames):
        counted = _counted(words, frames, group)
        if counted == "":
            return []
        joined = _joined(frames, [group[0], counted]) if counted else (frames[group[0]], group[0])
        used = {group[1]} | _shared(frames, [group[0], counted or group[0]])
        if joined is None or _names_another_column(words, frames, used):
            return []
        frame, source = joined
        sizes = frame.groupby(group[1]).size()
        counts = [[g, str(int(n))] for g, n in sizes.items()]
        program = _keyed(frame, group[1], answers.count(source, group[1]))
        return _rows(f"each `{group[1]}` of `{group[0]}` with its count", counts, f"`{group[1]}`", program=program)
    return []


def _measure(words: list[str], frames: Mapping[str, Any], agg: str) -> tuple[str, str] | None:
    """The numeric column after "total" / "average" (or the one numeric column the words name)."""
    keys = SUM if agg == "sum" else MEAN
    for i, word in enumerate(words):
        if word in keys:
            for after in words[i + 1 : i + 4]:
                found = _column(frames, after)
                if found is not None and _numeric(frames[found[0]][found[1]]):
                    return found
    named = [_column(frames, w) for w in words]
    numeric = [f for f in dict.fromkeys(named) if f is not None and _numeric(frames[f[0]][f[1]])]
    return numeric[0] if len(numeric) == 1 else None


def _counted(words: list[str], frames: Mapping[str, Any], group: tuple[str, str]) -> str | None:
    """The frame whose rows are counted ("how many orders"), when not the group's own;
    "" when the words name another frame but count something else ("how many customers
    per region placed orders": the customers, among those with orders)."""
    named = [name for word in words for name in frames if name != group[0] and name.casefold() in _forms(word)]
    if not named:
        return None
    text = " ".join(words)
    said = re.search(rf"(?<!\w)(?:{'|'.join(COUNT)}) (?:the )?(\w+)", text)
    return named[0] if said and named[0].casefold() in _forms(said.group(1)) else ""


def _numeric(series: Any) -> bool:
    return str(series.dtype).startswith(("int", "float", "uint"))


def _winners(frame: Any, group: str, target: str, measure: str, high: bool, how: str) -> list[list[Any]] | None:
    """Each group with its ``target`` of highest (lowest) ``measure`` aggregated by ``how``;
    None on a tie (either answer is right)."""
    summed = frame.groupby([group, target], sort=False)[measure].agg(how).reset_index()
    rows = []
    for key, part in summed.groupby(group, sort=False):
        ranked = part.sort_values(measure, ascending=not high)
        if len(ranked) > 1 and ranked[measure].iloc[0] == ranked[measure].iloc[1]:
            return None
        rows.append([key, ranked[target].iloc[0]])
    return rows


def _extreme(
    joined: tuple[Any, str],
    group: tuple[str, str],
    target: str,
    measure: str,
    high: bool,
    how: str,
    many: bool = False,
) -> list[DataCheck]:
    """The winners by ``how``; when the words say neither total nor average, "the region
    with the highest sales" may mean the highest total or the highest single sale, and
    "the most sales" (``many``) also the most of them: checked only where all give the
    same region."""
    frame, source = joined
    if not _numeric(frame[measure]):
        return []
    if not high and (frame.groupby(group[1])[target].nunique() < frame[target].nunique()).any():
        return []  # a region with no sales in a month has the lowest (none) or none at all: unsaid
    rows = _winners(frame, group[1], target, measure, high, how or "sum")
    readings = ["max" if high else "min", *(["count"] if many else [])] if not how else []
    if rows is None or any(rows != _winners(frame, group[1], target, measure, high, r) for r in readings):
        return []
    word = ("highest" if high else "lowest") + {"sum": " total", "mean": " average"}.get(how, "")
    what = f"each `{group[1]}` of `{group[0]}` with the `{target}` of {word} `{measure}`"
    others = frame[target].value_counts().index[:MAX_CHOICES]
    program = _keyed(frame, group[1], answers.extreme(source, group[1], target, measure, high, how or "sum"))
    return _rows(what, rows, f"`{group[1]}`", choices=[row[1] for row in rows] + list(others), program=program)


def _per_weekday(frames: Mapping[str, Any], counting: bool, words: list[str]) -> list[DataCheck]:
    found = [(name, dates) for name, frame in frames.items() if (dates := _dates(frame)) is not None]
    if len(found) != 1:
        return []
    name, (column, dates) = found[0]
    if _names_another_column(words, frames, {column}):  # "the total sales per weekday"
        return []
    days = dates.dropna().dt.day_name().value_counts()
    program = answers.weekdays(name, column, counting) if isinstance(column, str) else ""
    if not counting and _each_row(words, frames, column):
        program = ""  # the weekday of each date is one line per row; the program prints each day once
    if counting:
        counts = [[d, str(int(n))] for d, n in days.items()]
        return _rows(f"each weekday of `{name}` (by name) with its count", counts, "weekday", program=program)
    week = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    absent = [d for d in week if d not in days.index]
    return _rows(
        f"each weekday of `{name}` by name", [[d] for d in days.index], "weekday", choices=absent, program=program
    )


def _each_row(words: list[str], frames: Mapping[str, Any], column: Any) -> bool:
    """ "the weekday of each date", "for every row in visits": one answer per row, not
    per weekday."""
    rows = {"row", "rows", "entry", "entries", "record", "records", str(column).casefold()}
    rows |= {name.casefold() for name in frames}
    text = " ".join(words)
    for m in re.finditer(r"(?<!\w)(?:each|every)((?: \w+){1,3})", text):
        if any(_forms(word) & rows for word in m.group(1).split()):
            return True
    return False


def _text(value: Any) -> str:
    """A value as a program prints it: a date at midnight as its date (a group by day)."""
    if hasattr(value, "normalize") and hasattr(value, "strftime") and value == value.normalize():
        return str(value.strftime("%Y-%m-%d"))
    return str(value)


def _keyed(frame: Any, group: Any, program: str) -> str:
    """``program``, or none where its printed keys would not read as the check's: a
    column named by a non-string, or dates (a program prints a day as "2024-01-05
    00:00:00", the check as "2024-01-05")."""
    if not isinstance(group, str) or str(frame[group].dtype).startswith("datetime"):
        return ""
    return program


def _rows(
    what: str, rows: list[list[Any]], per: str, choices: list[Any] | None = None, program: str = ""
) -> list[DataCheck]:
    """The check, or none for more groups than :data:`MAX_GROUPS` or for groups the same
    but for letter case or spacing ("North", "north") or blank: a printed line cannot tell
    them apart. A blank choice (a region "") is no answer a line could show. ``per``: what
    a line is for, named in the check's words (a small model asked for "the region per
    month" grouped by region until it was told "one line per `month`")."""
    terms = [[_text(t) for t in row] for row in rows]
    keys = {_plain(row[0]) for row in terms}
    if not rows or len(rows) > MAX_GROUPS or len(keys) < len(terms) or "" in keys:
        return []
    source = f"{DATA_CHECK_PREFIX}{what}; print one line per {per} ({len(terms)} lines)"
    shown = [text for c in choices or [] if _plain(text := _text(c))]
    return [DataCheck(source=source, rows=terms, choices=shown, program=program)]


# --------------------------------------------------------------------------- checking
@dataclass
class _Line:
    """What one printed line shows: the groups it names, the text answers on it, its
    other numbers (not a group's, not a row label)."""

    keys: set[str]
    texts: set[str]
    numbers: list[str]


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def _is_number(term: str) -> bool:
    return NUMBER.fullmatch(term) is not None


def _value(found: str) -> float:
    return float(found.replace(",", ""))


def _near(found: str) -> tuple[float, float]:
    """The values a printed number shows: itself or, printed with decimals, what rounds to
    it (525 and 525.00 show 525, 3.2 shows 3.25, 1,234 shows 1234; a whole 2 is no average
    of 1.5)."""
    value, places = _value(found), len(found.partition(".")[2])
    margin = 0.5 * 10**-places + 1e-9 if places else 0.0
    return value - margin, value + margin


def _shows(found: str, want: str) -> bool:
    low, high = _near(found)
    return low <= float(want) <= high


def _read(line: str, words: re.Pattern[str] | None, keys: set[str], choices: set[str]) -> _Line:
    """The line as the check reads it. Text terms first, longest first (a group "North
    East" is not the group "North" too): the first group named is the line's, a later one
    is another group, unless answers are groups too (a team's best opponent); then
    numbers: a whole number that starts the line before the group it labels is a row
    label (pandas' index, "1."), neither an answer nor another answer; the first number
    that is a group (a year, an id) is the line's group."""
    terms = words.findall(line) if words else []
    group = next((t for t in terms if t in keys), None)
    if group is not None:
        terms.remove(group)
    found = {t for t in terms if t in keys and t not in choices} | ({group} if group else set())
    rest = words.sub(" ; ", line) if words else line
    numbers = [m.group() for m in NUMBER.finditer(rest)]
    numeric_keys = {k for k in keys if _is_number(k)}

    def is_key(found: str, key: str) -> bool:
        return _value(found) == float(key)

    names_group = bool(found) or any(is_key(n, k) for n in numbers[1:] for k in numeric_keys)
    first = numbers[0] if numbers else ""
    if (
        names_group
        and first.isdigit()
        and rest.lstrip().startswith(first)
        and not any(is_key(first, k) for k in numeric_keys)
    ):
        numbers = numbers[1:]
    for i, number in enumerate(numbers):
        key = next((k for k in numeric_keys if is_key(number, k)), None)
        if key is not None:
            found.add(key)
            del numbers[i]
            break
    return _Line(keys=found, texts={t for t in terms if t in choices}, numbers=numbers)


def _items(line: str, words: re.Pattern[str] | None, keys: set[str], choices: set[str]) -> list[_Line]:
    """The line as one, or, when it names several groups, as its items: a dict of the
    answers on one line is one answer per group; a line with every region for a month still
    names one group with several answers, and a dict of the whole frame has no item that
    holds a group with its answer."""
    whole = _read(line, words, keys, choices)
    items = [part for part in ITEMS.split(line) if part.strip()]
    if len(whole.keys) < 2 or len(items) < 2:
        return [whole]
    return [_read(part, words, keys, choices) for part in items]


def _answers(line: _Line, numbers: list[tuple[float, str]], answer: str) -> set[str]:
    """The answers a line shows: its text choices, and each number as the choices it
    rounds from (``numbers``: by value; the row's own answer first, so 3.2 shows 3.25, not
    also a 3.24 of another group)."""
    shown = set(line.texts)
    for number in line.numbers:
        if _is_number(answer) and _shows(number, answer):
            shown.add(answer)
            continue
        low, high = _near(number)
        at = bisect.bisect_left(numbers, (low, ""))
        while at < len(numbers) and numbers[at][0] <= high:
            shown.add(numbers[at][1])
            at += 1
    return shown


def _verdicts(check: DataCheck, lines: list[str]) -> tuple[int, int, int, int]:
    """(rows not shown, rows shown with another answer, lines naming a group the data does
    not hold, rows whose name answer is shown as a whole number: a row label, as
    ``idxmax`` gives, not the name it labels). A row is shown by a line that names its group and no other with its answer
    and no other answer the column could give; and no line may name that group with
    another answer: a line (or lines) holding every region for a month, a dict of the
    whole frame, or the frame itself answer nothing. A check of groups alone (the weekdays
    the data holds) has the others as its choices: all seven days printed are not the
    days of the data."""
    rows = [[_plain(t) for t in row] for row in check.rows]
    keys = {row[0] for row in rows}
    choices = list(dict.fromkeys(_plain(c) for c in check.choices)) or list(
        dict.fromkeys(row[1] for row in rows if len(row) > 1)
    )
    texts = sorted({t for t in [*keys, *choices] if not _is_number(t)}, key=len, reverse=True)
    words = re.compile(rf"(?<!\w)(?:{'|'.join(map(re.escape, texts))})(?!\w)") if texts else None
    numbers = sorted((_value(c), c) for c in choices if _is_number(c))
    read = [item for line in lines for item in _items(line, words, keys, set(choices))]
    missing = ambiguous = labels = 0
    for row in rows:
        key, answer = row[0], (row[1] if len(row) > 1 else "")
        lines_of = [line for line in read if line.keys == {key}]
        own = [_answers(line, numbers, answer) for line in lines_of]
        if answer and any(shown - {answer} for shown in own):
            ambiguous += 1
            missing += 1
        elif not any(shown == ({answer} if answer else set()) for shown in own):
            missing += 1
            if (
                answer
                and not _is_number(answer)
                and any(not ln.texts and any(n.isdigit() for n in ln.numbers) for ln in lines_of)
            ):
                labels += 1
    groups_alone = all(len(row) == 1 for row in rows)
    extra = sum(1 for line in read if not line.keys and line.texts) if groups_alone else 0
    return missing, ambiguous, extra, labels


def run_checks(checks: list[DataCheck], stdout: str) -> list[TestOutcome]:
    """Each check against what a program printed: passed when every row is shown on a line
    of its own (:func:`_verdicts`); the message counts the rows missing, never their values."""
    lines = [_plain(ln) for ln in stdout.splitlines() if ln.strip()]
    out = []
    for check in checks:
        missing, ambiguous, extra, labels = _verdicts(check, lines)
        said = [f"{extra} lines name a group the data does not hold"] if extra else []
        if missing:
            others = f"; {ambiguous} show a group with another answer too" if ambiguous else ""
            said.append(f"{missing} of {len(check.rows)} expected lines are not printed{others}")
        if labels:
            said.append(
                f"{labels} show a whole number where the answer is a name from the data: a row label "
                "(what idxmax gives), not the name it labels; look the name up in its column"
            )
        message = (
            "; ".join(said) + " (one line per group: its name in the data and its one answer, no other group or "
            "answer; compare each answer with the data)"
            if said
            else ""
        )
        out.append(TestOutcome(source=check.source, passed=not (missing or extra), message=message))
    return out
