"""Claims decided against their untrained control (bench.stats.control) on hand-made frame pairs whose answer is
known: a trained arm that passes its bar but equals its control is not SUPPORTED, one clearly above is."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import Outcome, Verdict, evaluate
from bench.stats.control import RULE, against, difference

TH = {"metric": "m", "min": 0.5}


def units(values, metric="m", start=0) -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(start, start + len(values)), "metric": metric,
                         "value": np.asarray(values, float)})


def decided(trained: pd.DataFrame, control: pd.DataFrame, rule="threshold", params=TH) -> Verdict:
    own = evaluate(trained, rule, params)
    return against(trained, control, rule, params, own, evaluate(control, rule, params), "m+random-init")


def test_passing_the_bar_but_equal_to_the_control_is_not_supported():
    rng = np.random.default_rng(0)
    t = rng.normal(0.8, 0.1, 20)
    trained = units(t)
    assert evaluate(trained, "threshold", TH).outcome is Outcome.SUPPORTED  # the absolute bar alone passes
    for control in (units(t), units(t + rng.normal(0, 0.02, 20))):  # the same, and the same up to noise
        v = decided(trained, control)
        assert v.outcome is not Outcome.SUPPORTED, v.reason
        assert v.rule == RULE and [p.outcome for p in v.parts][0] is Outcome.SUPPORTED
        assert "trained − control" in v.parts[1].metric and abs(v.parts[1].estimate) < 0.02


def test_clearly_above_the_control_is_supported_with_the_difference_as_known():
    rng = np.random.default_rng(1)
    t = rng.normal(0.8, 0.1, 20)
    c = t - 0.3 + rng.normal(0, 0.05, 20)
    v = decided(units(t), units(c))
    assert v.outcome is Outcome.SUPPORTED, v.reason
    own, diff = v.parts
    assert v.estimate == pytest.approx(t.mean()) and own.outcome is Outcome.SUPPORTED  # the headline: trained
    assert diff.estimate == pytest.approx(t.mean() - c.mean())
    assert diff.ci_low < t.mean() - c.mean() < diff.ci_high and diff.ci_low > 0 and diff.n == 20
    assert "must both hold" in v.reason


def test_the_difference_pairs_units_rather_than_pooling_them():
    """Units vary a lot between themselves (±1) but the trained arm is each unit's control + 0.1: only a
    paired test sees the 0.1.  Shuffling the control's unit labels breaks the pairing, and the claim fails."""
    rng = np.random.default_rng(2)
    c = rng.normal(0, 1, 24)
    t = c + 0.1 + rng.normal(0, 0.01, 24)
    params = {"metric": "m", "min": -10.0}
    d = difference(units(t), units(c), "threshold", params)
    assert d.outcome is Outcome.SUPPORTED and d.estimate == pytest.approx(0.1, abs=0.01)
    assert d.ci_high - d.ci_low < 0.05  # the per-unit spread (±1) cancels
    shuffled = units(c).assign(sample=rng.permutation(24))
    assert difference(units(t), shuffled, "threshold", params).outcome is not Outcome.SUPPORTED


def test_only_shared_units_are_paired():
    t, c = units(np.linspace(1, 2, 20)), units(np.linspace(0, 1, 20), start=10)  # units 10..19 in both
    d = difference(t, c, "threshold", TH)
    assert d.n == 10 and d.estimate == pytest.approx(np.linspace(1, 2, 20)[10:].mean() - np.linspace(0, 1, 20)[:10].mean())


def test_below_the_control_is_refuted_as_the_opposite_effect():
    rng = np.random.default_rng(3)
    t = rng.normal(0.8, 0.1, 20)
    v = decided(units(t), units(t + 0.4 + rng.normal(0, 0.05, 20)))
    assert v.outcome is Outcome.REFUTED and v.parts[1].outcome is Outcome.REFUTED
    assert "other side of no effect" in v.sensitivity


def test_a_missing_control_withholds_supported_and_keeps_a_refuted():
    rng = np.random.default_rng(4)
    good, bad = units(rng.normal(0.8, 0.1, 20)), units(rng.normal(0.1, 0.05, 20))
    ctl = Verdict(Outcome.ERROR, "the control crashed", "-")
    v = against(good, None, "threshold", TH, evaluate(good, "threshold", TH), ctl, "m+random-init")
    assert v.outcome is Outcome.INCONCLUSIVE and "the control crashed" in v.reason
    v = against(bad, None, "threshold", TH, evaluate(bad, "threshold", TH), ctl, "m+random-init")
    assert v.outcome is Outcome.REFUTED


def test_paired_difference_arm_is_the_difference_of_differences():
    rng = np.random.default_rng(5)
    n = 16

    def frame(gain):
        b = rng.normal(0.2, 0.05, n)
        return pd.concat([units(b + gain + rng.normal(0, 0.01, n), "a"), units(b, "b")], ignore_index=True)

    trained, control = frame(0.3), frame(0.03)
    params = {"a": {"metric": "a"}, "b": {"metric": "b"}, "min": 0.0}
    d = difference(trained, control, "paired_difference", params)
    gain = lambda f: f[f.metric == "a"].value.mean() - f[f.metric == "b"].value.mean()  # noqa: E731
    assert d.estimate == pytest.approx(gain(trained) - gain(control))
    assert d.outcome is Outcome.SUPPORTED
    # the same gain on both arms: the steering-on-noise case is not SUPPORTED however large the gain is
    assert difference(trained, trained, "paired_difference", params).outcome is not Outcome.SUPPORTED


def layers(values_by_layer, n=24) -> pd.DataFrame:
    """n texts × the given layers: text i's value at layer l is values_by_layer[l][i % 2]."""
    return pd.DataFrame([{"sample": i, "layer": layer, "metric": "m", "value": v[i % 2]}
                         for layer, v in enumerate(values_by_layer) for i in range(n)])


BAND = {"metric": "m", "min": 0.1, "max": 0.3}


def test_layer_majority_arm_is_the_share_of_layers_whose_mean_is_in_band():
    """Trained: every layer's texts alternate 0.05 and 0.35, so every per-layer mean (0.2) is in [0.1, 0.3] while no
    single text is; control: 3 of 4 layers' means are 0.6. trained − control = 1 − 1/4, and only the share of
    per-layer means gives it (a share per text would give 0 − 0)."""
    trained = layers([(0.05, 0.35)] * 4)
    control = layers([(0.6, 0.6)] * 3 + [(0.2, 0.2)])
    assert evaluate(trained, "layer_majority", BAND).outcome is Outcome.SUPPORTED
    d = difference(trained, control, "layer_majority", BAND)
    assert d.estimate == pytest.approx(0.75) and d.n == 24 and d.outcome is Outcome.SUPPORTED
    assert d.metric == "share of layers in [0.1, 0.3]: trained − control"
    # the untrained model's layers pass as often as the trained one's: the claim is not SUPPORTED
    v = decided(trained, layers([(0.2, 0.2)] * 4), "layer_majority", BAND)
    assert v.parts[0].outcome is Outcome.SUPPORTED and v.parts[1].estimate == 0.0
    assert v.outcome is not Outcome.SUPPORTED
    # a one-sided bound, claimed small: a layer passes when its mean is at most 0.3
    low = {"metric": "m", "max": 0.3}
    assert difference(trained, control, "layer_majority", low).estimate == pytest.approx(0.75)


def per_language(counts) -> pd.DataFrame:
    return pd.DataFrame({"set_lang": list("abcdefg")[:len(counts)], "metric": "n", "value": np.asarray(counts, float)})


EXISTS = {"metric": "n", "reduce": "min", "min": 1, "unit": "set_lang"}


def test_a_worst_case_is_decided_by_the_exact_sign_test_over_its_rows():
    """Seven languages' counts, each above the control's: the one-sided sign test gives p = 2⁻⁷ = 1/128, the
    estimate is the median difference, and with n = 7 only the extremes cover the median with ≥ 95%
    (1 − 2·2⁻⁷ = 0.984); the next pair would cover 1 − 2·8/128 = 0.875."""
    trained, control = per_language([84, 144, 72, 80, 122, 115, 58]), per_language([0, 0, 0, 0, 0, 1, 0])
    d = np.array([84, 144, 72, 80, 122, 114, 58])
    v = difference(trained, control, "threshold", EXISTS)
    assert v.outcome is Outcome.SUPPORTED and v.p_value == pytest.approx(1 / 128) and v.n == 7
    assert v.estimate == np.median(d) == 84 and (v.ci_low, v.ci_high) == (58, 144)
    assert "7 of 7 set_langs above the control" in v.reason and "probability 0.984" in v.reason
    # one language where the trained model selects no more than its control: 6 of 7 (one tie) → p = 1/64
    tied = difference(per_language([84, 144, 72, 80, 122, 115, 0]), control, "threshold", EXISTS)
    assert tied.p_value == pytest.approx(1 / 64) and "1 tied" in tied.reason
    # one language below: 6 of 7 → p = P(Bin(7, ½) ≥ 6) = 8/128, not below 0.05
    below = difference(per_language([84, 144, 72, 80, 122, 115, 0]), per_language([0, 0, 0, 0, 0, 1, 3]),
                       "threshold", EXISTS)
    assert below.p_value == pytest.approx(8 / 128) and below.outcome is Outcome.INCONCLUSIVE
    # the control selects more in every language: the opposite of the claim
    opposite = difference(control, trained, "threshold", EXISTS)
    assert opposite.outcome is Outcome.REFUTED and opposite.p_value == pytest.approx(1.0)
    # and through `against`: the absolute bar (min ≥ 1) and the difference both hold
    assert decided(trained, control, "threshold", EXISTS).outcome is Outcome.SUPPORTED
    assert decided(trained, trained, "threshold", EXISTS).outcome is Outcome.INCONCLUSIVE  # 7 ties: p = 1


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="no arm"):
        difference(units([1.0]), units([1.0]), "trend", {"metric": "m", "min": 0.0})


def test_the_family_correction_keeps_the_decision_and_withdraws_on_either_p():
    from bench.stats import adjust

    rng = np.random.default_rng(6)
    t = rng.normal(0.8, 0.1, 20)
    v = decided(units(t), units(t - 0.3 + rng.normal(0, 0.05, 20)))
    (kept,) = adjust([v])
    assert kept.outcome is Outcome.SUPPORTED and kept.rule == RULE and kept.reason == v.reason
    from scipy.stats import false_discovery_control

    bh = false_discovery_control([p.p_value for p in v.parts], method="bh")  # both conditions' p-values count
    assert [p.p_adjusted for p in kept.parts] == pytest.approx(list(bh))
    (withdrawn,) = adjust([v], unseen=400)  # 400 members with p = 1: nothing stays significant
    assert withdrawn.outcome is Outcome.INCONCLUSIVE and "BH" in withdrawn.reason
