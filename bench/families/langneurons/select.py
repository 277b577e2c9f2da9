"""Selection methods: per-language statistics of every FFN neuron in, a neuron set per language out.

A neuron is addressed by its flat index ``layer * F + j``; a selection maps each language to a sorted int64
array of flat indices.  Statistics arrive stacked over languages as (K, L, F) arrays.

* **LAPE** (Tang et al. 2024): p' = p / Σ_k p (0/0 → 0), LAPE = −Σ_k p' log p'.  bar = 95th percentile of all
  p values (all languages, all neurons), as the authors' selection script takes it: the k-th smallest of the N
  values with k = round(0.95·N) (Python's round, half to even), not the ⌈0.95·N⌉-th of the textbook quantile;
  the two differ by one rank whenever 0.95·N has a fractional part below ½, which changes neuron sets on some
  language subsets.  A neuron whose p exceeds the bar in no language gets LAPE = +∞.  The
  ``top_rate`` (1%) of all neurons with the lowest LAPE are selected; each is assigned to every language whose
  p exceeds the bar, so a neuron can belong to several languages.
* **LAVE**: the same (the same rounded bar) on the mean activation value instead of p (a negative mean counts as
  0, since an entropy needs non-negative masses).
* **PV**: the same on the per-neuron parameter-gradient norm of each language's loss (the parameter variation
  that one update on that language would cause).
* **LAP**: p_k > ``threshold`` (0.95) for exactly one language k.
* **RS**: per language, as many neurons as a reference selection gives it, drawn uniformly without
  replacement from all neurons with a seeded generator.
* **PLND** (Zhao et al. 2024): a language's set is the neurons in the layer's top-k importance on every one of
  its documents; the language-specific set is that set minus the neurons in any other language's set.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

Selection = dict[str, np.ndarray]


def entropy(stat: np.ndarray) -> np.ndarray:
    """Entropy over languages of each neuron's normalised statistic: (K, L, F) → (L, F); all-zero neurons → 0."""
    total = stat.sum(axis=0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(total > 0, stat / total, 0.0)
        logq = np.where(q > 0, np.log(np.where(q > 0, q, 1.0)), 0.0)
    return -(q * logq).sum(axis=0)


def bar_rank(n: int, quantile: float) -> int:
    """The 1-based rank of the bar among `n` sorted values: round(n·quantile) as the LAPE authors' script
    computes it (the float product, Python's half-to-even round), kept within 1 … n."""
    return min(max(int(round(n * quantile)), 1), n)


def percentile_bar(stat: np.ndarray, quantile: float) -> float:
    """The `quantile` of all values: the k-th smallest with k = :func:`bar_rank` (N values)."""
    flat = np.asarray(stat, float).ravel()
    k = bar_rank(flat.size, quantile)
    return float(np.partition(flat, k - 1)[k - 1])


def entropy_select(stat: np.ndarray, languages: list[str], *, top_rate: float = 0.01,
                   bar_quantile: float = 0.95, sizes: Mapping[str, int] | None = None) -> Selection:
    """LAPE's rule on any non-negative per-language statistic (K, L, F).  With `sizes`, each language gets
    exactly that many neurons (fewer only when fewer pass its bar): its lowest-entropy neurons above the bar,
    so that methods can be compared at equal set sizes."""
    stat = np.asarray(stat, float)
    if np.any(stat < 0):
        raise ValueError("entropy selection needs non-negative statistics")
    K = stat.shape[0]
    ent = entropy(stat).ravel()  # (L·F,)
    bar = percentile_bar(stat, bar_quantile)
    flat = stat.reshape(K, -1)  # (K, L·F)
    above = flat > bar
    ent = np.where(above.any(axis=0), ent, np.inf)
    if sizes is not None:
        return {lang: _first(np.argsort(np.where(above[k], ent, np.inf), kind="stable"), above[k], sizes[lang])
                for k, lang in enumerate(languages)}
    n_select = int(round(top_rate * ent.size))
    order = np.argsort(ent, kind="stable")[:n_select]
    order = order[np.isfinite(ent[order])]
    return {lang: np.sort(order[above[k, order]]).astype(np.int64) for k, lang in enumerate(languages)}


def lape(p: np.ndarray, languages: list[str], *, top_rate: float = 0.01, bar_quantile: float = 0.95) -> Selection:
    return entropy_select(p, languages, top_rate=top_rate, bar_quantile=bar_quantile)


def lave(mean_act: np.ndarray, languages: list[str], *, top_rate: float = 0.01,
         bar_quantile: float = 0.95, sizes: Mapping[str, int] | None = None) -> Selection:
    return entropy_select(np.clip(mean_act, 0.0, None), languages, top_rate=top_rate, bar_quantile=bar_quantile,
                          sizes=sizes)


def pv(grad_norm: np.ndarray, languages: list[str], *, top_rate: float = 0.01,
       bar_quantile: float = 0.95, sizes: Mapping[str, int] | None = None) -> Selection:
    return entropy_select(grad_norm, languages, top_rate=top_rate, bar_quantile=bar_quantile, sizes=sizes)


def lap(p: np.ndarray, languages: list[str], *, threshold: float = 0.95,
        sizes: Mapping[str, int] | None = None) -> Selection:
    """Neurons whose activation probability passes `threshold` for exactly one language.  With `sizes`, each
    language gets that many: the neurons where it is the most probable language, highest probability first."""
    flat_p = np.asarray(p, float).reshape(p.shape[0], -1)  # (K, L·F)
    if sizes is not None:
        top = flat_p.argmax(axis=0)
        return {lang: _first(np.argsort(-flat_p[k], kind="stable"), top == k, sizes[lang])
                for k, lang in enumerate(languages)}
    flat = flat_p > threshold
    only = flat.sum(axis=0) == 1
    return {lang: np.flatnonzero(flat[k] & only).astype(np.int64) for k, lang in enumerate(languages)}


def _first(order: np.ndarray, eligible: np.ndarray, n: int) -> np.ndarray:
    """The first `n` eligible indices of `order`, sorted."""
    return np.sort(order[eligible[order]][:n]).astype(np.int64)


def random_like(reference: Selection, n_neurons: int, seed: int) -> Selection:
    """RS: for each language, as many distinct random neurons as `reference` gives it (seeded per language)."""
    out = {}
    for k, (lang, idx) in enumerate(reference.items()):
        rng = np.random.default_rng([seed, k, 0x52])
        out[lang] = np.sort(rng.choice(n_neurons, size=len(idx), replace=False)).astype(np.int64)
    return out


def plnd(n_top: np.ndarray, n_docs: list[int] | np.ndarray, languages: list[str]) -> Selection:
    """n_top (K, L, F): documents where the neuron was in its layer's top-k; n_docs (K,): documents per language."""
    flat = np.asarray(n_top).reshape(n_top.shape[0], -1)
    docs = np.asarray(n_docs).reshape(-1, 1)
    always = (flat == docs) & (docs > 0)  # (K, L·F): top-k on every document of the language
    count = always.sum(axis=0)
    return {lang: np.flatnonzero(always[k] & (count == 1)).astype(np.int64) for k, lang in enumerate(languages)}


def restrict_layers(sel: Selection, layers: range | list[int], d_ffn: int) -> Selection:
    """Only the neurons that lie in `layers`."""
    keep = np.asarray(list(layers), dtype=np.int64)
    return {lang: idx[np.isin(idx // d_ffn, keep)] for lang, idx in sel.items()}


def layer_band(band: str, n_layers: int) -> range:
    """"all"; "understanding": the first quarter of the layers; "generation": the last eighth (Zhao et al.)."""
    if band == "all":
        return range(n_layers)
    if band == "understanding":
        return range(max(1, n_layers // 4))
    if band == "generation":
        return range(n_layers - max(1, n_layers // 8), n_layers)
    raise ValueError(f"unknown layer band '{band}' (all, understanding, generation)")
