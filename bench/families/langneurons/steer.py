"""Greedy generation under a neuron edit (:func:`bench.models.decoding.greedy_rows`), and how much of the output
is in a given language.

Language of a text: where the language has its own script, the share of the text's letters written in that
script (Cyrillic for ru/uk; Hangul for ko; kana for ja, plus Han when the text has kana; Han for zh when the text
has no kana).  For Latin-script languages the script cannot tell them apart, so the share of Latin letters is
multiplied by ``langdetect``'s probability for the language (seeded, so the result is reproducible).
"""

from __future__ import annotations

import unicodedata

import numpy as np

from bench.families.langneurons import text as tx
from bench.models import decoding, hooks

SCRIPT_OF = {"ru": "CYRILLIC", "uk": "CYRILLIC", "bg": "CYRILLIC", "ko": "HANGUL", "el": "GREEK", "ar": "ARABIC",
             "he": "HEBREW", "hi": "DEVANAGARI", "th": "THAI"}
DETECT_CODE = {"zh_CN": "zh-cn", "zh": "zh-cn", "zh_TW": "zh-tw", "pt_BR": "pt"}


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if "CJK UNIFIED" in name or "CJK COMPATIBILITY IDEOGRAPH" in name:
        return "HAN"
    if name.startswith(("HIRAGANA", "KATAKANA")):
        return "KANA"
    return name.split(" ", 1)[0] if name else ""


def language_share(text: str, lang: str) -> float:
    """Share (0–1) of `text` that is in language `lang` (see the module docstring)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    scripts = [_script(c) for c in letters]
    n = len(scripts)
    base = lang.split("_", 1)[0]
    if base == "ja":
        kana = scripts.count("KANA")
        return (kana + scripts.count("HAN")) / n if kana else 0.0
    if base == "zh":
        return scripts.count("HAN") / n if not scripts.count("KANA") else 0.0
    if base in SCRIPT_OF:
        return scripts.count(SCRIPT_OF[base]) / n
    latin = scripts.count("LATIN") / n
    if latin == 0:
        return 0.0
    return latin * _detect_probability(" ".join(text.split()), DETECT_CODE.get(lang, base))


def _detect_probability(text: str, code: str) -> float:
    from langdetect import DetectorFactory, LangDetectException, detect_langs

    DetectorFactory.seed = 0  # langdetect samples; a fixed seed makes it deterministic
    try:
        return float(sum(g.prob for g in detect_langs(text) if g.lang == code))
    except LangDetectException:
        return 0.0


def generate(model, prompts: list[str], *, max_new_tokens: int, edits: dict | None = None) -> list[str]:
    """Greedy continuations of `prompts` (left-padded into one batch) under `edits`; the new text only."""
    with hooks.intervene(model.hf, edits or {}):
        return decoding.greedy_rows(model, [tx.encode(model.tokenizer, p) for p in prompts], max_new_tokens,
                                    pad=tx.pad_id(model.tokenizer))


def shares(texts: list[str], lang: str) -> np.ndarray:
    return np.array([language_share(t, lang) for t in texts], dtype=float)
