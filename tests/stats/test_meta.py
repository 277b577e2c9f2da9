"""Random-effects pooling against a published worked example and a case computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.stats.meta import pool, se_from_ci

# Kacker (2004), "Combining information from interlaboratory evaluations using a random effects model",
# Metrologia 41:132-136: nine laboratories' values and their variances.  The reference figures are those of
# R metafor 2.x for this data set: rma(y, v, method="DL") and rma(y, v, method="DL", test="knha") (HKSJ), and
# rma(y, v, method="PM").
KACKER_Y = [61.00, 61.40, 62.21, 62.30, 62.34, 62.60, 62.70, 62.84, 65.90]
KACKER_V = [0.2025, 1.2100, 0.0900, 0.2025, 0.3844, 0.5625, 0.0676, 0.0225, 1.8225]


def test_kacker_dersimonian_laird_matches_metafor():
    p = pool(KACKER_Y, [math.sqrt(v) for v in KACKER_V], method="dl")
    assert p.k == 9
    assert p.estimate == pytest.approx(62.3901386044504, abs=1e-6)
    assert p.se == pytest.approx(0.245749668040304, abs=1e-6)
    assert p.tau2 == pytest.approx(0.288049246973751, abs=1e-6)
    assert p.q == pytest.approx(24.801897741835, abs=1e-6)
    assert p.i2 == pytest.approx(0.67744403741711, abs=1e-6)  # metafor: I² = 67.744403741711 %
    assert (p.ci_low, p.ci_high) == pytest.approx((61.710383798052, 63.0698934108488), abs=1e-6)  # knha
    assert p.fixed_estimate == pytest.approx(62.5833970939982, abs=1e-6)


def test_kacker_paule_mandel_matches_metafor_and_the_paper():
    p = pool(KACKER_Y, [math.sqrt(v) for v in KACKER_V], method="pm")
    assert p.tau2 == pytest.approx(0.705395309224248, abs=1e-6)
    assert p.estimate == pytest.approx(62.4076199113286, abs=1e-6)
    assert p.se == pytest.approx(0.338030602684471, abs=1e-6)
    assert math.sqrt(p.tau2) == pytest.approx(0.8399, abs=6e-5)  # Kacker's table 1, Paule–Mandel τ


def test_three_models_by_hand():
    # effects 0, 1, 2 with SE 0.5: weights 4, fixed mean 1, Q = 4·(1 + 0 + 1) = 8 on 2 df, I² = (8 − 2)/8 = 0.75;
    # DL τ² = (Q − df)/(Σw − Σw²/Σw) = 6/(12 − 4) = 0.75 (PM gives the same: Σ(y − 1)²/(0.25 + τ²) = 2);
    # random-effects weights 1 each: mean 1, SE sqrt(1/3); HKSJ scale Σ w(y − μ)²/(k − 1) = 1, so the
    # interval is 1 ± t(0.975, 2) · sqrt(1/3) = 1 ± 4.302653 · 0.577350; prediction interval
    # 1 ± t(0.975, 1) · sqrt(0.75 + 1/3) = 1 ± 12.706205 · 1.040833.
    for method in ("dl", "pm"):
        p = pool([0.0, 1.0, 2.0], [0.5, 0.5, 0.5], method=method)
        assert p.q == pytest.approx(8.0, abs=1e-9)
        assert p.i2 == pytest.approx(0.75, abs=1e-9)
        assert p.tau2 == pytest.approx(0.75, abs=1e-6)
        assert p.estimate == pytest.approx(1.0, abs=1e-9)
        assert p.se == pytest.approx(math.sqrt(1 / 3), abs=1e-6)
        assert (p.ci_low, p.ci_high) == pytest.approx((1 - 4.302653 * 0.577350, 1 + 4.302653 * 0.577350), abs=1e-5)
        assert (p.pi_low, p.pi_high) == pytest.approx((1 - 12.706205 * 1.040833, 1 + 12.706205 * 1.040833),
                                                      abs=1e-4)


def test_homogeneous_effects_have_no_heterogeneity_and_two_have_no_prediction_interval():
    p = pool([1.0, 1.1, 0.9], [0.5, 0.5, 0.5], method="dl")
    assert p.tau2 == 0.0 and p.i2 == 0.0  # Q = 0.08 < 2: I² is clipped at 0, not negative
    # DL's τ² = (0.08 − 2)/8 < 0 is taken as 0: the fixed-effect mean and SE 0.5/sqrt(3), not statsmodels'
    # weights 1/(0.25 − 0.24)
    assert p.estimate == pytest.approx(1.0, abs=1e-9) and p.se == pytest.approx(0.288675, abs=1e-6)
    # the HKSJ scale, Q/(k − 1) = 0.04, is taken as 1: 1 ± t(0.975, 2) · 0.5/sqrt(3) = 1 ± 4.302653 · 0.288675
    assert (p.ci_low, p.ci_high) == pytest.approx((1 - 1.242069, 1 + 1.242069), abs=1e-5)
    two = pool([1.0, 2.0], [0.1, 0.1])
    assert two.pi_low is None and two.pi_high is None


def test_se_from_ci_and_bad_input():
    assert se_from_ci(-1.959964, 1.959964) == pytest.approx(1.0, abs=1e-6)
    assert se_from_ci(0.0, 2 * 1.644854, confidence=0.90) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError):
        pool([1.0], [0.1])
    with pytest.raises(ValueError):
        pool([1.0, 2.0], [0.1, 0.0])


def test_paule_mandel_with_very_precise_effects_finds_the_root():
    # three effects measured very precisely and far apart (as induction scores of two trained models and a
    # truncated one): Q ≈ 86,528 on 2 df.  statsmodels' iteration at atol 1e-10 steps a rounding error below
    # the root and returns τ² = 0; the root of the Paule–Mandel equation Σ w_i (y_i − μ)² = k − 1 is ≈ 0.26972.
    y = np.array([0.8976552076637745, 0.9775962382555008, 0.04075511603150517])
    se = np.array([0.005357348543374668, 0.0024342648286787096, 0.002226733113337012])
    p = pool(y, se, method="pm")
    assert p.tau2 == pytest.approx(0.269715154, abs=1e-6)
    w = 1 / (se ** 2 + p.tau2)
    mu = (w * y).sum() / w.sum()
    assert (w * (y - mu) ** 2).sum() == pytest.approx(2.0, abs=1e-6)  # the estimating equation holds
    assert p.estimate == pytest.approx(mu, abs=1e-9)


def test_the_level_sets_both_intervals_and_the_record_names_itself():
    """Effects 0, 1, 2 with SE 0.5 (worked above) at 90%: 1 ± t(0.95, 2) · sqrt(1/3) and
    1 ± t(0.95, 1) · sqrt(0.75 + 1/3), with t(0.95, 2) = 2.919986 and t(0.95, 1) = 6.313752."""
    p = pool([0.0, 1.0, 2.0], [0.5, 0.5, 0.5], method="pm", confidence=0.9)
    assert (p.ci_low, p.ci_high) == pytest.approx((1 - 2.919986 * 0.577350, 1 + 2.919986 * 0.577350), abs=1e-5)
    assert (p.pi_low, p.pi_high) == pytest.approx((1 - 6.313752 * 1.040833, 1 + 6.313752 * 1.040833), abs=1e-4)
    assert (p.k, p.method, p.confidence, p.fixed_estimate) == (3, "pm", 0.9, pytest.approx(1.0))
    d = p.to_json()
    assert d["k"] == 3 and d["method"] == "pm" and d["tau2"] == pytest.approx(0.75, abs=1e-6)
    assert set(d) == {"k", "method", "estimate", "se", "ci_low", "ci_high", "tau2", "q", "i2", "pi_low", "pi_high",
                      "fixed_estimate", "confidence"}


def test_paule_mandel_with_homogeneous_effects_is_the_fixed_effect_model():
    p = pool([1.0, 1.1, 0.9], [0.5, 0.5, 0.5], method="pm")
    assert p.tau2 == 0.0 and p.estimate == pytest.approx(1.0) and p.se == pytest.approx(0.5 / math.sqrt(3))
    assert (p.ci_low, p.ci_high) == pytest.approx((1 - 1.242069, 1 + 1.242069), abs=1e-5)


def test_bad_input_is_refused_with_its_reason():
    with pytest.raises(ValueError, match=r"^pooling needs at least two effects$"):
        pool([1.0], [0.1])
    with pytest.raises(ValueError, match=r"^unknown method 'reml' \(use pm, dl\)$"):
        pool([1.0, 2.0], [0.1, 0.1], method="reml")
    for effects, ses in (([1.0, float("nan")], [0.1, 0.1]), ([1.0, 2.0], [0.1, float("inf")]), ([1.0, 2.0], [0.1, 0.0])):
        with pytest.raises(ValueError, match=r"^every effect needs a finite estimate and a positive standard error$"):
            pool(effects, ses)


def test_equal_effects_and_a_q_of_exactly_k_minus_1():
    """Three equal effects: Q = 0, so I² = 0 (not 0/0).  Effects 0, 1, 2 with SE 1: Q = Σ (y − 1)² = 2 = k − 1,
    the Paule–Mandel root is τ² = 0 at once (no looser tolerance tried, no error) and the model is the fixed one."""
    same = pool([1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    assert same.q == 0.0 and same.i2 == 0.0 and same.tau2 == 0.0 and same.estimate == pytest.approx(1.0)
    edge = pool([0.0, 1.0, 2.0], [1.0, 1.0, 1.0], method="pm")
    assert edge.q == pytest.approx(2.0) and edge.tau2 == 0.0 and edge.i2 == 0.0
    assert edge.estimate == pytest.approx(1.0) and edge.se == pytest.approx(math.sqrt(1 / 3))
