"""LAPE's selection against a re-statement of the authors' selection script.

The reference is RUCAIBox/Language-Specific-Neurons, ``identify.py`` at commit
fdecc8d5c83eea482e0cdfedd6c8a9d81d479ef8 (``top_rate = 0.01``), restated below from its logic in torch, float32
as the script computes it:

1. p = over_zero / n per neuron and language (layers × neurons × languages);
2. entropy of p normalised over languages (0/0 → 0, 0·log 0 → 0);
3. bar = the k-th smallest of all p values, k = round(0.95 · N) (``kthvalue``); a neuron whose p exceeds the
   bar in no language gets entropy +∞;
4. the round(0.01 · neurons) neurons of lowest entropy (``topk(largest=False)``);
5. each of them goes to every language whose p exceeds the bar (the same bar).

It needs nothing beyond torch, so these tests always run.  Statistics are integer counts over token totals below
4,000 (distinct ratios then stay distinct in float32) with every count ≥ 1 (no exact entropy ties at the cut,
whose order ``topk`` leaves open).  Agreement is asserted exactly (equal neuron sets).  The language subsets
are chosen where round and ceil give different bars, and the test checks that the ceiling would change a set
on at least one of them: without that, agreement would not show that bench uses the script's rank.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from bench.families.langneurons import select

LANGS = ["en", "zh", "fr", "es", "vi", "id", "ja"]


def identify_restated(over_zero: torch.Tensor, n: torch.Tensor, top_rate: float = 0.01,
                      bar_ratio: float = 0.95) -> list[list[int]]:
    """The script's selection (see the module docstring): per language, sorted flat indices layer · F + j."""
    probs = over_zero / n  # (L, F, K) float32
    normed = probs / probs.sum(dim=-1, keepdim=True)
    normed[torch.isnan(normed)] = 0
    ent = -(normed * torch.where(normed > 0, normed.log(), torch.zeros_like(normed))).sum(dim=-1)  # (L, F)
    flat_p = probs.flatten()
    bar = flat_p.kthvalue(round(len(flat_p) * bar_ratio)).values.item()
    ent[(probs > bar).sum(dim=-1) == 0] = torch.inf
    flat_ent = ent.flatten()
    _, chosen = flat_ent.topk(round(len(flat_ent) * top_rate), largest=False)
    picked = probs.reshape(-1, probs.shape[-1])[chosen]  # (n_chosen, K)
    return [sorted(int(i) for i in chosen[picked[:, k] > bar]) for k in range(probs.shape[-1])]


def _counts(seed: int, L: int = 6, F: int = 304, K: int = 7):
    """Token totals per language and per-neuron counts: most neurons fire alike everywhere, a few prefer one or
    two languages (as language neurons do).  F = 304 puts 0.95·N below the half for 3 and 4 languages
    (N = 5,472 and 7,296: 5,198.4 and 6,931.2), where round and ceil part; seed 3 has one 4-language subset (2 of
    its sets) that the ceiling changes."""
    rng = np.random.default_rng(seed)
    n = rng.integers(2000, 4000, size=K)
    base = rng.beta(2.0, 5.0, size=(L, F, 1)) * np.ones((1, 1, K))
    special = rng.random((L, F)) < 0.05
    for l, j in zip(*np.nonzero(special)):
        base[l, j, rng.choice(K, size=rng.integers(1, 3), replace=False)] += rng.uniform(0.3, 0.6)
    p = np.clip(base + rng.normal(0, 0.02, size=base.shape), 0, 1)
    over_zero = np.clip(np.rint(p * n), 1, n).astype(np.int64)
    return over_zero, n


def _bench(over_zero: np.ndarray, n: np.ndarray, langs: list[str]) -> list[list[int]]:
    p = (over_zero / n).transpose(2, 0, 1)  # (K, L, F) float64, as activation_stats gives it
    got = select.lape(p, langs, top_rate=0.01, bar_quantile=0.95)
    return [got[lang].tolist() for lang in langs]


def _ceil_differs(over_zero: np.ndarray, n: np.ndarray, langs: list[str]) -> bool:
    p = (over_zero / n).transpose(2, 0, 1)
    flat = np.sort(p.ravel())
    k_round, k_ceil = select.bar_rank(flat.size, 0.95), math.ceil(0.95 * flat.size)
    return k_round != k_ceil


@pytest.mark.parametrize("seed", [0, 1])
def test_lape_equals_the_restated_script_on_seven_languages(seed):
    over_zero, n = _counts(seed)
    want = identify_restated(torch.from_numpy(over_zero).float(), torch.from_numpy(n).float())
    assert _bench(over_zero, n, LANGS) == want
    assert sum(map(len, want)) > 0


def test_lape_equals_the_restated_script_on_language_subsets_where_round_and_ceil_differ(monkeypatch):
    over_zero, n = _counts(3)
    subsets = [list(c) for size in (3, 4) for c in itertools.combinations(range(len(LANGS)), size)]
    subsets = [s for s in subsets if _ceil_differs(over_zero[..., s], n[s], [LANGS[k] for k in s])]
    assert len(subsets) >= 10
    changed = 0
    for s in subsets:
        langs = [LANGS[k] for k in s]
        want = identify_restated(torch.from_numpy(over_zero[..., s]).float(), torch.from_numpy(n[s]).float())
        got = _bench(over_zero[..., s], n[s], langs)
        assert got == want, langs
        with monkeypatch.context() as mp:  # the textbook ⌈0.95·N⌉ instead of the script's round
            mp.setattr(select, "bar_rank", lambda size, q: min(max(math.ceil(size * q), 1), size))
            changed += _bench(over_zero[..., s], n[s], langs) != want
    assert changed >= 1, "no subset where the ceiling changes a set: the agreement would prove nothing"
