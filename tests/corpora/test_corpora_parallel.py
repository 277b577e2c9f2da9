"""Parallel corpora: gettext catalogs (written here as .mo files) and UDHR pages (written here as HTML)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.corpora import gettext_mo, parallel


def write_mo(path: Path, messages: dict[str, str]) -> None:
    """A GNU .mo catalog (little-endian, no hash table) holding `messages` plus the usual empty header entry."""
    items = sorted({"": "Content-Type: text/plain; charset=UTF-8\n", **messages}.items())
    ids = [k.encode() for k, _ in items]
    strs = [v.encode() for _, v in items]
    n = len(items)
    o_ids, o_strs = 28, 28 + 8 * n
    data_at = 28 + 16 * n
    table_ids, table_strs, blob = [], [], b""
    for s in ids:
        table_ids.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    for s in strs:
        table_strs.append((len(s), data_at + len(blob)))
        blob += s + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, n, o_ids, o_strs, 0, 0)
    body = b"".join(struct.pack("<2I", *t) for t in table_ids) + b"".join(struct.pack("<2I", *t) for t in table_strs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + body + blob)


SENTENCES = [f"the quick brown fox number {w} jumps over the lazy dog" for w in
             ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")]


def fake_locales(root: Path, langs=("de", "fr", "ru")) -> Path:
    for lang in langs:
        msgs = {s: f"[{lang}] {s.upper()} {lang}" for s in SENTENCES}
        msgs["copy %s to the place where it belongs"] = f"[{lang}] %s kopieren"   # printf code: dropped
        msgs["this text stays the same in translation"] = "this text stays the same in translation"  # identical
        msgs["too short here"] = f"[{lang}] kurz"  # fewer than 5 words
        if lang == "de":
            msgs["only german has this message translated here"] = "nur deutsch hat diese Nachricht"
        write_mo(root / lang / "LC_MESSAGES" / "prog.mo", msgs)
    return root


@pytest.fixture
def locales(tmp_path, monkeypatch) -> Path:
    root = fake_locales(tmp_path / "locale")
    monkeypatch.setenv("BENCH_LOCALE_DIR", str(root))
    return root


def test_gettext_pairs_are_filtered(locales):
    pairs = gettext_mo.pairs("de")
    assert set(pairs) == set(SENTENCES) | {"only german has this message translated here"}
    assert pairs[SENTENCES[0]] == f"[de] {SENTENCES[0].upper()} de"


def test_gettext_alignment_keeps_units_in_every_language(locales):
    par = parallel.load_parallel("gettext:en,de,fr,ru")
    assert par.languages == ("en", "de", "fr", "ru")
    assert len(par.texts) == len(SENTENCES)  # the German-only message is not aligned
    for unit in par.texts:
        en = unit[0]
        assert unit[1:] == tuple(f"[{l}] {en.upper()} {l}" for l in ("de", "fr", "ru"))


def test_split_is_seeded_disjoint_and_paired(locales):
    par = parallel.load_parallel("gettext:en,de,fr")
    a = parallel.split(par, n_eval=4, seed=3)
    b = parallel.split(par, n_eval=4, seed=3)
    c = parallel.split(par, n_eval=4, seed=4)
    assert a == b and a.evaluation != c.evaluation
    assert len(a.evaluation.texts) == 4 and len(a.selection.texts) == len(SENTENCES) - 4
    assert not set(a.evaluation.side("en")) & set(a.selection.side("en"))
    sub = parallel.subset_languages(a.evaluation, ["fr", "en"])
    assert [u[1] for u in sub.texts] == a.evaluation.side("en")


def test_unknown_language_is_a_spec_error(locales):
    from bench.ground.errors import SpecError

    with pytest.raises(SpecError, match="no gettext catalogs for 'xx'"):
        parallel.load_parallel("gettext:en,xx")


def test_fingerprint_follows_catalog_content(locales):
    from bench import corpora

    before = corpora.fingerprint("gettext:en,de")
    write_mo(locales / "de" / "LC_MESSAGES" / "prog.mo", {SENTENCES[0]: "geändert und anders als vorher"})
    assert corpora.fingerprint("gettext:en,de") != before


UDHR_PAGE = """<!doctype html><html><body><header><h2>{pre}</h2><p>{p0}</p><p>{p1}</p></header>
<article data-number="1"><h2>1</h2><p>{a1}</p></article>
<article data-number="2"><h2>2</h2><p>{a2}</p>{extra}</article></body></html>"""


def test_udhr_aligns_paragraphs_and_joins_uneven_articles(tmp_path, monkeypatch):
    from bench.corpora import udhr

    folder = tmp_path / "udhr" / "declaration"
    folder.mkdir(parents=True)
    (folder / "eng.html").write_text(UDHR_PAGE.format(pre="Preamble", p0="Whereas one", p1="Whereas two",
                                                      a1="All are free.", a2="Everyone counts.", extra=""))
    (folder / "deu_1996.html").write_text(UDHR_PAGE.format(pre="Präambel", p0="Da eins", p1="Da zwei",
                                                           a1="Alle sind frei.", a2="Jeder zählt.",
                                                           extra="<p>Zusatz.</p>"))
    monkeypatch.setattr("bench.corpora.npm.package_dir", lambda name: tmp_path / "udhr")
    par = parallel.load_parallel("udhr:en,de")
    assert par.texts == (("Whereas one", "Da eins"), ("Whereas two", "Da zwei"),
                         ("All are free.", "Alle sind frei."), ("Everyone counts.", "Jeder zählt. Zusatz."))
    assert udhr.udhr_texts("de")[:2] == ["Da eins", "Da zwei"]


def test_a_catalog_added_or_removed_changes_the_corpus_and_its_fingerprint(locales):
    """The catalogs of a language are listed once while their folder is unchanged; a file added or removed
    changes the folder, so the next listing, the texts and the fingerprint see it."""
    from bench import corpora

    before = corpora.fingerprint("gettext:en,de")
    assert [p.name for p in gettext_mo.catalogs("de")] == ["prog.mo"]
    write_mo(locales / "de" / "LC_MESSAGES" / "more.mo",
             {"a sentence only the second catalog carries": "ein Satz nur im zweiten Katalog"})
    assert [p.name for p in gettext_mo.catalogs("de")] == ["more.mo", "prog.mo"]
    assert corpora.fingerprint("gettext:en,de") != before
    (locales / "de" / "LC_MESSAGES" / "more.mo").unlink()
    assert [p.name for p in gettext_mo.catalogs("de")] == ["prog.mo"]
    assert corpora.fingerprint("gettext:en,de") == before
    assert gettext_mo.catalogs("xx") == []
