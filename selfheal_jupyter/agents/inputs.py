"""What the model is told about notebook inputs: names, types, shapes — never values.

The planner and developer need to know that ``df`` is a DataFrame with columns
``a: int64, b: object`` to write code against it; they never need (and must never
receive) the data itself: not a string's text (an ``api_key`` is a ``str``), not a
number, not a dict's keys. Descriptions are short so prompts stay small.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..model import ColumnInfo, InputDescription, NotebookContext
from ..sandbox.serialize import Pickled

MAX_COLUMNS = 30
KIND_SAMPLE = 50
"""How many of a text column's values are looked at for their types (never sent)."""
TEXT_DTYPES = ("object", "category", "str", "string")


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    root = module.split(".")[0]
    alias = {"pandas": "pandas", "numpy": "numpy"}.get(root, module)
    return f"{alias}.{cls.__qualname__}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


DATE_TEXT = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2})?)?|\d{1,2}/\d{1,2}/\d{2,4}|\d{4}/\d{1,2}/\d{1,2}"
)
NUMBER_TEXT = re.compile(r"\s*[-+]?(\d[\d,]*(\.\d*)?|\.\d+)\s*")
DATES_AS_TEXT = "dates as text"
NUMBERS_AS_TEXT = "numbers as text"


def _kinds(values: Any) -> list[str]:
    """The Python types of a few non-missing values of a column (``str``, ``int``...);
    text that is all dates or all numbers says so ("dates as text"): the kind of value
    it holds, never the value."""
    kinds: dict[str, None] = {}
    texts: list[str] = []
    try:
        head = values.dropna().head(KIND_SAMPLE) if hasattr(values, "dropna") else list(values)[:KIND_SAMPLE]
        for item in head:
            kinds.setdefault(type(item).__name__, None)
            if isinstance(item, str):
                texts.append(item)
    except Exception:
        return []
    out = list(kinds)[:3]
    if texts and len(kinds) == 1:
        if all(DATE_TEXT.fullmatch(t.strip()) for t in texts):
            out.append(DATES_AS_TEXT)
        elif all(NUMBER_TEXT.fullmatch(t) for t in texts):
            out.append(NUMBERS_AS_TEXT)
    return out


def columns_of(value: Any) -> list[ColumnInfo]:
    """A DataFrame's columns (or a Series as its one column): name, dtype and, for an
    ``object`` or ``category`` column, the types of a few of its values. Duck-typed, so
    pandas is not imported here; [] for anything else."""
    columns = getattr(value, "columns", None)
    dtypes = getattr(value, "dtypes", None)
    try:
        if columns is not None and dtypes is not None:
            out = []
            for name, dtype in list(zip(columns, dtypes, strict=False))[:MAX_COLUMNS]:
                kinds = []
                if str(dtype) in TEXT_DTYPES:
                    column = value[name]
                    kinds = _kinds(list(column.cat.categories[:KIND_SAMPLE]) if str(dtype) == "category" else column)
                out.append(ColumnInfo(str(name), str(dtype), kinds))
            return out
        dtype = getattr(value, "dtype", None)
        if dtype is not None and hasattr(value, "index") and hasattr(value, "name"):  # a Series
            kinds = _kinds(value) if str(dtype) in TEXT_DTYPES else []
            return [ColumnInfo(str(value.name), str(dtype), kinds)]
    except Exception:
        return []
    return []


def _summary(value: Any) -> str:
    # pandas DataFrame / Series, numpy arrays: duck-typed so neither is imported here.
    columns = getattr(value, "columns", None)
    dtypes = getattr(value, "dtypes", None)
    shape = getattr(value, "shape", None)
    if columns is not None and dtypes is not None and shape is not None:
        cols = [c.text() for c in columns_of(value)]
        more = f", … (+{len(columns) - MAX_COLUMNS} columns)" if len(columns) > MAX_COLUMNS else ""
        index = getattr(value, "index", None)
        index_name = getattr(index, "name", None)
        index_note = f"; index {index_name!r}" if index_name is not None else ""
        return f"{shape[0]} rows × {shape[1]} columns ({', '.join(cols)}{more}){index_note}"
    if getattr(value, "dtype", None) is not None and shape is not None:
        name = getattr(value, "name", None)
        named = f", name {name!r}" if name is not None else ""
        found = columns_of(value)
        of = f" ({', '.join(found[0].kinds)})" if found and found[0].kinds else ""
        return f"shape {tuple(shape)}, dtype {value.dtype}{of}{named}"
    if isinstance(value, (str, bytes)):
        return f"length {len(value)}"  # never the text: it may be a key, a password, a name
    if isinstance(value, (bool, int, float, complex)) or value is None:
        return ""  # the type says it all; the number is the user's data
    if isinstance(value, Mapping):
        kinds = sorted({type(k).__name__ for k in list(value)[:100]})
        of = f" of {', '.join(kinds)}" if kinds else ""
        return f"{len(value)} keys{of}"  # keys are data too (names, ids, tokens)
    if isinstance(value, (list, tuple, set, frozenset)):
        kinds = sorted({type(v).__name__ for v in list(value)[:100]})
        of = f" of {', '.join(kinds)}" if kinds else ""
        return f"length {len(value)}{of}"
    return ""


def describe_input(name: str, value: Any) -> InputDescription:
    if isinstance(value, Pickled) and value.type:  # bytes only: as their owner described them
        return InputDescription(name=name, type=value.type, summary=value.summary)
    try:
        summary = _summary(value)
    except Exception:
        summary = ""
    return InputDescription(name=name, type=_type_name(value), summary=summary)


def describe_inputs(inputs: Mapping[str, Any]) -> list[InputDescription]:
    """One description per input, in name order."""
    return [describe_input(name, inputs[name]) for name in sorted(inputs)]


INPUTS_HEADER = (
    "Inputs (already defined as global variables holding the user's real data: use them "
    "as they are; never create sample data for them, load or redefine them):"
)


def format_inputs(descriptions: list[InputDescription]) -> str:
    """The prompt lines for the inputs ("" when there are none)."""
    lines = []
    for d in descriptions:
        detail = f" — {d.summary}" if d.summary else ""
        lines.append(f"- `{d.name}`: {d.type}{detail}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- notebook context
DATA_HEADER = (
    "From the user's notebook: data already defined when the program starts, holding the "
    "user's real values (use them as they are; never replace them, re-create them or make "
    "up example data for them):"
)
DATA_TERMS = (
    "Print answers about this data in the user's terms: the names it holds (region names, "
    "customer names; weekday and month names via `.dt.day_name()` / `.dt.month_name()`), "
    "never row positions, index numbers or ids standing for them."
)
"""Only for a program written to answer the task: a repair of the user's own code prints
what the user's code prints (about 60 prompt tokens not read per heal request)."""
DATA_KEEP = (
    "Leave these values as they are (no new column, converted dtype, `inplace=True` or "
    "`.append` on them, beyond what the user's own code does): work on a copy, e.g. `d = df.copy()`."
)
CODE_HEADER = (
    "From the user's notebook: imports and definitions already made when the program "
    "starts (use them; do not re-import or redefine them, except to fix a bug inside one "
    "of the user's functions):"
)
UNAVAILABLE_HEADER = (
    "Named in the notebook but NOT available in the sandbox (do not use them and do "
    "not make up stand-ins; if the task cannot be done without one, print why):"
)


def format_context(ctx: NotebookContext | None, *, answers: bool = True) -> str:
    """The prompt text for a context: kinds, types, shapes, signatures; never values.

    ``answers``: the program is written to answer the task (not the user's own code
    repaired), so it is told how to name what it prints (:data:`DATA_TERMS`)."""
    if ctx is None or not ctx.entries:
        return ""
    data = [f"- `{e.name}`: {e.summary or e.type}" for e in ctx.available if e.kind == "value"]
    code = [f"- `{e.name}`: {e.summary or e.type}" for e in ctx.available if e.kind != "value"]
    out = []
    if data:
        terms = [DATA_TERMS, DATA_KEEP] if answers else [DATA_KEEP]
        out.append(DATA_HEADER + "\n" + "\n".join(data) + "\n" + " ".join(terms))
    if code:
        out.append(CODE_HEADER + "\n" + "\n".join(code))
    if ctx.unavailable:
        out.append(
            UNAVAILABLE_HEADER
            + "\n"
            + "\n".join(f"- `{e.name}`" + (f" ({e.type})" if e.type else "") for e in ctx.unavailable)
        )
    return "\n\n".join(out)
