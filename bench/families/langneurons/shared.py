"""The sub-results the family's probes share, each cached with ``ctx.memo`` under everything it depends on.

* the split of the parallel corpus (seeded by the run seed) — recomputed, it is cheap;
* activation statistics per language (one streaming pass over the selection part, blocks only);
* PV gradient norms per language (forward and backward with the head, on a small budget);
* bits of every evaluation text per condition (method × neuron-set language × evaluated language), so that
  specs asking for the same cell of a ΔBPB matrix compute it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from bench import corpora
from bench.corpora import parallel
from bench.ground.context import part
from bench.families.langneurons import edit, select, stats
from bench.families.langneurons import text as tx

METHODS = ("lape", "lap", "lave", "pv", "rs", "plnd", "rs-plnd")


@dataclass(frozen=True)
class Setup:
    """What text a probe reads and how neurons are selected (the spec's [data] and selection parameters)."""

    corpus: str
    languages: tuple[str, ...]
    eval_texts: int
    selection_tokens: int
    doc_tokens: int
    top_rate: float = 0.01
    bar_quantile: float = 0.95
    lap_threshold: float = 0.95
    plnd_top: float = 0.05
    pv_tokens: int = 256

    def data_parts(self, ctx) -> dict[str, Any]:
        return {"corpus": corpora.fingerprint(self.corpus), "eval_texts": self.eval_texts, "seed": ctx.seed,
                "model": ctx.model.fingerprint, "dtype": str(ctx.model.dtype), "device": ctx.model.device.type}


def split(setup: Setup, seed: int) -> parallel.Split:
    par = parallel.load_parallel(setup.corpus)
    sp = parallel.split(par, n_eval=setup.eval_texts, seed=seed)
    return parallel.Split(parallel.subset_languages(sp.selection, setup.languages),
                          parallel.subset_languages(sp.evaluation, setup.languages), seed)


CHUNKS = 8  # the selection documents are counted in this many interleaved chunks (split-half replicates)


def each_language(ctx, langs) -> list[tuple[str, Callable]]:
    """(language, progress) for each of `langs`: a stage run once per language reports once from 0 to 1, each
    language named with its place (:func:`bench.ground.context.part`)."""
    langs = list(langs)
    return [(lang, part(ctx.progress, i, len(langs), lang)) for i, lang in enumerate(langs)]


def language_chunks(ctx, setup: Setup, sp: parallel.Split, lang: str, progress=None) -> list[stats.Stats]:
    """The statistics of one language in CHUNKS interleaved chunks of its selection documents.  The statistics
    add up over documents, so any union of chunks is the statistic of those documents (one pass in all).
    `progress(f, msg)`: this language's share done (the context's own by default)."""
    m = ctx.model
    progress = progress or ctx.progress
    L, F = m.arch.n_layers, m.arch.d_ffn

    def compute() -> pd.DataFrame:
        docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=setup.doc_tokens,
                            budget=setup.selection_tokens)
        layer, neuron = np.divmod(np.arange(L * F), F)
        cols: dict[str, np.ndarray] = {"layer": layer, "neuron": neuron}
        n_tok, n_doc = [], []
        for c in range(CHUNKS):
            st = stats.record(m, docs[c::CHUNKS], top_frac=setup.plnd_top,
                              progress=lambda f, msg="", c=c: progress((c + f) / CHUNKS, msg))
            cols.update({f"n_pos_{c}": st.n_pos.ravel(), f"s_act_{c}": st.s_act.ravel(), f"n_top_{c}": st.n_top.ravel()})
            n_tok.append(st.n_tokens)
            n_doc.append(st.n_docs)
        frame = pd.DataFrame(cols)
        frame.attrs.update({"n_tokens": n_tok, "n_docs": n_doc})
        return frame

    parts = {"fn": "langneurons.stats", "v": 2, "chunks": CHUNKS, "lang": lang, **setup.data_parts(ctx),
             "selection_tokens": setup.selection_tokens, "doc_tokens": setup.doc_tokens, "plnd_top": setup.plnd_top}
    f = ctx.memo(parts, compute)
    return [stats.Stats(n_tokens=int(f.attrs["n_tokens"][c]), n_docs=int(f.attrs["n_docs"][c]),
                        n_pos=f[f"n_pos_{c}"].to_numpy(np.int64).reshape(L, F),
                        s_act=f[f"s_act_{c}"].to_numpy(float).reshape(L, F),
                        n_top=f[f"n_top_{c}"].to_numpy(np.int64).reshape(L, F)) for c in range(CHUNKS)]


def summed(chunks: list[stats.Stats]) -> stats.Stats:
    """The statistics of the union of `chunks`."""
    return stats.Stats(n_tokens=sum(c.n_tokens for c in chunks), n_docs=sum(c.n_docs for c in chunks),
                       n_pos=sum(c.n_pos for c in chunks), s_act=sum(c.s_act for c in chunks),
                       n_top=sum(c.n_top for c in chunks))


def half_pairs(n_pairs: int, seed: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """`n_pairs` distinct complementary splits of the CHUNKS chunks into two halves (seeded)."""
    from itertools import combinations

    halves = [h for h in combinations(range(CHUNKS), CHUNKS // 2) if 0 in h]  # each split once
    rng = np.random.default_rng([seed, 0x5B])
    pick = rng.permutation(len(halves))[: min(n_pairs, len(halves))]
    return [(halves[i], tuple(c for c in range(CHUNKS) if c not in halves[i])) for i in sorted(pick)]


def split_half_selections(ctx, setup: Setup, sp: parallel.Split, method: str, n_pairs: int):
    """[(selection on half A, selection on half B)] for `n_pairs` splits of the selection documents, for the
    methods that read the activation statistics only (lape, lap, lave, plnd)."""
    langs = list(sp.selection.languages)
    ch = {lang: language_chunks(ctx, setup, sp, lang, progress) for lang, progress in each_language(ctx, langs)}
    out = []
    for pair in half_pairs(n_pairs, ctx.seed):
        sels = []
        for half in pair:
            st = {lang: summed([ch[lang][c] for c in half]) for lang in langs}
            sels.append(_select_from(method, st, langs, setup))
        out.append(tuple(sels))
    return out


def _select_from(method: str, st: dict[str, stats.Stats], langs: list[str], setup: Setup) -> select.Selection:
    rule = dict(top_rate=setup.top_rate, bar_quantile=setup.bar_quantile)
    if method == "lape":
        return select.lape(np.stack([st[l].p for l in langs]), langs, **rule)
    if method == "lave":
        return select.lave(np.stack([st[l].mean for l in langs]), langs, **rule)
    if method == "lap":
        return select.lap(np.stack([st[l].p for l in langs]), langs, threshold=setup.lap_threshold)
    if method == "plnd":
        return select.plnd(np.stack([st[l].n_top for l in langs]), [st[l].n_docs for l in langs], langs)
    raise ValueError(f"no split-half selection for method '{method}' (lape, lave, lap, plnd)")


def language_gradients(ctx, setup: Setup, sp: parallel.Split, lang: str, progress=None) -> np.ndarray:
    """PV's gradient norm per neuron (L, F) on one language's selection documents; `progress` as in
    :func:`language_chunks`."""
    m = ctx.model
    L, F = m.arch.n_layers, m.arch.d_ffn

    def compute() -> pd.DataFrame:
        docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=min(setup.doc_tokens, setup.pv_tokens),
                            budget=setup.pv_tokens)
        g = stats.gradient_norms(m, docs, progress=progress or ctx.progress)
        return pd.DataFrame({"grad_norm": g.ravel()})

    parts = {"fn": "langneurons.pv", "v": 1, "lang": lang, **setup.data_parts(ctx), "pv_tokens": setup.pv_tokens,
             "doc_tokens": setup.doc_tokens}
    return ctx.memo(parts, compute)["grad_norm"].to_numpy(float).reshape(L, F)


def all_stats(ctx, setup: Setup, sp: parallel.Split) -> dict[str, stats.Stats]:
    return {lang: summed(language_chunks(ctx, setup, sp, lang, progress))
            for lang, progress in each_language(ctx, sp.selection.languages)}


def all_gradients(ctx, setup: Setup, sp: parallel.Split) -> np.ndarray:
    """PV's gradient norms of every selection language, stacked (K, L, F)."""
    return np.stack([language_gradients(ctx, setup, sp, lang, progress)
                     for lang, progress in each_language(ctx, sp.selection.languages)])


ORDER = ("lape", "lap", "lave", "pv", "plnd", "rs", "rs-plnd")  # the order of the sets, and of their rows


def selections(ctx, setup: Setup, sp: parallel.Split, methods, band: str = "all",
               sized_like: str = "") -> dict[str, select.Selection]:
    """Neuron sets per method and language (restricted to the layer `band`).  With `sized_like` (a method),
    LAP, LAVE and PV give each language as many neurons as that method does (RS always matches LAPE)."""
    m = ctx.model
    langs = list(sp.selection.languages)
    st = all_stats(ctx, setup, sp)
    n_all = m.arch.n_layers * m.arch.d_ffn
    out: dict[str, select.Selection] = {}
    if sized_like not in ("", "lape", "plnd"):
        raise ValueError(f"sized_like = '{sized_like}': sizes can follow lape or plnd")
    need = set(methods) | ({"lape"} if "rs" in methods else set()) | ({"plnd"} if "rs-plnd" in methods else set())
    if sized_like:
        need.add(sized_like)
    p = np.stack([st[l].p for l in langs])  # (K, L, F)
    rule = dict(top_rate=setup.top_rate, bar_quantile=setup.bar_quantile)
    # the sets that never follow another's sizes first, so that LAP, LAVE and PV can take theirs
    if "lape" in need:
        out["lape"] = select.lape(p, langs, **rule)
    if "plnd" in need:
        out["plnd"] = select.plnd(np.stack([st[l].n_top for l in langs]), [st[l].n_docs for l in langs], langs)
    sizes = {lang: len(out[sized_like][lang]) for lang in langs} if sized_like else None
    if "lap" in need:
        out["lap"] = select.lap(p, langs, threshold=setup.lap_threshold, sizes=sizes)
    if "lave" in need:
        out["lave"] = select.lave(np.stack([st[l].mean for l in langs]), langs, **rule, sizes=sizes)
    if "pv" in need:
        out["pv"] = select.pv(all_gradients(ctx, setup, sp), langs, **rule, sizes=sizes)
    if "rs" in need:
        out["rs"] = select.random_like(out["lape"], n_all, ctx.seed)
    if "rs-plnd" in need:
        out["rs-plnd"] = select.random_like(out["plnd"], n_all, ctx.seed + 1)
    band_layers = select.layer_band(band, m.arch.n_layers)
    return {k: select.restrict_layers(out[k], band_layers, m.arch.d_ffn) for k in ORDER if k in methods}


class _NotCached(Exception):
    pass


def condition_bits(ctx, setup: Setup, sp: parallel.Split, *, neurons: np.ndarray | None, langs: list[str],
                   micro_tokens: int) -> dict[str, np.ndarray]:
    """Bits of each evaluation text of every language in `langs` with `neurons` zeroed (None: unedited).

    Cached per language, keyed by the neuron set itself (so methods or layer bands that pick the same neurons
    share the work); the languages not cached yet are evaluated together in one length-sorted pass, which
    wastes less padding than one pass per language.
    """
    m = ctx.model
    if neurons is not None and len(neurons) == 0:
        neurons = None  # an empty set edits nothing
    parts = {lang: {"fn": "langneurons.bits", "v": 1, "lang": lang, **setup.data_parts(ctx),
                    "neurons": None if neurons is None else _digest(neurons)} for lang in langs}

    def missing():
        raise _NotCached

    out: dict[str, np.ndarray] = {}
    for lang in langs:
        try:
            out[lang] = ctx.memo(parts[lang], missing)["bits"].to_numpy(float)
        except _NotCached:
            pass
    todo = [lang for lang in langs if lang not in out]
    if todo:
        texts = [t for lang in todo for t in sp.evaluation.side(lang)]
        edits = edit.neuron_edits(m.arch, neurons) if neurons is not None else None
        bits, _ = edit.text_bits(m, texts, edits=edits, max_tokens=micro_tokens)
        n = len(sp.evaluation.texts)
        for i, lang in enumerate(todo):
            piece = pd.DataFrame({"bits": bits[i * n: (i + 1) * n]})
            out[lang] = ctx.memo(parts[lang], lambda piece=piece: piece)["bits"].to_numpy(float)
    return out


def _digest(idx: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.asarray(idx, dtype=np.int64).tobytes()).hexdigest()[:20]
