"""crossfit_summary (bench.stats.heldout) on hand-built sums whose per-layer scores are known: 1 − Σ resid / Σ total
per layer, reduced over the layers kept; the unit of the bootstrap is the text (its rows summed), and the rule
refuses to decide on too few texts or too few tokens per hidden dimension."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import Outcome, evaluate

SHARE = (0.2, 0.5, 0.3, 0.9)  # resid / total per layer: scores 0.8, 0.5, 0.7, 0.1


def _frame(n: int = 12, tokens: float = 1e6, hidden: float = 8, split_rows: bool = False,
           extra: tuple = ()) -> pd.DataFrame:
    """Texts 0..n−1 with total t = 1 + s/10 on every layer and resid = SHARE[layer] · t plus a text effect that
    sums to 0 over the texts (so the per-layer score is exactly 1 − SHARE[layer]); `split_rows` writes each text's
    sums as two rows (a third and two thirds) that the rule must add up."""
    rows = []
    wobble = np.tile([0.02, -0.02], n // 2 + 1)[:n]
    for s in range(n):
        t = 1 + s / 10
        for layer, share in enumerate(SHARE):
            r = share * t + wobble[s]
            for part in ((1 / 3, 2 / 3) if split_rows else (1.0,)):
                rows += [(s, layer, "resid", r * part), (s, layer, "total", t * part)]
    rows += [(None, None, "n_tokens", tokens), (None, None, "hidden_size", hidden)]
    rows += list(extra)
    return pd.DataFrame(rows, columns=["sample", "layer", "metric", "value"])


P = {"resid": "resid", "total": "total"}


@pytest.mark.parametrize(("reduce", "est"), [("median", 0.6), ("min", 0.1), ("max", 0.8), ("mean", 0.525)])
def test_the_estimate_is_the_reduced_per_layer_score(reduce, est):
    v = evaluate(_frame(), "crossfit_summary", {**P, "reduce": reduce, "min": 0.05})
    assert v.estimate == pytest.approx(est, abs=1e-12)
    assert (v.rule, v.metric, v.n) == ("crossfit_summary", f"{reduce} cross-fitted score", 12)
    assert v.threshold == f"{reduce} ≥ 0.05"


def test_skips_drop_the_first_and_last_layers():
    v = evaluate(_frame(), "crossfit_summary", {**P, "reduce": "min", "min": 0.05, "skip_first": 1, "skip_last": 1})
    assert v.estimate == pytest.approx(0.5)  # layers 1 and 2: scores 0.5, 0.7
    assert v.reason.endswith("; over 2 layers; N = 1000000 tokens = 125000.0 per hidden dimension")
    with pytest.raises(ValueError, match="leave none"):
        evaluate(_frame(), "crossfit_summary", {**P, "min": 0.1, "skip_first": 2, "skip_last": 2})


def test_a_texts_rows_are_summed_so_the_text_is_the_unit():
    """Each text's sums split over two rows: the same estimate, interval and p (the bootstrap draws texts)."""
    whole = evaluate(_frame(), "crossfit_summary", {**P, "min": 0.4})
    split = evaluate(_frame(split_rows=True), "crossfit_summary", {**P, "min": 0.4})
    assert split.n == whole.n == 12
    assert (split.estimate, split.ci_low, split.ci_high, split.p_value) == pytest.approx(
        (whole.estimate, whole.ci_low, whole.ci_high, whole.p_value))


def test_supported_and_refuted_against_the_bound():
    up = evaluate(_frame(), "crossfit_summary", {**P, "min": 0.4})  # median 0.6
    assert up.outcome is Outcome.SUPPORTED and up.ci_low <= 0.6 <= up.ci_high and up.p_value < 0.05
    assert up.effect == pytest.approx(0.2) and up.effect_name == "margin" and up.alpha == 0.05
    down = evaluate(_frame(), "crossfit_summary", {**P, "max": 0.4})
    assert down.outcome is Outcome.REFUTED and down.ci_low > 0.4 and down.threshold == "median ≤ 0.4"


def test_too_few_texts_or_tokens_decide_nothing():
    few = evaluate(_frame(n=8), "crossfit_summary", {**P, "min": 0.4})
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 8 samples (< 10) and 4 layers"
    assert few.estimate == pytest.approx(0.6) and few.n == 8
    assert evaluate(_frame(n=8), "crossfit_summary", {**P, "min": 0.4, "min_n": 8}).outcome is Outcome.SUPPORTED
    thin = evaluate(_frame(tokens=100, hidden=8), "crossfit_summary", {**P, "min": 0.4})  # 12.5 < 20 per dimension
    assert thin.outcome is Outcome.INCONCLUSIVE
    assert thin.reason == ("N = 100 tokens = 12.5 per hidden dimension (< 20): too few tokens for a d × d map; "
                           "cross-fitted 0.6; N = 100 tokens = 12.5 per hidden dimension")
    enough = evaluate(_frame(tokens=160, hidden=8), "crossfit_summary", {**P, "min": 0.4})  # exactly 20
    assert enough.outcome is Outcome.SUPPORTED
    loose = evaluate(_frame(tokens=100, hidden=8), "crossfit_summary", {**P, "min": 0.4, "min_tokens_per_dim": 10})
    assert loose.outcome is Outcome.SUPPORTED


def test_without_token_counts_the_size_is_not_named_and_not_checked():
    f = _frame()
    f = f[~f["metric"].isin(["n_tokens", "hidden_size"])]
    v = evaluate(f, "crossfit_summary", {**P, "min": 0.4})
    assert v.outcome is Outcome.SUPPORTED and v.reason.endswith("; over 4 layers; ")


def test_reported_metrics_are_reduced_the_same_way_beside_the_score():
    extra = tuple((s, layer, "in_sample", 0.9 - 0.1 * layer) for s in range(2) for layer in range(4))
    extra += tuple((s, layer, "adjusted", 0.3 + 0.1 * s) for s in range(2) for layer in range(4))
    v = evaluate(_frame(extra=extra), "crossfit_summary",
                 {**P, "min": 0.4, "report": ["in_sample", "absent", "adjusted"], "skip_first": 1})
    assert v.estimate == pytest.approx(0.5)  # layers 1–3: scores 0.5, 0.7, 0.1
    assert v.reason.endswith("; over 3 layers; in_sample median 0.7, adjusted median 0.35; N = 1000000 tokens = "
                             "125000.0 per hidden dimension")


def test_missing_metrics_and_where():
    f = _frame()
    v = evaluate(f[f["metric"] != "total"], "crossfit_summary", {**P, "min": 0.4})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "the frame has no rows for {'metric': 'total'}"
    assert evaluate(f[f["metric"] != "resid"], "crossfit_summary", {**P, "min": 0.4}).reason == (
        "the frame has no rows for {'metric': 'resid'}")
    f2 = pd.concat([f.assign(kind="a"), f.assign(kind="b", value=f["value"] * 0 + 1.0)], ignore_index=True)
    v = evaluate(f2, "crossfit_summary", {**P, "min": 0.4, "where": {"kind": "a"}})
    assert v.estimate == pytest.approx(0.6)


def test_texts_missing_a_layer_are_left_out():
    f = _frame(n=13)
    f = f[~((f["sample"] == 12) & (f["layer"] == 2))]  # text 12 lacks layer 2
    v = evaluate(f, "crossfit_summary", {**P, "min": 0.4})
    assert v.n == 12 and v.estimate == pytest.approx(0.6)


def test_interval_and_p_are_a_bootstrap_over_texts_by_hand():
    """Each resample of texts: the per-layer score from the drawn texts' summed resid and total, its median over
    layers; the percentile interval at the expanded level for 12 texts, p the corrected share at or below the bound."""
    from scipy import stats

    from bench.stats import _boot_p, expanded_confidence

    f = _frame()
    rows = f[f["metric"].isin(["resid", "total"])]
    R = rows[rows["metric"] == "resid"].pivot_table(index="sample", columns="layer", values="value").to_numpy()
    T = rows[rows["metric"] == "total"].pivot_table(index="sample", columns="layer", values="value").to_numpy()

    def median_score(i, axis=-1):
        i = np.asarray(i)
        return np.median(1 - R[i].sum(axis=-2) / T[i].sum(axis=-2), axis=-1)

    for confidence, bound in [(0.95, 0.55), (0.8, 0.59)]:
        v = evaluate(f, "crossfit_summary", {**P, "min": bound, "confidence": confidence, "n_resamples": 300,
                                             "alpha": 0.2})
        res = stats.bootstrap((np.arange(12),), median_score, vectorized=True, n_resamples=300, method="percentile",
                              confidence_level=expanded_confidence(confidence, 12),
                              random_state=np.random.default_rng(12345))
        lo, hi = res.confidence_interval.low, res.confidence_interval.high
        p = _boot_p(res.bootstrap_distribution, bound, +1, 12)
        assert (v.ci_low, v.ci_high, v.p_value) == pytest.approx((lo, hi, p))
        assert (v.alpha, v.effect) == (0.2, pytest.approx(0.6 - bound))
        if confidence == 0.95:  # (the reason names 95% whatever the level: a shared wording of bench.stats)
            assert v.reason == (f"0.6 median ≥ {bound:g}, 95% CI [{lo:.4g}, {hi:.4g}], p = {p:.3g} (p and CI over 12 "
                                "units 'sample'); over 4 layers; N = 1000000 tokens = 125000.0 per hidden dimension")
    v = evaluate(f, "crossfit_summary", {**P, "max": 0.65, "n_resamples": 300})
    res = stats.bootstrap((np.arange(12),), median_score, vectorized=True, n_resamples=300, method="percentile",
                          confidence_level=expanded_confidence(0.95, 12), random_state=np.random.default_rng(12345))
    assert v.p_value == pytest.approx(_boot_p(res.bootstrap_distribution, 0.65, -1, 12))


def test_refusals_carry_the_rules_fields():
    few = evaluate(_frame(n=8), "crossfit_summary", {**P, "max": 0.7, "alpha": 0.1})
    assert (few.rule, few.metric, few.threshold, few.alpha, few.n) == (
        "crossfit_summary", "median cross-fitted score", "median ≤ 0.7", 0.1, 8)
    thin = evaluate(_frame(tokens=100, hidden=8), "crossfit_summary", {**P, "reduce": "max", "min": 0.4, "alpha": 0.1})
    assert (thin.rule, thin.metric, thin.threshold, thin.alpha, thin.n) == (
        "crossfit_summary", "max cross-fitted score", "max ≥ 0.4", 0.1, 12)
    assert thin.estimate == pytest.approx(0.8) and thin.p_value is None
    gone = evaluate(_frame()[lambda f: f["metric"] != "total"], "crossfit_summary", {**P, "reduce": "min", "min": 0.4})
    assert (gone.rule, gone.metric) == ("crossfit_summary", "min cross-fitted score")


def test_no_text_with_both_sums_gives_no_estimate():
    f = _frame()
    f = f[~((f["metric"] == "resid") & (f["sample"] < 6)) & ~((f["metric"] == "total") & (f["sample"] >= 6))]
    v = evaluate(f, "crossfit_summary", {**P, "min": 0.4})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 0 samples (< 10) and 4 layers"
    assert np.isnan(v.estimate)


def test_one_layer_left_is_enough_to_decide():
    v = evaluate(_frame(), "crossfit_summary", {**P, "min": 0.4, "skip_first": 3})
    assert v.estimate == pytest.approx(0.1) and v.outcome is Outcome.REFUTED  # layer 3 alone: 0.1
    assert "over 1 layers" in v.reason


def test_only_layers_with_both_sums_count_and_a_text_missing_one_sum_is_left_out():
    f = _frame(n=13)
    extra = f[(f["metric"] == "resid") & (f["layer"] == 3)].assign(layer=4)  # resid of a layer without totals
    f = f[~((f["sample"] == 12) & (f["layer"] == 2) & (f["metric"] == "resid"))]  # text 12 lacks one resid
    v = evaluate(pd.concat([f, extra], ignore_index=True), "crossfit_summary", {**P, "min": 0.4})
    assert v.n == 12 and v.estimate == pytest.approx(0.6) and "over 4 layers" in v.reason


def test_skips_are_checked_against_the_named_column():
    f = _frame().rename(columns={"layer": "block"})
    with pytest.raises(ValueError) as err:
        evaluate(f, "crossfit_summary", {**P, "min": 0.1, "over": "block", "skip_first": 4})
    assert str(err.value) == "skip_first = 4 and skip_last = 0 leave none of this model's 4 blocks"


def test_reported_metrics_skip_the_last_layers_too():
    extra = tuple((s, layer, "in_sample", 0.9 - 0.1 * layer) for s in range(2) for layer in range(4))
    v = evaluate(_frame(extra=extra), "crossfit_summary",
                 {**P, "reduce": "min", "min": 0.05, "report": ["in_sample"], "skip_last": 2})
    assert v.estimate == pytest.approx(0.5)  # layers 0–1: scores 0.8, 0.5
    assert "; in_sample min 0.8; " in v.reason  # layers 0–1 of in_sample: 0.9, 0.8
