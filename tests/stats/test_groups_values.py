"""`bench.stats.groups` against Cliff's δ counted pair by pair, a cluster bootstrap written resample by resample,
scipy's Boschloo test and statsmodels' Newcombe interval, and the majority rule's words."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, _boot_p, evaluate, expanded_confidence
from bench.stats import groups


def delta_by_pairs(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.mean([np.sign(x - y) for x in a for y in b]))


def tokens(per_text_a, per_text_b, metric="m", layer=None) -> pd.DataFrame:
    """Rows of two token classes ("det", "noun") per text: per_text_a[t] are text t's det values."""
    rows = []
    for t, (va, vb) in enumerate(zip(per_text_a, per_text_b)):
        rows += [(t, "det", v) for v in va] + [(t, "noun", v) for v in vb]
    f = pd.DataFrame(rows, columns=["sample", "cls", "value"]).assign(metric=metric)
    return f if layer is None else f.assign(layer=layer)


def test_cliffs_delta_counts_pairs():
    a, b = [1.0, 2.0, 2.0, 5.0], [2.0, 3.0, 0.5]
    assert groups.cliffs_delta(np.array(a), np.array(b)) == pytest.approx(delta_by_pairs(a, b))
    assert groups.cliffs_delta(np.array([3.0]), np.array([1.0, 2.0])) == 1.0
    assert np.isnan(groups.cliffs_delta(np.array([]), np.array([1.0])))
    assert np.isnan(groups.cliffs_delta(np.array([1.0]), np.array([])))


def test_pair_sums_and_weights_give_the_delta_of_a_resample():
    rng = np.random.default_rng(0)
    vals = rng.normal(size=23).round(1)
    is_a = rng.random(23) < 0.5
    unit = rng.integers(0, 4, 23)
    S, na, nb = groups._pair_sums(vals, is_a, unit, 4)
    for u in range(4):
        assert na[u] == np.sum(is_a & (unit == u)) and nb[u] == np.sum(~is_a & (unit == u))
        for v in range(4):
            assert S[u, v] == sum(np.sign(vals[i] - vals[j]) for i in np.flatnonzero(is_a & (unit == u))
                                  for j in np.flatnonzero(~is_a & (unit == v)))
    draw = np.array([[2, 2, 0, 3], [1, 1, 1, 1]])
    W = groups._weights(draw, 4)
    assert W.tolist() == [[1, 0, 2, 1], [0, 4, 0, 0]]
    got = groups._delta_of(W, S[None], na[None], nb[None], chunk=1)[..., 0]  # one resample per chunk
    for row, d in zip(draw, got):  # the resample as data: each drawn unit's tokens, once per draw
        a = np.concatenate([vals[is_a & (unit == u)] for u in row])
        b = np.concatenate([vals[~is_a & (unit == u)] for u in row])
        assert d == pytest.approx(delta_by_pairs(a, b)) if len(a) and len(b) else np.isnan(d)


def test_a_non_finite_value_leaves_no_delta():
    vals = np.array([1.0, 2.0, np.nan, 0.5, 3.0, 1.5])
    is_a = np.array([True, True, True, False, False, False])
    unit = np.array([0, 1, 2, 0, 1, 2])
    S, na, nb = groups._pair_sums(vals, is_a, unit, 3)
    assert np.isnan(S).all() and na.tolist() == [1, 1, 1] and nb.tolist() == [1, 1, 1]
    assert np.isnan(groups._delta_of(np.ones(3), S[None], na[None], nb[None])).all()


def clustered(n_texts=10, shift=-1.0, seed=1):
    rng = np.random.default_rng(seed)
    a = [rng.normal(shift + t * 0.1, 1, 3).round(2) for t in range(n_texts)]
    b = [rng.normal(t * 0.1, 1, 4).round(2) for t in range(n_texts)]
    return a, b


P = {"metric": "m", "a": ["det"], "b": ["noun"], "min_n": 5}


def test_group_comparison_estimate_interval_and_p_by_hand():
    a, b = clustered()
    f = tokens(a, b)
    v = evaluate(f, "group_comparison", {**P, "n_resamples": 200})
    assert v.estimate == pytest.approx(delta_by_pairs(np.concatenate(a), np.concatenate(b)))

    def by_hand(i, axis=-1):  # one resample of texts at a time, δ counted pair by pair
        i = np.asarray(i)
        out = [delta_by_pairs(np.concatenate([a[t] for t in row]), np.concatenate([b[t] for t in row]))
               for row in i.reshape(-1, i.shape[-1])]
        return np.array(out).reshape(i.shape[:-1])

    res = stats.bootstrap((np.arange(10),), by_hand, vectorized=True, n_resamples=200, method="percentile",
                          confidence_level=expanded_confidence(0.95, 10), random_state=np.random.default_rng(12345))
    dist = res.bootstrap_distribution
    assert (v.ci_low, v.ci_high) == pytest.approx((res.confidence_interval.low, res.confidence_interval.high))
    assert v.p_value == pytest.approx(_boot_p(dist, 0.0, -1, 10))
    assert (v.rule, v.metric, v.n, v.effect_name, v.threshold) == (
        "group_comparison", "m: det vs noun", 10, "Cliff's δ", "δ ≤ 0")
    assert v.effect == pytest.approx(v.estimate)
    assert v.reason.endswith(" (p and CI over 10 units 'sample'; 30 vs 40 tokens)")
    assert v.outcome is Outcome.SUPPORTED


def test_group_comparison_sides_bounds_and_the_zero_check():
    a, b = clustered()
    f = tokens(a, b)
    v = evaluate(f, "group_comparison", {**P, "side": "greater", "a": ["noun"], "b": ["det"]})
    assert v.outcome is Outcome.SUPPORTED and v.threshold == "δ ≥ 0" and v.metric == "m: noun vs det"
    v = evaluate(f, "group_comparison", {**P, "side": "greater"})
    assert v.outcome is Outcome.REFUTED
    # a bound δ ≤ 0.5 that the estimate clears while its interval still reaches above 0: not SUPPORTED
    near = tokens(*clustered(shift=-0.2, seed=0))
    v = evaluate(near, "group_comparison", {**P, "delta": 0.3})
    assert v.threshold == "δ ≤ 0.3" and v.estimate < 0.3 and v.p_value < 0.05 and v.ci_low < 0 < v.ci_high
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason.endswith(", but the interval of δ includes 0")
    assert v.p_value == pytest.approx(_boot_p(np.full(2000, -1.0), 0.3, -1, 10))  # every resample below 0.3


def test_group_comparison_refusals():
    a, b = clustered()
    f = tokens(a, b)
    v = evaluate(f, "group_comparison", {**P, "min_n": 31})
    assert v.outcome is Outcome.INCONCLUSIVE and v.n == 10 and v.metric == "m: det vs noun"
    assert v.reason == "only 30 tokens in group a and 40 in group b (< 31) from 10 samples"
    assert evaluate(f, "group_comparison", {**P, "min_n": 30}).outcome is Outcome.SUPPORTED  # min_n itself decides
    v = evaluate(tokens(a[:2], b[:2]), "group_comparison", {**P, "min_n": 1})
    assert v.reason == "only 6 tokens in group a and 8 in group b (< 1) from 2 samples"
    v = evaluate(f, "group_comparison", {**P, "a": ["adj"], "b": ["verb"]})
    assert v.reason == "the frame has no rows for {'metric': 'm', 'cls': ['adj', 'verb']}"
    v = evaluate(f, "group_comparison", {**P, "column": "pos"})
    assert v.outcome is Outcome.INCONCLUSIVE and "'pos'" in v.reason
    with pytest.raises(ValueError, match="no unit column 'doc'"):
        evaluate(f, "group_comparison", {**P, "unit": "doc"})


def test_group_comparison_over_layers_is_the_share_of_layers():
    """Three layers: det below noun in layers 0 and 1, above in layer 2 — δ per layer known by pairs."""
    a, b = clustered(n_texts=12)
    up = [x + 10 for x in a]
    f = pd.concat([tokens(a, b, layer=0), tokens(a, b, layer=1), tokens(up, b, layer=2)], ignore_index=True)
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "n_resamples": 200})
    d_low = delta_by_pairs(np.concatenate(a), np.concatenate(b))
    assert v.estimate == pytest.approx(2 / 3) and v.n == 12 and v.threshold == "> 0.5 of layers"
    assert v.effect_name == "share of layers" and v.rule == "group_comparison"
    assert v.reason.endswith(f"δ per layer from {d_low:.3g} to 1 (bound 0); p and CI over 12 units 'sample'")
    assert v.reason.startswith("holds in 67% of 3 layers, 95% CI [")


def test_binary_groups_use_boschloo_and_newcombe():
    from statsmodels.stats.proportion import confint_proportions_2indep

    a = [1] * 3 + [0] * 17   # 3 of 20
    b = [1] * 12 + [0] * 8   # 12 of 20
    f = pd.DataFrame({"sample": np.arange(40), "cls": ["det"] * 20 + ["noun"] * 20, "metric": "m",
                      "value": np.array(a + b, float)})
    v = evaluate(f, "group_comparison", P)
    p = stats.boschloo_exact([[3, 12], [17, 8]], alternative="less").pvalue
    lo, hi = confint_proportions_2indep(3, 20, 12, 20, method="newcomb", compare="diff", alpha=0.05)
    assert v.estimate == pytest.approx(3 / 20 - 12 / 20) and v.p_value == pytest.approx(p)
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi)) and v.n == 40
    assert v.effect_name == "difference of shares (= Cliff's δ on 0/1)" and v.threshold == "δ ≤ 0"
    assert v.reason == (f"3 of 20 vs 12 of 20: -0.45, Newcombe 95% CI [{lo:.4g}, {hi:.4g}], exact Boschloo test, "
                        f"p = {p:.3g} (p and CI over 40 units 'sample')")
    v = evaluate(f, "group_comparison", {**P, "side": "greater", "confidence": 0.9})
    p = stats.boschloo_exact([[3, 12], [17, 8]], alternative="greater").pvalue
    lo, hi = confint_proportions_2indep(3, 20, 12, 20, method="newcomb", compare="diff", alpha=0.1)
    assert v.p_value == pytest.approx(p) and (v.ci_low, v.ci_high) == pytest.approx((lo, hi))
    with pytest.raises(ValueError, match="delta must be 0"):
        evaluate(f, "group_comparison", {**P, "delta": 0.1})


def test_majority_words_and_outcomes():
    v = groups.majority("r", "n", 0.75, 0.6, 0.9, 0.01, 4, 0.05, "layer", "detail", n_units=10)
    assert v.outcome is Outcome.SUPPORTED and v.reason == "holds in 75% of 4 layers, 95% CI [0.6, 0.9], p = 0.01; detail"
    assert (v.rule, v.metric, v.estimate, v.n, v.effect, v.effect_name, v.threshold) == (
        "r", "n", 0.75, 10, 0.75, "share of layers", "> 0.5 of layers")
    v = groups.majority("r", "n", 0.5, 0.4, 0.9, 0.01, 4, 0.05, "layer", "d", n_units=10)
    assert v.outcome is Outcome.INCONCLUSIVE  # exactly half is not more than half
    v = groups.majority("r", "n", 0.75, 0.6, 0.9, 0.05, 4, 0.05, "layer", "d", n_units=10)
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "holds in 75% of 4 layers, 95% CI [0.6, 0.9], p = 0.05; d"
    v = groups.majority("r", "n", 0.25, 0.1, 0.5, 0.9, 4, 0.05, "layer", "d", n_units=10)
    assert v.outcome is Outcome.REFUTED and v.reason == "holds in 25% of 4 layers, 95% CI [0.1, 0.5] ≤ 0.5; d"
    v = groups.majority("r", "n", 0.75, 0.6, 0.9, 0.01, 4, 0.05, "layer", "d", n_units=7)
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == (
        "holds in 75% of 4 layers, 95% CI [0.6, 0.9]: only 7 units, and the bootstrap is calibrated from 8; d")
    v = groups.majority("r", "n", 0.75, 0.6, 0.9, 0.01, 9, 0.05, "layer", "d")  # no units: the levels count
    assert v.n == 9 and v.outcome is Outcome.SUPPORTED
    v = groups.majority("r", "n", 0.75, 0.8, 0.9, 0.01, 4, 0.05, "layer", "d", n_units=10)
    assert v.ci_low == 0.75 and v.reason == ("holds in 75% of 4 layers, 95% CI [0.75, 0.9] (interval widened down to "
                                             "the estimate (the resampled values lay above it, from 0.8)), p = 0.01; d")


def test_a_layer_whose_delta_lies_on_the_bound_does_not_count_for_the_claim():
    """Layer 2 has the same values in both classes (δ = 0 exactly): with the bound 0 it is not "below", so the share
    is 2 of 3, not 3 of 3 (an estimate on the bound is not on the claimed side)."""
    a, b = clustered(n_texts=12)
    f = pd.concat([tokens(a, b, layer=0), tokens(a, b, layer=1), tokens(b, b, layer=2)], ignore_index=True)
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "n_resamples": 200})
    assert v.estimate == pytest.approx(2 / 3)
    # with the bound at −0.2 a layer of δ = −0.2 exactly would not count either; δ of layer 0 lies beyond it
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "n_resamples": 200, "delta": -0.2})
    d = delta_by_pairs(np.concatenate(a), np.concatenate(b))
    assert d < -0.2 and v.estimate == pytest.approx(2 / 3)
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "n_resamples": 200, "delta": d})
    assert v.estimate == 0.0  # layers 0 and 1 sit exactly on this bound, layer 2 above it


def test_group_comparison_names_refusals_and_binary_fields():
    a, b = clustered()
    f = tokens(a, b)
    f2 = f.assign(cls=f["cls"].map({"det": "adj", "noun": "verb"}))
    both = pd.concat([f, f2], ignore_index=True)
    v = evaluate(both, "group_comparison", {**P, "a": ["det", "adj"], "b": ["noun", "verb"], "n_resamples": 200})
    assert v.metric == "m: det+adj vs noun+verb"
    v = evaluate(f, "group_comparison", {**P, "a": ["adj"], "b": ["verb"]})
    assert (v.rule, v.metric) == ("group_comparison", "m")
    v = evaluate(tokens(a[:3], b[:3]), "group_comparison", {**P, "min_n": 1, "alpha": 0.1, "n_resamples": 200})
    assert v.n == 3 and "calibrated from 8" in v.reason and not v.reason.startswith("only")  # measured, not refused
    v = evaluate(tokens(a[:2], b[:2]), "group_comparison", {**P, "min_n": 1, "alpha": 0.1})
    assert (v.rule, v.alpha, v.outcome) == ("group_comparison", 0.1, Outcome.INCONCLUSIVE)
    # the default min_n is 20 tokens a group: exactly 20 each is measured
    v = evaluate(tokens([x[:2] for x in a], [x[:2] for x in b]), "group_comparison",
                 {"metric": "m", "a": ["det"], "b": ["noun"], "n_resamples": 200})
    assert v.n == 10 and not v.reason.startswith("only")
    # one 0/1 value per unit, groups of 20 and 15: the counts of b come from b's units
    vals = [1] * 3 + [0] * 17 + [1] * 12 + [0] * 3
    g = pd.DataFrame({"sample": np.arange(35), "cls": ["det"] * 20 + ["noun"] * 15, "metric": "m",
                      "value": np.array(vals, float)})
    v = evaluate(g, "group_comparison", {**P, "alpha": 0.1})
    assert v.estimate == pytest.approx(3 / 20 - 12 / 15) and v.effect == pytest.approx(v.estimate)
    assert (v.rule, v.metric, v.n, v.alpha) == ("group_comparison", "m: det vs noun", 35, 0.1)
    assert v.reason.startswith("3 of 20 vs 12 of 15: ")
    v = evaluate(g, "group_comparison", {**P, "side": "greater"})
    assert v.threshold == "δ ≥ 0" and v.outcome is Outcome.REFUTED
    assert v.sensitivity.startswith("the interval lies wholly on the other side") or v.sensitivity.startswith("power")
    with pytest.raises(ValueError) as err:
        evaluate(g, "group_comparison", {**P, "delta": 0.1})
    assert str(err.value) == "group_comparison on one 0/1 value per unit tests exactly against δ = 0 (delta must be 0)"
