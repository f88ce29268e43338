"""The notebook names a cell reads, as data: what travels to the sandbox and what the model
may be told of each (never a value). Resolved by ``notebook/context.py``; re-exported by
``model``, the one data model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class InputDescription:
    """What the prompt is told about one notebook input (never the value itself)."""

    name: str
    type: str
    summary: str = ""
    """Shape / columns / dtypes / length, as short text."""


MAX_COLUMN_NAME = 120
"""Characters of a column's name the model is told."""

ContextKind = Literal["module", "import", "function", "class", "value", "unavailable"]


@dataclass
class ColumnInfo:
    """One column of a notebook DataFrame as the model and the diagnosis may know it:
    its name, its dtype and the Python types of a few of its distinct values (``str`` in
    an ``object`` column says it holds text); never a value."""

    name: str
    dtype: str
    kinds: list[str] = field(default_factory=list)

    def text(self) -> str:
        """``date: object (str)``, ``sales: int64``; a name longer than
        :data:`MAX_COLUMN_NAME` cut (the data chose it: a survey's whole question, or
        anything, goes to every prompt)."""
        shown = [k for k in self.kinds if k != self.dtype]
        kinds = f" ({', '.join(shown)})" if shown and self.dtype in ("object", "category", "str", "string") else ""
        name = self.name if len(self.name) <= MAX_COLUMN_NAME else self.name[: MAX_COLUMN_NAME - 1] + "…"
        return f"{name}: {self.dtype}{kinds}"


@dataclass
class ContextEntry:
    """One notebook name a cell needs, and how it travels to the sandbox.

    ``module`` / ``import``: an import line; ``function`` / ``class``: the source defined
    in the notebook; ``value``: a copy (pickled once per run); ``unavailable``: not
    sent, ``reason`` says why. ``type`` and ``summary`` are what the model may be told
    (type name, shape, columns, signature): never a value.
    """

    name: str
    kind: ContextKind
    type: str = ""
    summary: str = ""
    reason: str = ""
    source: str = ""
    """The import line or the notebook source (goes into the prelude, not to the model)."""
    columns: list[ColumnInfo] = field(default_factory=list)
    """A DataFrame's columns (a Series: its one), with dtypes and value types."""
    shape: list[int] = field(default_factory=list)
    """An array's, a frame's or a series' shape ([] when it has none)."""
    attributes: list[str] = field(default_factory=list)
    """The public attribute names of the value, of the class or of the module (for a
    close name when one is misspelt)."""

    def label(self) -> str:
        """Short text for the panel: ``DataFrame 3×2``, ``function``, ``numpy``."""
        if self.kind == "module":
            return self.type
        if self.kind in ("function", "class"):
            return self.kind
        return self.type


@dataclass
class NotebookContext:
    """The names a cell reads from its notebook, resolved at run start (copies only)."""

    entries: list[ContextEntry] = field(default_factory=list)
    prelude: str = ""
    """Imports and notebook definitions run before the candidate (never part of it)."""
    values: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Data values pickled once at run start; copied into the sandbox, never to the model."""
    notebook_names: list[str] = field(default_factory=list)
    """Every name the user's notebook defines (not the shell's own): a close one is
    offered when the code reads a name that does not exist."""

    @property
    def available(self) -> list[ContextEntry]:
        return [e for e in self.entries if e.kind != "unavailable"]

    @property
    def unavailable(self) -> list[ContextEntry]:
        return [e for e in self.entries if e.kind == "unavailable"]

    def names(self) -> set[str]:
        """The names defined in the sandbox before the candidate runs."""
        return {e.name for e in self.available}

    def data_names(self) -> set[str]:
        """The names holding the user's data (never to be replaced by made-up values)."""
        return {e.name for e in self.entries if e.kind == "value"}

    def entry(self, name: str) -> ContextEntry | None:
        """The available entry of ``name`` (None: not sent)."""
        return next((e for e in self.available if e.name == name), None)

    def to_dict(self) -> list[dict[str, str]]:
        return [
            {"name": e.name, "kind": e.kind, "type": e.type, "summary": e.summary, "reason": e.reason}
            for e in self.entries
        ]
