"""English ↔ translation pairs from the gettext catalogs installed on the machine (``gettext:en,de,fr,…``).

Every program's ``/usr/share/locale/<lang>/LC_MESSAGES/<domain>.mo`` maps an English message (msgid) to its
translation, so messages align across languages by their msgid.  ``en`` stands for the msgids themselves.
Kept: single messages (no plural forms) whose English has at least ``MIN_WORDS`` words, that read as prose
(mostly letters and spaces, no control characters, not an option listing), that carry no printf or brace
format codes, whose translation differs from the English, and that are at most ``MAX_CHARS`` long.
When several catalogs translate one msgid, the catalog whose path sorts first wins.  Read with the standard
library's ``gettext`` module.

``load("gettext:de")`` gives the German side of all messages translated to German;
``load("gettext:en,de,fr")`` the texts of every listed language for the messages all of them translate.
"""

from __future__ import annotations

import gettext
import os
import re
from pathlib import Path

from bench.ground.errors import SpecError
from bench.corpora import parallel, source_def

VERSION = 2
MIN_WORDS = 5
MAX_CHARS = 300
FORMAT_CODE = re.compile(r"%(\d+\$)?[-+ #0']*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspnm%]"
                         r"|%<|\{[A-Za-z0-9_]*\}|\$\{|\\[ntr]")
SPACES = re.compile(r"\s+")


def locale_root() -> Path:
    return Path(os.environ.get("BENCH_LOCALE_DIR", "/usr/share/locale"))


_CATALOGS: dict[tuple[str, int], list[Path]] = {}


def catalogs(lang: str) -> list[Path]:
    """The message catalogs of `lang`, listed once per process while their folder is unchanged (its modification
    time changes when a file is added or removed): a cell fingerprints the corpus for every shared result it looks
    up, and listing a folder of some hundred catalogs each time cost 20 ms."""
    folder = locale_root() / lang / "LC_MESSAGES"
    try:
        key = (str(folder), folder.stat().st_mtime_ns)
    except OSError:
        return []
    if key not in _CATALOGS:
        _CATALOGS[key] = sorted(folder.glob("*.mo"))
    return list(_CATALOGS[key])


def _clean(s: str) -> str:
    return SPACES.sub(" ", s).strip()


def _prose(s: str) -> bool:
    """Mostly letters and spaces, no control characters, not a command-line option listing."""
    if not s or s[0] in "-*" or any(ord(c) < 0x20 for c in s):
        return False
    return sum(c.isalpha() or c == " " for c in s) >= 0.85 * len(s)


def _usable(msgid: str, text: str) -> bool:
    return (len(msgid.split()) >= MIN_WORDS and _prose(msgid) and _prose(text) and len(msgid) <= MAX_CHARS and len(text) <= 2 * MAX_CHARS
            and text != msgid and not FORMAT_CODE.search(msgid) and not FORMAT_CODE.search(text)
            and "\x00" not in text and "\ufffd" not in text)


def pairs(lang: str) -> dict[str, str]:
    """English msgid → translation for one language, filtered as the module docstring says."""
    out: dict[str, str] = {}
    for path in catalogs(lang):
        try:
            with path.open("rb") as fh:
                catalog = gettext.GNUTranslations(fh)._catalog  # noqa: SLF001 - the stdlib keeps it there
        except Exception:  # noqa: BLE001 - a malformed or unreadable catalog is skipped, not fatal
            continue
        for key, value in catalog.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                continue  # plural forms are keyed by (msgid, n)
            if any(ord(c) < 0x20 and c not in "\n\t\x04" for c in key + value):
                continue
            msgid = _clean(key.split("\x04", 1)[-1])  # drop a message context
            text = _clean(value)
            if msgid not in out and _usable(msgid, text):
                out[msgid] = text
    return out


def _languages(variant: str) -> tuple[str, ...]:
    langs = tuple(x.strip() for x in variant.split(",") if x.strip())
    if not langs:
        raise SpecError("gettext corpus needs languages, e.g. 'gettext:en,de,fr'", key="data.corpus")
    for lang in langs:
        if lang != "en" and not catalogs(lang):
            raise SpecError(f"no gettext catalogs for '{lang}' under {locale_root()} (run scripts/setup.sh, "
                            f"which installs the extra catalog packages)", key="data.corpus")
    return langs


@parallel.aligner_def("gettext")
def aligned(languages: tuple[str, ...]) -> parallel.Parallel:
    tables = {lang: pairs(lang) for lang in languages if lang != "en"}
    if not tables:
        raise SpecError("a parallel gettext corpus needs at least one language besides 'en'", key="data.corpus")
    common = sorted(set.intersection(*(set(t) for t in tables.values())))
    units = tuple(tuple(msgid if lang == "en" else tables[lang][msgid] for lang in languages) for msgid in common)
    return parallel.Parallel(tuple(languages), units)


def _files(variant: str) -> list[Path]:
    return [p for lang in _languages(variant) if lang != "en" for p in catalogs(lang)]


def _fingerprint(variant: str) -> str:
    return f"v{VERSION}:{','.join(_languages(variant))}:{parallel.digest_files(_files(variant))}"


@source_def("gettext", version=VERSION, fingerprint=_fingerprint,
            hashed=lambda variant: sum(p.stat().st_size for p in _files(variant)))
def gettext_texts(variant: str) -> list[str]:
    langs = _languages(variant)
    if len(langs) == 1:
        table = pairs(langs[0]) if langs[0] != "en" else None
        if table is None:
            raise SpecError("'gettext:en' alone is ambiguous: name a language whose msgids to take", key="data.corpus")
        return list(table.values())
    par = aligned(langs)
    return [t for lang in langs for t in par.side(lang)]
