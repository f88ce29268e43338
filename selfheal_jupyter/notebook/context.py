"""The names a cell needs from its notebook → imports, notebook sources, copied values.

A notebook cell reads what the cells above it made: ``np``, a DataFrame ``df``, a
helper ``scale()``, an instance of a class defined in the notebook. The candidate runs
in a sandbox that has none of these, so at run start each name the cell needs is
resolved from the user's namespace into one of:

* **an import line** for a module, or for a class / function importable from an
  installed module (``import numpy as np``, ``from math import sqrt``); never pickled;
* **its notebook source** for a function or class defined in the notebook
  (``__module__ == "__main__"``), decorators included, found in the cell sources
  IPython keeps; the names those definitions read are resolved too (transitively);
* **a copy** of data (DataFrames, arrays, numbers, strings, containers, instances of
  notebook classes), pickled once here, at run start, and reused by every iteration;
* **unavailable**, with a reason, for what cannot travel (generators, open files,
  sockets, locks, connections, a definition whose source is gone, a value above
  ``SelfHeal.context_max_bytes``, a library the sandbox image lacks or has at another
  version). Those are not sent; the panel lists them and the model is told not to
  use or invent them.

Imports and definitions form the *prelude*, run in the sandbox before the candidate
(never part of it). The user's namespace and objects are only read: what travels is
a copy made now, so a candidate that mutates ``acct`` leaves the kernel's ``acct``
alone. Nothing here imports IPython: the front passes the namespace in.
"""

from __future__ import annotations

import ast
import difflib
import importlib.metadata
import inspect
import linecache
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..agents.inputs import _summary as _structure
from ..agents.inputs import _type_name, columns_of
from ..model import ContextEntry, NotebookContext
from .names_read import BUILTIN_NAMES, hidden_from_user, names_in_task, names_read
from .value_copies import TooLarge, copy_value, why_not_picklable

MAX_DEPTH = 20
"""How deep definitions that read other definitions are followed."""
MAX_ATTRIBUTES = 400
"""Most attribute names kept of one value, class or module (for a close name)."""
MAX_NOTEBOOK_NAMES = 500
CLOSE_NAME_CUTOFF = 0.8
"""How alike (difflib's ratio) a notebook name must be to one the code reads but the
notebook lacks for it to travel too (the fix will likely use it)."""


# --------------------------------------------------------------------------- sources


def _cell_files() -> list[str]:
    """The cell sources IPython registered in linecache, newest first."""
    return [name for name, entry in reversed(list(linecache.cache.items())) if len(entry) == 4 and entry[1] is None]


def _top_level_definition(filename: str, name: str, line: int | None = None) -> str | None:
    """The source of the top-level def/class ``name`` in a registered file, decorators
    included (the one spanning ``line``, else the last one)."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    text = "".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    found: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if stmt.name != name:
            continue
        start = min([d.lineno for d in stmt.decorator_list] + [stmt.lineno])
        if line is not None and start <= line <= (stmt.end_lineno or stmt.lineno):
            found = stmt
            break
        found = stmt
    if found is None:
        return None
    start = min([d.lineno for d in found.decorator_list] + [found.lineno])
    return textwrap.dedent("".join(lines[start - 1 : found.end_lineno]))


def _function_files(cls: type) -> list[tuple[str, int]]:
    """(file, line) of the methods a notebook class defines itself."""
    out = []
    for value in vars(cls).values():
        func = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
        try:
            func = inspect.unwrap(func)
        except ValueError:
            continue
        code = getattr(func, "__code__", None)
        if code is not None and getattr(func, "__qualname__", "").startswith(cls.__qualname__ + "."):
            out.append((code.co_filename, code.co_firstlineno))
    return out


def definition_source(name: str, obj: Any) -> str | None:
    """The notebook source that defines ``obj`` (a function or class), or None."""
    target = getattr(obj, "__name__", name)
    places: list[tuple[str, int | None]] = []
    if isinstance(obj, type):
        places = list(_function_files(obj))
    else:
        try:
            func = inspect.unwrap(obj)
        except ValueError:
            func = obj
        code = getattr(func, "__code__", None)
        if code is not None and "<locals>" not in getattr(obj, "__qualname__", ""):
            places = [(code.co_filename, code.co_firstlineno)]
        target = getattr(func, "__name__", target)
        if "<locals>" in getattr(obj, "__qualname__", ""):
            target = name  # a decorator returned an inner function: find `def name`
    for filename, line in places:
        source = _top_level_definition(filename, target, line)
        if source is not None:
            return source
    if places and not isinstance(obj, type):
        return None  # its code says where it came from, and that is gone (exec, a file)
    for filename in _cell_files():  # a class without methods: the newest cell defining it
        source = _top_level_definition(filename, target)
        if source is not None:
            return source
    return None


# --------------------------------------------------------------------------- libraries


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def _distributions() -> Mapping[str, list[str]]:
    try:
        return importlib.metadata.packages_distributions()
    except Exception:
        return {}


@lru_cache(maxsize=256)
def kernel_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except Exception:
        return None


def distribution_of(module_root: str) -> str | None:
    """The installed distribution that provides the top-level module (``sklearn`` →
    ``scikit-learn``); None for the standard library and local files."""
    if module_root in sys.stdlib_module_names or module_root in sys.builtin_module_names:
        return None
    if module_root.startswith("_") or module_root == "__main__":
        return None
    return _distribution_of(module_root)


KNOWN_DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "yaml": "PyYAML",
    "bs4": "beautifulsoup4",
    "skimage": "scikit-image",
    "dateutil": "python-dateutil",
    "mpl_toolkits": "matplotlib",
}


@lru_cache(maxsize=256)
def _distribution_of(root: str) -> str | None:
    # Fast paths first: scanning every installed distribution takes about half a second.
    for guess in (KNOWN_DISTRIBUTIONS.get(root), root):
        if guess and kernel_version(guess) is not None:
            return guess
    dists = _distributions().get(root)
    return dists[0] if dists else None


def _is_local_module(root: str) -> bool:
    """A module imported from a plain file (a student's helpers.py), not a package."""
    if root in sys.stdlib_module_names or root in sys.builtin_module_names or root.startswith("_"):
        return False
    return distribution_of(root) is None and root in sys.modules


def with_command(dists: Iterable[str]) -> str:
    return "selfheal sandbox build --with " + " ".join(sorted(set(dists)))


# --------------------------------------------------------------------------- resolving


def _size_text(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _label(value: Any) -> str:
    """``DataFrame 3×2``, ``ndarray 100``, ``list (3)``, ``int``, ``Account``."""
    cls = type(value)
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape) and shape:
        return f"{cls.__name__} {'×'.join(str(n) for n in shape)}"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return f"{cls.__name__} ({len(value)})"
    return cls.__name__


def describe_value(value: Any) -> str:
    """Type and structure (shape, columns, dtypes, lengths, attribute names), no values."""
    type_name = _type_name(value)
    try:
        if isinstance(value, (str, bytes)):
            detail = f"length {len(value)}"
        elif isinstance(value, (bool, int, float, complex)) or value is None:
            detail = ""
        elif isinstance(value, Mapping):
            detail = f"{len(value)} keys"
        elif type(value).__module__ == "__main__":
            attrs = [a for a in getattr(value, "__dict__", {}) if not a.startswith("_")]
            detail = "instance of a class defined in the notebook" + (
                f"; attributes {', '.join(attrs[:15])}" if attrs else ""
            )
        else:
            detail = _structure(value)
    except Exception:
        detail = ""
    return f"{type_name} — {detail}" if detail else type_name


def public_attributes(obj: Any) -> list[str]:
    """The public attribute names of a value, class or module (never their values)."""
    try:
        names = [n for n in dir(obj) if isinstance(n, str) and not n.startswith("_")]
    except Exception:
        return []
    return names[:MAX_ATTRIBUTES]


def _signature(name: str, obj: Any) -> str:
    try:
        text = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return f"{name}(...)"
    return text if len(text) <= 120 else text[:117] + "..."


def _class_summary(name: str, cls: type) -> str:
    sig = _signature(name, cls)
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    methods = []
    for attr, value in vars(cls).items():
        if attr.startswith("_") or not callable(getattr(value, "__func__", value)):
            continue
        methods.append(_signature(attr, getattr(cls, attr)).replace("(self, ", "(").replace("(self)", "()"))
    parts = [f"class {sig}"]
    if bases:
        parts.append(f"bases {', '.join(bases)}")
    if methods:
        parts.append("methods " + ", ".join(methods[:12]))
    return "; ".join(parts)


def _importable(obj: Any) -> tuple[str, str] | None:
    """(module, attribute) an installed module exposes ``obj`` under (shortest public path)."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
        return None
    if "." in qualname or "<" in qualname:
        return None
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        path = ".".join(parts[:i])
        if any(p.startswith("_") for p in parts[1:i]) and i < len(parts):
            continue
        mod = sys.modules.get(path)
        if mod is not None and getattr(mod, qualname, None) is obj:
            return path, qualname
    return None


def _module_import(name: str, module: types.ModuleType) -> str | None:
    real = getattr(module, "__name__", None)
    if not isinstance(real, str) or real == "__main__" or sys.modules.get(real) is not module:
        return None
    if real == name:
        return f"import {real}"
    if "." in real:
        parent, _, leaf = real.rpartition(".")
        if leaf == name:
            return f"from {parent} import {leaf}"
    return f"import {real} as {name}"


@dataclass
class _Resolver:
    ns: Mapping[str, Any]
    max_bytes: int
    hidden: Mapping[str, Any] | None
    image_packages: Mapping[str, str] | None
    entries: dict[str, ContextEntry] = field(default_factory=dict)
    imports: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)
    values: dict[str, bytes] = field(default_factory=dict)
    _visiting: set[str] = field(default_factory=set)
    _visible: list[str] | None = None

    def need(self, name: str, depth: int = 0, *, quiet_missing: bool = False) -> None:
        if name in self.entries or name in self._visiting or depth > MAX_DEPTH:
            return
        if name not in self.ns or hidden_from_user(name, self.ns, self.hidden):
            if name in BUILTIN_NAMES or quiet_missing:
                return
            self.entries[name] = ContextEntry(
                name, "unavailable", reason="not defined in your notebook (never run, or deleted)"
            )
            # A misspelt name: the one the user meant travels too, for the fix to use.
            for close in difflib.get_close_matches(name, self.visible_names(), n=1, cutoff=CLOSE_NAME_CUTOFF):
                self.need(close, depth + 1, quiet_missing=True)
            return
        self._visiting.add(name)
        try:
            self._resolve(name, self.ns[name], depth)
        finally:
            self._visiting.discard(name)

    def visible_names(self) -> list[str]:
        """The names the user's notebook defines (not the shell's own)."""
        if self._visible is None:
            self._visible = [
                n for n in self.ns if not n.startswith("_") and not hidden_from_user(n, self.ns, self.hidden)
            ][:MAX_NOTEBOOK_NAMES]
        return self._visible

    def _unavailable(self, name: str, type_: str, reason: str) -> None:
        self.entries[name] = ContextEntry(name, "unavailable", type=type_, reason=reason)

    def _missing_library(self, roots: Iterable[str], *, copied: bool) -> str | None:
        """Why a name cannot go to this image (a missing / different library), or None."""
        missing, differ = [], []
        for root in roots:
            if _is_local_module(root):
                return (
                    f"it needs the module {root!r}, a local file of your kernel and not "
                    "an installed package, which the sandbox does not have"
                )
            dist = distribution_of(root)
            if dist is None or self.image_packages is None:
                continue
            have = self.image_packages.get(_dist_key(dist))
            if have is None:
                missing.append(dist)
            elif copied:
                mine = kernel_version(dist)
                if mine is not None and mine != have:
                    differ.append((dist, mine, have))
        if missing:
            names = ", ".join(sorted(set(missing)))
            return f"the sandbox image has no {names}: add it with `{with_command(missing)}`"
        if differ:
            dist, mine, have = differ[0]
            return (
                f"{dist} is {mine} in your kernel but {have} in the sandbox image, so a "
                f"copy may not load there: `{with_command(d for d, _, _ in differ)}` "
                "installs your kernel's version in the sandbox"
            )
        return None

    def _resolve(self, name: str, value: Any, depth: int) -> None:
        if isinstance(value, types.ModuleType):
            line = _module_import(name, value)
            if line is None:
                self._unavailable(name, "module", "a module that cannot be imported by name")
                return
            root = value.__name__.split(".")[0]
            why = self._missing_library([root], copied=False)
            if why:
                self._unavailable(name, value.__name__, why)
                return
            self.imports.append(line)
            self.entries[name] = ContextEntry(
                name,
                "module",
                type=value.__name__,
                summary=f"module {value.__name__}",
                source=line,
                attributes=public_attributes(value),
            )
            return
        is_class = isinstance(value, type)
        try:
            unwrapped = inspect.unwrap(value) if callable(value) and not is_class else value
        except ValueError:
            unwrapped = value
        module = getattr(value, "__module__", None)
        if module == "__main__" and (is_class or inspect.isfunction(unwrapped)):
            self._definition(name, value, "class" if is_class else "function", depth)
            return
        if is_class or inspect.isroutine(value) or isinstance(value, type(print)):
            where = _importable(value)
            if where is not None:
                mod, attr = where
                why = self._missing_library([mod.split(".")[0]], copied=False)
                if why:
                    self._unavailable(name, f"{mod}.{attr}", why)
                    return
                line = f"from {mod} import {attr}" + (f" as {name}" if attr != name else "")
                self.imports.append(line)
                kind_text = "class" if is_class else "function"
                summary = f"{kind_text} {attr} imported from {mod}"
                self.entries[name] = ContextEntry(name, "import", type=f"{mod}.{attr}", summary=summary, source=line)
                return
        self._copy(name, value, depth)

    def _definition(self, name: str, obj: Any, kind: str, depth: int) -> None:
        source = definition_source(name, obj)
        type_ = "class" if kind == "class" else "function"
        if source is None:
            self._unavailable(
                name,
                type_,
                f"a {type_} whose source is not available (defined "
                "through exec, or its cell is gone): define it in a cell",
            )
            return
        try:
            reads = names_read(source)
        except SyntaxError:
            self._unavailable(name, type_, f"a {type_} whose source does not parse")
            return
        defined = getattr(inspect.unwrap(obj) if kind == "function" else obj, "__name__", name)
        for needed in reads:
            if needed not in (name, defined):
                self.need(needed, depth + 1)
        if defined != name and defined not in self.entries:
            # ``f = scale``: the prelude defines ``scale`` and binds the alias
            alias = f"\n{name} = {defined}\n"
        else:
            alias = ""
        self.definitions.append(source.rstrip() + "\n" + alias)
        summary = _class_summary(name, obj) if kind == "class" else f"function {_signature(name, obj)}"
        self.entries[name] = ContextEntry(
            name,
            "function" if kind == "function" else "class",
            type=type_,
            summary=summary,
            source=source,
            attributes=public_attributes(obj) if kind == "class" else [],
        )

    def _copy(self, name: str, value: Any, depth: int) -> None:
        label = _label(value)
        try:
            data, main, roots = copy_value(value, self.max_bytes)
        except TooLarge:
            self._unavailable(
                name,
                label,
                (
                    f"its copy would be larger than SelfHeal.context_max_bytes "
                    f"({_size_text(self.max_bytes)}): raise it with "
                    f"%config SelfHeal.context_max_bytes = ..., or use a sample (df.head(1000))"
                ),
            )
            return
        except RecursionError:
            self._unavailable(name, label, "it is nested too deeply to be copied")
            return
        except Exception as exc:
            self._unavailable(name, label, why_not_picklable(value, exc))
            return
        why = self._missing_library(roots, copied=True)
        if why:
            self._unavailable(name, label, why)
            return
        for cls_name in main:  # notebook classes/functions the copy refers to
            self.need(cls_name, depth + 1)
            entry = self.entries.get(cls_name)
            if entry is None or entry.kind == "unavailable":
                self._unavailable(
                    name,
                    label,
                    (
                        f"it refers to {cls_name}, defined in your notebook, which cannot be "
                        f"sent ({entry.reason if entry else 'not found'})"
                    ),
                )
                return
        self.values[name] = data
        shape = getattr(value, "shape", None)
        self.entries[name] = ContextEntry(
            name,
            "value",
            type=label,
            summary=describe_value(value),
            columns=columns_of(value),
            shape=list(shape) if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape) else [],
            attributes=public_attributes(value),
        )


def resolve(
    names: Iterable[str],
    ns: Mapping[str, Any],
    *,
    max_bytes: int,
    hidden: Mapping[str, Any] | None = None,
    image_packages: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
    quiet_missing: bool = False,
) -> NotebookContext:
    """Resolve ``names`` (and what their definitions read) from ``ns``.

    ``image_packages``: ``{normalised distribution name: version}`` of the sandbox
    image (None: not checked). ``skip``: names that travel another way (``--inputs``).
    ``quiet_missing``: names absent from ``ns`` are left out instead of reported (for
    names guessed from a task's words).
    """
    resolver = _Resolver(ns, max_bytes, hidden, image_packages)
    skipped = set(skip)
    for name in names:
        if name not in skipped:
            resolver.need(name, quiet_missing=quiet_missing)
    for name in skipped:
        resolver.entries.pop(name, None)
        resolver.values.pop(name, None)
    imports = list(dict.fromkeys(resolver.imports))
    parts = []
    if imports:
        parts.append("\n".join(imports) + "\n")
    parts.extend(resolver.definitions)
    prelude = "\n".join(parts)
    return NotebookContext(
        entries=list(resolver.entries.values()),
        prelude=prelude,
        values=resolver.values,
        notebook_names=resolver.visible_names(),
    )


def for_cell(
    source: str,
    ns: Mapping[str, Any],
    *,
    max_bytes: int,
    hidden: Mapping[str, Any] | None = None,
    image_packages: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
    transform: Callable[[str], str] | None = None,
) -> NotebookContext:
    """The context of a code cell (``%%heal``, the autoheal button).

    ``transform``: turns IPython syntax (``%time``, ``!ls``) into Python when the
    cell does not parse as it is (the shell's ``transform_cell``).
    """
    try:
        names = names_read(source)
    except SyntaxError:
        try:
            names = names_read(transform(source)) if transform is not None else []
        except SyntaxError:
            names = []  # the cell does not parse: the run shows the SyntaxError itself
    return resolve(names, ns, max_bytes=max_bytes, hidden=hidden, image_packages=image_packages, skip=skip)


def for_task(
    text: str,
    ns: Mapping[str, Any],
    *,
    max_bytes: int,
    hidden: Mapping[str, Any] | None = None,
    image_packages: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
) -> NotebookContext:
    """The context of an ``%%agent`` task: the notebook variables its words name."""
    return resolve(
        names_in_task(text, ns, hidden),
        ns,
        max_bytes=max_bytes,
        hidden=hidden,
        image_packages=image_packages,
        skip=skip,
        quiet_missing=True,
    )


# --------------------------------------------------------------------------- telling
