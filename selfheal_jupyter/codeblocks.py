"""Find the program in a model's reply.

Models answer in many shapes: one fenced block (the asked-for case), a block with no
language tag, several blocks, prose around bare code, a reply cut before its closing
fence, a reasoning section before the answer. :func:`extract_code` takes the program
out of all of those, and returns None when there is no code at all (the loop records
that iteration as a failure and asks for one fenced block; it never crashes on it).

Several blocks — the rule, decided once:
1. Blocks tagged with another language (``bash``, ``json``, ``text``, ``output``...)
   are ignored; untagged blocks count only if they parse as Python.
2. A block whose lines all appear in another block is dropped (a repeated excerpt).
3. If the remaining blocks are *versions* of one program (they define the same
   top-level function/class, or are mostly the same text: "original" then "fixed"),
   the last one that compiles wins (else the largest).
4. Otherwise they are *parts* of one program (imports, then a function, then its use)
   and are joined in order.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from .model import CANDIDATE_FILE

_PY_TAGS = {"python", "py", "python3", "py3", "ipython", "ipython3", "pycon", "sage"}
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*$", re.MULTILINE)
_THINK_RE = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)
_CODE_START_RE = re.compile(
    r"^(import |from \S+ import |def |class |async def |@|#|if __name__|for |while |with |try:"
    r"|print\(|[A-Za-z_][\w.]*(\[[^\]]*\])?\s*[-+*/]?=[^=])"
)


@dataclass
class _Block:
    code: str
    tag: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while True:
        opening = _FENCE_RE.search(text, pos)
        if opening is None:
            return blocks
        fence, tag = opening.group(1), opening.group(2).lower()
        body_start = opening.end() + 1
        closing_re = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        closing = closing_re.search(text, body_start)
        if closing is None:
            blocks.append(_Block(text[body_start:], tag, closed=False))
            return blocks
        blocks.append(_Block(text[body_start : closing.start()], tag, closed=True))
        pos = closing.end()


def _compiles(code: str) -> bool:
    try:
        compile(code, "<reply>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _is_meaningful_code(code: str) -> bool:
    """Parses, and is more than bare names or constants ("Sorry" parses as a name)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)):
            continue
        return True
    return False


def _top_level_defs(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _lines(code: str) -> set[str]:
    return {ln.strip() for ln in code.splitlines() if ln.strip()}


def _are_versions(a: str, b: str) -> bool:
    if _top_level_defs(a) & _top_level_defs(b):
        return True
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() > 0.6


def _choose(codes: list[str]) -> str:
    codes = [c for c in codes if c.strip()]
    if len(codes) <= 1:
        return codes[0] if codes else ""
    # 2. Drop blocks that are an excerpt of another block.
    kept: list[str] = []
    for i, code in enumerate(codes):
        mine = _lines(code)
        subsumed = any(
            j != i and mine <= _lines(other) and (len(_lines(other)) > len(mine) or j > i)
            for j, other in enumerate(codes)
        )
        if not subsumed:
            kept.append(code)
    if len(kept) == 1:
        return kept[0]
    # 3. Versions of one program: the last complete one.
    if any(_are_versions(a, b) for i, a in enumerate(kept) for b in kept[i + 1 :]):
        complete = [c for c in kept if _compiles(c)]
        return complete[-1] if complete else max(kept, key=len)
    # 4. Parts of one program.
    return "\n\n".join(c.strip("\n") for c in kept)


def _unfenced(text: str) -> str | None:
    """Bare code, possibly between a line of prose before and after it."""
    stripped = text.strip("\n")
    if _is_meaningful_code(stripped):
        return stripped
    lines = stripped.splitlines()
    starts = [i for i, ln in enumerate(lines) if _CODE_START_RE.match(ln)]
    for start in starts[:20]:
        for end in range(len(lines), start, -1):
            chunk = "\n".join(lines[start:end])
            if not lines[end - 1].strip():
                continue
            if _is_meaningful_code(chunk):
                return chunk
            if len(lines) - end > 10:
                break
    return None


def extract_code(reply: str) -> str | None:
    """The program in ``reply``, or None when the reply holds no code."""
    text = _THINK_RE.sub("", reply or "").replace("\r\n", "\n")
    if not text.strip():
        return None
    blocks = _fenced_blocks(text)
    if blocks:
        tagged = [b.code for b in blocks if b.tag in _PY_TAGS and b.code.strip()]
        untagged = [b.code for b in blocks if not b.tag and b.code.strip() and _is_meaningful_code(b.code)]
        chosen = _choose(tagged or untagged)
        if chosen.strip():
            return chosen.strip("\n") + "\n"
        # Only an unterminated untagged fence, or untagged blocks that do not parse:
        # still the model's attempt at code; QA will report its syntax error.
        attempts = [b.code for b in blocks if not b.tag and any(_CODE_START_RE.match(ln) for ln in b.code.splitlines())]
        if attempts:
            return max(attempts, key=len).strip("\n") + "\n"
        return None
    code = _unfenced(text)
    return code.strip("\n") + "\n" if code else None


def code_diff(old: str | None, new: str, *, old_name: str = "previous.py", new_name: str = CANDIDATE_FILE) -> str:
    """The unified diff text of ``old`` → ``new`` ("" when there is no ``old``).

    Every line ends with a newline in the diff, also the last line of a text typed
    without one (else ``-last line`` and ``+next line`` would be glued together)."""
    if old is None:
        return ""

    def lines(text: str) -> list[str]:
        return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]

    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile=old_name, tofile=new_name))
