"""Input edits and answer matching for the QA probe (prefix reconstruction: test_contextual.py)."""

from __future__ import annotations

import pytest

from bench.corpora.capitals import capital_facts, is_correct
from bench.families.microscope.qa import edit, prompt, stop_words


def test_edits():
    s = "What is the capital of France?"
    stops = stop_words()
    assert edit(s, "original") == s
    assert edit(s, "no_punctuation") == "What is the capital of France"
    assert edit(s, "no_articles") == "What is capital of France?"
    assert edit(s, "no_stopwords", stops) == "capital France?"
    assert edit("Name the capital city of Côte d'Ivoire.", "no_articles") == "Name capital city of Côte d'Ivoire."


def test_prompt_keeps_the_scaffold_and_demonstrated_answers():
    demos, facts = capital_facts(5, 2)
    assert len(demos) == 2 and len(facts) == 5 and {d.subject for d in demos}.isdisjoint(f.subject for f in facts)
    p = prompt(demos, facts[0], "no_punctuation", stop_words())
    assert p.count("Question:") == 3 and p.endswith("Answer:") and f"Answer: {demos[0].aliases[0]}" in p
    assert "?" not in p


@pytest.mark.parametrize("answer,ok", [(" Paris", True), (" paris.\nQuestion", True), (" Paris, France", True),
                                       (" Parisian", False), (" Lyon", False), ("", False)])
def test_alias_matching(answer, ok):
    assert is_correct(answer, ("Paris",)) is ok


def test_alias_matching_ignores_accents():
    assert is_correct(" Brasilia", ("Brasília",)) and is_correct(" Bogotá is", ("Bogota",))
