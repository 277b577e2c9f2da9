"""Language-specific neurons: which FFN neurons each language owns (LAPE, LAP, LAVE, PV, RS, PLND), where they lie,
and what deactivating them does to each language's bits per byte (Tang et al. 2024; Zhao et al. 2024).

All probes of the family read a parallel corpus (``gettext:en,de,…`` or ``udhr:…``), split by the run seed into
a selection part (statistics) and an evaluation part (bits per byte, steering prompts, similarities), and
share the per-language statistics and per-condition bits through ``ctx.memo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from bench.ground.registry import probe_def
from bench.families.langneurons import shared
from bench.families.langneurons import text as tx
from bench.families.langneurons.schemas import LangNeurons

Method = Literal["lape", "lap", "lave", "pv", "rs", "plnd", "rs-plnd"]
Band = Literal["all", "understanding", "generation"]
COLUMNS = ["method", "set_lang", "language", "layer", "neuron", "sample", "metric", "value"]
CORPUS = "gettext:en,de,fr,es,ru,ja,zh_CN"

STATS_METRICS = ("tokens_selection", "docs_selection", "texts_evaluation", "tokens_evaluation", "bytes_evaluation",
                 "bytes_per_token", "activation_probability", "n_selected", "fraction_selected", "n_unique",
                 "fraction_unique", "selected", "selection_jaccard")
LAYER_METRICS = ("layer_count", "layer_share", "edge_count", "total_count", "edge_share", "uniform_share",
                 "edge_layers", "selection_jaccard")
DEACT_METRICS = ("bits", "bytes", "bpb", "delta_bpb", "n_ablated")


def frame(rows: list[tuple], notes: list[str] | None = None) -> pd.DataFrame:
    f = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("layer", "neuron", "sample"):
        f[col] = f[col].astype("Int64")
    f["value"] = f["value"].astype(float)
    f.attrs["notes"] = list(notes or [])
    return f


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = len(np.union1d(a, b))
    return len(np.intersect1d(a, b)) / union if union else 1.0


SELECTION = shared.Setup(corpus=CORPUS, languages=(), eval_texts=200, selection_tokens=65536, doc_tokens=256,
                         pv_tokens=4096)  # the selection group's defaults in every probe that selects neurons


def checked(setup: shared.Setup) -> shared.Setup:
    if setup.eval_texts < 2 or setup.selection_tokens < setup.doc_tokens or setup.doc_tokens < 8:
        raise ValueError("need eval_texts ≥ 2, doc_tokens ≥ 8 and selection_tokens ≥ doc_tokens")
    return setup


@dataclass(frozen=True)
class StatsParams:
    selection: shared.Setup = SELECTION
    methods: tuple[Method, ...] = ("lape",)
    split_halves: int = 0


@dataclass(frozen=True)
class LayerParams:
    selection: shared.Setup = SELECTION
    methods: tuple[Method, ...] = ("lape",)
    edge_fraction: float = 0.2
    split_halves: int = 0


@dataclass(frozen=True)
class DeactivationParams:
    selection: shared.Setup = SELECTION
    full: tuple[Method, ...] = ("lape",)
    diagonal: tuple[Method, ...] = ("rs",)
    band: Band = "all"
    micro_tokens: int = 2048
    sized_like: str = ""


@probe_def("activation_stats", version=3, schema=LangNeurons, metrics=STATS_METRICS)
def activation_stats(ctx, p: StatsParams) -> pd.DataFrame:
    """Per-language activation statistics (tokens, activation probabilities) and the neurons each method selects.

    With `split_halves` > 0, the selection is repeated on that many complementary splits of the selection
    documents into halves: ``n_selected`` per half (``sample`` = replicate) and the Jaccard index of the two
    halves' sets per language (``sample`` = split), the uncertainty of which neurons get selected."""
    setup, methods, split_halves = checked(p.selection), p.methods, p.split_halves
    m = ctx.model
    sp = shared.split(setup, ctx.seed)
    langs = list(sp.selection.languages)
    st = shared.all_stats(ctx, setup, sp)
    L, F = m.arch.n_layers, m.arch.d_ffn
    rows: list[tuple] = []
    for lang in langs:
        texts = sp.evaluation.side(lang)
        n_tok = sum(len(tx.encode(m.tokenizer, t)) - 1 for t in texts)
        n_bytes = sum(len(t.encode("utf-8")) for t in texts)
        rows += [(None, None, lang, None, None, None, "tokens_selection", st[lang].n_tokens),
                 (None, None, lang, None, None, None, "docs_selection", st[lang].n_docs),
                 (None, None, lang, None, None, None, "texts_evaluation", len(texts)),
                 (None, None, lang, None, None, None, "tokens_evaluation", n_tok),
                 (None, None, lang, None, None, None, "bytes_evaluation", n_bytes),
                 (None, None, lang, None, None, None, "bytes_per_token", n_bytes / max(1, n_tok))]
        rows += [(None, None, lang, l, None, None, "activation_probability", float(st[lang].p[l].mean()))
                 for l in range(L)]
    sels = shared.selections(ctx, setup, sp, methods)
    for method, sel in sels.items():
        for k, lang in enumerate(langs):
            idx = sel[lang]
            rows += [(method, lang, None, None, None, None, "n_selected", len(idx)),
                     (method, lang, None, None, None, None, "fraction_selected", len(idx) / (L * F))]
            p = st[lang].p.ravel()
            rows += [(method, lang, None, int(i // F), int(i % F), None, "selected", float(p[i])) for i in idx]
        union = np.unique(np.concatenate([sel[l] for l in langs]))
        rows += [(method, None, None, None, None, None, "n_unique", len(union)),
                 (method, None, None, None, None, None, "fraction_unique", len(union) / (L * F))]
    for method in (methods if split_halves else []):
        for r, pair in enumerate(shared.split_half_selections(ctx, setup, sp, method, split_halves)):
            for j, half in enumerate(pair):
                rows += [(method, lang, None, None, None, 2 * r + j, "n_selected", len(half[lang])) for lang in langs]
            rows += [(method, lang, None, None, None, r, "selection_jaccard", _jaccard(pair[0][lang], pair[1][lang]))
                     for lang in langs]
    notes = [f"{len(sp.selection.texts)} selection and {len(sp.evaluation.texts)} evaluation units of {setup.corpus} "
             f"(split seed {ctx.seed}); {L} layers × {F} FFN neurons"]
    notes += [f"{lang}: {st[lang].n_tokens} selection tokens" for lang in langs]
    return frame(rows, notes)


@probe_def("layer_distribution", version=3, schema=LangNeurons, metrics=LAYER_METRICS)
def layer_distribution(ctx, p: LayerParams) -> pd.DataFrame:
    """How the selected neurons (all languages, each neuron once) spread over layers; the share in the bottom
    and top `edge_fraction` of the layers, beside the share that a uniform spread would give.  With
    `split_halves` > 0: edge and total counts of the selection on each half of that many splits of the selection
    documents (``sample`` = replicate) and the Jaccard index of the halves' sets (``sample`` = split)."""
    setup, methods, edge_fraction, split_halves = checked(p.selection), p.methods, p.edge_fraction, p.split_halves
    m = ctx.model
    sp = shared.split(setup, ctx.seed)
    L, F = m.arch.n_layers, m.arch.d_ffn
    n_edge = max(1, int(round(edge_fraction * L)))
    edge = sorted(set(range(n_edge)) | set(range(L - n_edge, L)))
    rows: list[tuple] = []
    for method, sel in shared.selections(ctx, setup, sp, methods).items():
        for lang, idx in sel.items():
            counts = np.bincount(idx // F, minlength=L)
            rows += [(method, lang, None, l, None, None, "layer_count", int(c)) for l, c in enumerate(counts)]
        union = np.unique(np.concatenate(list(sel.values())))
        counts = np.bincount(union // F, minlength=L)
        total = int(counts.sum())
        rows += [(method, None, None, l, None, None, "layer_count", int(c)) for l, c in enumerate(counts)]
        rows += [(method, None, None, l, None, None, "layer_share", c / total if total else 0.0)
                 for l, c in enumerate(counts)]
        rows += [(method, None, None, None, None, None, "edge_count", int(counts[edge].sum())),
                 (method, None, None, None, None, None, "total_count", total),
                 (method, None, None, None, None, None, "edge_share", counts[edge].sum() / total if total else 0.0),
                 (method, None, None, None, None, None, "uniform_share", len(edge) / L),
                 (method, None, None, None, None, None, "edge_layers", len(edge))]
    for method in (methods if split_halves else []):
        for r, pair in enumerate(shared.split_half_selections(ctx, setup, sp, method, split_halves)):
            unions = [np.unique(np.concatenate(list(half.values()))) for half in pair]
            for j, u in enumerate(unions):
                c = np.bincount(u // F, minlength=L)
                rows += [(method, None, None, None, None, 2 * r + j, "edge_count", int(c[edge].sum())),
                         (method, None, None, None, None, 2 * r + j, "total_count", int(c.sum()))]
            rows.append((method, None, None, None, None, r, "selection_jaccard", _jaccard(*unions)))
    notes = [f"edge layers (first and last {n_edge} of {L}): {edge}"]
    return frame(rows, notes)


@probe_def("deactivation", version=3, schema=LangNeurons, metrics=DEACT_METRICS)
def deactivation(ctx, p: DeactivationParams) -> pd.DataFrame:
    """Bits per byte of each language's evaluation texts with each language's neuron set zeroed.

    Methods in `full` give the whole ΔBPB matrix (every set × every language); methods in `diagonal` only each
    set on its own language.  `band` keeps only the neurons of some layers (PLND's understanding layers …).
    Rows: bits per text and condition (``method = "none"`` for the unedited model), bytes per text, and the
    corpus-level ΔBPB = Σ Δbits / Σ bytes per cell.  With `sized_like` ("lape"), every method's set for a
    language has that method's size for it, so that methods are compared at equal set sizes.
    """
    setup, full, diagonal, band = checked(p.selection), p.full, p.diagonal, p.band
    micro_tokens, sized_like = p.micro_tokens, p.sized_like
    sp = shared.split(setup, ctx.seed)
    langs = list(sp.evaluation.languages)
    methods = list(dict.fromkeys([*full, *diagonal]))
    sels = shared.selections(ctx, setup, sp, methods, band=band, sized_like=sized_like)
    plan = [(meth, x, langs if meth in full else [x]) for meth in methods for x in langs]
    rows: list[tuple] = []
    base = shared.condition_bits(ctx, setup, sp, neurons=None, langs=langs, micro_tokens=micro_tokens)
    nbytes = {lang: np.array([len(t.encode("utf-8")) for t in sp.evaluation.side(lang)], float) for lang in langs}
    for lang in langs:
        rows += [("none", None, lang, None, None, s, "bits", b) for s, b in enumerate(base[lang])]
        rows += [(None, None, lang, None, None, s, "bytes", b) for s, b in enumerate(nbytes[lang])]
        rows.append(("none", None, lang, None, None, None, "bpb", base[lang].sum() / nbytes[lang].sum()))
    ctx.progress(1 / (len(plan) + 1), "unedited bits per byte")
    for j, (meth, x, ys) in enumerate(plan):
        got = shared.condition_bits(ctx, setup, sp, neurons=sels[meth][x], langs=ys, micro_tokens=micro_tokens)
        for y in ys:
            rows += [(meth, x, y, None, None, s, "bits", b) for s, b in enumerate(got[y])]
            rows.append((meth, x, y, None, None, None, "delta_bpb", (got[y] - base[y]).sum() / nbytes[y].sum()))
        ctx.progress((j + 2) / (len(plan) + 1), f"{meth}: {x} neurons off")
    for meth in methods:
        rows += [(meth, x, None, None, None, None, "n_ablated", len(sels[meth][x])) for x in langs]
    notes = [f"{len(sp.evaluation.texts)} evaluation texts per language; layer band '{band}'"]
    notes += [f"{meth}: {x} set is empty, so its row equals the unedited model" for meth in methods for x in langs
              if len(sels[meth][x]) == 0]
    return frame(rows, notes)
