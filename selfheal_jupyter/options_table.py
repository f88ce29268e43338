"""The README's table of options, written from ``SelfHeal``'s traits.

    python3 -m selfheal_jupyter.options_table README.md     # rewrites the table in place

Why: each default lives in one place (:mod:`~selfheal_jupyter.config`); a table copied
by hand falls behind it. Each row is one option: its default, what the embedded model
uses instead where it was measured better (the trait's ``embedded`` tag),
and the trait's own help, which ``%config SelfHeal`` shows too. ``tests/unit/test_options_table.py``
fails when the README's table is not this one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from traitlets import Bool, Enum, Float, Int, TraitType, Unicode

from .config import EMBEDDED, SelfHeal

BEGIN = "<!-- options: written from SelfHeal by `python3 -m selfheal_jupyter.options_table README.md` -->"
END = "<!-- end of options -->"


def option_names() -> list[str]:
    """The options in the order ``config.py`` declares them (grouped by what they set)."""
    return [
        name for name, trait in vars(SelfHeal).items() if isinstance(trait, TraitType) and trait.metadata.get("config")
    ]


def _size(value: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value} ({value >> shift} {unit})"
    return str(value)


def _value(name: str, trait: TraitType, value: object) -> str:
    if isinstance(trait, Bool):
        return str(value)
    if isinstance(trait, Float):
        return f"{value:g}"
    if isinstance(trait, Int):
        return _size(int(str(value))) if name.endswith("_bytes") else str(value)
    if isinstance(trait, (Unicode, Enum)):
        return f"`{value}`" if value else '`""`'
    return f"`{value!r}`"


def _embedded_options() -> dict[str, object]:
    """What the embedded model uses where the user kept the default (``SelfHeal``'s tags)."""
    traits = SelfHeal.class_traits(config=True)
    return {name: trait.metadata[EMBEDDED] for name, trait in traits.items() if EMBEDDED in trait.metadata}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The table, between its two marker lines."""
    traits = SelfHeal.class_traits(config=True)
    embedded = _embedded_options()
    lines = [BEGIN, "| option | default | what |", "| --- | --- | --- |"]
    for name in option_names():
        trait = traits[name]
        default = _value(name, trait, trait.default_value)
        if name in embedded:
            default += f" (the embedded model: {_value(name, trait, embedded[name])})"
        lines.append(f"| `{name}` | {default} | {_cell(trait.help)} |")
    lines.append(END)
    return "\n".join(lines)


def replaced(text: str) -> str:
    """``text`` (the README) with its table written anew; ValueError without the markers."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not (begin and end):
        raise ValueError(f"the markers of the options table are missing: {BEGIN} ... {END}")
    return head + render() + tail


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path = Path(args[0])
    text = path.read_text(encoding="utf-8")
    new = replaced(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: options table written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
