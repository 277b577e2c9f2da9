"""The family's decision rules on frames with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import Outcome, adjust, evaluate


def token_frame(shift: float, n_texts: int = 30, per_text: int = 20, seed: int = 0) -> pd.DataFrame:
    """Tokens of two classes; group a's values are lower by `shift` standard deviations."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_texts):
        for p in range(per_text):
            cls = "determiner" if p % 2 else "noun"
            v = rng.normal() - (shift if cls == "determiner" else 0.0)
            for layer in range(4):
                rows.append((s, p, layer, cls, "context_loss", v + 0.1 * rng.normal()))
    return pd.DataFrame(rows, columns=["sample", "position", "layer", "cls", "metric", "value"])


GROUPS = dict(metric="context_loss", a=["determiner"], b=["noun"], side="less", delta=-0.1, n_resamples=300)


def test_group_comparison_supported_refuted_inconclusive():
    assert evaluate(token_frame(1.0), "group_comparison", GROUPS).outcome is Outcome.SUPPORTED
    v = evaluate(token_frame(-1.0), "group_comparison", GROUPS)
    assert v.outcome is Outcome.REFUTED and v.estimate > 0
    v = evaluate(token_frame(0.0, n_texts=6, per_text=6), "group_comparison", {**GROUPS, "min_n": 5})
    assert v.outcome is Outcome.INCONCLUSIVE


def test_cliffs_delta_of_separated_groups_is_minus_one():
    f = token_frame(50.0)
    v = evaluate(f, "group_comparison", GROUPS)
    assert v.estimate == pytest.approx(-1.0) and v.effect_name == "Cliff's δ"


def test_group_comparison_per_layer_majority():
    f = token_frame(1.0)
    f.loc[(f["layer"] == 0) & (f["cls"] == "determiner"), "value"] += 5  # one layer goes the other way
    v = evaluate(f, "group_comparison", {**GROUPS, "over": "layer"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.75)
    f.loc[(f["layer"] == 1) & (f["cls"] == "determiner"), "value"] += 5
    f.loc[(f["layer"] == 2) & (f["cls"] == "determiner"), "value"] += 5
    assert evaluate(f, "group_comparison", {**GROUPS, "over": "layer"}).outcome is Outcome.REFUTED


def paired(r: float, n_texts: int = 40, per_text: int = 15, seed: int = 1, subject=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_texts * per_text
    x = rng.normal(size=n)
    y = r * x + np.sqrt(1 - r * r) * rng.normal(size=n)
    s = np.repeat(np.arange(n_texts), per_text)
    p = np.tile(np.arange(per_text), n_texts)
    return pd.concat([pd.DataFrame({"sample": s, "position": p, "metric": "context_loss", "value": x,
                                    "subject": subject}),
                      pd.DataFrame({"sample": s, "position": p, "metric": "token_error_mean", "value": y,
                                    "subject": subject})], ignore_index=True)


CORR = dict(x={"metric": "context_loss"}, y={"metric": "token_error_mean"}, n_resamples=300)


def test_correlation_rule():
    v = evaluate(paired(0.5, seed=10), "correlation", CORR)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.5, abs=0.08)
    assert v.ci_low < v.estimate < v.ci_high
    assert evaluate(paired(-0.5), "correlation", CORR).outcome is Outcome.REFUTED
    assert evaluate(paired(0.0, seed=3), "correlation", CORR).outcome is not Outcome.SUPPORTED


def test_correlation_difference_needs_both_subjects():
    one = paired(0.4, subject="base")
    one.attrs["notes"] = ["no base/instruct counterpart of 'x'"]
    v = evaluate(one, "correlation_difference", CORR)
    assert v.outcome is Outcome.INCONCLUSIVE and "counterpart" in v.reason
    empty = pd.DataFrame(columns=["subject", "sample", "position", "metric", "value"])
    assert evaluate(empty, "correlation_difference", CORR).outcome is Outcome.INCONCLUSIVE
    both = pd.concat([paired(0.05, seed=4, subject="base"), paired(0.6, seed=5, subject="instruct")])
    v = evaluate(both, "correlation_difference", CORR)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.55, abs=0.1)
    same = pd.concat([paired(0.4, seed=6, subject="base"), paired(0.4, seed=7, subject="instruct")])
    assert evaluate(same, "correlation_difference", CORR).outcome is Outcome.REFUTED


def layer_frame(slope: float, n: int = 20, layers: int = 8, seed: int = 2, metric="lens_loss") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(s, l, metric, 10 + slope * l + rng.normal(scale=0.3)) for s in range(n) for l in range(layers)]
    return pd.DataFrame(rows, columns=["sample", "layer", "metric", "value"])


def test_trend_rule():
    assert evaluate(layer_frame(-1.0), "trend", {"metric": "lens_loss", "max": -0.8}).outcome is Outcome.SUPPORTED
    v = evaluate(layer_frame(+1.0), "trend", {"metric": "lens_loss", "max": -0.8})
    assert v.outcome is Outcome.REFUTED and v.estimate == pytest.approx(1.0)


def test_layer_majority_rule():
    f = layer_frame(0.0, metric="frac")
    f["value"] = np.where(f["layer"] < 6, 0.3, 0.1)  # 6 of 8 layers above 0.2
    v = evaluate(f, "layer_majority", {"metric": "frac", "min": 0.2})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.75)
    f["value"] = np.where(f["layer"] < 2, 0.3, 0.1)
    assert evaluate(f, "layer_majority", {"metric": "frac", "min": 0.2}).outcome is Outcome.REFUTED


def test_layer_majority_band():
    """With both bounds the share counts the layers whose mean lies between them: a model that moves far more than
    "about a fifth" of its dimensions is outside the band, not above a floor."""
    f = layer_frame(0.0, metric="frac")
    f["value"] = np.select([f["layer"] < 3, f["layer"] < 5], [0.2, 0.7], 0.05)  # 3 in, 2 above, 3 below
    v = evaluate(f, "layer_majority", {"metric": "frac", "min": 0.1, "max": 0.3})
    assert v.outcome is Outcome.REFUTED and v.estimate == pytest.approx(3 / 8)
    assert evaluate(f, "layer_majority", {"metric": "frac", "min": 0.1}).estimate == pytest.approx(5 / 8)
    f["value"] = np.where(f["layer"] < 6, 0.2, 0.9)
    v = evaluate(f, "layer_majority", {"metric": "frac", "min": 0.1, "max": 0.3})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(6 / 8) and "in [0.1, 0.3]" in v.reason
    with pytest.raises(ValueError):
        evaluate(f, "layer_majority", {"metric": "frac", "min": 0.3, "max": 0.1})


def test_layer_summary_rule():
    f = pd.DataFrame({"layer": range(6), "metric": "linearity", "value": [0.5, 0.95, 0.92, 0.97, 0.91, 0.3]})
    v = evaluate(f, "layer_summary", {"metric": "linearity", "min": 0.9, "skip_first": 1, "skip_last": 1})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.935)
    v = evaluate(f, "layer_summary", {"metric": "linearity", "min": 0.9, "reduce": "min"})
    assert v.outcome is Outcome.REFUTED
    assert evaluate(f, "layer_summary", {"metric": "linearity", "reduce": "max", "max": 0.96}).outcome \
        is Outcome.REFUTED
    with pytest.raises(ValueError, match="leave none of this model's 6 layers"):  # the spec does not fit
        evaluate(f, "layer_summary", {"metric": "linearity", "min": 0.9, "skip_first": 3, "skip_last": 3})


def qa_frame(orig: list[int], edited: list[int]) -> pd.DataFrame:
    rows = [(i, "original", "correct", float(v)) for i, v in enumerate(orig)]
    rows += [(i, "no_stopwords", "correct", float(v)) for i, v in enumerate(edited)]
    return pd.DataFrame(rows, columns=["sample", "condition", "metric", "value"])


DROP = dict(a={"metric": "correct", "condition": "original"}, b={"metric": "correct", "condition": "no_stopwords"})


def test_accuracy_drop_mcnemar():
    v = evaluate(qa_frame([1] * 30 + [0] * 10, [0] * 20 + [1] * 10 + [0] * 10), "accuracy_drop", DROP)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.5)
    assert v.p_value == pytest.approx(0.5 ** 20)  # 20 lost, 0 gained
    v = evaluate(qa_frame([1] * 20 + [0] * 20, [1] * 20 + [0] * 20), "accuracy_drop", DROP)
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value == 1.0
    v = evaluate(qa_frame([0] * 30 + [1] * 10, [1] * 30 + [1] * 10), "accuracy_drop", DROP)
    assert v.outcome is Outcome.REFUTED


def test_gated_rule_is_inconclusive_when_a_precondition_fails():
    f = token_frame(1.0)
    ratio = pd.DataFrame({"sample": range(10), "metric": "decoder_loss_ratio", "value": 0.95})
    frame = pd.concat([f, ratio], ignore_index=True)
    gate = {"rule": "threshold", "metric": "decoder_loss_ratio", "max": 0.8}
    v = evaluate(frame, "gated", {"of": [gate, {"rule": "group_comparison", **GROUPS}]})
    assert v.outcome is Outcome.INCONCLUSIVE and "precondition" in v.reason and v.p_value is None
    frame.loc[frame["metric"] == "decoder_loss_ratio", "value"] = 0.5 + 0.01 * np.arange(10)
    v = evaluate(frame, "gated", {"of": [gate, {"rule": "group_comparison", **GROUPS}]})
    assert v.outcome is Outcome.SUPPORTED and v.rule == "group_comparison"
    assert adjust([v])[0].outcome is Outcome.SUPPORTED  # a gated verdict is a leaf for BH


def test_unit_pair_sums_give_cliffs_delta_and_its_reweighting():
    from bench.stats.comparisons import _delta_of, _pair_sums, cliffs_delta

    rng = np.random.default_rng(9)
    vals = np.round(rng.normal(size=300), 1)  # ties on purpose
    is_a = rng.random(300) < 0.4
    units = rng.integers(0, 12, 300)
    S, na, nb = _pair_sums(vals, is_a, units, 12)
    assert _delta_of(np.ones(12), S[None], na[None], nb[None])[0] == pytest.approx(cliffs_delta(vals[is_a], vals[~is_a]))
    w = rng.integers(0, 3, 12).astype(float)  # a bootstrap resample: unit u counted w[u] times
    rows = np.concatenate([np.flatnonzero(units == u) for u in range(12) for _ in range(int(w[u]))])
    expected = cliffs_delta(vals[rows][is_a[rows]], vals[rows][~is_a[rows]])
    assert _delta_of(w, S[None], na[None], nb[None])[0] == pytest.approx(expected)


def test_mcnemar_power_reaches_its_target_at_the_n_it_asks_for_and_matches_simulation():
    from bench.stats.comparisons import mcnemar_power

    pw, need = mcnemar_power(0.05, 0.2, 100, 0.05, 0.8)
    assert mcnemar_power(0.05, 0.2, need, 0.05, 0.8)[0] == pytest.approx(0.8, abs=0.01)
    rng = np.random.default_rng(0)  # simulate the exact test: discordant pairs lost with p = (ψ+Δ)/2ψ
    hits = 0
    for _ in range(2000):
        k = rng.binomial(100, 0.2)
        lost = rng.binomial(k, (0.2 + 0.05) / 0.4)
        from scipy import stats as st
        hits += k > 0 and st.binomtest(lost, k, 0.5, alternative="greater").pvalue < 0.05
    assert abs(hits / 2000 - pw) < 0.08  # exact test is discrete, the approximation continuous
