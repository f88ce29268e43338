"""What a failure means, worked out without the model, in milliseconds.

Why: a small model on two busy cores takes a minute or more to say anything, while most
failures of data work say what is wrong to anyone who can see the notebook's context: a
column spelt with a capital (``KeyError: 'Region'`` where ``df`` has ``region``), ``.dt``
on a column of text, arithmetic on a column of text, two arrays of different shapes. The
context (:mod:`~selfheal_jupyter.notebook.context`) holds each value's columns with their
dtypes and the kinds of their values, its shape and its attribute names — never values —
and the failing frame's locals come summarised from the sandbox. From those and the
structured error alone, :func:`explain` builds an :class:`~selfheal_jupyter.model.Explanation`:
the failing line, the exception, plain sentences, and — when the diagnosis implies one
precise change of the failing line — that edit. Nothing here parses a traceback's text or
runs code.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import keyword
import re
from collections.abc import Callable, Iterable
from functools import cached_property

from .agents.checks import comments
from .agents.inputs import DATES_AS_TEXT, NUMBERS_AS_TEXT
from .feedback import INSIDE_NOTEBOOK
from .model import NOTEBOOK_FILE, ColumnInfo, ContextEntry, ExecutionResult, Explanation, LineEdit, NotebookContext
from .source_lines import source_lines

CUTOFF = 0.75
"""How alike (difflib's ratio) a name must be to count as the one meant."""
TEXT_DTYPES = frozenset({"object", "str", "string", "category"})
SHAPE = re.compile(r"\(\s*\d+\s*(?:,\s*\d*\s*)*\)")
MAX_LISTED = 15
MAX_QUOTED = 100
"""Characters of one `quoted` name or code in a sentence: a sentence quotes a key the
candidate made (``"A" * 10**6``) and the user's column names, and goes to the model, the
panel and the terminal."""
TOP = 0
"""``LineEdit.line`` of a line added before the program's first (an import the edit needs)."""


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).casefold()


def close_name(name: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` meant by ``name``: the same but for case, spaces and
    underscores, else difflib's closest above :data:`CUTOFF`; None when none is."""
    pool = [c for c in dict.fromkeys(choices) if c != name]
    same = [c for c in pool if _norm(c) == _norm(name)]
    if len(same) == 1:
        return same[0]
    found = difflib.get_close_matches(name, pool, n=1, cutoff=CUTOFF)
    if not found:
        lowered = {c.casefold(): c for c in pool}
        found = [lowered[m] for m in difflib.get_close_matches(name.casefold(), list(lowered), n=1, cutoff=CUTOFF)]
    return found[0] if found else None


def _quoted(quote: str, text: str) -> str | None:
    """``text`` as a string literal in ``quote``s, when that literal is exactly ``text``
    (None: a name from the user's data holding a quote, backslash or line break, whose
    literal would be other code)."""
    literal = f"{quote}{text}{quote}"
    try:
        return literal if ast.literal_eval(literal) == text else None
    except (ValueError, SyntaxError):
        return None


def _identifier(name: str) -> bool:
    """``name`` can be written as a name in code (an attribute, a variable); a name from the
    user's data (a column, an attribute set by ``setattr``, a key of ``globals()``) may be
    any text."""
    return name.isidentifier() and not keyword.iskeyword(name)


def _string_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int], bool]]:
    """Where ``tree``'s string literals are, as ((line, byte column), (end line, end byte
    column), an f-string?): each f-string whole, each other string constant (a literal
    inside an f-string is the f-string's)."""
    out = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            out.append(((node.lineno, node.col_offset), end, isinstance(node, ast.JoinedStr)))
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _delimiters(text: str) -> list[str]:
    """The characters that shape an f-string, in order: its quotes, its fields' braces, a
    backslash (which a field may not hold before Python 3.12)."""
    return [c for c in text if c in "'\"{}\\"]


def _parse_line(source: str) -> tuple[ast.AST | None, str]:
    """A line parsed alone (a block's header gets a body), and the text its positions index."""
    text = source.strip()
    for candidate in (text, text + "\n    pass", text.rstrip(":")):
        try:
            return ast.parse(candidate), candidate
        except SyntaxError:
            continue
    return None, text


def _bound_by(node: ast.AST) -> set[str]:
    """Names a statement (or a whole program) binds: assignments, definitions, imports."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            out.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return out


def _reads_now(node: ast.AST) -> set[str]:
    """Names a statement reads when it runs: a value, a class's bases and body, a
    function's defaults (its body runs when it is called)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack += [*sub.args.defaults, *(d for d in sub.args.kw_defaults if d is not None)]
            stack += [] if isinstance(sub, ast.Lambda) else sub.decorator_list
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            out.add(sub.id)
        stack.extend(ast.iter_child_nodes(sub))
    return out


def _definition_of(tree: ast.Module, name: str, ready: set[str], *, functions: bool = True) -> ast.stmt | None:
    """The first top-level statement that binds ``name`` and that could run earlier: a
    one-line ``name = value``, or (``functions``) an undecorated ``def``/``class``, that
    reads only ``ready`` names when it runs (:func:`_reads_now`)."""
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (
                node.value is not None
                and node.lineno == node.end_lineno
                and [getattr(t, "id", None) for t in targets] == [name]
                and _reads_now(node) <= ready
            ):
                return node
        elif (
            functions
            and isinstance(node, (ast.FunctionDef, ast.ClassDef))
            and node.name == name
            and not node.decorator_list
            and _reads_now(node) <= ready
        ):
            return node
    return None


def _base(node: ast.expr) -> str | None:
    """The name an attribute or item chain starts from (``rows[0].qty`` → ``rows``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _changes(stmts: Iterable[ast.stmt], name: str) -> bool:
    """Whether top-level ``stmts`` bind ``name`` (again) or change its value in place (an
    item or attribute set, ``+=``, a method of it called, ``append`` in a comprehension
    too, ``global`` in a function): then which of its values an earlier line meant to
    read is not one edit's to guess (``errors = []`` before ``errors = validate(rows)``,
    ``scores = []`` before a loop that appends)."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if getattr(node, "name", None) == name or any(
                isinstance(n, ast.Global) and name in n.names for n in ast.walk(node)
            ):
                return True
            continue  # its body binds its own names
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and not isinstance(node.ctx, ast.Load)
            or isinstance(node, (ast.Attribute, ast.Subscript))
            and not isinstance(node.ctx, ast.Load)
            and _base(node) == name
            or isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _base(node.func) == name
            or isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar))
            and node.name == name
            or isinstance(node, (ast.Import, ast.ImportFrom))
            and name in {(a.asname or a.name).split(".")[0] for a in node.names}
        ):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def _names_on(source: str) -> list[str]:
    """Identifiers a line reads, in order (a line that does not parse alone: by pattern)."""
    tree, _ = _parse_line(source)
    if tree is not None:
        return list(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)))
    return list(dict.fromkeys(re.findall(r"(?<![.\w])([A-Za-z_]\w*)", source)))


def _string_literal(text: str) -> str | None:
    """``'Region'`` → ``Region`` (a KeyError's message is the key's repr)."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _column_refs(source: str) -> list[tuple[str, str, str]]:
    """``(frame, column, text)`` for each ``frame['col']`` and each ``frame.col`` before
    ``.dt`` / ``.str``, as written on the line."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\[\s*(['\"])([^'\"\]]+)\2\s*\]", source):
        out.append((m.group(1), m.group(3), m.group(0)))
    for m in re.finditer(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?=\.(?:dt|str)\b)", source):
        out.append((m.group(1), m.group(2), m.group(0)))
    return out


def _holds_text(column: ColumnInfo) -> bool:
    return column.dtype in ("str", "string") or (column.dtype in TEXT_DTYPES and "str" in column.kinds)


def _what_it_holds(column: ColumnInfo) -> str:
    kinds = [k for k in column.kinds if k != column.dtype]
    return f"dtype {column.dtype}" + (f", {', '.join(kinds)}" if kinds else "")


class _Reader:
    """One failure, read against one program and its context."""

    def __init__(
        self, result: ExecutionResult, code: str, context: NotebookContext | None, given: str | None = None
    ) -> None:
        assert result.error is not None
        self.given = given
        self.error = result.error
        self.message = result.error.message
        self.code = code
        self.context = context
        own = [f for f in self.error.frames if f.file != NOTEBOOK_FILE]
        frame = own[-1] if own else None
        self.line = self.error.line or (frame.line if frame else None)
        self.lines = lines = source_lines(code)
        """The program's lines as the AST numbers them."""
        self.source = (
            lines[self.line - 1].strip()
            if self.line and 0 < self.line <= len(lines)
            else (frame.source if frame else "")
        )
        self.raw = lines[self.line - 1] if self.line and 0 < self.line <= len(lines) else ""
        last = self.error.frames[-1] if self.error.frames else None
        self.inner = last.source if last is not None and last.file == NOTEBOOK_FILE else ""
        """The failing line inside a notebook function, when it failed there."""
        self.sentences: list[str] = []
        self.edits: list[LineEdit] = []

    # ------------------------------------------------------------------ helpers
    def say(self, sentence: str) -> None:
        self.sentences.append(sentence)

    def entry(self, name: str) -> ContextEntry | None:
        return self.context.entry(name) if self.context else None

    def column(self, frame: str, name: str) -> ColumnInfo | None:
        entry = self.entry(frame)
        if entry is None:
            return None
        return next((c for c in entry.columns if c.name == name), None)

    def frames_on_line(self) -> list[ContextEntry]:
        """The notebook's DataFrames (and Series) the failing line reads."""
        return [e for n in _names_on(self.source) if (e := self.entry(n)) is not None and e.columns]

    def local_columns(self, name: str) -> list[str]:
        """A DataFrame's columns as the sandbox summarised a local of the failing frame."""
        m = re.search(r"columns=(\[.*?\])", self.error.locals.get(name, ""))
        if not m:
            return []
        try:
            value = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            return []
        return [str(c) for c in value] if isinstance(value, list) else []

    def edit(self, old: str, new: str, line: int | None = None) -> bool:
        """Propose replacing ``old`` (once on the failing line, or on ``line``, in its code) by ``new``."""
        line = line or self.line
        raw = self.lines[line - 1] if line and 0 < line <= len(self.lines) else ""
        if (
            line
            and old
            and raw.count(old) == 1
            and self.may_edit(old, new, line)
            and not self.in_assert(line)
            and not any(e.old == old for e in self.edits)
        ):
            self.edits.append(LineEdit(line, old, new))
            return True
        return False

    def in_assert(self, line: int) -> bool:
        """Whether ``line`` is a part of an assert: an assert is the spec (the user's, which
        the spec guard refuses to see changed) or the candidate's claim; an edit of it is
        never the fix, and its refused round would count as the model's."""
        return self.tree is None or any(
            isinstance(n, ast.Assert) and n.lineno <= line <= (n.end_lineno or n.lineno) for n in ast.walk(self.tree)
        )

    def may_edit(self, old: str, new: str, line: int) -> bool:
        """Whether ``old`` on ``line`` is code, or one whole string literal, and not
        a part of a string's text; inside an f-string, only where ``new`` keeps its quotes,
        braces and backslashes as ``old`` has them (``'Regoin'`` → ``'region'``, ``valu`` →
        ``value``). An edit of a string's text would put a name from the user's data where
        braces are code, or where a quote closes the string (in an f-string, before Python
        3.12), so that it ran."""
        raw = self.lines[line - 1]
        if self.tree is None:
            return False
        at = len(raw[: raw.index(old)].encode())
        start, end = (line, at), (line, at + len(old.encode()))
        inside = [fstring for s, e, fstring in _string_spans(self.tree) if s < start < e or s < end < e]
        return all(inside) and (not inside or _delimiters(new) == _delimiters(old))

    def rename(self, name: str, meant: str) -> bool:
        """Propose ``name`` → ``meant`` where the failing line reads ``name`` once. The
        edit's text is the smallest expression around it that the line holds once, so
        that ``value`` on ``sum(values) / len(value)`` becomes ``len(value)`` →
        ``len(values)`` (the plain name is also a part of ``values``)."""
        tree, text = _parse_line(self.raw)
        if tree is None:  # a line of a longer statement: the name itself, where it is once on the line
            return len(re.findall(rf"(?<![.\w]){re.escape(name)}(?!\w)", self.raw)) == 1 and self.edit(name, meant)
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
        if len(uses) != 1 or uses[0].lineno != 1:
            return False
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        node: ast.AST | None = uses[0]
        offset = uses[0].col_offset
        while isinstance(node, (ast.expr, ast.stmt)) and node.lineno == node.end_lineno == 1:
            segment = ast.get_source_segment(text, node) or ""
            at = offset - node.col_offset
            if self.raw.count(segment) == 1 and segment[at : at + len(name)] == name:
                return self.edit(segment, segment[:at] + meant + segment[at + len(name) :])
            node = parents.get(node)
        return False

    @property
    def imported_pandas(self) -> str | None:
        """The name pandas goes by by the notebook's import or the program's own (None: neither)."""
        for entry in self.context.available if self.context else []:
            if entry.kind == "module" and entry.type == "pandas":
                return entry.name
        m = re.search(r"^\s*import\s+pandas(?:\s+as\s+(\w+))?\s*$", self.code, re.M)
        return (m.group(1) or "pandas") if m else None

    def pandas(self) -> str | None:
        """The name pandas goes by for this program (``pd``): the notebook's import, the
        program's own, or ``pd`` with an import line added before the program."""
        imported = self.imported_pandas
        if imported:
            return imported
        if "pd" in _names_on(self.code.replace("\n", " ; ")):
            return None  # something else is called pd
        self.edits.append(LineEdit(TOP, "", "import pandas as pd"))
        return "pd"

    @cached_property
    def tree(self) -> ast.Module | None:
        """The program parsed once (None: it does not parse)."""
        try:
            return ast.parse(self.code)
        except SyntaxError:
            return None

    def program_names(self) -> set[str]:
        return _bound_by(self.tree) if self.tree is not None else set()

    def missing_definition(self, name: str) -> bool:
        """Say, and undo by the tool's own edit, a top-level definition of ``name`` (an
        assignment, a ``def``, a ``class``) this program makes only after the failing line,
        or an assignment the user's given program makes and this one dropped: small models
        do both. Said always, mended only when that definition is the name's one value
        (:func:`_changes`): moving or restoring the first of several (a placeholder
        ``errors = []``) would hand an assert the placeholder to check."""
        tree = self.tree
        if tree is None:
            return False
        failing = next((n for n in tree.body if n.lineno == self.line and n.col_offset == 0), None)
        if failing is None:
            return False
        ready = set(dir(builtins)) | ({e.name for e in self.context.available} if self.context else set())
        for node in tree.body:
            if node.end_lineno is not None and node.end_lineno < failing.lineno:
                ready |= _bound_by(node)
        later = ast.Module(body=[n for n in tree.body if n.lineno > failing.lineno], type_ignores=[])
        moved = _definition_of(later, name, ready)
        if moved is not None:
            block = self.lines[moved.lineno - 1 : moved.end_lineno]
            self.say(f"`{name}` is used on line {self.line} before line {moved.lineno} defines it.")
            # the move jumps over the failing line and what follows it up to the definition:
            # none of them may change what the definition reads (`numbers.append(90)` between)
            jumped = [failing, *(n for n in later.body if n.lineno < moved.lineno)]
            if (
                not _changes([n for n in later.body if n is not moved], name)
                and not any(_changes(jumped, read) for read in _reads_now(moved))
                and self.insert_before(failing, block)
            ):
                self.edits += [LineEdit(moved.lineno + i, text, "") for i, text in enumerate(block) if text.strip()]
            return True
        if self.given is None or name in self.program_names():
            return False
        try:
            given = ast.parse(self.given)
        except SyntaxError:
            return False
        kept = _definition_of(given, name, ready, functions=False)
        if kept is None:
            return False
        text = ast.get_source_segment(self.given, kept) or ""  # the line may hold other statements
        if _changes([n for n in given.body if n is not kept], name):
            self.say(
                f"`{name}` is not defined: your program assigns it (`{text}`) and changes it after; "
                "this one dropped those lines."
            )
            return True
        self.say(f"`{name}` is not defined: your program assigns it (`{text}`) and this one dropped that line.")
        self.insert_before(failing, [text])
        return True

    def insert_before(self, statement: ast.stmt, lines: list[str]) -> bool:
        """Propose ``lines`` added before a top-level ``statement``: before its decorators,
        if it has any (between them and their ``def`` or ``class``, an assignment does not
        parse and a ``class`` takes them over)."""
        first = min([d.lineno for d in getattr(statement, "decorator_list", [])] + [statement.lineno])
        text = self.lines[first - 1]
        if any(e.line == first for e in self.edits):
            return False
        self.edits.append(LineEdit(first, text, "\n".join([*lines, text])))
        return True

    def text_columns(self) -> list[tuple[str, str, str, ColumnInfo]]:
        out = []
        for frame, col, text in _column_refs(self.source):
            column = self.column(frame, col)
            if column is not None and _holds_text(column):
                out.append((frame, col, text, column))
        return out

    def to_dates(self, refs: list[tuple[str, str, str, ColumnInfo]]) -> None:
        """Wrap each text column on the line in ``pd.to_datetime``."""
        alias = self.pandas()
        if alias is None:
            return
        for _, _, text, _ in refs:
            self.edit(text, f"{alias}.to_datetime({text})")

    # ------------------------------------------------------------------ KeyError
    def key_error(self) -> None:
        key = _string_literal(self.message)
        if key is None or self.merge_key(key):
            return
        frames = self.frames_on_line()
        for entry in frames:
            names = [c.name for c in entry.columns]
            if key not in names:
                self._missing_column(entry.name, key, names)
                return
        if frames and ".apply(" in self.source and "axis" not in self.source:
            self._apply_on_columns(key, frames[0].name)
            return
        for local in _names_on(self.source):
            names = self.local_columns(local)
            if names and key not in names:
                self._missing_column(local, key, names)
                return

    def columns_of(self, name: str) -> list[str]:
        """A DataFrame's columns: the notebook's, else as the failing frame's locals show them."""
        entry = self.entry(name)
        return [c.name for c in entry.columns] if entry is not None and entry.columns else self.local_columns(name)

    def merge_key(self, key: str) -> bool:
        """``a.merge(b, on=key)`` (or ``pd.merge(a, b, on=key)``) where one frame has ``key``
        and the other one column named after it (``id`` and ``student_id``): say so, and
        the tool's own edit joins the two with ``left_on`` / ``right_on``."""
        tree, text = _parse_line(self.raw)
        for node in ast.walk(tree) if tree is not None else []:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "merge"):
                continue
            on = next((k for k in node.keywords if k.arg == "on"), None)
            frames = [node.func.value, *node.args[:1]] if node.args else []
            if (
                len(node.args) >= 2
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == (self.imported_pandas or "pd")
            ):
                frames = node.args[:2]
            if on is None or not (isinstance(on.value, ast.Constant) and on.value.value == key) or len(frames) != 2:
                continue
            if not all(isinstance(f, ast.Name) for f in frames):
                continue
            left, right = (f.id for f in frames)  # type: ignore[attr-defined]
            has = {side: key in self.columns_of(side) for side in (left, right)}
            if has[left] == has[right]:
                continue
            lacking = right if has[left] else left
            named = [c for c in self.columns_of(lacking) if key.lower() in re.split(r"[\W_]+", c.lower()) and c != key]
            if len(named) != 1:
                continue
            meant = named[0]
            self.say(
                f"`{key}` is a column of `{left if has[left] else right}` but not of `{lacking}`, whose "
                f"column for it is `{meant}`: join them with `left_on` and `right_on`."
            )
            quote = (ast.get_source_segment(text, on.value) or '"')[0]
            keys = [_quoted(quote, k) for k in ((key, meant) if has[left] else (meant, key))]
            if all(keys):
                self.edit(ast.get_source_segment(text, on) or "", f"left_on={keys[0]}, right_on={keys[1]}")
            return True
        return False

    def _missing_column(self, frame: str, key: str, names: list[str]) -> None:
        meant = close_name(key, names)
        if meant is None:
            shown = ", ".join(f"`{n}`" for n in names[:MAX_LISTED])
            self.say(f"`{key}` is not a column of `{frame}`; its columns are {shown}.")
            return
        self.say(f"`{key}` is not a column of `{frame}`; `{meant}` is.")
        for quote in ("'", '"'):
            literal = _quoted(quote, meant)
            if literal is not None and _quoted(quote, key) and self.edit(f"{quote}{key}{quote}", literal):
                return
        if key.isidentifier() and meant.isidentifier():
            self.edit(f".{key}", f".{meant}")

    def _apply_on_columns(self, key: str, frame: str) -> None:
        self.say(
            f"`{key}` is a column of `{frame}`, but `apply` without `axis=1` hands your function "
            "each column, not each row: add `axis=1`."
        )
        tree, text = _parse_line(self.raw)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply":
                segment = ast.get_source_segment(text, node)
                if segment and segment.endswith(")"):
                    self.edit(segment, segment[:-1].rstrip() + ", axis=1)")
                return

    # ------------------------------------------------------------------ AttributeError
    def attribute_error(self) -> None:
        if "Can only use .dt accessor" in self.message:
            self.dates_needed("`.dt`")
            return
        module = re.match(r"module '([\w.]+)' has no attribute '(\w+)'", self.message)
        if module:
            entry = (
                next((e for e in self.context.available if e.type == module.group(1)), None) if self.context else None
            )
            attr = module.group(2)
            meant = close_name(attr, entry.attributes) if entry else None
            if meant:
                self.say(f"`{module.group(1)}` has no `{attr}`; `{meant}` is what it has.")
                if _identifier(meant):
                    self.edit(f".{attr}", f".{meant}")
            return
        m = re.match(r"'(\w+)' object has no attribute '(\w+)'", self.message)
        if not m:
            return
        type_name, attr = m.group(1), m.group(2)
        for name in _names_on(self.source):
            entry = self.entry(name)
            if entry is None or entry.kind != "value" or entry.type.split(" ")[0] != type_name:
                continue
            column = close_name(attr, [c.name for c in entry.columns])
            if column is not None:
                self.say(
                    f"`{name}` has no attribute `{attr}`; `{column}` is one of its columns (`{name}['{column}']`)."
                )
                literal = _quoted("'", column) or _quoted('"', column)
                if _identifier(column) or literal:
                    self.edit(f"{name}.{attr}", f"{name}.{column}" if _identifier(column) else f"{name}[{literal}]")
                return
            meant = close_name(attr, entry.attributes)
            if meant is not None:
                self.say(f"`{name}` ({type_name}) has no attribute `{attr}`; `{meant}` is one it has.")
                if _identifier(meant):
                    self.edit(f"{name}.{attr}", f"{name}.{meant}")
                return
            if len(entry.attributes) <= MAX_LISTED:
                listed = ", ".join(f"`{a}`" for a in entry.attributes)
                self.say(f"`{name}` ({type_name}) has no attribute `{attr}`; it has {listed}.")
                return

    def dates_needed(self, what: str) -> None:
        """``.dt`` / ``resample`` on text: the text columns of the line become dates."""
        refs = self.text_columns()
        if not refs:
            for m in re.finditer(r"\b([A-Za-z_]\w*)\.set_index\(\s*(['\"])(\w+)\2\s*\)", self.source):
                column = self.column(m.group(1), m.group(3))
                if column is not None and _holds_text(column):
                    frame, col = m.group(1), m.group(3)
                    self.say(
                        f"`{col}` of `{frame}` holds text ({_what_it_holds(column)}), not dates: {what} needs "
                        f"datetimes. Convert it first, e.g. `pd.to_datetime({frame}['{col}'])`."
                    )
                    alias = self.pandas()
                    if alias:
                        self.edit(
                            m.group(0),
                            f"{frame}.assign({col}={alias}.to_datetime({frame}[{m.group(2)}{col}{m.group(2)}]))"
                            f".set_index({m.group(2)}{col}{m.group(2)})",
                        )
                    return
            self.say(f"{what} works on datetime values only: convert the column with `pd.to_datetime` first.")
            return
        frame, col, _, column = refs[0]
        self.say(
            f"`{col}` of `{frame}` holds text ({_what_it_holds(column)}), not dates: {what} needs datetimes. "
            f"Convert it first, e.g. `pd.to_datetime({frame}['{col}'])`."
        )
        self.to_dates(refs)

    # ------------------------------------------------------------------ TypeError
    def type_error(self) -> None:
        message = self.message
        if "Only valid with DatetimeIndex" in message:
            self.dates_needed("`resample`")
            return
        if "indices must be integers" in message and "not float" in message:
            self._float_index()
            return
        called = "object is not subscriptable" in message or re.search(
            r"'(method|builtin_function_or_method)'", message
        )
        if called and self._not_called():
            return
        arithmetic = any(
            w in message
            for w in (
                "unsupported operand type",
                "can only concatenate str",
                "can't multiply sequence",
                "not supported for the input types",
                "Could not convert",
                "to numeric",
                "ufunc",
            )
        )
        if not arithmetic:
            return
        refs = self.text_columns()
        if refs:
            self._text_arithmetic(refs)
            return
        if "can only concatenate str" in message:
            other = re.search(r'not "(\w+)"', message)
            self.say(
                f"`+` joins text only, and one side is {'a ' + other.group(1) if other else 'not text'}: "
                "turn it into text first (`str(...)`, or an f-string)."
            )
        elif re.search(r"for [^:]+: '(int|float)' and 'str'|'str' and '(int|float)'", message):
            self.say(
                "A number and a text are combined: the text must become a number first (`int(...)`, `float(...)`)."
            )

    def _text_arithmetic(self, refs: list[tuple[str, str, str, ColumnInfo]]) -> None:
        frame, col, _, column = refs[0]
        dates = ".dt" in self.source or any(DATES_AS_TEXT in c.kinds for *_, c in refs)
        if dates:
            self.say(
                f"`{col}` of `{frame}` holds text ({_what_it_holds(column)}), not dates: dates subtract "
                f"only as datetimes. Convert it first, e.g. `pd.to_datetime({frame}['{col}'])`."
            )
            self.to_dates(refs)
            return
        self.say(
            f"`{col}` of `{frame}` holds text ({_what_it_holds(column)}): arithmetic on it fails or joins "
            f"strings. Convert it first, e.g. `pd.to_numeric({frame}['{col}'])`."
        )
        if len(refs) == 1 and NUMBERS_AS_TEXT in column.kinds:
            alias = self.pandas()
            if alias:
                self.edit(refs[0][2], f"{alias}.to_numeric({refs[0][2]})")

    def _float_index(self) -> None:
        self.say("`/` always gives a float, and an index must be a whole number: use `//` inside the brackets.")
        for m in re.finditer(r"\[([^\[\]]*)\]", self.raw):
            inside = m.group(1)
            if inside.count("/") == 1 and "//" not in inside:
                self.edit(m.group(0), "[" + inside.replace("/", "//") + "]")
                return

    def _not_called(self) -> bool:
        """A method used without calling it: ``x.sum / 2``, ``counts.most_common[3]``."""
        if re.search(r"'(method|builtin_function_or_method)' object is not subscriptable", self.message):
            hits = list(re.finditer(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\[", self.raw))
            if len(hits) == 1:
                call = hits[0].group(1)
                end = _bracket_end(self.raw, hits[0].end() - 1)
                self.say(f"`{call}` is a method: call it, `{call}(...)`, rather than index it.")
                if end is not None:
                    inside = self.raw[hits[0].end() : end]
                    self.edit(self.raw[hits[0].start() : end + 1], f"{call}({inside})")
                return True
            self.say("A method is indexed with `[...]` where it should be called with `(...)`.")
            return True
        for found in re.finditer(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b(?!\s*[(.\[])", self.raw):
            obj, attr = found.group(1), found.group(2)
            entry = self.entry(obj)
            if entry is not None and entry.kind == "value" and attr in entry.attributes:
                self.say(f"`{obj}.{attr}` is a method: call it, `{obj}.{attr}()`.")
                self.edit(found.group(0), f"{found.group(0)}()")
                return True
        return False

    # ------------------------------------------------------------------ NameError
    def name_error(self) -> None:
        m = re.match(r"name '(\w+)' is not defined", self.message)
        if not m:
            return
        name = m.group(1)
        if self.missing_definition(name):
            return
        sent = {e.name for e in self.context.available} if self.context else set()
        own = self.program_names()
        meant = close_name(name, sorted(sent | own | set(dir(builtins))))
        if meant is not None:
            where = " (in your notebook)" if meant in sent else " (in the program)" if meant in own else ""
            self.say(f"`{name}` is not defined; `{meant}` is{where}.")
            self.rename(name, meant)
            return
        elsewhere = close_name(name, self.context.notebook_names) if self.context else None
        if elsewhere is not None:
            self.say(f"`{name}` is not defined; your notebook has `{elsewhere}`.")
        elif self.context is not None and self.context.notebook_names and name not in self.context.notebook_names:
            self.say(f"`{name}` is defined neither here nor in your notebook: define it, or run the cell that does.")

    # ------------------------------------------------------------------ ValueError
    def value_error(self) -> None:
        message = self.message
        if "truth value of a Series is ambiguous" in message or "truth value of an array" in message:
            self._boolean_operators()
            return
        if "Index contains duplicate entries, cannot reshape" in message:
            self.say(
                "`pivot` needs one row per (index, column) pair and the data has several: "
                "`pivot_table(..., aggfunc='sum')` adds them up."
            )
            return
        if "could not convert string to float" in message or "invalid literal for int()" in message:
            self.say(
                "A text that is not a number was converted to one: skip or clean the lines that are "
                "not data (a header, an empty line) first."
            )
            self._header_row(_string_literal(message.rpartition(": ")[2]))
            return
        self._shapes()

    def _header_row(self, text: str | None) -> None:
        """The text that is no number sits in a row of words only (``['date', 'item',
        'amount']``, a local of the failing frame): a header. When the program reads its
        lines with one ``.splitlines()``, the tool's own edit skips the first line."""
        if text is None or not any(text in row and not any(map(_numeric, row)) for row in self._local_rows()):
            return
        found = [(n, line) for n, line in enumerate(self.lines, 1) if ".splitlines()" in line]
        if len(found) == 1 and found[0][1].count(".splitlines()") == 1 and ".splitlines()[" not in found[0][1]:
            self.say(f"`{text}` is a word of the first line, a header: `.splitlines()[1:]` skips it.")
            self.edit(".splitlines()", ".splitlines()[1:]", line=found[0][0])

    def _local_rows(self) -> list[list[str]]:
        """The failing frame's locals that are lists or tuples of texts (as the sandbox showed them)."""
        rows = []
        for shown in self.error.locals.values():
            try:
                value = ast.literal_eval(shown)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
                rows.append(list(value))
        return rows

    def _boolean_operators(self) -> None:
        self.say(
            "`and` / `or` / `not` ask for one True or False, and a Series holds many: combine "
            "conditions with `&` / `|` / `~`, each in parentheses."
        )
        tree, text = _parse_line(self.raw)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.BoolOp):
                segment = ast.get_source_segment(text, node)
                if segment is None:
                    return
                op = " & " if isinstance(node.op, ast.And) else " | "
                parts = [ast.get_source_segment(text, v) for v in node.values]
                if all(parts):
                    self.edit(segment, op.join(f"({p})" for p in parts))
                return

    def _shapes(self) -> None:
        message = self.message
        shapes = SHAPE.findall(message)
        lengths = re.search(r"Length of values \((\d+)\) does not match length of index \((\d+)\)", message)
        mismatch = re.search(r"Expected axis has (\d+) elements, new values have (\d+) elements", message)
        if not (lengths or mismatch or (shapes and re.search(r"shape|broadcast|aligned|dimension", message))):
            return
        named = []
        for name in _names_on(self.source):
            entry = self.entry(name)
            if entry is not None and entry.shape:
                named.append(f"`{name}` has shape {_shape_text(entry.shape)}")
                continue
            local = self.error.locals.get(name, "")
            m = re.search(r"shape=(\([\d, ]*\))", local) or re.search(r"len=(\d+)", local)
            if m:
                text = m.group(1)
                named.append(f"`{name}` has shape {text if text.startswith('(') else f'({text},)'}")
        if lengths:
            told = f"{lengths.group(1)} values for an index of {lengths.group(2)} rows"
        elif mismatch:
            told = f"{mismatch.group(2)} new labels for an axis of {mismatch.group(1)}"
        else:
            told = "shapes " + " and ".join(shapes[:2])
        self.say(
            "The shapes do not match: "
            + (("; ".join(named) + f" ({told})") if named else told)
            + ". Make them agree (the same length, or a shape that broadcasts), or align them by a key first."
        )

    # ------------------------------------------------------------------ AssertionError
    def assertion(self) -> None:
        self.sort_direction()

    def sort_direction(self) -> None:
        """A check failed after the program's one ``sort_values`` without ``ascending``, where
        its comments ask for the largest ("# the three largest cities"): ``sort_values`` puts
        the smallest first. Said, and the tool's own edit sorts the largest first."""
        if not LARGEST.search("\n".join(comments(self.code))):
            return
        sorts = [(n, line) for n, line in enumerate(self.lines, 1) if ".sort_values(" in line]
        if len(sorts) != 1 or "ascending" in sorts[0][1]:
            return
        number, line = sorts[0]
        tree, text = _parse_line(line)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sort_values":
                segment = ast.get_source_segment(text, node) or ""
                self.say(
                    f"`sort_values` on line {number} puts the smallest first, and the program's comment "
                    "asks for the largest: sort with `ascending=False`."
                )
                if segment.endswith(")"):
                    self.edit(segment, segment[:-1].rstrip() + ", ascending=False)", line=number)
                return

    # ------------------------------------------------------------------ others
    def zero_division(self) -> None:
        self.say("A division by zero: a divisor is 0 for some of the data; decide what the result is then.")


LARGEST = re.compile(r"\b(largest|biggest|highest|greatest|most|top|best|maximum)\b", re.I)
"""Words of a comment asking for the largest first."""


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _one_line(sentence: str) -> str:
    """``sentence`` with each `quoted` part cut to :data:`MAX_QUOTED` characters, on one
    line: a name from the data may hold a line break (``Total\\nsales``), and the feedback
    is read line by line (what a student's hints leave out is the explanation's lines)."""
    parts = sentence.split("`")
    cut = [p[: MAX_QUOTED - 1] + "…" if i % 2 and len(p) > MAX_QUOTED else p for i, p in enumerate(parts)]
    return "\\n".join("`".join(cut).splitlines())


def _shape_text(shape: list[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _bracket_end(text: str, start: int) -> int | None:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
    return None


def explain(
    result: ExecutionResult | None, code: str, context: NotebookContext | None, given: str | None = None
) -> Explanation | None:
    """What the tool can say of ``result``'s failure on its own (None: nothing failed
    that it can read: a pass, a timeout, a reply without a program). ``given``: the
    user's own program, whose lines a candidate may have dropped."""
    if result is None or result.error is None:
        return None
    reader = _Reader(result, code, context, given)
    handlers: dict[str, Callable[[], None]] = {
        "KeyError": reader.key_error,
        "AttributeError": reader.attribute_error,
        "TypeError": reader.type_error,
        "NameError": reader.name_error,
        "ValueError": reader.value_error,
        "ZeroDivisionError": reader.zero_division,
        "AssertionError": reader.assertion,
    }
    handler = handlers.get(result.error.type)
    if handler is not None:
        try:
            handler()
        except Exception:  # a diagnosis never stands in the way of the run
            reader.sentences, reader.edits = [], []
    reader.sentences = [_one_line(s) for s in reader.sentences]
    if reader.inner:
        reader.sentences.insert(0, INSIDE_NOTEBOOK.format(source=reader.inner))
    edits = reader.edits if any(e.line != TOP for e in reader.edits) else []
    return Explanation(
        error=f"{result.error.type}: {result.error.message}"[:300],
        line=reader.line,
        source=reader.source,
        diagnosis=reader.sentences,
        edits=edits,
    )


def apply_edits(code: str, edits: list[LineEdit]) -> str | None:
    """``code`` with ``edits`` made (None when one no longer fits its line)."""
    lines = source_lines(code, keepends=True)
    top = [e.new + "\n" for e in edits if e.line == TOP]
    for e in edits:
        if e.line == TOP:
            continue
        if not 0 < e.line <= len(lines) or lines[e.line - 1].count(e.old) != 1:
            return None
        lines[e.line - 1] = lines[e.line - 1].replace(e.old, e.new)
    return "".join(top + lines)


def edit_words(edit: LineEdit) -> str:
    """One edit as a reader sees it: a change, a line added before another, a line removed."""
    if not edit.new:
        return f"`{edit.old.strip()}` removed from line {edit.line}"
    if edit.new.endswith("\n" + edit.old):
        added = edit.new[: -len(edit.old) - 1].splitlines()
        more = f" ({len(added)} lines)" if len(added) > 1 else ""
        return f"`{added[0]}`{more} added before line {edit.line}"
    return f"`{edit.old}` → `{edit.new}`"
