"""`bench.stats.comparisons` against answers worked out by hand: the trend's Spearman ρ from scipy and its
bootstrap over texts written resample by resample, the layer majority's share and its p, the layer summary's
exact reduction, McNemar's exact p and interval, its power from Connor's formula, and every field and sentence of
the verdicts, refusals included."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, _boot_p, evaluate, exact, expanded_confidence
from bench.stats.comparisons import check_skips, mcnemar_power


def layers(values: np.ndarray, metric: str = "m", over: str = "layer") -> pd.DataFrame:
    """(texts, layers) values as frame rows: one per text and layer."""
    n, g = values.shape
    return pd.DataFrame({"sample": np.repeat(np.arange(n), g), over: np.tile(np.arange(g), n), "metric": metric,
                         "value": values.ravel()})


def noisy(n=12, g=6, slope=0.3, seed=4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return slope * np.arange(g)[None, :] + rng.normal(size=(n, g))


def boot(values: np.ndarray, stat, n_resamples: int):
    """The percentile bootstrap over texts (rows), as the rules draw it: seed 12345, the expanded level."""
    n = values.shape[0]
    return stats.bootstrap((np.arange(n),), lambda i, axis=-1: stat(values[np.asarray(i)]), vectorized=True,
                           n_resamples=n_resamples, method="percentile",
                           confidence_level=expanded_confidence(0.95, n), random_state=np.random.default_rng(12345))


def spearman_of_means(x: np.ndarray) -> np.ndarray:
    """Spearman ρ of layer index and each resample's layer means, one resample at a time through scipy."""
    means = x.mean(axis=-2)
    flat = means.reshape(-1, means.shape[-1])
    rho = [stats.spearmanr(np.arange(means.shape[-1]), row).statistic for row in flat]
    return np.asarray(rho).reshape(means.shape[:-1])


# trend ---------------------------------------------------------------------------------------------------------

def test_trend_is_spearman_of_the_layer_means_with_a_bootstrap_over_texts():
    vals = noisy()
    v = evaluate(layers(vals), "trend", {"metric": "m", "min": 0.2, "n_resamples": 300})
    rho = stats.spearmanr(np.arange(6), vals.mean(axis=0)).statistic
    res = boot(vals, spearman_of_means, 300)
    assert v.estimate == pytest.approx(rho) and v.effect == pytest.approx(rho)
    assert (v.ci_low, v.ci_high) == pytest.approx((res.confidence_interval.low, res.confidence_interval.high))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.2, +1, 12))
    assert (v.rule, v.metric, v.threshold, v.effect_name, v.n, v.alpha) == (
        "trend", "m", "ρ(layer, m) ≥ 0.2", "Spearman ρ", 12, 0.05)
    assert v.reason.endswith("(p and CI over 12 units 'sample')")
    down = evaluate(layers(-vals), "trend", {"metric": "m", "max": -0.2, "n_resamples": 300})
    assert down.estimate == pytest.approx(-rho) and down.threshold == "ρ(layer, m) ≤ -0.2"
    assert down.p_value == pytest.approx(_boot_p(-res.bootstrap_distribution, -0.2, -1, 12))
    assert down.outcome is v.outcome


def test_trend_draws_2000_resamples_by_default():
    vals = noisy(n=10, g=4, slope=0.2, seed=6)
    v = evaluate(layers(vals), "trend", {"metric": "m", "min": 0.0})
    res = boot(vals, spearman_of_means, 2000)
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.0, +1, 10))


def test_trend_reads_its_column_unit_where_and_alpha():
    vals = noisy(n=8, g=5)
    f = layers(vals, over="depth").rename(columns={"sample": "text"}).assign(kind="a")
    other = f.assign(kind="b", value=-f["value"])
    v = evaluate(pd.concat([f, other]), "trend", {"metric": "m", "min": 0.0, "over": "depth", "unit": "text",
                                                   "where": {"kind": "a"}, "alpha": 0.1, "confidence": 0.9,
                                                   "n_resamples": 200})
    rho = stats.spearmanr(np.arange(5), vals.mean(axis=0)).statistic
    assert v.estimate == pytest.approx(rho) and v.threshold == "ρ(depth, m) ≥ 0" and v.alpha == 0.1 and v.n == 8
    assert "90% CI" in v.reason and "over 8 units 'text'" in v.reason


def test_trend_refuses_too_few_texts_or_layers_and_missing_rows():
    few = evaluate(layers(noisy(n=4)), "trend", {"metric": "m", "min": 0.0, "alpha": 0.1})
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 4 samples and 6 layers"
    assert (few.rule, few.metric, few.n, few.threshold, few.p_value, few.alpha) == (
        "trend", "m", 4, "ρ(layer, m) ≥ 0", None, 0.1)
    assert few.estimate == pytest.approx(stats.spearmanr(np.arange(6), noisy(n=4).mean(axis=0)).statistic)
    assert evaluate(layers(noisy(n=5)), "trend", {"metric": "m", "min": 0.0}).reason != "only 5 samples and 6 layers"
    two = evaluate(layers(noisy(g=2)), "trend", {"metric": "m", "min": 0.0, "min_n": 3})
    assert two.outcome is Outcome.INCONCLUSIVE and two.reason == "only 12 samples and 2 layers"
    three = evaluate(layers(noisy(g=3)), "trend", {"metric": "m", "min": 0.0, "n_resamples": 100})
    assert "only" not in three.reason
    gone = evaluate(layers(noisy()), "trend", {"metric": "other", "min": 0.0})
    assert gone.outcome is Outcome.INCONCLUSIVE and gone.reason == "the frame has no rows for {}"
    assert (gone.rule, gone.metric) == ("trend", "other")


# layer_majority ------------------------------------------------------------------------------------------------

def share_above(bound):
    return lambda x: (x.mean(axis=-2) >= bound).mean(axis=-1)


def test_layer_majority_is_the_share_of_layer_means_with_its_bootstrap():
    vals = noisy(n=12, g=6, slope=0.4, seed=1)
    v = evaluate(layers(vals), "layer_majority", {"metric": "m", "min": 0.5, "n_resamples": 300})
    means = vals.mean(axis=0)
    res = boot(vals, share_above(0.5), 300)
    assert v.estimate == pytest.approx((means >= 0.5).mean()) and v.effect == v.estimate
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1, 12))
    assert (v.rule, v.metric, v.threshold, v.effect_name, v.n) == (
        "layer_majority", "m", "> 0.5 of layers", "share of layers", 12)
    assert f"per-layer means from {means.min():.3g} to {means.max():.3g} vs ≥ 0.5" in v.reason
    assert v.reason.endswith("p and CI over 12 units 'sample'") and f"of 6 layers" in v.reason
    below = evaluate(layers(-vals), "layer_majority", {"metric": "m", "max": -0.5, "n_resamples": 300})
    assert below.estimate == pytest.approx(v.estimate) and "vs ≤ -0.5" in below.reason
    on = layers(np.full((12, 4), 0.5) + np.random.default_rng(0).normal(scale=1e-9, size=(12, 4)).round(12))
    on["value"] = 0.5  # every layer's mean exactly on the bound: it holds (≥), on both sides
    on.loc[on["sample"] == 0, "value"] = 0.5
    assert evaluate(on, "layer_majority", {"metric": "m", "min": 0.5}).estimate == 1.0
    assert evaluate(on, "layer_majority", {"metric": "m", "max": 0.5}).estimate == 1.0


def test_layer_majority_band_counts_both_ends_and_refuses():
    vals = np.tile([0.25, 0.5, 0.75, 1.0], (10, 1))  # layer means exactly on the band's ends count as inside
    v = evaluate(layers(vals), "layer_majority", {"metric": "m", "min": 0.5, "max": 0.75})
    assert v.estimate == pytest.approx(0.5) and "vs in [0.5, 0.75]" in v.reason
    with pytest.raises(ValueError, match=r"layer_majority: min \(0.75\) must lie below max \(0.75\)"):
        evaluate(layers(vals), "layer_majority", {"metric": "m", "min": 0.75, "max": 0.75})
    wide = np.tile([0.25, 0.5, 0.75, 1.0, 1.0, 1.0], (10, 1))  # 6 layers, so texts and layers differ in number
    few = evaluate(layers(wide[:4]), "layer_majority", {"metric": "m", "min": 0.5, "alpha": 0.1})
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 4 samples (< 5)"
    assert (few.rule, few.metric, few.n, few.alpha) == ("layer_majority", "m", 4, 0.1)
    enough = evaluate(layers(wide[:4]), "layer_majority", {"metric": "m", "min": 0.5, "min_n": 4})
    assert not enough.reason.startswith("only 4 samples (<")  # 4 texts with min_n = 4 are not refused
    gone = evaluate(layers(vals), "layer_majority", {"metric": "x", "min": 0.5, "where": {"layer": 1}})
    assert gone.outcome is Outcome.INCONCLUSIVE and gone.reason == "the frame has no rows for {'layer': 1}"
    assert (gone.rule, gone.metric) == ("layer_majority", "x")


def test_layer_majority_draws_2000_resamples_by_default():
    vals = noisy(n=10, g=5, slope=0.3, seed=8)
    v = evaluate(layers(vals), "layer_majority", {"metric": "m", "min": 0.5})
    res = boot(vals, share_above(0.5), 2000)
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1, 10))


def test_layer_majority_reads_over_unit_and_alpha():
    vals = noisy(n=10, g=5, slope=0.5, seed=3)
    f = layers(vals, over="depth").rename(columns={"sample": "text"})
    v = evaluate(f, "layer_majority", {"metric": "m", "min": 0.4, "over": "depth", "unit": "text", "alpha": 0.2,
                                        "confidence": 0.9, "n_resamples": 200})
    res = stats.bootstrap((np.arange(10),), lambda i, axis=-1: share_above(0.4)(vals[np.asarray(i)]),
                          vectorized=True, n_resamples=200, method="percentile",
                          confidence_level=expanded_confidence(0.9, 10), random_state=np.random.default_rng(12345))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1, 10))
    assert v.alpha == 0.2 and v.threshold == "> 0.5 of depths" and "per-depth means" in v.reason
    assert "units 'text'" in v.reason and "90% CI" in v.reason


# layer_summary -------------------------------------------------------------------------------------------------

def test_layer_summary_reduces_layer_means_exactly_after_the_skips():
    rows = [(s, l, "lin", v) for l, base in enumerate([0.5, 0.95, 0.92, 0.97, 0.91, 0.3])
            for s, v in enumerate([base - 0.01, base + 0.01])]  # two texts per layer: the mean is `base`
    f = pd.DataFrame(rows, columns=["sample", "layer", "metric", "value"])
    v = evaluate(f, "layer_summary", {"metric": "lin", "min": 0.9, "skip_first": 1, "skip_last": 1})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.935)
    assert (v.rule, v.metric, v.n, v.threshold, v.effect_name, v.alpha, v.p_value, v.sensitivity) == (
        "layer_summary", "lin", 4, "median ≥ 0.9", "margin", 0.05, None, None)
    assert v.effect == pytest.approx(0.035)
    assert v.reason == "median over 4 layers (1–4) = 0.935 meets median ≥ 0.9; range 0.91–0.97 (exact)"
    low = evaluate(f, "layer_summary", {"metric": "lin", "min": 0.9, "reduce": "min", "alpha": 0.1})
    assert low.outcome is Outcome.REFUTED and low.estimate == pytest.approx(0.3) and low.alpha == 0.1
    assert low.reason == "min over 6 layers (0–5) = 0.3 misses min ≥ 0.9; range 0.3–0.97 (exact)"
    assert low.sensitivity == "exact: the min over all 6 layers, no sampling"
    top = evaluate(f, "layer_summary", {"metric": "lin", "max": 0.97, "reduce": "max", "skip_last": 2})
    assert top.outcome is Outcome.SUPPORTED and top.estimate == pytest.approx(0.97)  # on the bound holds
    assert top.threshold == "max ≤ 0.97" and top.n == 4
    mean = evaluate(f, "layer_summary", {"metric": "lin", "max": 0.5, "reduce": "mean", "skip_first": 5})
    assert mean.outcome is Outcome.SUPPORTED and mean.estimate == pytest.approx(0.3)
    assert mean.reason.startswith("mean over 1 layers (5–5)")
    gone = evaluate(f, "layer_summary", {"metric": "x", "min": 0.9})
    assert gone.outcome is Outcome.INCONCLUSIVE and (gone.rule, gone.metric) == ("layer_summary", "x")
    deep = f.rename(columns={"layer": "depth"})
    with pytest.raises(ValueError, match="leave none of this model's 6 depths$"):
        evaluate(deep, "layer_summary", {"metric": "lin", "min": 0.9, "over": "depth", "skip_first": 6})


def test_check_skips_leaves_at_least_one_layer():
    check_skips(0, 0, 1)
    with pytest.raises(ValueError, match="^skip_first = 1 and skip_last = 0 leave none of this model's 1 layers$"):
        check_skips(1, 0, 1)
    check_skips(2, 3, 6)
    for first, last in ((3, 3), (6, 0), (0, 6), (-1, 0), (0, -1)):
        with pytest.raises(ValueError, match=f"skip_first = {first} and skip_last = {last} leave none of this "
                                             f"model's 6 heads"):
            check_skips(first, last, 6, "head")


# accuracy_drop -------------------------------------------------------------------------------------------------

def qa(orig, edited, unit="sample"):
    rows = [(i, "original", "correct", float(v)) for i, v in enumerate(orig)]
    rows += [(i, "edited", "correct", float(v)) for i, v in enumerate(edited)]
    return pd.DataFrame(rows, columns=[unit, "condition", "metric", "value"])


A, B = {"metric": "correct", "condition": "original"}, {"metric": "correct", "condition": "edited"}


def test_accuracy_drop_is_the_exact_mcnemar_test_with_its_interval():
    orig = [1] * 12 + [1] * 7 + [0] * 2 + [0] * 9  # 7 lost, 2 gained, 30 questions
    edited = [1] * 12 + [0] * 7 + [1] * 2 + [0] * 9
    v = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B})
    p, lo, hi = exact.paired(7, 2, 30, 0.95)
    assert v.p_value == pytest.approx(stats.binomtest(7, 9, 0.5, alternative="greater").pvalue) == pytest.approx(p)
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi))
    assert v.estimate == pytest.approx(5 / 30) and v.effect == pytest.approx(5 / 30)
    assert (v.rule, v.metric, v.threshold, v.effect_name, v.n) == (
        "accuracy_drop", "accuracy correct,original − correct,edited", "drop > 0", "accuracy drop", 30)
    assert v.reason == (f"{5 / 30:.4g}, 95% CI [{lo:.4g}, {hi:.4g}] vs drop > 0, p = {p:.3g} (p and CI over 30 units "
                        f"'sample') (accuracy 0.633 → 0.467; McNemar 7 lost vs 2 gained)")
    assert v.outcome is Outcome.INCONCLUSIVE  # p = 0.09
    p90, lo90, hi90 = exact.paired(7, 2, 30, 0.9)
    at90 = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "confidence": 0.9})
    assert (at90.ci_low, at90.ci_high) == pytest.approx((lo90, hi90)) and "90% CI" in at90.reason
    shifted = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "min": 0.5})
    assert shifted.threshold == "drop > 0.5"


def test_accuracy_drop_means_repeated_rows_per_question_and_pairs_by_unit():
    f = qa([1, 0] * 10, [0, 0] * 10, unit="q")
    twice = pd.concat([f, f.assign(value=f["value"])])  # the same answers twice per question: the mean is 0/1
    v = evaluate(twice, "accuracy_drop", {"a": A, "b": B, "unit": "q"})
    assert v.n == 20 and v.p_value == pytest.approx(0.5 ** 10) and v.outcome is Outcome.SUPPORTED
    half = qa([1] * 20, [0] * 20)  # right under one of two edited phrasings: a mean of 0.5 is not > 0.5, so lost
    half = pd.concat([half, half[half["condition"] == "edited"].assign(value=1.0)])
    v = evaluate(half, "accuracy_drop", {"a": A, "b": B})
    assert v.p_value == pytest.approx(0.5 ** 20) and v.estimate == pytest.approx(0.5)
    def halves(a_val, b_val):  # 12 questions: the first with per-question means a_val / b_val, the rest tied
        rows = qa([a_val] + [1] * 11, [b_val] + [1] * 11)
        return evaluate(rows, "accuracy_drop", {"a": A, "b": B}).reason

    assert "McNemar 0 lost vs 0 gained" in halves(0.5, 0.0)  # right half the time is not right (> 0.5): no loss
    assert "McNemar 0 lost vs 1 gained" in halves(0.5, 1.0)  # … so from there to right is a gain
    assert "McNemar 0 lost vs 0 gained" in halves(0.0, 0.5)
    assert "McNemar 1 lost vs 0 gained" in halves(1.0, 0.5) and "McNemar 0 lost vs 1 gained" in halves(0.5, 0.75)
    lone = pd.concat([qa([1] * 12, [0] * 12), pd.DataFrame([(99, "original", "correct", 1.0)],
                                                           columns=["sample", "condition", "metric", "value"])])
    assert evaluate(lone, "accuracy_drop", {"a": A, "b": B}).n == 12  # unpaired questions are dropped


def test_accuracy_drop_refusals_and_power():
    few = evaluate(qa([1] * 9, [0] * 9), "accuracy_drop", {"a": A, "b": B, "alpha": 0.1})
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 9 paired questions (< 10)"
    assert (few.rule, few.n, few.estimate, few.alpha) == ("accuracy_drop", 9, 1.0, 0.1)
    assert few.metric == "accuracy correct,original − correct,edited"
    assert evaluate(qa([1] * 9, [0] * 9), "accuracy_drop", {"a": A, "b": B, "min_n": 9}).outcome is Outcome.SUPPORTED
    six = evaluate(qa([1] * 6, [0] * 6), "accuracy_drop", {"a": A, "b": B, "min_n": 6})  # exact: no bootstrap floor
    assert six.outcome is Outcome.SUPPORTED and six.p_value == pytest.approx(0.5 ** 6)
    gone = evaluate(qa([1] * 12, [0] * 12), "accuracy_drop", {"a": A, "b": {**B, "condition": "x"}})
    assert gone.outcome is Outcome.INCONCLUSIVE and "{'metric': 'correct', 'condition': 'x'}" in gone.reason
    assert gone.metric == "accuracy correct,original − correct,x"
    gone_a = evaluate(qa([1] * 12, [0] * 12), "accuracy_drop", {"a": {**A, "condition": "y"}, "b": B})
    assert "'y'" in gone_a.reason and gone_a.rule == "accuracy_drop"
    orig, edited = [1] * 12 + [1] * 3 + [0] * 15, [1] * 12 + [0] * 3 + [0] * 15
    v = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "smallest_effect": 0.1, "alpha": 0.05})
    pw, need = mcnemar_power(0.1, 3 / 30, 30, 0.05, 0.8)
    assert v.reason.endswith(f"; power to detect a drop of 0.1 at n = 30: {pw:.2f} (80% needs n ≈ {need}), so the "
                             f"test is underpowered for the paper's effect")
    v = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "smallest_effect": 0.1, "power": 0.5})
    pw, need = mcnemar_power(0.1, 3 / 30, 30, 0.05, 0.5)
    assert f"(50% needs n ≈ {need})" in v.reason and (pw < 0.5) == v.reason.endswith("paper's effect")
    orig, edited = [1] * 10 + [1] * 3 + [0] * 2 + [0] * 15, [1] * 10 + [0] * 3 + [1] * 2 + [0] * 15
    v = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "smallest_effect": 0.1})
    pw, need = mcnemar_power(0.1, 5 / 30, 30, 0.05, 0.8)  # ψ: 3 lost and 2 gained of 30
    assert f"(accuracy 0.433 → 0.400; McNemar 3 lost vs 2 gained); power to detect a drop of 0.1 at n = 30: " \
           f"{pw:.2f} (80% needs n ≈ {need})" in v.reason
    strong = evaluate(qa([1] * 30, [0] * 30), "accuracy_drop", {"a": A, "b": B, "smallest_effect": 0.1})
    assert strong.outcome is Outcome.SUPPORTED and not strong.reason.endswith("paper's effect")


def _mcnemar_power_by_hand(effect: float, psi: float, n: int, alpha: float) -> float:
    """Every (lost, gained, same) table of n pairs, its multinomial probability, and whether scipy's exact
    one-sided binomial test of the lost among the discordant rejects at p < α."""
    p10, p01 = (psi + effect) / 2, (psi - effect) / 2
    total = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            p = stats.binomtest(a, a + b, 0.5, alternative="greater").pvalue if a + b else 1.0
            if p < alpha:
                total += stats.multinomial.pmf([a, b, n - a - b], n, [p10, p01, 1 - psi])
    return total


def test_mcnemar_power_is_the_exact_tests_over_every_table():
    """Known answer: the power the verdict's own test has, summed over every table of n pairs (not Connor's normal
    approximation, which puts it at 0.26 instead of 0.15 for a drop of 0.1 with 30% discordant pairs at n = 30),
    and the n it names is the first, from its search's start, whose power reaches the target."""
    for effect, psi, n in ((0.1, 0.3, 30), (0.2, 0.25, 20), (0.05, 0.2, 25), (0.25, 0.3, 12)):
        pw, need = mcnemar_power(effect, psi, n, 0.05, 0.8)
        assert pw == pytest.approx(_mcnemar_power_by_hand(effect, psi, n, 0.05), abs=1e-12)
    pw, need = mcnemar_power(0.2, 0.25, 20, 0.05, 0.8)
    assert need == 42
    assert _mcnemar_power_by_hand(0.2, 0.25, 42, 0.05) >= 0.8 > _mcnemar_power_by_hand(0.2, 0.25, 41, 0.05)
    assert mcnemar_power(0.2, 0.25, 42, 0.05, 0.8)[0] >= 0.8
    # fewer discordant pairs than the effect needs: ψ is raised to the effect itself
    assert mcnemar_power(0.1, 0.02, 50, 0.05, 0.8) == mcnemar_power(0.1, 0.1 + 1e-9, 50, 0.05, 0.8)
    assert mcnemar_power(0.1, 0.3, 50, 0.01, 0.9)[1] > mcnemar_power(0.1, 0.3, 50, 0.05, 0.8)[1]
    assert mcnemar_power(0.1, 0.3, 50, 0.05, 0.8)[0] < mcnemar_power(0.1, 0.3, 50, 0.10, 0.8)[0]
    # α = 1/16 is a tail probability of ½-binomials (4 of 4: p = 1/16 exactly): p < α must not reject there
    for effect, psi, n in ((0.3, 0.4, 10), (0.2, 0.5, 14)):
        assert mcnemar_power(effect, psi, n, 1 / 16, 0.8)[0] == pytest.approx(
            _mcnemar_power_by_hand(effect, psi, n, 1 / 16), abs=1e-12)
    # the n for 80% is the first that reaches it, counted from one pair
    pw, need = mcnemar_power(0.3, 0.4, 10, 1 / 16, 0.8)
    assert _mcnemar_power_by_hand(0.3, 0.4, need, 1 / 16) >= 0.8
    assert all(_mcnemar_power_by_hand(0.3, 0.4, m, 1 / 16) < 0.8 for m in range(1, need))


def _first_reaching_by_scan(effect: float, psi: float, alpha: float, power: float) -> int:
    """The fewest pairs whose power reaches `power`, each m's power from scipy's pmf afresh (the search's answer
    before it built each m's distribution from the last)."""
    q = (psi + effect) / (2 * psi)
    for m in range(1, 5_000):
        d = np.arange(m + 1)
        k = np.floor(stats.binom.isf(alpha, d, 0.5)) + 1
        k = np.where(stats.binom.sf(k - 1, d, 0.5) < alpha, k, k + 1)
        if float(np.dot(stats.binom.pmf(d, m, psi), stats.binom.sf(k - 1, d, q))) >= power:
            return m
    raise AssertionError("not reached")


def test_mcnemar_power_names_the_first_n_an_exact_scan_names():
    """Known answer: the n the incremental search names is the exact scan's, on needs from tens to about a
    thousand pairs, where the saw-tooth of an exact test's power puts some m above the target before others below
    it (α = 1/16 and 0.01 included); a recurrence off by one pair in the shift names a later n."""
    cases = ((0.2, 0.25, 0.05, 0.8), (0.1, 0.3, 0.05, 0.8), (0.05, 0.2, 0.05, 0.8), (0.3, 0.4, 1 / 16, 0.8),
             (0.08, 0.1, 0.01, 0.9), (0.04, 0.08, 0.05, 0.5), (0.15, 0.6, 0.05, 0.95))
    for effect, psi, alpha, power in cases:
        assert mcnemar_power(effect, psi, 30, alpha, power)[1] == _first_reaching_by_scan(effect, psi, alpha, power)


def test_discordant_pmfs_are_the_binomials():
    """Known answer: each m's distribution of discordant pairs built from the last is scipy's Binomial(m, ψ) pmf."""
    from bench.stats.comparisons import _discordant_pmfs

    seen = {m: pmf.copy() for m, pmf in _discordant_pmfs(0.3, 600) if m in (1, 2, 17, 600)}
    assert sorted(seen) == [1, 2, 17, 600]
    for m, pmf in seen.items():
        np.testing.assert_allclose(pmf, stats.binom.pmf(np.arange(m + 1), m, 0.3), rtol=1e-9, atol=1e-300)


def test_mcnemar_power_finds_a_need_at_the_end_of_its_range(monkeypatch):
    """The last n searched counts: with the range cut to 42 pairs, the 42 that a drop of 0.2 at ψ 0.25 needs."""
    from bench.stats import comparisons

    monkeypatch.setattr(comparisons, "MAX_PAIRS", 42)
    assert comparisons.mcnemar_power(0.2, 0.25, 20, 0.05, 0.8)[1] == 42
    monkeypatch.setattr(comparisons, "MAX_PAIRS", 41)
    assert comparisons.mcnemar_power(0.2, 0.25, 20, 0.05, 0.8)[1] == 42  # said "n > 41"


def test_mcnemar_power_beyond_the_pairs_it_searches_says_so():
    """A drop too small for MAX_PAIRS pairs to show with 80% power: the n it gives is MAX_PAIRS + 1, and the
    reason says "n > MAX_PAIRS" rather than a number it never reached."""
    from bench.stats.comparisons import MAX_PAIRS

    pw, need = mcnemar_power(0.001, 0.02, 50, 0.05, 0.8)
    assert need == MAX_PAIRS + 1 and pw < 0.06
    assert mcnemar_power(0.001, 0.02, MAX_PAIRS, 0.05, 0.8)[0] < 0.8
    orig, edited = [1] * 12 + [1] * 3 + [0] * 15, [1] * 12 + [0] * 3 + [0] * 15
    v = evaluate(qa(orig, edited), "accuracy_drop", {"a": A, "b": B, "smallest_effect": 0.001})
    assert f"(80% needs n > {MAX_PAIRS})" in v.reason


# gated ---------------------------------------------------------------------------------------------------------

def test_gated_names_every_failed_precondition_and_keeps_the_claims_numbers():
    rng = np.random.default_rng(2)
    f = pd.concat([pd.DataFrame({"sample": range(12), "metric": "gate1", "value": 0.1 * rng.normal(size=12) + 1}),
                   pd.DataFrame({"sample": range(12), "metric": "gate2", "value": 0.1 * rng.normal(size=12) - 1}),
                   pd.DataFrame({"sample": range(12), "metric": "claim", "value": 0.1 * rng.normal(size=12) + 2})])
    g1, g2 = {"rule": "threshold", "metric": "gate1", "min": 0.0}, {"rule": "threshold", "metric": "gate2", "min": 0.0}
    claim = {"rule": "threshold", "metric": "claim", "min": 0.0}
    plain = evaluate(f, "threshold", {"metric": "claim", "min": 0.0})
    v = evaluate(f, "gated", {"of": [g1, g2, claim], "alpha": 0.1})
    gate2 = evaluate(f, "threshold", {"metric": "gate2", "min": 0.0})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == f"precondition not met: gate2: {gate2.reason}"
    assert (v.rule, v.metric, v.estimate, v.ci_low, v.ci_high, v.n, v.effect, v.effect_name, v.threshold) == (
        "gated", "claim", plain.estimate, plain.ci_low, plain.ci_high, plain.n, plain.effect, plain.effect_name,
        plain.threshold)
    assert v.p_value is None and v.p_adjusted is None and v.alpha == 0.1
    both = evaluate(f, "gated", {"of": [{**g1, "min": 5.0}, g2, claim]})
    assert both.reason.startswith("precondition not met: gate1: ") and "; gate2: " in both.reason
    ok = evaluate(f, "gated", {"of": [g1, claim]})
    assert ok == plain
    assert evaluate(f, "gated", {"of": [claim]}) == plain
    with pytest.raises(ValueError, match="^gated needs at least the claim's rule in 'of'$"):
        evaluate(f, "gated", {"of": []})


@pytest.mark.parametrize("off", [-3, 3])
def test_mcnemar_power_is_the_same_whatever_the_quantile_guessed(monkeypatch, off):
    """The binomial quantile only starts the rejection region: guessed `off` counts, the power and the n named are
    those of the exact scan (the region is settled by the tails, as the sensitivity search settles its own)."""
    cases = ((0.2, 0.25, 0.05, 0.8), (0.3, 0.4, 1 / 16, 0.8), (0.08, 0.1, 0.01, 0.9))
    want = [(mcnemar_power(e, psi, 30, a, pw), _first_reaching_by_scan(e, psi, a, pw)) for e, psi, a, pw in cases]
    isf = stats.binom.isf
    monkeypatch.setattr(stats.binom, "isf", lambda q, n, p: isf(q, n, p) + off)
    for (e, psi, a, pw), (before, scanned) in zip(cases, want):
        got = mcnemar_power(e, psi, 30, a, pw)
        assert got[1] == scanned == before[1] and got[0] == pytest.approx(before[0], abs=1e-12)
