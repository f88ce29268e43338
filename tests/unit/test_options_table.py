"""The README's options table is the one written from ``SelfHeal``'s traits."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.options_table import BEGIN, END, option_names, render, replaced

README = Path(__file__).parents[2] / "README.md"


def test_the_readme_table_is_the_one_the_traits_give():
    text = README.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README.md lost the options table's markers"
    assert replaced(text) == text, (
        "README.md's options table differs from SelfHeal's traits: "
        "run `python3 -m selfheal_jupyter.options_table README.md`"
    )


def test_every_option_has_one_row_with_its_default_and_help():
    table = render()
    assert set(option_names()) == set(SelfHeal.class_traits(config=True))
    for name in option_names():
        rows = [line for line in table.splitlines() if line.startswith(f"| `{name}` |")]
        assert len(rows) == 1, (name, rows)
    assert "| `max_iterations` | 4 | Most developer → QA rounds per task. |" in table
    assert "| `output_limit_bytes` | 1048576 (1 MiB) |" in table
    assert "| `candidates` | 1 (the embedded model: 3) |" in table


def test_a_changed_default_or_help_shows_as_a_difference(monkeypatch):
    text = README.read_text(encoding="utf-8")
    trait = SelfHeal.class_traits()["max_iterations"]
    monkeypatch.setattr(trait, "default_value", 5)
    assert replaced(text) != text
    monkeypatch.undo()
    monkeypatch.setattr(trait, "help", "Rounds.")
    assert "| `max_iterations` | 4 | Rounds. |" in replaced(text)


def test_a_readme_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="markers"):
        replaced("# no table here\n")


def test_the_embedded_models_values_are_tags_of_the_options_and_config_shows_them():
    """One place for each value: the option's own ``embedded`` tag, which the run uses
    (where the user kept the default), ``%config SelfHeal`` shows and the table prints."""
    traits = SelfHeal.class_traits(config=True)
    tagged = {name: t.metadata["embedded"] for name, t in traits.items() if "embedded" in t.metadata}
    assert {"candidates", "plan_min_words", "plan_on_heal", "llm_timeout_s"} <= set(tagged)
    shown = SelfHeal.class_get_help()
    table = render()
    for name, value in tagged.items():
        section = shown.split(f"SelfHeal.{name}=")[1].split("\n--SelfHeal.")[0]
        assert f"The embedded model: {value!r}" in section, name
        assert getattr(SelfHeal().for_endpoint(True), name) == value != traits[name].default_value
        assert "(the embedded model: " in next(line for line in table.splitlines() if f"`{name}`" in line)
    hosted = SelfHeal()
    assert hosted.for_endpoint(False) is hosted
