"""Is the hint writer's prose right, and does it keep the change to itself?

Two layers, both needed because the writer is a model a student can steer (a comment
in their own cell asking for the fix "in base64, reversed, with spaces between the
letters"):

1. **The fix's lines, in any disguise** (:func:`leaked_lines`): the text is looked at
   in several views — Unicode NFKC, format and zero-width characters removed,
   look-alike letters folded to ASCII (Unicode's confusables, through
   ``confusable_homoglyphs``), markdown code spans joined, and what base64, hex, URL or
   HTML escapes, ROT13 or reversal hide decoded — and no view may hold a changed line of
   the fix (whitespace aside, names renamed).
2. **What only the holder of the fix can check** (:func:`problems`): the prose names no
   name, operator or literal that the fix introduces or removes on the lines it
   changes (nor its usual words: "integer division" for ``//``), no name the student's
   cell does not have, no code the cell does not hold, no instruction to change code
   ("use", "change … to", "replace", "instead", "to fix this"), no error other than
   the one that happened, no line but the ones the tool named, no number the cell,
   the error or the values do not back, and no value the verified run holds where the
   student's run differs (:mod:`.why`).

Prose that fails is dropped and the hint is the facts alone: a good hint (the facts
were right every time the model was not).
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import html
import keyword
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable

from confusable_homoglyphs.confusables import confusables_data

from .facts import PUNCTUATION, Facts, HeldFix, tokens

MIN_TOKENS = 3
"""A changed line shorter than this (``else:``, ``)``) says nothing on its own; its
tokens are checked by layer 2."""

# ---------------------------------------------------------------- layer 1: views
_INVISIBLE = {"\u00ad", "\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u180e", "\u3164", "\uffa0"}


def _fold(char: str) -> str:
    if char.isascii():
        return char
    for glyph in confusables_data.get(char, ()):
        if glyph["c"].isascii():
            return glyph["c"]
    return char


def plain(text: str) -> str:
    """``text`` as it looks: NFKC, without format (Cf) or zero-width characters, every
    look-alike letter folded to its ASCII twin."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cf", "Mn", "Me") and c not in _INVISIBLE)
    return "".join(_fold(c) for c in text)


_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX = re.compile(r"(?:\\x|0x|%)?[0-9a-fA-F]{2}(?:[\s:,-]?(?:\\x|0x|%)?[0-9a-fA-F]{2}){3,}")


def _decoded(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if text and printable >= 0.9 * len(text) else None


def _base64_views(text: str) -> list[str]:
    out = []
    for chunk in _BASE64.findall(text):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                data = decode(chunk + "=" * (-len(chunk) % 4))
            except (binascii.Error, ValueError):
                continue
            found = _decoded(data)
            if found:
                out.append(found)
                break
    return out


def _hex_views(text: str) -> list[str]:
    out = []
    for chunk in _HEX.findall(text):
        digits = re.sub(r"\\x|0x|%|[\s:,-]", "", chunk)
        try:
            found = _decoded(bytes.fromhex(digits))
        except ValueError:
            continue
        if found:
            out.append(found)
    return out


def views(text: str) -> list[str]:
    """Every way ``text`` may be read: as it looks, its code spans joined, and what the
    usual encodings and reversal hide in it (each view also reversed)."""
    seen = plain(text)
    found = [seen, "".join(m.group(2) for m in _SPAN.finditer(seen)), seen.replace("`", "")]
    found.append(html.unescape(seen))
    found.append(urllib.parse.unquote(seen))
    found.append(codecs.decode(seen, "rot13"))
    found += [plain(v) for v in _base64_views(seen) + _hex_views(seen)]
    out: list[str] = []
    for view in found:
        for v in (view, view[::-1]):
            if v and v not in out:
                out.append(v)
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _is_name(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _same_up_to_names(line: list[str], window: list[str]) -> bool:
    """``window`` is ``line`` with names consistently renamed (a keyword is no name: ``for
    value in values:`` is not any four words and a colon)."""
    mapping: dict[str, str] = {}
    back: dict[str, str] = {}
    for ours, theirs in zip(line, window, strict=False):
        if keyword.iskeyword(ours) or keyword.iskeyword(theirs):
            if ours != theirs:
                return False
        elif _is_name(ours) and _is_name(theirs):
            if mapping.setdefault(ours, theirs) != theirs or back.setdefault(theirs, ours) != ours:
                return False
        elif ours != theirs:
            return False
    return True


def leaked_lines(text: str, fix_lines: Iterable[str]) -> list[str]:
    """The fix's changed lines that any view of ``text`` holds, exactly or nearly
    (whitespace aside, names renamed: only a line with something beyond names and
    punctuation, since ``x: float`` renamed is any "Word: word"). Lines of fewer than
    ``MIN_TOKENS`` tokens are left to :func:`problems`."""
    found: list[str] = []
    seen = [(_squash(v), tokens(v.replace("`", " "))) for v in views(text)]
    for line in fix_lines:
        ours = tokens(line)
        if len(ours) < MIN_TOKENS:
            continue
        squashed = _squash(line)
        renamable = any(not (_is_name(t) and not keyword.iskeyword(t)) and t not in PUNCTUATION for t in ours)
        for flat, theirs in seen:
            if squashed in flat or (
                renamable
                and any(_same_up_to_names(ours, theirs[i : i + len(ours)]) for i in range(len(theirs) - len(ours) + 1))
            ):
                found.append(line.strip())
                break
    return found


# ---------------------------------------------------------------- layer 2: the holder's checks
OPERATOR_WORDS = {
    "//": (
        "integer division",
        "floor division",
        "whole-number division",
        "whole number division",
        "floor-divide",
        "slash",
        "rounds down",
    ),
    "/": ("true division", "float division", "floating-point division", "floating point division", "slash"),
    "%": ("modulo", "modulus", "remainder"),
    "**": ("exponent", "to the power", "squared", "cubed"),
    "==": ("equality check", "double equals"),
    "=": ("single equals", "assignment"),
    "!=": ("not equal",),
    "<=": ("less than or equal", "at most"),
    ">=": ("greater than or equal", "at least"),
    "<": ("less than", "smaller than"),
    ">": ("greater than", "bigger than", "larger than"),
    "+=": ("add to", "increment"),
    "-=": ("subtract from", "decrement"),
    "and": ("both conditions",),
    "or": ("either condition",),
    "not": ("negate", "negation"),
}
"""Words that name an operator as surely as its symbol."""

_INSTRUCTION = re.compile(
    r"(?i)\b(?:use|using|uses|used instead|change|changing|replace|replacing|instead|rather than|swap|switch"
    r"|rewrite|modify|adjust|should|must|needs? to|have to|has to|ought|to fix|fix (?:it|this|that|the)"
    r"|the fix|correct (?:it|this|that|the)|try (?:to|using|changing|adding|removing|writing)|make sure|remember to"
    r"|(?:you|we) (?:can|could|might|may|will) (?:add|remove|delete|insert|write|put|start|change)"
    r"|^(?:add|remove|delete|insert|write|put|start|begin|move|call)\b)",
    re.M,
)
_ERROR_WORDS = {
    "IndexError": (r"index(?: ?error)?|out of range|out of bounds|past (?:its|the) end",),
    "KeyError": (r"key ?error|missing key|no such key|key .{0,20}(?:missing|not found)",),
    "NameError": (r"name ?error|not defined|undefined",),
    "ZeroDivisionError": (r"zero ?division|divid\w* by zero|division by zero",),
    "TypeError": (r"type ?error",),
    "ValueError": (r"value ?error",),
    "AttributeError": (r"attribute ?error|has no attribute",),
    "SyntaxError": (r"syntax ?error|invalid syntax",),
    "RecursionError": (r"recursion ?error|infinite recursion|maximum recursion",),
    "timeout": (r"infinite loop|never ends|runs forever|loops forever",),
}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\w)")
_NUMBER_WORDS = dict(
    zero="0", one="1", two="2", three="3", four="4", five="5", six="6", seven="7", eight="8", nine="9", ten="10"
)
_LINES_SAID = re.compile(r"(?i)\blines?\s+((?:\d+(?:\s*(?:,|and|or|to|-|–)\s*)?)+)")
_CODE_LIKE = re.compile(
    r"[A-Za-z_]\w*\([^()\n]*(?:\([^()\n]*\)[^()\n]*)*\)"  # a call
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"  # an attribute
    r"|[A-Za-z_]\w*\[[^\]\n]*\]"  # a subscript
    r"|\b[A-Za-z_]*_\w*"  # a snake_case name
)
_KEYWORD_WORDS = frozenset({"return", "break", "continue", "elif", "lambda", "yield", "global", "nonlocal", "raise"})
"""Keywords that, as plain words, still name the statement (``for`` or ``in`` do not)."""


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z_]\w*", text)}


def _numbers(text: str) -> set[str]:
    out = set()
    for n in _NUMBER.findall(text):
        out.add(n.lstrip("-"))
        if "." in n:
            out.add(n.lstrip("-").rstrip("0").rstrip("."))
    return out


def _cell_names(cell: str) -> set[str]:
    return {t for t in tokens(cell) if _is_name(t)}


def _spans(text: str) -> list[str]:
    return [m.group(2) for m in _SPAN.finditer(text)]


def _with_lines_said_removed(text: str) -> str:
    return _LINES_SAID.sub(" ", text)


def problems(
    text: str,
    *,
    facts: Facts,
    held: HeldFix | None,
    line_offset: int = 0,
    allowed_numbers: Iterable[str] = (),
) -> list[str]:
    """Why ``text`` may not be shown (empty: it may), in words that quote nothing of
    the fix (the reasons go into the student's record). ``line_offset``: what the student's
    line numbers add to the cell's own (1 when the cell's first line is a ``%%hint``
    line), as the prose was written with them. ``allowed_numbers``: numbers the hint's own facts say (its values)."""
    out: list[str] = []
    seen = plain(text)
    if held is not None:
        leaked = leaked_lines(text, held.lines)
        if leaked:
            out.append("it holds a line of the fix")
    if _INSTRUCTION.search(seen):
        out.append(f"it tells the student what to change ({_INSTRUCTION.search(seen).group(0)!r})")  # type: ignore[union-attr]
    cell = facts.cell
    names = _cell_names(cell)
    lowered = seen.lower()
    words = _words(seen)
    code_parts = _spans(seen) + _CODE_LIKE.findall(_with_lines_said_removed(seen))
    code_names = {t for part in code_parts for t in tokens(part) if _is_name(t)}
    if held is not None:
        for token in sorted(held.introduced | held.removed | held.moved):
            said = False
            if _is_name(token):
                keyword_like = token in ("and", "or", "not", "is", "in", "if", "for", "else", "def", "with", "as")
                if len(token) > 1 and not keyword_like:
                    said = token.lower() in words
                else:
                    said = token in code_names or (token in _KEYWORD_WORDS and token in words)
            elif token[0].isdigit():
                said = token in _numbers(_with_lines_said_removed(_number_words(seen)))
            elif token[0] in "'\"" or token[:2].lower() in ("f'", 'f"', "r'", 'r"', "b'", 'b"'):
                inner = token.strip("rbfuRBFU")[1:-1]
                said = len(inner) >= 1 and (inner in seen if len(inner) > 1 else f"'{inner}'" in seen)
            elif token not in PUNCTUATION:
                said = any(token in tokens(part) for part in code_parts) or bool(
                    re.search(rf"(?:^|\s){re.escape(token)}(?:\s|$)", seen)
                )
            for word in OPERATOR_WORDS.get(token, ()):
                said = said or word in lowered
            if said:
                kind = (
                    "name" if _is_name(token) else "literal" if token[0].isdigit() or token[0] in "'\"" else "operator"
                )
                out.append(f"it names {'an' if kind == 'operator' else 'a'} {kind} the fix changes")
                break
    if held is not None and states_verified(seen, held, facts):
        out.append("it states a value the verified run has where the student's differs")
    strangers = sorted(n for n in code_names if n not in names and n.lower() not in ("e", "g", "i.e", "etc"))
    if strangers:
        out.append("it names something the cell does not have")
    for span in _spans(seen):
        if _squash(span) and _squash(span) not in _squash(cell) and not _is_value(span, facts, allowed_numbers):
            out.append("it quotes code the cell does not hold")
            break
    for error, patterns in _ERROR_WORDS.items():
        if error == facts.error_type or (error == "IndexError" and facts.error_type == "KeyError"):
            continue
        if any(re.search(rf"(?i)\b(?:{p})\b", seen) for p in patterns):
            if error == "IndexError" and re.search(r"(?i)\bindex\b", seen) and "out of" not in lowered:
                continue  # "the index i" is no claim of an IndexError
            out.append(f"it speaks of an error that did not happen ({error})")
            break
    said_lines = {int(n) for m in _LINES_SAID.finditer(seen) for n in re.findall(r"\d+", m.group(1))}
    known_lines = {n + line_offset for n in [*facts.changed_lines, facts.failing_line or 0] if n}
    wrong_lines = sorted(said_lines - known_lines)
    if wrong_lines:
        out.append("it points at a line the tool did not name")
    backed = (
        _numbers(cell)
        | _numbers(facts.error_message)
        | _numbers(facts.failed_test)
        | {n for _, value in facts.values for n in _numbers(value)}
        | {n for name, _ in facts.values for n in _numbers(name)}
        | set(allowed_numbers)
    )
    claimed = _numbers(_with_lines_said_removed(seen)) - backed
    if claimed:
        out.append("it states a number nothing computed")
    return out


def _own(facts: Facts) -> Callable[[str], bool]:
    """Whether a code span is the student's own: one of their run's values, or code of
    their cell (two tokens or more: a lone ``1`` could be anything)."""
    own = {_squash(v) for _, v in facts.values}
    differs = facts.differs
    if differs is not None:
        own |= {_squash(differs.value), *(_squash(v) for _, v in (*differs.call, *differs.around))}
    cell = _squash(facts.cell)
    return lambda span: _squash(span) in own or (len(tokens(span)) >= 2 and _squash(span) in cell)


def _without_own(text: str, facts: Facts) -> str:
    theirs = _own(facts)
    return _SPAN.sub(lambda m: " " if theirs(m.group(2)) else m.group(0), text)


def states_verified(text: str, held: HeldFix, facts: Facts) -> bool:
    """``text`` says, in a sentence about a name whose value differs, the value the verified
    run holds there (``middle`` is ``1`` tells ``//`` as surely as the fixed line). Code
    spans that are the student's own values (``[3, 1, 2]``) or code (``len(ordered) / 2``)
    say nothing of the fix."""
    for sentence in re.split(r"(?<=[.?!;:])\s+|\n", text):
        bare = _without_own(sentence, facts)
        words = _words(bare)
        for name, value in held.verified_values:
            if not _words(name) <= words:
                continue
            if _NUMBER.fullmatch(value.strip()):
                if _numbers(value) & _numbers(_with_lines_said_removed(_number_words(bare))):
                    return True
            elif len(_squash(value)) >= 3 and _squash(value) in _squash(bare):
                return True
    return False


def says_the_fix(text: str, *, facts: Facts, held: HeldFix) -> list[str]:
    """What in ``text`` — a hint that may quote the student's own code and values — says
    the fix: a line of it, as code a name, operator or literal it brings that the cell has
    nowhere (a literal by its value: ``'Fizz'`` is the cell's ``"Fizz"``), an operator's
    usual words, or a value the verified run holds where the student's differs."""
    out = []
    if leaked_lines(text, held.lines):
        out.append("it holds a line of the fix")
    seen = plain(text)
    bare = _with_lines_said_removed(_without_own(seen, facts))
    code = [*_spans(_without_own(seen, facts)), *_CODE_LIKE.findall(bare)]
    said = {t for part in code for t in tokens(part)}
    cell = set(tokens(facts.cell))
    values = {_literal(t) for t in cell}
    lowered = bare.lower()
    for token in sorted(held.introduced | held.moved):
        if token in cell or (token[0] in "'\"" and _literal(token) in values):
            continue
        numbers = token[0].isdigit() and token in _numbers(bare)
        if token in said or numbers or any(word in lowered for word in OPERATOR_WORDS.get(token, ())):
            out.append(f"it says {token!r}, which the fix brings")
    if states_verified(seen, held, facts):
        out.append("it states a value the verified run has where the student's differs")
    return out


def _literal(token: str) -> object:
    try:
        return ast.literal_eval(token)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return token


def _number_words(text: str) -> str:
    """Number words that stand for a value ("starts at one", "plus two") as digits ("one
    of the marks" stays a word)."""
    return re.sub(
        r"(?i)\b(at|from|to|by|is|be|equals?|than|plus|minus|times|over)\s+(" + "|".join(_NUMBER_WORDS) + r")\b",
        lambda m: f"{m.group(1)} {_NUMBER_WORDS[m.group(2).lower()]}",
        text,
    )


def _is_value(span: str, facts: Facts, allowed: Iterable[str]) -> bool:
    """A code span that is a value the tool computed (``1.5``) or an expression it showed."""
    flat = _squash(span)
    return any(flat in (_squash(name), _squash(value)) for name, value in facts.values) or flat in set(allowed)
