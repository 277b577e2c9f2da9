"""The factual QA set (country → capital, :mod:`bench.corpora.capitals`) asked with the input edits of LLM-Microscope's
Table 1 (no stop words, no punctuation, no articles), and greedy answering.

Prompts are few-shot: ``Question: … Answer: …`` blocks, then the test question and ``Answer:``.  The edits apply
to the question sentences (demonstrations included) and leave the ``Question:``/``Answer:`` scaffold and the
demonstrated answers as they are: the scaffold is the task format, the sentences are the input.  Stop words are
spaCy's English list (no download needed); punctuation is every Unicode punctuation character.
"""

from __future__ import annotations

import re
import unicodedata

from bench.corpora.capitals import Fact
from bench.models import decoding

CONDITIONS = ("original", "no_stopwords", "no_punctuation", "no_articles")
ARTICLES = frozenset({"a", "an", "the"})


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


def greedy_answers(model, prompts: list[str], max_new_tokens: int, batch: int) -> list[str]:
    """Greedy answers (the first line of each continuation) to `prompts`, which share their demonstrations: the
    shared prefix runs once (:func:`bench.models.decoding.decode`), and decoding stops at the end of the line."""
    return list(decoding.decode(model.hf, model.tokenizer, prompts, max_new_tokens, micro_batch=batch).texts)
