"""accuracy_floor on hand-made frames with known binomial answers."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats

from bench.families.generalization.rules import accuracy_floor
from bench.stats import Outcome


def _frame(k: int, n: int) -> pd.DataFrame:
    return pd.DataFrame({"metric": "correct", "value": [1.0] * k + [0.0] * (n - k), "stage": "initial",
                         "split": "id", "sample": range(n)})


def test_floor_decisions():
    v = accuracy_floor(_frame(18, 20), min=0.05, where={"stage": "initial", "split": "id"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 0.9 and v.n == 20
    assert abs(v.p_value - stats.binomtest(18, 20, 0.05, alternative="greater").pvalue) < 1e-12
    assert accuracy_floor(_frame(0, 40), min=0.1).outcome is Outcome.REFUTED
    assert accuracy_floor(_frame(3, 20), min=0.1).outcome is Outcome.INCONCLUSIVE
    assert accuracy_floor(_frame(3, 6), min=0.1).outcome is Outcome.INCONCLUSIVE  # too few items
    assert accuracy_floor(_frame(3, 20), min=0.1, where={"stage": "sft"}).outcome is Outcome.INCONCLUSIVE


def test_ceiling_decisions():
    from bench.families.generalization.rules import accuracy_ceiling

    f = _frame(1, 40).assign(metric="format_ok")
    v = accuracy_ceiling(f, max=0.2)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 1 / 40
    assert abs(v.p_value - stats.binomtest(1, 40, 0.2, alternative="less").pvalue) < 1e-12
    assert accuracy_ceiling(_frame(30, 40).assign(metric="format_ok"), max=0.2).outcome is Outcome.REFUTED
    assert accuracy_ceiling(_frame(6, 40).assign(metric="format_ok"), max=0.2).outcome is Outcome.INCONCLUSIVE
    assert accuracy_ceiling(_frame(0, 6).assign(metric="format_ok"), max=0.2).outcome is Outcome.INCONCLUSIVE


# ── what each verdict says, its interval and its edges (known answers) ─────────────────────────────────────

def _cp(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Clopper–Pearson from its beta quantiles, written out."""
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def test_floor_verdict_fields_and_reason():
    v = accuracy_floor(_frame(18, 20), min=0.05, where={"stage": "initial", "split": "id"})
    lo, hi = _cp(18, 20)
    assert (v.ci_low, v.ci_high) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
    assert (v.rule, v.metric, v.threshold, v.effect_name, v.alpha) == (
        "accuracy_floor", "correct[initial,id]", "> 0.05", "margin", 0.05)
    assert v.effect == pytest.approx(0.85)
    assert v.reason == f"18/20 correct = 0.9, 95% CI [{lo:.3g}, {hi:.3g}] > 0.05, binomial p = {v.p_value:.3g}"
    mid = accuracy_floor(_frame(3, 20), min=0.1)
    lo, hi = _cp(3, 20)
    assert mid.metric == "correct[all]" and mid.reason == (
        f"3/20 correct = 0.15, 95% CI [{lo:.3g}, {hi:.3g}] vs floor > 0.1, binomial p = {mid.p_value:.3g}")


def test_floor_refutation_and_its_exact_binomial_power():
    """0 of 40 against a floor of 0.1: the interval [0, 1 − 0.025^(1/40)] lies below it.  The exact one-sided
    test of "share > 0" rejects at k ≥ 1, so its power at the bound 0.1 is 1 − 0.9⁴⁰ = 0.985 (a normal
    approximation from the interval would say 1.00)."""
    v = accuracy_floor(_frame(0, 40), min=0.1)
    hi = 1 - 0.025 ** (1 / 40)
    assert v.outcome is Outcome.REFUTED and (v.ci_low, v.ci_high) == (0.0, pytest.approx(hi, abs=1e-9))
    assert v.reason == f"0/40 correct = 0, 95% CI [0, {hi:.3g}]: not above the floor 0.1"
    assert f"{1 - 0.9 ** 40:.2f}" == "0.99"
    assert v.sensitivity == "power 0.99 at the bound 0.1 vs no effect (0) with n = 40"


def test_floor_edges_min_n_alpha_and_an_interval_ending_on_the_bound():
    assert accuracy_floor(_frame(10, 10), min=0.5).outcome is Outcome.SUPPORTED  # n = min_n is enough
    few = accuracy_floor(_frame(9, 9), min=0.5)
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 9 items (< 10)"
    assert (few.rule, few.metric, few.n, few.threshold, few.estimate, few.alpha) == (
        "accuracy_floor", "correct[all]", 9, "> 0.5", 1.0, 0.05)
    assert accuracy_floor(_frame(5, 5), min=0.5, min_n=5).outcome is Outcome.SUPPORTED
    p = accuracy_floor(_frame(3, 20), min=0.1).p_value
    at = accuracy_floor(_frame(3, 20), min=0.1, alpha=p)  # p equal to α is not below it
    assert at.outcome is Outcome.INCONCLUSIVE and at.alpha == p
    top = accuracy_floor(_frame(0, 40), min=0.1).ci_high
    edge = accuracy_floor(_frame(0, 40), min=top)  # "at or below the floor" refutes
    assert edge.outcome is Outcome.REFUTED and edge.ci_high == top


def test_alpha_sets_the_interval_level():
    v = accuracy_floor(_frame(18, 20), min=0.05, alpha=0.1)
    lo, hi = _cp(18, 20, 0.1)
    assert (v.ci_low, v.ci_high, v.alpha) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9), 0.1)
    assert "90% CI" in v.reason


def test_missing_rows_and_values_other_than_0_1():
    v = accuracy_floor(_frame(3, 20), min=0.1, where={"stage": "sft"})
    assert (v.outcome, v.rule, v.metric) == (Outcome.INCONCLUSIVE, "accuracy_floor", "correct[sft]")
    assert v.reason == "the frame has no rows for {'stage': 'sft'}"
    bad = _frame(3, 20).assign(value=[0.5] + [1.0] * 19)
    with pytest.raises(ValueError, match=r"^accuracy_floor needs 0/1 values, 'correct' has others$"):
        accuracy_floor(bad, min=0.1)
    assert accuracy_floor(_frame(20, 20), min=0.5).estimate == 1.0  # all ones are 0/1 values too


def test_ceiling_verdict_fields_and_reasons():
    from bench.families.generalization.rules import accuracy_ceiling

    f = _frame(1, 40).assign(metric="format_ok")
    v = accuracy_ceiling(f, max=0.2)
    lo, hi = _cp(1, 40)
    assert (v.rule, v.metric, v.threshold, v.effect_name) == ("accuracy_ceiling", "format_ok[all]", "< 0.2", "margin")
    assert v.effect == pytest.approx(0.175) and (v.ci_low, v.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert v.reason == f"1/40 = 0.025, 95% CI [{lo:.3g}, {hi:.3g}] < 0.2, binomial p = {v.p_value:.3g}"
    high = accuracy_ceiling(_frame(30, 40).assign(metric="format_ok"), max=0.2)
    lo, hi = _cp(30, 40)
    assert high.reason == f"30/40 = 0.75, 95% CI [{lo:.3g}, {hi:.3g}]: not below the ceiling 0.2"
    mid = accuracy_ceiling(_frame(6, 40).assign(metric="format_ok"), max=0.2)
    lo, hi = _cp(6, 40)
    assert mid.reason == f"6/40 = 0.15, 95% CI [{lo:.3g}, {hi:.3g}] vs ceiling < 0.2, binomial p = {mid.p_value:.3g}"
    bottom = accuracy_ceiling(_frame(40, 40).assign(metric="format_ok"), max=0.2).ci_low
    edge = accuracy_ceiling(_frame(40, 40).assign(metric="format_ok"), max=bottom)  # "at or above" refutes
    assert edge.outcome is Outcome.REFUTED
    other = accuracy_ceiling(_frame(1, 40), max=0.2, metric="correct", where={"stage": "initial"})
    assert other.metric == "correct[initial]" and other.outcome is Outcome.SUPPORTED


def test_the_sentences_name_the_metric_the_bound_and_the_test():
    from bench.ground import registry

    floor = registry.rule("accuracy_floor").sentence
    assert floor({"min": 0.05}) == ("the share of correct `correct` items is > 0.05 (one-sided exact binomial test, "
                                    "α = 0.05; Clopper–Pearson interval)")
    assert floor({"min": 0.3, "metric": "solved", "where": {"stage": "rl"}, "alpha": 0.01}) == (
        "the share of correct `solved` items where stage = rl is > 0.3 (one-sided exact binomial test, α = 0.01; "
        "Clopper–Pearson interval)")
    ceiling = registry.rule("accuracy_ceiling").sentence
    assert ceiling({"max": 0.2}) == ("the share of `format_ok` items is < 0.2 (one-sided exact binomial test, "
                                     "α = 0.05; Clopper–Pearson interval)")
    assert ceiling({"max": 0.1, "metric": "x", "where": {"stage": "sft"}}).startswith(
        "the share of `x` items where stage = sft is < 0.1")


def test_an_estimate_on_the_bound_is_never_supported():
    """10 of 20 against 0.5: p = P(X ≥ 10 | 20, ½) = 0.588, below α = 0.6, yet the share is not above the floor
    (the README's policy: an estimate exactly on the bound is not on the claimed side)."""
    v = accuracy_floor(_frame(10, 20), min=0.5, alpha=0.6)
    assert v.p_value == pytest.approx(0.5881, abs=1e-4) and v.p_value < 0.6
    assert v.outcome is Outcome.INCONCLUSIVE and v.effect == 0.0


def test_the_ceiling_decides_from_ten_items_and_a_short_sample_keeps_its_alpha():
    from bench.families.generalization.rules import accuracy_ceiling

    ten = accuracy_ceiling(_frame(0, 10).assign(metric="format_ok"), max=0.5)  # p = ½¹⁰, n = min_n is enough
    assert ten.outcome is Outcome.SUPPORTED and ten.p_value == pytest.approx(0.5 ** 10)
    few = accuracy_ceiling(_frame(0, 9).assign(metric="format_ok"), max=0.5, alpha=0.01)
    assert few.outcome is Outcome.INCONCLUSIVE and few.alpha == 0.01 and few.reason == "only 9 items (< 10)"
