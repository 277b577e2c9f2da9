"""The sub-results the family's probes share, each cached with ``ctx.memo`` under everything it depends on.

* the split of the parallel corpus (seeded by the run seed) — recomputed, it is cheap;
* activation statistics per language (one streaming pass over the selection part, blocks only);
* PV gradient norms per language (forward and backward with the head, on a small budget);
* bits of every evaluation text per condition (method × neuron-set language × evaluated language), so that
  specs asking for the same cell of a ΔBPB matrix compute it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench import corpora
from bench.corpora import parallel
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


def language_stats(ctx, setup: Setup, sp: parallel.Split, lang: str) -> stats.Stats:
    m = ctx.model
    L, F = m.arch.n_layers, m.arch.d_ffn

    def compute() -> pd.DataFrame:
        docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=setup.doc_tokens,
                            budget=setup.selection_tokens)
        st = stats.record(m, docs, top_frac=setup.plnd_top, progress=ctx.progress)
        layer, neuron = np.divmod(np.arange(L * F), F)
        frame = pd.DataFrame({"layer": layer, "neuron": neuron, "n_pos": st.n_pos.ravel(),
                              "s_act": st.s_act.ravel(), "n_top": st.n_top.ravel()})
        frame.attrs.update({"n_tokens": st.n_tokens, "n_docs": st.n_docs})
        return frame

    parts = {"fn": "langneurons.stats", "v": 1, "lang": lang, **setup.data_parts(ctx),
             "selection_tokens": setup.selection_tokens, "doc_tokens": setup.doc_tokens, "plnd_top": setup.plnd_top}
    f = ctx.memo(parts, compute)
    return stats.Stats(n_tokens=int(f.attrs["n_tokens"]), n_docs=int(f.attrs["n_docs"]),
                       n_pos=f["n_pos"].to_numpy(np.int64).reshape(L, F),
                       s_act=f["s_act"].to_numpy(float).reshape(L, F), n_top=f["n_top"].to_numpy(np.int64).reshape(L, F))


def language_gradients(ctx, setup: Setup, sp: parallel.Split, lang: str) -> np.ndarray:
    m = ctx.model
    L, F = m.arch.n_layers, m.arch.d_ffn

    def compute() -> pd.DataFrame:
        docs = tx.documents(m.tokenizer, sp.selection.side(lang), doc_tokens=min(setup.doc_tokens, setup.pv_tokens),
                            budget=setup.pv_tokens)
        g = stats.gradient_norms(m, docs)
        return pd.DataFrame({"grad_norm": g.ravel()})

    parts = {"fn": "langneurons.pv", "v": 1, "lang": lang, **setup.data_parts(ctx), "pv_tokens": setup.pv_tokens,
             "doc_tokens": setup.doc_tokens}
    return ctx.memo(parts, compute)["grad_norm"].to_numpy(float).reshape(L, F)


def all_stats(ctx, setup: Setup, sp: parallel.Split) -> dict[str, stats.Stats]:
    return {lang: language_stats(ctx, setup, sp, lang) for lang in sp.selection.languages}


def selections(ctx, setup: Setup, sp: parallel.Split, methods, band: str = "all") -> dict[str, select.Selection]:
    """Neuron sets per method and language (restricted to the layer `band`)."""
    m = ctx.model
    langs = list(sp.selection.languages)
    st = all_stats(ctx, setup, sp)
    n_all = m.arch.n_layers * m.arch.d_ffn
    out: dict[str, select.Selection] = {}
    need = set(methods) | ({"lape"} if "rs" in methods else set()) | ({"plnd"} if "rs-plnd" in methods else set())
    p = np.stack([st[l].p for l in langs])  # (K, L, F)
    rule = dict(top_rate=setup.top_rate, bar_quantile=setup.bar_quantile)
    if "lape" in need:
        out["lape"] = select.lape(p, langs, **rule)
    if "lap" in need:
        out["lap"] = select.lap(p, langs, threshold=setup.lap_threshold)
    if "lave" in need:
        out["lave"] = select.lave(np.stack([st[l].mean for l in langs]), langs, **rule)
    if "pv" in need:
        out["pv"] = select.pv(np.stack([language_gradients(ctx, setup, sp, l) for l in langs]), langs, **rule)
    if "plnd" in need:
        out["plnd"] = select.plnd(np.stack([st[l].n_top for l in langs]), [st[l].n_docs for l in langs], langs)
    if "rs" in need:
        out["rs"] = select.random_like(out["lape"], n_all, ctx.seed)
    if "rs-plnd" in need:
        out["rs-plnd"] = select.random_like(out["plnd"], n_all, ctx.seed + 1)
    band_layers = select.layer_band(band, m.arch.n_layers)
    return {k: select.restrict_layers(v, band_layers, m.arch.d_ffn) for k, v in out.items() if k in methods}


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
