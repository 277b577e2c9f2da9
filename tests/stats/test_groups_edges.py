"""`bench.stats.groups` at its edges: an interval that ends exactly on 0, a layer whose δ lies exactly on the bound
on the "greater" side, the per-layer share's p against a bootstrap written by hand, 0/1 tokens clustered in texts
(not the exact 2×2 path), few 0/1 units, and the majority verdict's fields, power and smallest effect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, _boot_p, evaluate, expanded_confidence, sensitivity
from bench.stats import groups

P = {"metric": "m", "a": ["det"], "b": ["noun"], "min_n": 5}


def tokens(per_text_a, per_text_b, layer=None) -> pd.DataFrame:
    rows = []
    for t, (va, vb) in enumerate(zip(per_text_a, per_text_b)):
        rows += [(t, "det", v) for v in va] + [(t, "noun", v) for v in vb]
    f = pd.DataFrame(rows, columns=["sample", "cls", "value"]).assign(metric="m")
    return f if layer is None else f.assign(layer=layer)


def delta(a, b) -> float:
    """Cliff's δ counted over every pair."""
    return float(np.mean(np.sign(np.subtract.outer(np.asarray(a, float), np.asarray(b, float)))))


def test_cliffs_delta_of_a_single_value_in_b():
    assert groups.cliffs_delta(np.array([3.0, 4.0]), np.array([2.0])) == 1.0
    assert groups.cliffs_delta(np.array([1.0, 2.0, 3.0]), np.array([2.0])) == 0.0


def one_text_apart(step):
    """Ten texts of three det and four noun tokens, all 0, except text 0's det tokens at `step`: δ of a resample is
    step · (copies of text 0) / 10, so with P(no copy) = 0.9¹⁰ ≈ 0.35 the interval ends exactly on 0."""
    return tokens([[step] * 3] + [[0.0] * 3] * 9, [[0.0] * 4] * 10)


def test_an_interval_that_ends_exactly_on_zero_includes_zero():
    v = evaluate(one_text_apart(-1.0), "group_comparison", {**P, "delta": 0.3})
    assert v.estimate == pytest.approx(-0.1) and v.ci_high == 0.0 and v.p_value < 0.05
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason.endswith(", but the interval of δ includes 0")
    v = evaluate(one_text_apart(1.0), "group_comparison", {**P, "side": "greater", "delta": -0.3})
    assert v.estimate == pytest.approx(0.1) and v.ci_low == 0.0 and v.p_value < 0.05
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason.endswith(", but the interval of δ includes 0")


def clustered(n_texts=12, seed=1):
    rng = np.random.default_rng(seed)
    a = [rng.normal(-1.0 + t * 0.1, 1, 3).round(2) for t in range(n_texts)]
    b = [rng.normal(t * 0.1, 1, 4).round(2) for t in range(n_texts)]
    return a, b


def test_on_the_greater_side_a_layer_on_the_bound_does_not_count():
    """Layers 0 and 1: det above noun; layer 2: the same values in both classes, δ = 0 exactly."""
    a, b = clustered()
    up = [x + 10 for x in a]
    f = pd.concat([tokens(up, b, 0), tokens(up, b, 1), tokens(b, b, 2)], ignore_index=True)
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "side": "greater", "n_resamples": 200})
    assert v.estimate == pytest.approx(2 / 3)


def test_the_share_of_layers_p_and_names_by_hand():
    """Layers 0, 1: det below noun; layer 2: above.  The bootstrap over texts rewritten: each resample's δ per layer
    counted over pairs, the share of layers below the bound, p = the corrected share of resamples with ≤ ½."""
    a, b = clustered()
    up = [x + 10 for x in a]
    per_layer = [(a, b), (a, b), (up, b)]
    f = pd.concat([tokens(x, y, g) for g, (x, y) in enumerate(per_layer)], ignore_index=True)
    v = evaluate(f, "group_comparison", {**P, "over": "layer", "n_resamples": 200, "alpha": 0.1})

    def share(i, axis=-1):
        i = np.asarray(i)
        out = [np.mean([delta(np.concatenate([x[t] for t in row]), np.concatenate([y[t] for t in row])) < 0
                        for x, y in per_layer]) for row in i.reshape(-1, i.shape[-1])]
        return np.array(out).reshape(i.shape[:-1])

    res = stats.bootstrap((np.arange(12),), share, vectorized=True, n_resamples=200, method="percentile",
                          confidence_level=expanded_confidence(0.95, 12), random_state=np.random.default_rng(12345))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1, 12))
    assert v.p_value != pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1))  # the correction matters here
    assert (v.rule, v.metric, v.alpha, v.n) == ("group_comparison", "m: det vs noun", 0.1, 12)


def test_zero_one_tokens_clustered_in_texts_take_the_cluster_bootstrap():
    """Three det and four noun tokens of 0/1 per text: not one value per unit, so not the exact 2×2 test; δ of 0/1
    values is the difference of the shares."""
    rng = np.random.default_rng(3)
    a = [(rng.random(3) < 0.2).astype(float) for _ in range(10)]
    b = [(rng.random(4) < 0.7).astype(float) for _ in range(10)]
    v = evaluate(tokens(a, b), "group_comparison", {**P, "n_resamples": 200})
    assert v.estimate == pytest.approx(np.concatenate(a).mean() - np.concatenate(b).mean())
    assert v.n == 10 and v.effect_name == "Cliff's δ"
    assert v.reason.endswith(" (p and CI over 10 units 'sample'; 30 vs 40 tokens)")
    # per layer: one 0/1 value per text and layer is still a comparison per layer, not one 2×2 table
    one = tokens([[1.0]] * 4 + [[0.0]] * 6, [[1.0]] * 8 + [[0.0]] * 2)
    f = pd.concat([one.assign(layer=g) for g in range(3)], ignore_index=True)
    v = evaluate(f, "group_comparison", {**P, "min_n": 1, "over": "layer", "n_resamples": 200})
    assert v.estimate == 1.0 and v.effect_name == "share of layers" and v.n == 10


def test_few_zero_one_units_are_decided_by_the_exact_test():
    """3 of 3 against 0 of 3: Boschloo p = 1/64; six units are too few for a bootstrap, not for an exact test."""
    f = pd.DataFrame({"sample": np.arange(6), "cls": ["det"] * 3 + ["noun"] * 3, "metric": "m",
                      "value": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]})
    v = evaluate(f, "group_comparison", {**P, "min_n": 3, "side": "greater"})
    assert v.p_value == pytest.approx(1 / 64) and v.n == 6
    assert v.outcome is Outcome.SUPPORTED and v.reason.startswith("3 of 3 vs 0 of 3: 1, Newcombe 95% CI [")


def test_zero_one_groups_short_of_the_smallest_effect_get_the_exact_binomial_power():
    """6 of 20 against 4 of 20 with a smallest effect of 0.5: the interval ends below it, so REFUTED; its power is
    the exact binomial one, P(X ≥ 1 | 40, ½) = 1 − 2⁻⁴⁰ (a rejection needs one success when the null share is 0)."""
    f = pd.DataFrame({"sample": np.arange(40), "cls": ["det"] * 20 + ["noun"] * 20, "metric": "m",
                      "value": np.array([1] * 6 + [0] * 14 + [1] * 4 + [0] * 16, float)})
    v = evaluate(f, "group_comparison", {**P, "side": "greater", "smallest_effect": 0.5})
    assert v.outcome is Outcome.REFUTED and v.ci_high < 0.5
    assert v.sensitivity == "power 1.00 at smallest effect 0.5 vs bound 0 (the spec) with n = 40"


def test_majority_fields_edges_and_sensitivity():
    v = groups.majority("r", "n", 0.75, 0.6, 0.9, 0.01, 4, 0.1, "layer", "d", n_units=8)
    assert v.outcome is Outcome.SUPPORTED  # 8 units: the bootstrap is calibrated from 8 on
    assert (v.p_value, v.alpha, v.ci_low, v.ci_high) == (0.01, 0.1, 0.6, 0.9)
    # a REFUTED share: its power at the bound ½ against no effect, se = 0.2 / t₉(0.975)
    v = groups.majority("r", "n", 0.25, 0.1, 0.5, 0.9, 4, 0.05, "layer", "d", n_units=10)
    assert v.outcome is Outcome.REFUTED
    assert v.sensitivity == "power 1.00 at the bound 0.5 vs no effect (0) with n = 10"


def test_majority_short_of_the_smallest_effect_only_when_calibrated():
    """An undecided share whose interval ends below the smallest effect 0.8 is REFUTED from 8 units on."""
    with sensitivity.reference({"smallest_effect": 0.8}):
        v = groups.majority("r", "n", 0.6, 0.4, 0.7, 0.2, 4, 0.05, "layer", "d", n_units=8)
        assert v.outcome is Outcome.REFUTED and "no effect as large as 0.8" in v.reason
        assert groups.majority("r", "n", 0.6, 0.4, 0.7, 0.2, 4, 0.05, "layer", "d", n_units=20).outcome is (
            Outcome.REFUTED)
        v = groups.majority("r", "n", 0.6, 0.4, 0.7, 0.2, 4, 0.05, "layer", "d", n_units=7)
        assert v.outcome is Outcome.INCONCLUSIVE and "no effect as large" not in v.reason
