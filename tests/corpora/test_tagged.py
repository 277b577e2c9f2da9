"""Word classes: tag maps, detokenisation, and sub-token alignment on two kinds of tokenizer."""

from __future__ import annotations

import pytest

from bench.corpora.tagged import (
    CLASSES,
    SPECIAL,
    TaggedText,
    brown_class,
    detokenize,
    penn_class,
    spread_order,
    token_classes,
)

# A hand-tagged sentence: (word, class).
SENTENCE = [("The", "determiner"), ("unbelievably", "adverb"), ("tall", "adjective"), ("giraffes", "noun"),
            ("of", "preposition"), ("Nairobi", "noun"), ("ate", "verb"), ("42", "number"), ("leaves", "noun"),
            (",", "punctuation"), ("didn't", "verb"), ("they", "pronoun"), ("?", "punctuation")]


def tagged() -> TaggedText:
    return detokenize([w for w, _ in SENTENCE], [c for _, c in SENTENCE])


def test_detokenize_keeps_spans():
    t = tagged()
    assert t.text == "The unbelievably tall giraffes of Nairobi ate 42 leaves, didn't they?"
    assert [t.text[s:e] for s, e in t.spans] == [w for w, _ in SENTENCE]


def test_brown_quotes_become_straight_quotes():
    t = detokenize(["He", "said", "``", "no", "''", "."], ["pronoun", "verb", "punctuation", "determiner",
                                                           "punctuation", "punctuation"])
    assert t.text == 'He said "no".'


@pytest.mark.parametrize("tag,cls", [("AT", "determiner"), ("IN", "preposition"), ("CS", "preposition"),
                                     ("NN-TL", "noun"), ("NP$", "noun"), ("VBD", "verb"), ("BEDZ*", "verb"),
                                     ("PPSS+MD", "pronoun"), ("PP$", "pronoun"), ("JJ-HL", "adjective"),
                                     ("OD", "adjective"), ("QL", "adverb"), ("*", "adverb"), ("CD", "number"),
                                     (".", "punctuation"), ("---HL", "punctuation"), ("``", "punctuation"),
                                     ("FW-NN", "noun"), ("CC", "other"), ("WDT", "determiner"), ("ABN", "determiner")])
def test_brown_tags(tag, cls):
    assert brown_class(tag) == cls


@pytest.mark.parametrize("tag,cls", [("DT", "determiner"), ("PDT", "determiner"), ("TO", "preposition"),
                                     ("NNPS", "noun"), ("MD", "verb"), ("PRP$", "pronoun"), ("WRB", "adverb"),
                                     (",", "punctuation"), ("-LRB-", "punctuation"), ("CC", "other")])
def test_penn_tags(tag, cls):
    assert penn_class(tag) == cls


def _expected(t: TaggedText, offsets) -> list[str]:
    """Slow reference: the class of the word that contains the token's first non-space character."""
    out = []
    for s, e in offsets:
        cls = SPECIAL
        for ch in range(s, e):
            if t.text[ch].isspace():
                continue
            cls = next((c for (a, b), c in zip(t.spans, t.classes) if a <= ch < b), SPECIAL)
            break
        out.append(cls)
    return out


def test_subword_tokenizer_splits_words(tiny_tokenizer):
    """The tiny byte-level BPE (256 merges) splits long words into pieces; every piece gets its word's class."""
    t = tagged()
    enc = tiny_tokenizer(t.text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    assert len(offsets) > len(SENTENCE) + 5  # words really are split
    got = token_classes(t, offsets)
    assert got == _expected(t, offsets)
    pieces = [c for (s, e), c in zip(offsets, got) if 4 <= s < 16]  # inside "unbelievably"
    assert len(pieces) >= 2 and set(pieces) == {"adverb"}


def test_tokenizer_that_merges_leading_spaces():
    """A word-level tokenizer whose tokens carry their leading space (" the", " tall"): the space is skipped."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    t = tagged()
    words = ["The", "?", ",", "[BOS]"] + [" " + w for w, _ in SENTENCE] + [w for w, _ in SENTENCE]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words + ["[UNK]"]))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r" ?[A-Za-z0-9']+| ?[^A-Za-z0-9' ]"), behavior="isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[BOS]")
    enc = fast(t.text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    pieces = [t.text[s:e] for s, e in offsets]
    assert " tall" in pieces and " of" in pieces  # the space is part of the token
    assert token_classes(t, offsets) == [c for _, c in SENTENCE]
    assert token_classes(t, [(0, 0)] + list(offsets))[0] == SPECIAL  # a BOS has no characters


def test_every_class_is_known():
    assert set(c for _, c in SENTENCE) <= set(CLASSES)


@pytest.mark.parametrize("m", [1, 2, 7, 500])
def test_spread_order_is_a_permutation(m):
    order = spread_order(m)
    assert sorted(order) == list(range(m))
