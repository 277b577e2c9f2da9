"""``brown_text:VARIANT`` — the Brown corpus as plain running text, read straight from its files.

Same files and paragraph order as ``brown:VARIANT`` (one text per paragraph, round-robin over files spread
evenly over the selection, paragraphs of at least 8 words), but without the tags and without NLTK's reader,
which is much slower: for probes that only need the words (e.g. counting bigrams).
"""

from __future__ import annotations

from bench.ground.errors import BenchError
from bench.corpora import source_def, tagged


def _paragraphs(text: str, min_words: int) -> list[str]:
    out = []
    for block in text.split("\n\n"):
        words = [tok.rsplit("/", 1)[0] for tok in block.split() if "/" in tok]
        if len(words) >= min_words:
            out.append(tagged.detokenize(words, ["other"] * len(words)).text)
    return out


def _fingerprint(variant: str) -> str:
    return "text-only:" + tagged._brown_fingerprint(variant)


@source_def("brown_text", version=1, fingerprint=_fingerprint)
def brown_text(variant: str, min_words: int = 8) -> list[str]:
    root = tagged.brown_dir()
    files = tagged.brown_files(variant, root)
    if not files:
        raise BenchError(f"Brown variant {variant!r} selects no files")
    paras = [_paragraphs((root / files[i]).read_text(encoding="latin-1"), min_words)
             for i in tagged.spread_order(len(files))]
    out = []
    for depth in range(max(len(p) for p in paras)):
        out += [p[depth] for p in paras if depth < len(p)]
    return out
