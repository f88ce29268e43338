"""Put a repair reply's functions in place of the program's (``SelfHeal.repair_format = "functions"``).

Why: a repair of a program made of small functions mostly changes one or two of them;
the model writing only those takes a fraction of the tokens of the whole program again
(the prints, the data and the asserts stay as they are), and a small model writes a
whole function more reliably than it copies lines exactly (SEARCH/REPLACE, :mod:`.edits`).

The reply's code counts as functions when every top-level statement of it is a
function or class definition, an import, or a copy of one of the program's own
top-level statements (the model often starts from the program's data): each definition
replaces the program's top-level one of the same name (its decorators included), a new
one goes before the first top-level definition, a new import before the program's first
statement; a copy changes nothing. Any other reply (a program whose top-level code
differs, code that does not parse) is read as a whole program, and so is one that would change more than functions: a class in place of a function (or
the reverse), or a new definition taking a name the program binds otherwise (its data,
an import), which would stand between that binding and the code that reads it. A name
the reply defines twice is its last definition, as Python reads the reply.

Asked for functions, the embedded model still often goes on after them with the rest of
the program, copied: :func:`copied_from` finds where, so that the reply is ended there
(the server stops) instead of streaming lines the program already has.
"""

from __future__ import annotations

import ast
import re

from ..codeblocks import extract_code
from ..source_lines import source_lines

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IMPORTS = (ast.Import, ast.ImportFrom)

INSTRUCTION = (
    "Fix the program. Reply with ONE fenced ```python block holding only the functions you "
    "change, each complete from its `def` line (with any import or new helper function they "
    "need): the rest of the program stays as it is."
)
"""Why no "or the whole program": the embedded model, offered both, wrote the whole program
every time (docs/measurements.md, issue 46); a whole program is still read as one."""


def _parse(code: str) -> ast.Module | None:
    """The code's tree, or None: it does not parse, or nests too deep to (the reply is
    then read whole, and the pre-check says so)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _start(node: ast.stmt) -> int:
    """First line (1-based) of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _import_line(tree: ast.Module) -> int:
    """Where a new import goes (0-based): before the first statement, after a docstring
    and the ``from __future__`` imports (which must come first)."""
    at = _start(tree.body[0]) - 1
    for i, node in enumerate(tree.body):
        docstring = (
            i == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if not docstring and not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        at = node.end_lineno or node.lineno
    return at


_OPENING = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*\n", re.MULTILINE)
_DEF_STARTS = ("def ", "async def ", "class ", "@")
_IMPORT_STARTS = ("import ", "from ")


def copied_from(reply: str, program: str) -> int | None:
    """Where a reply, after a definition, starts copying the program's own top-level
    code (the offset of that line), or None: no fenced code yet, no definition yet, or a
    top-level line that is not one of the program's (new code: a whole program, read
    whole). Copied lines before the first definition (the program's data) are passed.
    A line counts as top-level only where the code before it parses: an unindented line
    inside a string or brackets of a definition is none, and the reply is then read whole
    (one parse per call: this runs at every line the reply streams). Code in a ``<think>`` section is
    a draft, not the reply's; and definitions all copied unchanged are a quote of the
    program ("the original code:"), whose fix comes after: no cut there either."""
    lowered = reply.lower()
    answer = lowered.rfind("</think>")
    if lowered.rfind("<think>") > answer:
        return None  # still reasoning: its drafts are no reply (codeblocks leaves them out)
    opening = _OPENING.search(reply, max(answer, 0))
    if opening is None:
        return None
    top_level = {ln.rstrip() for ln in source_lines(program) if ln.strip() and not ln[0].isspace()}
    seen_def = False
    offset = opening.end()
    for line in source_lines(reply[offset:], keepends=True):
        if not line.endswith("\n"):
            return None  # a line still being written
        text = line.rstrip()
        if text.startswith(("```", "~~~")):
            return None  # the block ended by itself
        if not text or text[0].isspace() or text.startswith("#") or text.startswith(_IMPORT_STARTS):
            pass
        elif text.startswith(_DEF_STARTS):
            seen_def = True
        elif (written := _parse(reply[opening.end() : offset])) is None:
            return None  # inside a statement still open (a string, brackets): no cut here, ever
        elif text not in top_level:
            return None
        elif seen_def:
            return None if _quotes(written, reply[opening.end() : offset], program) else offset
        offset += len(line)
    return None


def _text(lines: list[str], node: ast.stmt) -> list[str]:
    """A statement's lines (of its code's ``lines``), a definition's decorators included,
    without blank lines or trailing spaces (compared as text: comparing trees recurses as
    deep as the code nests)."""
    return [ln.rstrip() for ln in lines[_start(node) - 1 : node.end_lineno] if ln.strip()]


def _quotes(written: ast.Module, code: str, program: str) -> bool:
    """Every definition the reply wrote so far (``code``, parsed as ``written``) is the
    program's own, unchanged: it is quoting the program (its fix comes later), not going
    on after a fix."""
    have = _parse(program)
    program_lines, code_lines = source_lines(program), source_lines(code)
    own = {n.name: _text(program_lines, n) for n in have.body if isinstance(n, _DEFS)} if have is not None else {}
    return all(not isinstance(n, _DEFS) or own.get(n.name) == _text(code_lines, n) for n in written.body)


def has_functions(program: str | None) -> bool:
    """The program parses and defines a top-level function or class: a reply can name
    what it replaces."""
    tree = _parse(program) if program else None
    return tree is not None and any(isinstance(n, _DEFS) for n in tree.body)


def _bound_otherwise(tree: ast.Module) -> set[str]:
    """Names the program binds at top level other than by a definition of its own:
    assignments, loop variables, imports, definitions inside a top-level block."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, _DEFS):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.alias):
                names.add(n.asname or n.name.split(".")[0])
            elif isinstance(n, _DEFS):
                names.add(n.name)
    return names


def splice(program: str, reply: str) -> str | None:
    """The program with the reply's definitions (and imports) put in, or None when the
    reply is not made of definitions only (then it is read as a whole program)."""
    code = extract_code(reply)
    tree = _parse(code) if code else None
    have = _parse(program)
    if tree is None or have is None or code is None:
        return None
    reply_lines = source_lines(code)
    lines = source_lines(program)
    own = {tuple(_text(lines, n)) for n in have.body if not isinstance(n, _DEFS + _IMPORTS)}
    copies = [n for n in tree.body if not isinstance(n, _DEFS + _IMPORTS)]
    if any(tuple(_text(reply_lines, n)) not in own for n in copies) or not any(isinstance(n, _DEFS) for n in tree.body):
        return None
    existing = {}
    for node in have.body:
        if isinstance(node, _DEFS):
            existing[node.name] = node  # the last definition is the one that runs
    data = _bound_otherwise(have)
    last = {node.name: node for node in tree.body if isinstance(node, _DEFS)}
    known_imports = {ast.dump(n) for n in have.body if isinstance(n, _IMPORTS)}
    replaced: list[tuple[int, int, list[str]]] = []
    added: list[str] = []
    imports: list[str] = []
    for node in tree.body:
        if not isinstance(node, _DEFS + _IMPORTS):
            continue  # a copy of the program's own statement: it stays where it is
        text = reply_lines[_start(node) - 1 : node.end_lineno]
        if not isinstance(node, _DEFS):
            if ast.dump(node) not in known_imports:
                imports.extend(text)
        elif last[node.name] is not node:
            continue  # defined again further down the reply: that one is the reply's
        elif node.name in existing:
            old = existing.pop(node.name)
            if isinstance(old, ast.ClassDef) != isinstance(node, ast.ClassDef):
                return None
            replaced.append((_start(old), old.end_lineno or old.lineno, text))
        elif node.name in data:
            return None
        else:
            added.extend([*text, "", ""])
    for start, end, text in sorted(replaced, reverse=True):
        lines[start - 1 : end] = text
    if added:
        # no definition ends above the first one: its line has not moved
        at = min(_start(n) for n in have.body if isinstance(n, _DEFS)) - 1
        lines[at:at] = added
    if imports:
        at = _import_line(have)
        lines[at:at] = imports
    return "\n".join(lines).rstrip("\n") + "\n"
