"""Selection methods on hand-built statistics whose answer is known, and against a plain per-neuron loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.families.langneurons import select

LANGS = ["en", "de", "ru"]


def planted(kind: str = "p") -> tuple[np.ndarray, dict[str, list[int]]]:
    """(K=3, L=2, F=50) statistics: every neuron 0.3 in every language, except
    neuron 7 (layer 0) fires only for en, neuron 61 (layer 1, j=11) only for de, neuron 90 (layer 1, j=40) for en and ru."""
    stat = np.full((3, 2, 50), 0.3)
    planted = {7: (0.9, 0.0, 0.0), 61: (0.0, 0.9, 0.0), 90: (0.9, 0.0, 0.9)}
    for flat, vals in planted.items():
        stat[:, flat // 50, flat % 50] = vals
    return stat, {"en": [7, 90], "de": [61], "ru": [90]}


@pytest.mark.parametrize("method", ["lape", "lave", "pv"])
def test_entropy_methods_recover_planted_neurons(method):
    stat, want = planted()
    fn = getattr(select, method)
    got = fn(stat, LANGS, top_rate=3 / 100, bar_quantile=0.95)
    assert {k: v.tolist() for k, v in got.items()} == want


def test_a_neuron_firing_for_two_languages_is_assigned_to_both():
    stat, _ = planted()
    got = select.lape(stat, LANGS, top_rate=0.03)
    assert 90 in got["en"] and 90 in got["ru"] and 90 not in got["de"]


def test_lave_ignores_negative_means():
    stat, want = planted()
    stat = stat.copy()
    stat[1, 0, 3] = -5.0  # a strongly negative mean is no evidence of anything
    got = select.lave(stat, LANGS, top_rate=0.03)
    assert {k: v.tolist() for k, v in got.items()} == want


def test_lape_counts_one_percent_of_neurons_and_skips_neurons_below_the_bar():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 0.5, size=(3, 4, 250))  # 1000 neurons → 10 selected
    got = select.lape(p, LANGS, top_rate=0.01)
    union = np.unique(np.concatenate(list(got.values())))
    assert len(union) <= 10
    bar = np.sort(p.ravel())[round(p.size * 0.95) - 1]
    for k, lang in enumerate(LANGS):
        assert np.all(p[k].ravel()[got[lang]] > bar)


def naive_lape(p: np.ndarray, langs, top_rate: float, q: float) -> dict[str, list[int]]:
    """The definition, one neuron at a time (the independent reference for the vectorised code)."""
    K = p.shape[0]
    flat = p.reshape(K, -1)
    values = sorted(flat.ravel().tolist())
    bar = values[round(len(values) * q) - 1]  # the authors' rank: round, not ceil
    scores = []
    for n in range(flat.shape[1]):
        col = flat[:, n]
        if not any(v > bar for v in col):
            scores.append(math.inf)
            continue
        s = sum(col)
        h = 0.0
        for v in col:
            if s > 0 and v > 0:
                h -= (v / s) * math.log(v / s)
        scores.append(h)
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))[: round(top_rate * len(scores))]
    order = [i for i in order if math.isfinite(scores[i])]
    return {lang: sorted(i for i in order if flat[k, i] > bar) for k, lang in enumerate(langs)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lape_matches_the_definition_on_random_statistics(seed):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 2.0, size=(4, 3, 200))
    p[:, 0, :5] = 0.0  # neurons that never fire anywhere (0/0 → 0)
    langs = ["a", "b", "c", "d"]
    got = select.lape(p, langs, top_rate=0.02, bar_quantile=0.9)
    assert {k: v.tolist() for k, v in got.items()} == naive_lape(p, langs, 0.02, 0.9)


def test_lape_bar_is_the_rounded_rank_not_the_ceiling():
    """12 distinct probabilities (3 languages × 4 neurons): 0.95·12 = 11.4, so the bar is the 11th smallest value
    (round), not the 12th (⌈11.4⌉).  Only the largest value, 0.12 for de on neuron 2, lies above the 11th smallest
    (0.11): LAPE selects neuron 2 for de.  With the ceiling the bar is 0.12 itself and nothing is selected."""
    p = np.arange(1, 13, dtype=float).reshape(4, 3).T[:, None, :] / 100  # (K=3, L=1, F=4), p[k, 0, j] = (3j+k+1)/100
    p = p[:, :, [0, 1, 3, 2]]  # the 12th value (0.12: k = 2, j = 3) moves to neuron 2
    p[[1, 2]] = p[[2, 1]]  # … and to de (k = 1)
    assert p[1, 0, 2] == 0.12 and np.sort(p.ravel())[10] == 0.11
    assert select.bar_rank(12, 0.95) == 11 and math.ceil(0.95 * 12) == 12
    assert select.percentile_bar(p, 0.95) == 0.11
    got = select.lape(p, LANGS, top_rate=1.0, bar_quantile=0.95)
    assert {k: v.tolist() for k, v in got.items()} == {"en": [], "de": [2], "ru": []}


@pytest.mark.parametrize(("n", "rank"), [(12, 11), (30, 28), (10, 10), (20, 19), (1, 1), (7, 7)])
def test_bar_rank_rounds_half_to_even_as_the_authors_script(n, rank):
    """round(N·0.95) on the float product: 0.95·30 is 28.5 in floating point and rounds to the even 28 (⌈⌉: 29);
    0.95·10 = 9.5 rounds to 10; 0.95·7 = 6.65 → 7.  The rank never leaves 1 … N."""
    assert select.bar_rank(n, 0.95) == rank


def test_lap_takes_neurons_above_threshold_in_exactly_one_language():
    p = np.full((3, 1, 10), 0.5)
    p[0, 0, 2] = 0.97              # en only
    p[:2, 0, 5] = 0.99             # en and de: not language-specific
    p[2, 0, 8] = 0.96              # ru only
    got = select.lap(p, LANGS, threshold=0.95)
    assert {k: v.tolist() for k, v in got.items()} == {"en": [2], "de": [], "ru": [8]}


def test_random_selection_matches_counts_and_is_seeded():
    ref = {"en": np.array([1, 2, 3]), "de": np.array([4]), "ru": np.array([], dtype=np.int64)}
    a = select.random_like(ref, 1000, seed=5)
    b = select.random_like(ref, 1000, seed=5)
    c = select.random_like(ref, 1000, seed=6)
    assert {k: len(v) for k, v in a.items()} == {"en": 3, "de": 1, "ru": 0}
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["en"], c["en"])
    assert len(np.unique(a["en"])) == 3


def test_plnd_intersects_documents_and_removes_shared_neurons():
    n_top = np.zeros((3, 2, 4), dtype=np.int64)
    n_docs = [5, 4, 2]
    n_top[0, 0, 1] = 5             # en: top on all 5 docs
    n_top[0, 1, 2] = 4             # en: top on 4 of 5 docs → not in the set
    n_top[1, 1, 3] = 4             # de: all docs
    n_top[0, 0, 0] = 5             # shared by en and ru → removed from both
    n_top[2, 0, 0] = 2
    got = select.plnd(n_top, n_docs, LANGS)
    assert {k: v.tolist() for k, v in got.items()} == {"en": [1], "de": [7], "ru": []}


def test_layer_bands_and_restriction():
    assert list(select.layer_band("understanding", 18)) == [0, 1, 2, 3]
    assert list(select.layer_band("generation", 18)) == [16, 17]
    assert list(select.layer_band("all", 3)) == [0, 1, 2]
    sel = {"en": np.array([0, 5, 10, 15])}  # F = 5: layers 0, 1, 2, 3
    assert select.restrict_layers(sel, [1, 3], 5)["en"].tolist() == [5, 15]


def test_lave_and_lape_pick_different_neurons_when_probability_and_magnitude_disagree():
    """Neuron 7 fires often only for en but with the same mean as elsewhere; neuron 20 fires equally often
    everywhere but much more strongly for de.  LAPE must pick 7 (not 20), LAVE 20 (not 7)."""
    from bench.families.langneurons import shared, stats
    from bench.families.langneurons.shared import Setup

    L, F = 2, 50
    p = np.full((3, L, F), 0.3)
    mean = np.full((3, L, F), 0.3)
    p[:, 0, 7] = (0.9, 0.0, 0.0)
    mean[:, 0, 20] = (0.0, 2.0, 0.0)
    st = {lang: stats.Stats(n_tokens=1000, n_docs=4, n_pos=(p[k] * 1000).astype(np.int64),
                            s_act=mean[k] * 1000, n_top=np.zeros((L, F), np.int64)) for k, lang in enumerate(LANGS)}
    setup = Setup("x", tuple(LANGS), 2, 128, 8, top_rate=1 / 100)
    lape = shared._select_from("lape", st, LANGS, setup)
    lave = shared._select_from("lave", st, LANGS, setup)
    assert lape["en"].tolist() == [7] and 20 not in np.concatenate(list(lape.values()))
    assert lave["de"].tolist() == [20] and 7 not in np.concatenate(list(lave.values()))


def test_split_halves_are_complementary_and_distinct():
    from bench.families.langneurons.shared import CHUNKS, half_pairs

    pairs = half_pairs(20, seed=0)
    assert len(pairs) == 20 and len(set(pairs)) == 20
    for a, b in pairs:
        assert sorted(a + b) == list(range(CHUNKS)) and len(a) == len(b)


def test_sizes_give_each_language_its_best_ranked_neurons():
    """With sizes, a method returns exactly that many neurons per language, its own best-ranked ones."""
    # two languages, one layer of six neurons; probabilities chosen so every rank is known
    p = np.array([[[0.90, 0.80, 0.70, 0.10, 0.10, 0.60]],
                  [[0.10, 0.10, 0.10, 0.95, 0.85, 0.50]]])
    langs = ["en", "de"]
    sized = select.lap(p, langs, sizes={"en": 2, "de": 1})
    assert sized["en"].tolist() == [0, 1] and sized["de"].tolist() == [3]  # highest p where it is the top language
    assert select.lap(p, langs, sizes={"en": 9, "de": 9})["en"].tolist() == [0, 1, 2, 5]  # all it owns, no more
    # entropy rule: en's neurons above the bar (0.5 here) by entropy, lowest first: 0 (0.9 vs 0.1), 1, 2, 5
    bar = {"top_rate": 1.0, "bar_quantile": 0.5}
    ent = select.entropy_select(p, langs, **bar, sizes={"en": 3, "de": 2})
    assert ent["en"].tolist() == [0, 1, 2] and ent["de"].tolist() == [3, 4]
    one = select.lave(p, langs, **bar, sizes={"en": 1, "de": 1})
    assert one["en"].tolist() == [0] and one["de"].tolist() == [3]
