"""`bench.stats.correlations` against scipy's coefficients, the weighted forms against repeated rows, and the
bootstrap over texts written resample by resample (whole texts drawn, their tokens pooled, r computed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, _boot_p, evaluate, expanded_confidence
from bench.stats.correlations import weighted_partial, weighted_pearson


def test_weighted_pearson_is_pearson_of_the_repeated_rows():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=7), rng.normal(size=7)
    w = np.array([1, 0, 3, 2, 1, 1, 4], float)
    rep = np.repeat(np.arange(7), w.astype(int))
    assert weighted_pearson(w, x, y) == pytest.approx(stats.pearsonr(x[rep], y[rep])[0], rel=1e-12)
    both = weighted_pearson(np.stack([w, np.ones(7)]), x, y)
    assert both[1] == pytest.approx(stats.pearsonr(x, y)[0], rel=1e-12)
    assert np.isnan(weighted_pearson(np.ones(3), np.ones(3), np.arange(3.0)))  # no spread: undefined


def test_weighted_partial_is_the_correlation_of_the_residuals():
    rng = np.random.default_rng(1)
    z = rng.normal(size=40)
    x, y = z + rng.normal(size=40), 2 * z + rng.normal(size=40)
    rx = x - np.polyval(np.polyfit(z, x, 1), z)
    ry = y - np.polyval(np.polyfit(z, y, 1), z)
    assert weighted_partial(np.ones(40), x, y, z) == pytest.approx(stats.pearsonr(rx, ry)[0], rel=1e-9)


def texts(n_texts=12, per=4, slope=0.5, seed=2, subject=None):
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_texts):
        level = rng.normal()
        for pos in range(per):
            xv = level + rng.normal()
            rows += [(t, pos, "x", round(xv, 3)), (t, pos, "y", round(slope * xv + rng.normal(), 3)),
                     (t, pos, "z", round(level, 3))]
    f = pd.DataFrame(rows, columns=["sample", "position", "metric", "value"])
    return f if subject is None else f.assign(subject=subject)


C = {"x": {"metric": "x"}, "y": {"metric": "y"}, "min": 0.0, "n_resamples": 200}


def wide(f):
    return f.pivot_table(index=["sample", "position"], columns="metric", values="value").reset_index()


def by_hand_interval(w, coef, n_resamples=200, confidence=0.95):
    units = np.unique(w["sample"])

    def stat(i, axis=-1):
        i = np.asarray(i)
        out = []
        for row in i.reshape(-1, i.shape[-1]):
            rows = pd.concat([w[w["sample"] == units[k]] for k in row])
            out.append(coef(rows["x"].to_numpy(), rows["y"].to_numpy()))
        return np.array(out).reshape(i.shape[:-1])

    res = stats.bootstrap((np.arange(len(units)),), stat, vectorized=True, n_resamples=n_resamples,
                          confidence_level=expanded_confidence(confidence, len(units)), method="percentile",
                          random_state=np.random.default_rng(12345))
    return res.confidence_interval.low, res.confidence_interval.high, res.bootstrap_distribution


def test_pearson_correlation_by_hand():
    f = texts()
    w = wide(f)
    v = evaluate(f, "correlation", C)
    r, rho = stats.pearsonr(w["x"], w["y"])[0], stats.spearmanr(w["x"], w["y"])[0]
    lo, hi, dist = by_hand_interval(w, lambda a, b: stats.pearsonr(a, b)[0])
    assert v.estimate == pytest.approx(r) and v.effect == pytest.approx(rho) and v.effect_name == "Spearman ρ"
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi)) and v.p_value == pytest.approx(_boot_p(dist, 0.0, +1, 12))
    assert (v.rule, v.metric, v.n, v.threshold) == ("correlation", "r(x, y)", 12, "pearson r > 0")
    assert v.reason.endswith(" (p and CI over 12 units 'sample'; 48 tokens)") and v.outcome is Outcome.SUPPORTED


def test_spearman_correlation_by_hand():
    f = texts(seed=3)
    w = wide(f)
    v = evaluate(f, "correlation", {**C, "method": "spearman", "min": 0.1, "confidence": 0.9})
    lo, hi, dist = by_hand_interval(w, lambda a, b: stats.spearmanr(a, b)[0], confidence=0.9)
    assert v.estimate == pytest.approx(stats.spearmanr(w["x"], w["y"])[0])
    assert v.effect == pytest.approx(stats.pearsonr(w["x"], w["y"])[0]) and v.effect_name == "Pearson r"
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi)) and v.p_value == pytest.approx(_boot_p(dist, 0.1, +1, 12))
    assert v.threshold == "spearman r > 0.1"


def test_partial_correlation_given_the_text_level():
    """y depends on x only through the text level z: given z, what is left is x's own noise → partial r known by
    residuals, and the plain r is reported beside it."""
    f = texts(seed=4)
    w = wide(f)
    v = evaluate(f, "correlation", {**C, "given": {"metric": "z"}})
    rx = w["x"] - np.polyval(np.polyfit(w["z"], w["x"], 1), w["z"])
    ry = w["y"] - np.polyval(np.polyfit(w["z"], w["y"], 1), w["z"])
    assert v.estimate == pytest.approx(stats.pearsonr(rx, ry)[0], rel=1e-9)
    assert v.effect == pytest.approx(stats.pearsonr(w["x"], w["y"])[0]) and v.metric == "r(x, y | z)"
    assert v.threshold == "partial r > 0" and v.effect_name == "Pearson r without the covariate"
    assert v.reason.endswith(f"; 48 tokens; without the covariate r = {v.effect:.3g})")
    with pytest.raises(ValueError, match="needs method = 'pearson'"):
        evaluate(f, "correlation", {**C, "given": {"metric": "z"}, "method": "spearman"})


def test_correlation_refusals_and_the_interval_check():
    f = texts()
    v = evaluate(f, "correlation", {**C, "min_n": 49})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 48 matched tokens (< 49) from 12 samples"
    assert v.n == 12 and v.metric == "r(x, y)"
    assert evaluate(f, "correlation", {**C, "min_n": 48}).outcome is Outcome.SUPPORTED
    v = evaluate(f[f["sample"] < 2], "correlation", {**C, "min_n": 1})
    assert v.reason == "only 8 matched tokens (< 1) from 2 samples"
    assert evaluate(f, "correlation", {**C, "x": {"metric": "w"}}).reason == "the frame has no rows for {'metric': 'w'}"
    with pytest.raises(ValueError, match="must contain the unit column 'sample'"):
        evaluate(f, "correlation", {**C, "key": ["position"]})
    # a bound 0.2 below the estimate: p = 0.049 < α, but the interval (from 0.302) reaches below 0.364
    w = wide(f)
    bound = stats.pearsonr(w["x"], w["y"])[0] - 0.2
    v = evaluate(f, "correlation", {**C, "min": bound})
    assert v.p_value < 0.05 and v.ci_low <= bound and v.outcome is Outcome.INCONCLUSIVE
    assert v.reason.endswith(f", but the interval does not exclude {bound:g}")


def test_correlation_difference_pairs_texts_across_subjects():
    a, b = texts(slope=1.0, seed=5, subject="base"), texts(slope=0.0, seed=5, subject="instruct")
    f = pd.concat([a, b], ignore_index=True)
    v = evaluate(f, "correlation_difference", {"x": {"metric": "x"}, "y": {"metric": "y"}, "min_abs": 0.2,
                                               "n_resamples": 200})
    wa, wb = wide(a), wide(b)
    d = abs(stats.pearsonr(wa["x"], wa["y"])[0] - stats.pearsonr(wb["x"], wb["y"])[0])
    assert v.estimate == pytest.approx(d) and v.effect == pytest.approx(d) and v.n == 12
    assert (v.rule, v.metric, v.threshold, v.effect_name) == (
        "correlation_difference", "|r(base) − r(instruct)|", "≥ 0.2", "|Δr|")
    assert v.reason.endswith(" (p and CI over 12 units 'sample')")
    v = evaluate(a, "correlation_difference", {"x": {"metric": "x"}, "y": {"metric": "y"}})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "the frame has no rows for both subjects"
    noted = a.copy()
    noted.attrs = {"notes": ["instruct model missing", "x"]}
    v = evaluate(noted, "correlation_difference", {"x": {"metric": "x"}, "y": {"metric": "y"}})
    assert v.reason == "instruct model missing; x"
    v = evaluate(f, "correlation_difference", {"x": {"metric": "x"}, "y": {"metric": "y"}, "min_n": 49})
    assert v.reason == "too few matched tokens (48, 48)" and v.metric == "|r(base) − r(instruct)|"
    assert evaluate(f, "correlation_difference", {"x": {"metric": "x"}, "y": {"metric": "y"}, "min_n": 48,
                                                  "n_resamples": 200}).n == 12


# ── the survivors of the retest (docs/mutation.md) ────────────────────────────────────────────────────────

def test_corr_needs_three_rows_and_spread_in_both():
    from bench.stats.correlations import _corr

    r = _corr("pearson")
    x3, y3 = np.array([0.0, 0.1, 0.3]), np.array([0.2, 0.1, 0.4])  # spreads below 1
    assert r(x3, y3) == pytest.approx(stats.pearsonr(x3, y3)[0])
    assert _corr("spearman")(x3, y3) == pytest.approx(stats.spearmanr(x3, y3)[0])
    assert np.isnan(r(x3[:2], y3[:2]))
    assert np.isnan(r(np.ones(3), y3)) and np.isnan(r(x3, np.ones(3)))


def test_correlation_defaults_and_refusal_fields():
    f = texts(n_texts=5)  # 20 matched tokens from 5 texts: the default min_n (20) is met
    v = evaluate(f, "correlation", {"x": {"metric": "x"}, "y": {"metric": "y"}})
    assert v.n == 5 and not v.reason.startswith("only")
    w = wide(f)
    _, _, dist = by_hand_interval(w, lambda a, b: stats.pearsonr(a, b)[0], n_resamples=1000)
    assert v.p_value == pytest.approx(_boot_p(dist, 0.0, +1, 5))  # 1,000 resamples by default, at α = 0.05
    assert v.alpha == 0.05 and "only 5 units, and the bootstrap is calibrated from 8" in v.reason
    v = evaluate(texts(n_texts=3, per=8), "correlation", {**C, "min_n": 1})
    assert v.n == 3 and not v.reason.startswith("only")  # three texts are enough to be measured
    v = evaluate(texts(n_texts=2, per=8), "correlation", {**C, "min_n": 1, "alpha": 0.1})
    assert (v.rule, v.metric, v.alpha, v.outcome) == ("correlation", "r(x, y)", 0.1, Outcome.INCONCLUSIVE)
    v = evaluate(f, "correlation", {**C, "x": {"metric": "w"}})
    assert (v.rule, v.metric) == ("correlation", "r(w, y)")
    with pytest.raises(ValueError) as err:
        evaluate(f, "correlation", {**C, "given": {"metric": "z"}, "method": "spearman"})
    assert str(err.value) == "correlation: `given` (a partial correlation) needs method = 'pearson'"


def test_correlation_difference_p_defaults_and_refusal_fields():
    a, b = texts(slope=1.0, seed=5, subject="base"), texts(slope=0.0, seed=5, subject="instruct")
    f = pd.concat([a, b], ignore_index=True)
    xy = {"x": {"metric": "x"}, "y": {"metric": "y"}}
    v = evaluate(f, "correlation_difference", {**xy, "n_resamples": 200})
    wa, wb = wide(a), wide(b)

    def by_hand(i, axis=-1):  # the same texts resampled for both subjects
        i = np.asarray(i)
        out = []
        for row in i.reshape(-1, i.shape[-1]):
            ra = pd.concat([wa[wa["sample"] == t] for t in row])
            rb = pd.concat([wb[wb["sample"] == t] for t in row])
            out.append(abs(stats.pearsonr(ra["x"], ra["y"])[0] - stats.pearsonr(rb["x"], rb["y"])[0]))
        return np.array(out).reshape(i.shape[:-1])

    res = stats.bootstrap((np.arange(12),), by_hand, vectorized=True, n_resamples=200, method="percentile",
                          confidence_level=expanded_confidence(0.95, 12), random_state=np.random.default_rng(12345))
    assert (v.ci_low, v.ci_high) == pytest.approx((res.confidence_interval.low, res.confidence_interval.high))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.2, +1, 12))
    small = pd.concat([texts(n_texts=5, slope=1.0, seed=5, subject="base"),
                       texts(n_texts=5, slope=0.0, seed=5, subject="instruct")], ignore_index=True)
    assert evaluate(small, "correlation_difference", {**xy, "n_resamples": 200}).n == 5  # 20 tokens each: min_n met
    v = evaluate(a, "correlation_difference", {**xy, "alpha": 0.1})
    assert (v.rule, v.metric, v.alpha) == ("correlation_difference", "|r(base) − r(instruct)|", 0.1)
    v = evaluate(f, "correlation_difference", {**xy, "min_n": 49, "alpha": 0.1})
    assert (v.rule, v.alpha, v.outcome) == ("correlation_difference", 0.1, Outcome.INCONCLUSIVE)
