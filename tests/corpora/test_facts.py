"""Fact sets, quiz patterns, normalisation and alias matching (with the case where a plain substring misleads)."""

from __future__ import annotations

import pytest

from bench.ground.errors import SpecError
from bench.corpora import facts as F


def test_normalise_drops_case_punctuation_articles_and_accents():
    assert F.normalise("The  Hague!") == "hague"
    assert F.normalise("São Tomé, an island.") == "sao tome island"


@pytest.mark.parametrize("output,aliases,expected", [
    ("Paris, France.", ("Paris",), True),
    ("It is the city of Paris", ("paris",), True),
    ("The Hague", ("Hague",), True),
    ("New Delhi", ("New Delhi",), True),
    ("Delhi", ("New Delhi",), False),
    ("Romeo", ("Rome",), False),             # short alias inside a longer word: not a match
    ("Romania", ("Oman",), False),
    ("Hydrogen", ("H",), False),
    ("Rome.", ("Rome",), True),
    ("", ("Rome",), False),
])
def test_alias_matching_by_whole_words(output, aliases, expected):
    assert F.matches(output, aliases) is expected


def test_the_papers_raw_substring_rule_is_available_and_misleads():
    assert F.matches("Romeo", ("Rome",), substring=True)
    assert F.matches("Paris, France.", ("paris",), substring=True)


def test_quiz_patterns_expand():
    assert F.expand("Andorra la V[ell|iej]a") == ["Andorra la Vella", "Andorra la Vieja"]
    assert F.expand("Cal{if{ornia}}|CA") == ["California", "Calif", "Cal", "CA"]
    assert F.expand("{G{eorge} }Washington") == ["George Washington", "G Washington", "Washington"]
    assert F.expand("Vienna|Wien") == ["Vienna", "Wien"]
    with pytest.raises(ValueError):
        F.expand("a{b")


def test_quiz_files_parse_with_continuations(tmp_path):
    (tmp_path / "x").write_text("Austria:Vienna|Wien\nLong:\\\nName{s}\n")
    assert F.quiz_rows("x", tmp_path) == [["Austria", "Vienna|Wien"], ["Long", "Name{s}"]]


def test_geonames_and_quiz_sets():
    caps = F.load_facts("country-capital")
    fr = next(f for f in caps if f.subject == "France")
    assert fr.answer == "Paris" and fr.question() == "What is the capital of France?"
    assert fr.question(1) != fr.question(0)
    cont = {f.subject: f.answer for f in F.load_facts("country-continent")}
    assert cont["Brazil"] == "South America"
    quiz = {f.subject: f.aliases for f in F.quiz_capitals()}
    assert "Wien" in quiz["Austria"] and "Vienna" in quiz["Austria"]


def test_fictional_facts_are_seeded_new_and_not_real():
    a, b = F.fictional(30, 1), F.fictional(30, 1)
    assert a == b and a != F.fictional(30, 2)
    real = F._real_names()
    assert all(F.normalise(f.subject) not in real and F.normalise(f.answer) not in real for f in a)
    assert len({f.subject for f in a}) == 30


def test_unknown_variant_is_a_spec_error():
    with pytest.raises(SpecError, match="did you mean"):
        F.load_facts("country-capitals")


def test_starts_with_reads_the_first_line_and_keeps_articles():
    assert F.starts_with(" Paris, France.", ("Paris",))
    assert F.starts_with(" Bogotá is big", ("Bogota",)) and F.starts_with("\n  lima\nParis", ("Lima",))
    assert not F.starts_with(" Parisian food", ("Paris",))  # whole words only
    assert not F.starts_with(" It is Paris", ("Paris",))  # anywhere is not enough: it must come first
    assert not F.starts_with(" unknown\nParis", ("Paris",))  # the first line only
    assert not F.starts_with("The Hague", ("Hague",)) and F.matches("The Hague", ("Hague",))  # articles count here
    assert not F.starts_with(" Paris", ("", "  "))


def test_one_country_capital_model_serves_every_family():
    from bench.families.ecm import tasks
    from bench.families.microscope import qa

    capitals = F.geonames("country-capital")
    demos, questions = qa.capital_facts(6, 2)
    assert [(f.subject, f.aliases) for f in demos + questions] == [(f.subject, f.aliases) for f in capitals[:8]]
    assert [(i.query, i.aliases) for i in tasks._pool("capital")] == [(f.subject, f.aliases) for f in capitals[:150]]
