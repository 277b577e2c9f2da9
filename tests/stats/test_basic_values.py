"""`bench.stats.basic` against answers worked out by hand: the t interval and p of a mean from its formula, the
exact binomial p of 9 of 10 as a count of outcomes (11/1024), the Wilcoxon p of six differences by enumerating the
64 sign patterns, McNemar's p of 5 against 1 discordant pairs (7/64), the Monte Carlo rank p of a baseline, and
every field and sentence of the verdicts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, _boot_p, evaluate, exact, expanded_confidence

FIVE = [0.6, 0.7, 0.8, 0.9, 1.0]  # mean 0.8, sd √0.025


def sample_frame(values, metric="m", start=0) -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(start, start + len(values)), "metric": metric,
                         "value": np.asarray(values, float)})


def t_by_hand(values, bound, confidence=0.95):
    """(mean, t, half-width) of the one-sample t interval, from the formula."""
    x = np.asarray(values, float)
    se = x.std(ddof=1) / math.sqrt(len(x))
    return x.mean(), (x.mean() - bound) / se, stats.t.ppf(1 - (1 - confidence) / 2, len(x) - 1) * se


def test_threshold_mean_is_the_t_test_and_t_interval_by_hand():
    up = [x + 1 for x in FIVE]  # mean 1.8: values outside [0, 1], so the t-test alone decides (no share cap)
    v = evaluate(sample_frame(up), "threshold", {"metric": "m", "min": 1.5})
    mean, t, half = t_by_hand(up, 1.5)
    assert t == pytest.approx(0.3 / math.sqrt(0.025 / 5))
    assert v.estimate == pytest.approx(1.8) and v.p_value == pytest.approx(stats.t.sf(t, 4))
    assert (v.ci_low, v.ci_high) == pytest.approx((1.8 - half, 1.8 + half))
    assert (v.outcome, v.rule, v.metric, v.n, v.threshold, v.alpha) == (
        Outcome.SUPPORTED, "threshold", "m", 5, "≥ 1.5", 0.05)
    assert v.effect == pytest.approx(0.3) and v.effect_name == "margin"
    assert v.reason == (f"1.8 ≥ 1.5, 95% CI [{1.8 - half:.4g}, {1.8 + half:.4g}], p = {stats.t.sf(t, 4):.3g} "
                        "(p and CI over 5 units 'sample')")
    # the upper side: p is the other tail; a narrower 90% interval still lies wholly above the bound
    v = evaluate(sample_frame(up), "threshold", {"metric": "m", "max": 1.5, "confidence": 0.9, "alpha": 0.1})
    _, _, half90 = t_by_hand(up, 1.5, 0.9)
    assert v.p_value == pytest.approx(stats.t.cdf(t, 4)) and v.threshold == "≤ 1.5" and v.alpha == 0.1
    assert (v.ci_low, v.ci_high) == pytest.approx((1.8 - half90, 1.8 + half90))
    assert v.outcome is Outcome.REFUTED and v.effect == pytest.approx(0.3)


def test_shares_cannot_show_more_than_n_of_n_would():
    """Values in [0, 1] against a bound inside it: p is at least bⁿ (all 1 under a 0/1 null of mean b) and the
    interval reaches Clopper–Pearson's end for n of n, so nine facts at 1 and one at 0.75 are no surer of "≥ 0.9"
    than ten 0/1 facts all right; where the t-test is already that cautious, it stands unchanged."""
    crowded = [1.0] * 9 + [0.75]
    v = evaluate(sample_frame(crowded), "threshold", {"metric": "m", "min": 0.9})
    _, t, half = t_by_hand(crowded, 0.9)
    assert stats.t.sf(t, 9) < 0.01  # what the t-test alone would say
    edge = 0.025 ** (1 / 10)
    assert v.p_value == pytest.approx(0.9 ** 10) and v.outcome is Outcome.INCONCLUSIVE
    assert (v.ci_low, v.ci_high) == pytest.approx((edge, 0.975 + half))
    assert v.reason == (f"0.975, 95% CI [{edge:.4g}, {0.975 + half:.4g}], t-test raised to what 10 of 10 0/1 values "
                        f"could show, values in [0, 1] (p ≥ 0.9^10 = 0.349), p = 0.349 (p and CI over 10 units "
                        f"'sample')")
    ten = evaluate(sample_frame([1.0] * 10), "threshold", {"metric": "m", "min": 0.9})
    assert ten.p_value == pytest.approx(v.p_value) and ten.ci_low == pytest.approx(edge)  # the exact test's own
    low = evaluate(sample_frame([0.0] * 9 + [0.1]), "threshold", {"metric": "m", "max": 0.2})
    _, t, half = t_by_hand([0.0] * 9 + [0.1], 0.2)
    assert low.p_value == pytest.approx(0.8 ** 10) and low.ci_high == pytest.approx(1 - edge)
    assert low.ci_low == pytest.approx(0.01 - half) and "(p ≥ (1 − 0.2)^10 = 0.107)" in low.reason
    # FIVE against 0.5: t gives p = 0.0066, below 0.5^5 = 0.031, which it is raised to (still < 0.05)
    five = evaluate(sample_frame(FIVE), "threshold", {"metric": "m", "min": 0.5})
    assert five.p_value == pytest.approx(0.5 ** 5) and five.outcome is Outcome.SUPPORTED
    # spread values far from the bound: the t-test's own p and interval are already more cautious
    mid = [0.1, 0.2, 0.3, 0.25, 0.15] * 2
    plain = evaluate(sample_frame(mid), "threshold", {"metric": "m", "min": 0.9})
    _, t, half = t_by_hand(mid, 0.9)
    assert plain.p_value == pytest.approx(stats.t.sf(t, 9)) and "raised" not in plain.reason
    assert plain.outcome is Outcome.REFUTED
    # outside [0, 1], or a bound on its edge: no cap
    assert evaluate(sample_frame([0.0, 1.0, 1.2, 0.9, 1.0]), "threshold", {"metric": "m", "min": 0.5}).p_value \
        == pytest.approx(stats.t.sf(t_by_hand([0.0, 1.0, 1.2, 0.9, 1.0], 0.5)[1], 4))
    assert "raised" not in evaluate(sample_frame(crowded), "threshold", {"metric": "m", "min": 0.0}).reason


def test_threshold_of_identical_values_has_no_interval_and_p_one():
    v = evaluate(sample_frame([0.7] * 5), "threshold", {"metric": "m", "min": 0.5})
    assert (v.outcome, v.p_value, v.ci_low, v.ci_high, v.n) == (Outcome.INCONCLUSIVE, 1.0, None, None, 5)
    assert v.reason == ("0.7, no interval: all 5 units gave the same value vs ≥ 0.5, p = 1 "
                        "(p and CI over 5 units 'sample')")


def test_threshold_refuses_fewer_units_than_min_n():
    v = evaluate(sample_frame(FIVE[:4]), "threshold", {"metric": "m", "min": 0.5})
    assert (v.outcome, v.reason, v.rule, v.metric, v.n, v.threshold, v.alpha) == (
        Outcome.INCONCLUSIVE, "only 4 samples (< 5)", "threshold", "m", 4, "≥ 0.5", 0.05)
    assert v.estimate == pytest.approx(0.75) and v.p_value is None
    assert evaluate(sample_frame(FIVE[:4]), "threshold", {"metric": "m", "min": 0.5, "min_n": 4}).p_value is not None
    v = evaluate(sample_frame(FIVE[:4]).rename(columns={"sample": "text"}), "threshold",
                 {"metric": "m", "min": 0.5, "unit": "text", "min_n": 6, "alpha": 0.2})
    assert (v.reason, v.alpha) == ("only 4 texts (< 6)", 0.2)


def test_threshold_on_zero_one_values_is_the_exact_binomial_test():
    """9 of 10 against ½: p = P(X ≥ 9) = (C(10,9) + C(10,10)) / 2¹⁰ = 11/1024; Clopper–Pearson from beta quantiles."""
    v = evaluate(sample_frame([1] * 9 + [0]), "threshold", {"metric": "m", "min": 0.5})
    lo, hi = stats.beta.ppf(0.025, 9, 2), stats.beta.ppf(0.975, 10, 1)
    assert v.p_value == pytest.approx(11 / 1024) and (v.ci_low, v.ci_high) == pytest.approx((lo, hi))
    assert (v.outcome, v.n, v.threshold, v.effect_name) == (Outcome.SUPPORTED, 10, "≥ 0.5", "margin")
    assert v.estimate == pytest.approx(0.9) and v.effect == pytest.approx(0.4)
    assert (v.rule, v.metric) == ("threshold", "m")
    assert v.reason == (f"9 of 10 = 0.9, Clopper–Pearson 95% CI [{lo:.4g}, {hi:.4g}], exact binomial test vs ≥ 0.5, "
                        "p = 0.0107 (p and CI over 10 units 'sample')")
    v = evaluate(sample_frame([1] * 9 + [0]), "threshold", {"metric": "m", "max": 0.5})
    assert v.p_value == pytest.approx(1 - 1 / 1024) and v.outcome is Outcome.REFUTED  # P(X ≤ 9)
    # the exact power of a REFUTED 0/1 claim: the interval lies on the other side, so at any power
    assert v.sensitivity.startswith("the interval lies wholly on the other side")
    # 1 of 10 against a smallest effect of 0.55 over the bound ½: the exact test rejects from 9 successes on
    # (P(X ≥ 9 | ½) = 11/1024), so its power is P(X ≥ 9 | 0.55) — too small for the REFUTED to stand
    v = evaluate(sample_frame([1] + [0] * 9), "threshold", {"metric": "m", "min": 0.5, "smallest_effect": 0.55})
    power = 10 * 0.55 ** 9 * 0.45 + 0.55 ** 10
    assert v.outcome is Outcome.INCONCLUSIVE
    assert v.reason.startswith(f"could not have shown the effect: power {power:.2f} at smallest effect 0.55 vs bound "
                               "0.5 (the spec) with n = 10; about ")


def test_threshold_worst_case_over_rows():
    for reduce, bound, est, ok in [("max", {"min": 1.0}, 1.0, True), ("max", {"max": 1.0}, 1.0, True),
                                   ("max", {"max": 0.95}, 1.0, False), ("min", {"min": 0.6}, 0.6, True),
                                   ("min", {"min": 0.65}, 0.6, False), ("min", {"max": 0.55}, 0.6, False)]:
        v = evaluate(sample_frame(FIVE), "threshold", {"metric": "m", "reduce": reduce, **bound})
        (key, b), = bound.items()
        label = f"{'≥' if key == 'min' else '≤'} {b:g}"
        assert v.outcome is (Outcome.SUPPORTED if ok else Outcome.REFUTED), (reduce, bound)
        assert v.reason == f"{reduce} m = {est:g} {'meets' if ok else 'misses'} {label} (exact, 5 rows)"
        assert (v.estimate, v.n, v.threshold, v.effect_name, v.p_value) == (est, 5, label, "margin", None)
        assert v.effect == pytest.approx(est - b) and v.rule == "threshold" and v.metric == "m"
        assert v.sensitivity == (None if ok else f"exact: the {reduce} over all 5 rows, no sampling")
    v = evaluate(sample_frame(FIVE), "threshold", {"metric": "m", "reduce": "max", "min": 0.5, "alpha": 0.2})
    assert v.alpha == 0.2


def heads(seed=0, n=12):
    """n texts × 2 layers × 2 heads; head (1, 0) is the best, with per-text noise."""
    rng = np.random.default_rng(seed)
    means = {(0, 0): 0.1, (0, 1): 0.2, (1, 0): 0.6, (1, 1): 0.3}
    rows = [(s, lay, h, "score", mu + 0.1 * rng.standard_normal()) for s in range(n) for (lay, h), mu in means.items()]
    return pd.DataFrame(rows, columns=["sample", "layer", "head", "metric", "value"])


def best_head_boot(f, n_resamples):
    """The bootstrap of the best head's mean written over texts: each resample's group means, then their max."""
    cube = f.pivot_table(index="sample", columns=["layer", "head"], values="value").to_numpy()

    def stat(i, axis=-1):
        return cube[np.asarray(i)].mean(axis=-2).max(axis=-1)

    n = cube.shape[0]
    return stats.bootstrap((np.arange(n),), stat, vectorized=True, n_resamples=n_resamples, method="percentile",
                           confidence_level=expanded_confidence(0.95, n), random_state=np.random.default_rng(12345))


def test_threshold_of_the_best_group_is_a_bootstrap_over_units():
    f = heads()
    p = {"metric": "score", "reduce": "max_group_mean", "by": ["layer", "head"], "n_resamples": 300}
    v = evaluate(f, "threshold", {**p, "min": 0.5})
    res = best_head_boot(f, 300)
    best = f[(f["layer"] == 1) & (f["head"] == 0)]["value"].mean()
    assert v.estimate == pytest.approx(best) and v.effect == pytest.approx(best - 0.5)
    assert (v.ci_low, v.ci_high) == pytest.approx((res.confidence_interval.low, res.confidence_interval.high))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.5, +1, 12))
    assert v.reason.endswith(" (p and CI over 12 units 'sample')") and v.n == 12
    assert (v.rule, v.metric, v.threshold, v.effect_name) == ("threshold", "score", "≥ 0.5", "margin")
    v = evaluate(f, "threshold", {**p, "max": 0.8})
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.8, -1, 12))
    # `where` narrows the rows first: layer 0 alone, whose best head is (0, 1)
    v = evaluate(f, "threshold", {**p, "min": 0.5, "where": {"layer": 0}})
    assert v.estimate == pytest.approx(f[(f["layer"] == 0) & (f["head"] == 1)]["value"].mean())


def test_threshold_missing_rows():
    f = sample_frame(FIVE)
    f.attrs["notes"] = ["no such layer"]
    v = evaluate(f, "threshold", {"metric": "m", "min": 0.5, "where": {"layer": 3}})
    assert (v.outcome, v.reason, v.rule, v.metric) == (
        Outcome.INCONCLUSIVE, "the frame has no rows for {'layer': 3} (no such layer)", "threshold", "m")


def pair(a, b, start_b=0):
    return pd.concat([sample_frame(a, "a"), sample_frame(b, "b", start_b)], ignore_index=True)


AB = {"a": {"metric": "a"}, "b": {"metric": "b"}}
D = np.array([1.0, 2.0, 0.25, 2.5, 1.5, 1.25])  # a − b per text; minus 0.5: one negative, the smallest |·|


def wilcoxon_by_enumeration(x):
    """P(W⁺ ≥ observed) over the 2ⁿ equally likely sign patterns (no ties, no zeros)."""
    ranks = stats.rankdata(np.abs(x))
    w = ranks[x > 0].sum()
    hits = sum(sum(r for r, s in zip(ranks, signs) if s) >= w for signs in itertools.product([0, 1], repeat=len(x)))
    return hits / 2 ** len(x)


def test_paired_difference_is_wilcoxon_with_the_t_interval_by_hand():
    v = evaluate(pair(2 + D, [2.0] * 6), "paired_difference", {**AB, "min": 0.5})
    assert wilcoxon_by_enumeration(D - 0.5) == 2 / 64  # W⁺ = 20 of 21: only {} and {rank 1} left out reach it
    mean, _, half = t_by_hand(D, 0.5)
    assert v.p_value == pytest.approx(2 / 64) and v.estimate == pytest.approx(8.5 / 6)
    assert (v.ci_low, v.ci_high) == pytest.approx((mean - half, mean + half))
    assert v.effect == pytest.approx(D.mean() / D.std(ddof=1)) and v.effect_name == "Cohen's d_z"
    assert (v.outcome, v.rule, v.metric, v.n, v.threshold, v.alpha) == (
        Outcome.SUPPORTED, "paired_difference", "a − b", 6, "≥ 0.5", 0.05)
    assert v.reason == (f"1.417 ≥ 0.5, 95% CI [{mean - half:.4g}, {mean + half:.4g}], p = 0.0312 "
                        "(p and CI over 6 units 'sample')")
    v = evaluate(pair(2 + D, [2.0] * 6), "paired_difference", {**AB, "min": 0.5, "confidence": 0.8})
    _, _, half80 = t_by_hand(D, 0.5, 0.8)
    assert (v.ci_low, v.ci_high) == pytest.approx((mean - half80, mean + half80))


def test_paired_difference_equal_to_min_everywhere_has_p_one():
    v = evaluate(pair(2 + D, 1 + D), "paired_difference", {**AB, "min": 1.0})
    assert (v.outcome, v.p_value, v.ci_low, v.ci_high, v.estimate) == (Outcome.INCONCLUSIVE, 1.0, None, None, 1.0)
    assert np.isnan(v.effect)  # no spread: d_z undefined
    assert v.reason.startswith("1, no interval: all 6 units gave the same value vs ≥ 1, p = 1")
    # differences equal to min up to rounding (0.1 added and taken away again): still p = 1, not a signed-rank test
    b = np.array([0.2, 0.7, 1.3, 2.9, 3.1, 0.4])
    assert np.any((b + 0.1) - b - 0.1 != 0)
    assert evaluate(pair(b + 0.1, b), "paired_difference", {**AB, "min": 0.1}).p_value == 1.0
    # one text: no spread, no d_z
    v = evaluate(pair([3.0], [2.0]), "paired_difference", {**AB, "min_n": 1})
    assert v.n == 1 and np.isnan(v.effect) and v.estimate == 1.0


def test_paired_difference_refusals():
    v = evaluate(pair(2 + D, [2.0] * 6, start_b=10), "paired_difference", {**AB, "alpha": 0.1})
    assert (v.outcome, v.reason, v.rule, v.metric, v.alpha, v.n) == (
        Outcome.INCONCLUSIVE, "no sample has both sides", "paired_difference", "a − b", 0.1, None)
    v = evaluate(pair(2 + D, [2.0] * 6, start_b=2), "paired_difference", {**AB, "min": 0.5, "alpha": 0.1})
    assert (v.outcome, v.reason, v.n, v.threshold, v.alpha, v.rule, v.metric) == (
        Outcome.INCONCLUSIVE, "only 4 paired samples (< 5)", 4, "≥ 0.5", 0.1, "paired_difference", "a − b")
    assert v.estimate == pytest.approx(np.mean(D[2:]))
    v = evaluate(pair(2 + D, [2.0] * 6, start_b=2), "paired_difference", {**AB, "min_n": 4})
    assert v.n == 4 and v.p_value is not None  # min_n itself is enough
    # two texts: d_z from their two differences, 1 and 2 (mean 1.5, sd √0.5)
    v = evaluate(pair([3.0, 4.0], [2.0, 2.0]), "paired_difference", {**AB, "min_n": 2})
    assert v.effect == pytest.approx(1.5 / math.sqrt(0.5))
    f = pair(2 + D, [2.0] * 6)
    f.attrs["notes"] = ["b was skipped"]
    v = evaluate(f, "paired_difference", {"a": {"metric": "a"}, "b": {"metric": "c"}})
    assert (v.reason, v.metric, v.rule) == (
        "the frame has no rows for {'metric': 'c'} (b was skipped)", "a − c", "paired_difference")
    v = evaluate(f, "paired_difference", {"a": {"metric": "z", "layer": 1}, "b": {"metric": "b"}})
    assert (v.reason, v.metric) == ("the frame has no rows for {'metric': 'z', 'layer': 1} (b was skipped)", "z,1 − b")


def test_paired_zero_one_values_use_the_exact_mcnemar_test():
    """5 texts right only under a, 1 only under b: p = P(X ≥ 5 | 6, ½) = 7/64."""
    a = [1, 1, 1, 1, 1, 1, 0, 0, 1, 0]
    b = [0, 0, 0, 0, 0, 1, 1, 0, 1, 0]
    v = evaluate(pair(a, b), "paired_difference", AB)
    p, lo, hi = exact.paired(5, 1, 10, 0.95)
    assert p == pytest.approx(7 / 64) and v.p_value == pytest.approx(7 / 64)
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi)) and v.estimate == pytest.approx(0.4)
    d = np.array(a, float) - np.array(b, float)
    assert v.effect == pytest.approx(d.mean() / d.std(ddof=1)) and v.n == 10 and v.threshold == "≥ 0"
    assert (v.rule, v.metric, v.effect_name) == ("paired_difference", "a − b", "Cohen's d_z")
    assert v.reason == (f"0.4, exact 95% CI [{lo:.4g}, {hi:.4g}], exact McNemar: 5 samples only under a, 1 only "
                        "under b, p = 0.109 (p and CI over 10 units 'sample')")
    v = evaluate(pair(a, b), "paired_difference", {**AB, "confidence": 0.8})
    assert (v.ci_low, v.ci_high) == pytest.approx(exact.paired(5, 1, 10, 0.8)[1:])
    # only one side 0/1: not McNemar, the Wilcoxon path (which takes any min)
    v = evaluate(pair(2 + D, [0, 1, 0, 1, 0, 1]), "paired_difference", {**AB, "min": 0.5})
    assert v.effect_name == "Cohen's d_z" and v.estimate == pytest.approx(np.mean(2 + D) - 0.5)
    assert evaluate(pair([0, 1, 0, 1, 0, 1], 2 + D), "paired_difference", {**AB, "min": -9}).n == 6
    # six texts, 5 against 0: an exact test needs no bootstrap calibration, so it decides (p = 1/32)
    v = evaluate(pair([1] * 5 + [0], [0] * 6), "paired_difference", AB)
    assert (v.outcome, v.n, v.p_value) == (Outcome.SUPPORTED, 6, pytest.approx(1 / 32))
    with pytest.raises(ValueError) as err:
        evaluate(pair(a, b), "paired_difference", {**AB, "min": 0.1})
    assert str(err.value) == "paired_difference on 0/1 values tests with McNemar, which needs min = 0"


def test_paired_difference_of_best_groups_is_a_bootstrap_over_units():
    f = pd.concat([heads(1).assign(side="x"), heads(2).assign(side="y", value=lambda d: d["value"] - 0.3)])
    p = {"a": {"side": "x"}, "b": {"side": "y"}, "reduce": "max_group_mean", "by": ["layer", "head"],
         "n_resamples": 300, "min": 0.1}
    v = evaluate(f, "paired_difference", p)
    ca = f[f["side"] == "x"].pivot_table(index="sample", columns=["layer", "head"], values="value").to_numpy()
    cb = f[f["side"] == "y"].pivot_table(index="sample", columns=["layer", "head"], values="value").to_numpy()

    def stat(i, axis=-1):
        i = np.asarray(i)
        return ca[i].mean(axis=-2).max(axis=-1) - cb[i].mean(axis=-2).max(axis=-1)

    res = stats.bootstrap((np.arange(12),), stat, vectorized=True, n_resamples=300, method="percentile",
                          confidence_level=expanded_confidence(0.95, 12), random_state=np.random.default_rng(12345))
    assert v.estimate == pytest.approx(ca.mean(0).max() - cb.mean(0).max())
    assert (v.ci_low, v.ci_high) == pytest.approx((res.confidence_interval.low, res.confidence_interval.high))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.1, +1, 12))
    d = ca.mean(axis=1) - cb.mean(axis=1)
    assert v.effect == pytest.approx(d.mean() / d.std(ddof=1)) and v.effect_name == "Cohen's d_z"
    assert v.reason.endswith(" (p and CI over 12 units 'sample')") and v.metric == "x − y"
    assert (v.rule, v.threshold) == ("paired_difference", "≥ 0.1")


def baseline_frame(observed, n=199):
    return pd.concat([pd.DataFrame({"kind": "observed", "metric": "s", "value": observed}),
                      pd.DataFrame({"kind": "baseline", "metric": "r", "value": np.arange(1.0, n + 1)})])


OB = {"observed": {"kind": "observed"}, "baseline": {"kind": "baseline"}}


def test_exceeds_baseline_rank_p_quantile_and_z_by_hand():
    """Baseline 1..199: q0.99 = 197 + 0.02 (linear interpolation at 0.99 · 198), sd = √(199 · 200 / 12).  The
    observed value is the mean of its rows, 197.5; two draws (198, 199) reach it: p = (1 + 2) / 200."""
    v = evaluate(baseline_frame([197.0, 198.0]), "exceeds_baseline", OB)
    assert v.estimate == 197.5 and v.p_value == pytest.approx(3 / 200) and v.n == 199
    # α is left at its default here, 0.05: the level docs/CLAIMS.md states for every rule whose spec sets none
    assert v.effect == pytest.approx((197.5 - 100) / math.sqrt(199 * 200 / 12)) and v.effect_name == "z vs baseline"
    assert (v.outcome, v.rule, v.metric, v.threshold, v.alpha, v.sensitivity) == (
        Outcome.SUPPORTED, "exceeds_baseline", "observed", "> q0.99 of baseline (197)", 0.05, None)
    assert v.reason == "197.5 exceeds the baseline's q0.99 = 197"
    v = evaluate(baseline_frame([197.0, 198.0]), "exceeds_baseline", {**OB, "alpha": 0.01})
    assert (v.outcome, v.reason, v.alpha) == (Outcome.INCONCLUSIVE, "197.5 exceeds q0.99 but p = 0.015 ≥ α", 0.01)
    v = evaluate(baseline_frame([198.0]), "exceeds_baseline", OB)
    assert v.p_value == pytest.approx(3 / 200)  # the draw equal to it counts: 198 and 199
    v = evaluate(baseline_frame([198.0]), "exceeds_baseline", {**OB, "alpha": 3 / 200})
    assert v.outcome is Outcome.INCONCLUSIVE  # p = α is not below it
    v = evaluate(baseline_frame([197.0, 198.0]), "exceeds_baseline", {**OB, "quantile": 0.5})
    assert v.threshold == "> q0.5 of baseline (100)" and v.reason == "197.5 exceeds the baseline's q0.5 = 100"


def test_exceeds_baseline_z_from_two_draws_and_from_a_constant_baseline():
    """The median needs two draws: z of 1 against [0.1, 0.2] is (1 − 0.15) / (0.1 / √2); a constant baseline has no z."""
    two = pd.concat([pd.DataFrame({"kind": "observed", "metric": "s", "value": [1.0]}),
                     pd.DataFrame({"kind": "baseline", "metric": "r", "value": [0.1, 0.2]})])
    v = evaluate(two, "exceeds_baseline", {**OB, "quantile": 0.5, "alpha": 0.5})
    assert v.effect == pytest.approx(0.85 / (0.1 / math.sqrt(2))) and v.p_value == pytest.approx(1 / 3)
    assert v.outcome is Outcome.SUPPORTED and v.threshold == "> q0.5 of baseline (0.15)"
    flat = two.assign(value=[1.0, 0.2, 0.2])
    v = evaluate(flat, "exceeds_baseline", {**OB, "quantile": 0.5, "alpha": 0.5})
    assert np.isnan(v.effect) and v.outcome is Outcome.SUPPORTED


def test_exceeds_baseline_refuted_and_too_few_draws():
    v = evaluate(baseline_frame([150.0]), "exceeds_baseline", OB)
    assert (v.outcome, v.reason) == (Outcome.REFUTED, "150 does not exceed the baseline's q0.99 = 197")
    assert v.p_value == pytest.approx(51 / 200) and v.n == 199
    assert v.sensitivity == "exact comparison with 199 baseline draws (smallest attainable p 0.005 < α)"
    v = evaluate(baseline_frame([197.02]), "exceeds_baseline", OB)  # on the quantile itself: not beyond it
    assert v.outcome is Outcome.REFUTED
    v = evaluate(baseline_frame([150.0]), "exceeds_baseline", {**OB, "alpha": 0.005})
    # 1/200 is not below α: these draws could never have supported it, so the REFUTED is not kept
    assert (v.outcome, v.sensitivity) == (Outcome.INCONCLUSIVE, None)
    assert v.reason == ("could not have shown the effect: the rule states no sensitivity (150 does not exceed the "
                        "baseline's q0.99 = 197)")
    # 0.99 needs 100 draws: 99 are refused, 100 decide
    v = evaluate(baseline_frame([500.0], n=99), "exceeds_baseline", {**OB, "alpha": 0.1})
    assert (v.outcome, v.reason, v.n, v.p_value, v.metric, v.alpha) == (
        Outcome.INCONCLUSIVE, "99 baseline draws cannot resolve the 0.99 quantile", 99, pytest.approx(1 / 100),
        "observed", 0.1)
    # 99 draws at the 0.95 quantile: the smallest attainable p is 1/100, below α = 0.015, so a REFUTED stands
    v = evaluate(baseline_frame([10.0], n=99), "exceeds_baseline", {**OB, "quantile": 0.95, "alpha": 0.015})
    assert v.outcome is Outcome.REFUTED
    assert v.sensitivity == "exact comparison with 99 baseline draws (smallest attainable p 0.01 < α)"
    v = evaluate(baseline_frame([500.0], n=1), "exceeds_baseline", OB)  # one draw: no spread, refused
    assert v.reason == "1 baseline draws cannot resolve the 0.99 quantile"
    assert v.threshold.startswith("> q0.99 of baseline (") and v.rule == "exceeds_baseline" and v.estimate == 500
    assert evaluate(baseline_frame([500.0], n=100), "exceeds_baseline", OB).outcome is Outcome.SUPPORTED
    f = baseline_frame([1.0])
    f.attrs["notes"] = ["none"]
    v = evaluate(f, "exceeds_baseline", {**OB, "baseline": {"kind": "x"}})
    assert (v.reason, v.rule, v.metric) == ("the frame has no rows for {'kind': 'x'} (none)", "exceeds_baseline",
                                            "observed")
    assert evaluate(f, "exceeds_baseline", {**OB, "observed": {"kind": "y"}}).reason == (
        "the frame has no rows for {'kind': 'y'} (none)")


def test_all_of_hands_its_alpha_to_the_parts():
    f = sample_frame(FIVE)
    v = evaluate(f, "all", {"of": [{"rule": "threshold", "metric": "m", "min": 0.5}], "alpha": 0.001})
    assert v.alpha == 0.001 and v.parts[0].alpha == 0.001
    assert v.outcome is Outcome.INCONCLUSIVE  # p = 0.0066 does not clear 0.001


def test_the_arms_of_threshold_and_paired_difference():
    from bench.stats import control

    assert control.supports("threshold")  # loads the registry, and so the arms, when this test runs alone
    f = pd.concat([sample_frame(FIVE), sample_frame([0.0] * 5, "m").assign(layer=1)], ignore_index=True)
    f["layer"] = f["layer"].fillna(0)
    arm = control.ARMS["threshold"](f, metric="m", max=0.5, where={"layer": 0}, unit="sample")
    assert (arm.side, arm.unit, arm.name) == (-1, "sample", "m")
    assert arm.table.to_numpy().ravel().tolist() == FIVE and arm.table.index.tolist() == [0, 1, 2, 3, 4]
    assert float(arm.stat(arm.table.to_numpy())) == pytest.approx(0.8)
    assert control.ARMS["threshold"](f, metric="m", min=0.5).side == +1
    by = control.ARMS["threshold"](heads(), metric="score", min=0.5, reduce="max_group_mean", by=["layer", "head"])
    assert by.table.shape == (12, 4)
    assert float(by.stat(by.table.to_numpy())) == pytest.approx(by.table.to_numpy().mean(axis=0).max())
    # a worst case pairs its rows by unit, one row each: two layers give each sample twice, so no pairing
    v = control.ARMS["threshold"](f, metric="m", min=0.5, reduce="max")
    assert (v.outcome, v.reason, v.rule) == (
        Outcome.INCONCLUSIVE, "reduce 'max' is an exact worst case: its rows pair with the control's only by a "
        "'sample' column that names each row once", "threshold")
    assert "'layer' column" in control.ARMS["threshold"](f, metric="m", max=0.5, reduce="min", unit="layer").reason
    arm = control.ARMS["threshold"](f, metric="m", max=0.5, reduce="min", where={"layer": 0})
    assert (arm.exact, arm.side, arm.unit, arm.stat) == (True, -1, "sample", None)
    assert arm.table["value"].tolist() == FIVE and arm.table.index.tolist() == [0, 1, 2, 3, 4]
    v = control.ARMS["threshold"](f, metric="x", min=0.5, reduce="max")
    assert (v.reason, v.rule, v.metric) == ("the frame has no rows for {}", "threshold", "x")
    # paired: only the texts with both sides, a's columns first; the statistic is a's minus b's
    arm = control.ARMS["paired_difference"](pair(2 + D, [2.0] * 6, start_b=2), a={"metric": "a"}, b={"metric": "b"})
    assert (arm.side, arm.unit, arm.name) == (+1, "sample", "a − b")
    assert arm.table.to_numpy().tolist() == [[2 + d, 2.0] for d in D[2:]]
    assert float(arm.stat(arm.table.to_numpy())) == pytest.approx(np.mean(D[2:]))
    f = pd.concat([heads(1).assign(side="x"), heads(2).assign(side="y")])
    arm = control.ARMS["paired_difference"](f, a={"side": "x"}, b={"side": "y"}, reduce="max_group_mean",
                                            by=["layer", "head"])
    assert arm.table.shape == (12, 8)  # four heads a side
    m = arm.table.to_numpy()
    assert float(arm.stat(m)) == pytest.approx(m[:, :4].mean(axis=0).max() - m[:, 4:].mean(axis=0).max())
    v = control.ARMS["paired_difference"](pair(2 + D, [2.0] * 6), a={"metric": "z"}, b={"metric": "b"})
    assert v.reason == "the frame has no rows for {'metric': 'z'}"
    v = control.ARMS["paired_difference"](pair(2 + D, [2.0] * 6), a={"metric": "a"}, b={"metric": "c"})
    assert (v.reason, v.metric, v.rule) == ("the frame has no rows for {'metric': 'c'}", "a − c", "paired_difference")


def test_share_cap_applies_only_to_shares_against_a_bound_inside_the_unit_interval():
    from bench.stats.basic import share_cap

    shares = np.array([1.0] * 9 + [0.75])
    same = (0.01, 0.9, 1.0, "")
    assert share_cap(shares, 1.0, +1, 0.95, 0.01, 0.9, 1.0) == same  # a bound on the edge: nothing to compare with
    assert share_cap(shares, 1.5, +1, 0.95, 0.01, 0.9, 1.0) == same
    assert share_cap(np.append(shares, -0.1), 0.5, +1, 0.95, 0.01, 0.9, 1.0) == same  # one below 0: not shares
    assert share_cap(np.append(shares, 1.4), 0.5, +1, 0.95, 0.01, 0.9, 1.0) == same  # one above 1: not shares
    assert share_cap(np.array([0.95]), 0.5, +1, 0.95, 0.01, 0.9, 1.0)[0] == 0.5  # one unit: p ≥ 0.5¹
    assert share_cap(shares, 0.9, +1, 0.95, 0.01, 0.9, 1.0)[0] == pytest.approx(0.9 ** 10)
    # p already above bⁿ, the interval's low end above n of n's: only the interval is widened, and it says so
    near = np.array([0.82, 0.77, 0.87, 0.80, 0.84, 0.78, 0.86, 0.81, 0.83, 0.82])
    _, t, half = t_by_hand(near, 0.81)
    p = stats.t.sf(t, 9)
    assert p > 0.81 ** 10 and near.mean() - half > 0.025 ** 0.1
    got = share_cap(near, 0.81, +1, 0.95, p, near.mean() - half, near.mean() + half)
    assert got[:3] == pytest.approx((p, 0.025 ** 0.1, near.mean() + half)) and got[3].startswith("t-test raised")
    # a t-test already as cautious: unchanged, and nothing said
    assert share_cap(near, 0.8, +1, 0.95, 0.5, 0.5, 0.9) == (0.5, 0.5, 0.9, "")
