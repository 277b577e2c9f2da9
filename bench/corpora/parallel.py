"""Parallel (sentence-aligned) multilingual text, and its seeded split into a selection and an evaluation part.

A parallel corpus is named like any corpus, ``source:lang,lang,…`` (``gettext:en,de,fr`` or ``udhr:en,de,vi``);
the language list in the name fixes which units are aligned (a unit must exist in every listed language), so
two probes that name the same corpus read the same units whatever subset of languages they study.
Unit ``i`` of every language says the same thing; the split keeps units whole, so the evaluation texts of all
languages are translations of one another and a bootstrap over evaluation units is paired across languages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.ground.errors import SpecError


@dataclass(frozen=True)
class Parallel:
    languages: tuple[str, ...]
    texts: tuple[tuple[str, ...], ...]  # texts[u][k]: unit u in languages[k]

    def __post_init__(self):
        if any(len(u) != len(self.languages) for u in self.texts):
            raise ValueError("every unit needs one text per language")

    def side(self, lang: str) -> list[str]:
        k = self.languages.index(lang)
        return [u[k] for u in self.texts]

    def subset(self, units) -> "Parallel":
        return Parallel(self.languages, tuple(self.texts[int(i)] for i in units))


@dataclass(frozen=True)
class Split:
    """Units of a parallel corpus divided, by a seeded permutation, into selection and evaluation parts."""

    selection: Parallel
    evaluation: Parallel
    seed: int


# source name -> (language list -> aligned corpus); filled by the source modules
_ALIGNERS: dict[str, Callable[[tuple[str, ...]], Parallel]] = {}


def aligner_def(source: str):
    def wrap(fn):
        if source in _ALIGNERS:
            raise ValueError(f"parallel source '{source}' is registered twice")
        _ALIGNERS[source] = fn
        return fn

    return wrap


def parse_languages(variant: str) -> tuple[str, ...]:
    langs = tuple(x.strip() for x in variant.split(",") if x.strip())
    if len(langs) < 2 or len(set(langs)) != len(langs):
        raise SpecError(f"a parallel corpus names two or more distinct languages, got '{variant}'", key="data.corpus")
    return langs


def load_parallel(corpus: str) -> Parallel:
    """The aligned units of ``source:lang,lang,…``, kept on disk under the corpus fingerprint once built."""
    from bench import corpora
    from bench.ground.store import atomic_write_bytes, cache_root, key_of

    source, variant = corpora.split(corpus)  # imports every source module, which registers its aligner
    if source.name not in _ALIGNERS:
        raise SpecError(f"corpus source '{source.name}' is not parallel text (parallel sources: "
                        f"{', '.join(sorted(_ALIGNERS))})", key="data.corpus")
    langs = parse_languages(variant)
    path = cache_root() / "data" / "parallel" / f"{key_of({'corpus': corpora.fingerprint(corpus)})}.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Parallel(tuple(raw["languages"]), tuple(tuple(u) for u in raw["texts"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    par = _ALIGNERS[source.name](langs)
    body = json.dumps({"languages": par.languages, "texts": par.texts}, ensure_ascii=False)
    atomic_write_bytes(path, body.encode("utf-8"))
    return par


def split(par: Parallel, *, n_eval: int, seed: int) -> Split:
    """A seeded permutation of the units; the first `n_eval` form the evaluation part, the rest the selection part."""
    n = len(par.texts)
    if not 0 < n_eval < n:
        raise ValueError(f"cannot hold out {n_eval} of {n} aligned units for evaluation")
    order = np.random.default_rng([seed, 0x5EED]).permutation(n)
    return Split(selection=par.subset(sorted(order[n_eval:])), evaluation=par.subset(sorted(order[:n_eval])),
                 seed=seed)


def subset_languages(par: Parallel, languages: list[str] | tuple[str, ...]) -> Parallel:
    """The same units in fewer languages (in the order asked for)."""
    if not languages:
        return par
    missing = [l for l in languages if l not in par.languages]
    if missing:
        raise SpecError(f"languages {missing} are not in the corpus (it has {', '.join(par.languages)})",
                        key="data.languages")
    idx = [par.languages.index(l) for l in languages]
    return Parallel(tuple(languages), tuple(tuple(u[i] for i in idx) for u in par.texts))


_FILE_DIGESTS: dict[tuple[str, int, int], bytes] = {}


def digest_files(paths) -> str:
    """sha256 over the names and contents of files (the identity of a corpus built from them).  Each file is
    read and hashed once per process: its digest is kept under its path, size and modification time, so a
    changed file is read again and an unchanged one is only looked up (a cell fingerprints its corpus for every
    shared result it looks up)."""
    h = hashlib.sha256()
    for p in sorted(paths, key=str):
        h.update(str(p).encode())
        h.update(file_digest(p))
    return h.hexdigest()[:16]


def file_digest(path) -> bytes:
    """sha256 of one file's bytes, read at most once per process while the file is unchanged."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hashlib.sha256(path.read_bytes()).digest()
    return _FILE_DIGESTS[key]
