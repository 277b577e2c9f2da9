"""Exact tests on 0/1 data, the sensitivity a REFUTED must carry, refutable existence claims and the residues of
the decision policy (an estimate on the bound, approximate measurements, per-cell α of a REFUTED)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.spine import results
from bench.stats import Outcome, Verdict, _decide, adjust, evaluate, sensitivity
from bench.stats.exact import paired


def units(values, metric="m") -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(len(values)), "metric": metric, "value": np.asarray(values, float)})


def pairs(n10: int, n01: int, n11: int, n00: int) -> pd.DataFrame:
    a = [1] * n10 + [0] * n01 + [1] * n11 + [0] * n00
    b = [0] * n10 + [1] * n01 + [1] * n11 + [0] * n00
    return pd.concat([units(a, "a"), units(b, "b")], ignore_index=True)


PAIRED = {"a": {"metric": "a"}, "b": {"metric": "b"}, "min": 0.0}


# ── point 1: exact tests where the data are counts ───────────────────────────────────────────────────────────

def test_five_of_five_against_point_nine_is_not_supported():
    v = evaluate(units([1.0] * 5), "threshold", {"metric": "m", "min": 0.9})
    assert v.outcome is not Outcome.SUPPORTED
    assert v.p_value == pytest.approx(0.9 ** 5, rel=1e-6)  # exact binomial P(X ≥ 5 | 0.9) = 0.59
    assert v.ci_low == pytest.approx(0.025 ** (1 / 5), rel=1e-6) and v.ci_high == 1.0  # Clopper–Pearson [0.478, 1]


def test_thirty_of_thirty_against_point_nine_is_supported():
    v = evaluate(units([1.0] * 30), "threshold", {"metric": "m", "min": 0.9})
    assert v.outcome is Outcome.SUPPORTED and v.p_value == pytest.approx(0.9 ** 30, rel=1e-6)  # 0.042


def test_all_zero_data_keep_a_real_interval_and_p():
    v = evaluate(units([0.0] * 26), "threshold", {"metric": "m", "max": 0.1})
    assert v.p_value > 0 and v.ci_high > v.ci_low
    assert v.ci_high == pytest.approx(1 - 0.025 ** (1 / 26), rel=1e-6)


def test_constant_continuous_data_get_no_point_interval():
    """Zero variance in non-0/1 data: no interval at all (a point would claim certainty), never p = 0."""
    v = evaluate(units([0.7] * 12), "threshold", {"metric": "m", "min": 0.5})
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value == 1.0
    assert v.ci_low is None and v.ci_high is None
    assert "no interval" in v.reason
    d = evaluate(pd.concat([units([0.7] * 12, "a"), units([0.2] * 12, "b")], ignore_index=True),
                 "paired_difference", PAIRED)
    assert d.ci_low is None and d.ci_high is None and d.p_value > 0


def test_three_to_zero_discordant_of_26_is_not_supported():
    v = evaluate(pairs(3, 0, 10, 13), "paired_difference", PAIRED)
    assert v.outcome is not Outcome.SUPPORTED
    assert v.p_value == pytest.approx(0.125)  # exact McNemar; the old Wilcoxon approximation said 0.042
    assert v.ci_low < 0 < v.estimate < v.ci_high


def test_eight_to_zero_discordant_is_supported_by_mcnemar():
    v = evaluate(pairs(8, 0, 10, 8), "paired_difference", PAIRED)
    assert v.outcome is Outcome.SUPPORTED and v.p_value == pytest.approx(0.5 ** 8)


def test_paired_exact_interval_never_a_point_and_holds_the_estimate():
    p, lo, hi = paired(0, 0, 26, 0.95)
    assert p == 1.0 and lo < 0 < hi
    for n10, n01, n in [(3, 0, 26), (0, 5, 20), (7, 2, 30), (12, 12, 24)]:
        _, lo, hi = paired(n10, n01, n, 0.95)
        assert lo <= (n10 - n01) / n <= hi


def test_mcnemar_gain_uses_the_exact_interval():
    f = pairs(0, 0, 12, 12).assign(item=lambda d: d["sample"])
    v = evaluate(f, "mcnemar_gain", PAIRED)
    assert v.ci_low < 0 < v.ci_high  # was the bootstrap point [0, 0]


# ── point 4: sensitivity before REFUTED ───────────────────────────────────────────────────────────────────────

def test_refuted_without_sensitivity_is_impossible():
    bare = Verdict(Outcome.REFUTED, "interval below", "threshold", "m", 0.1, 0.0, 0.2, 0.9, n=10)
    v = sensitivity.guard(units([0.0]), bare, {})
    assert v.outcome is Outcome.INCONCLUSIVE and "could not have shown the effect" in v.reason


def test_failed_precondition_turns_refuted_inconclusive():
    frame = pd.concat([units([0.0] * 7, "learned"), units([0.4], "loss_drop_last")], ignore_index=True)
    req = [{"metric": "loss_drop_last", "max": 0.05, "why": "the training loss converged"}]
    v = evaluate(frame, "threshold", {"metric": "learned", "min": 0.5, "requires": req})
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "could not have shown the effect: the training loss converged (measured 0.4)" in v.reason
    held = evaluate(frame.replace({"value": {0.4: 0.01}}), "threshold",
                    {"metric": "learned", "min": 0.5, "requires": req})
    assert held.outcome is Outcome.REFUTED and held.sensitivity == "precondition held: the training loss converged (0.01)"
    absent = evaluate(frame[frame["metric"] == "learned"], "threshold",
                      {"metric": "learned", "min": 0.5, "requires": req})
    assert absent.outcome is Outcome.INCONCLUSIVE and "measured nothing" in absent.reason


def test_requires_needs_its_keys():
    with pytest.raises(ValueError, match="requires"):
        evaluate(units([0.0] * 7), "threshold", {"metric": "m", "min": 0.5, "requires": [{"metric": "m"}]})


def test_underpowered_refutation_is_inconclusive_with_the_n_needed():
    # 8 units, mean 0.001 and a t interval reaching 0.099: wholly below the bound 0.1, but at this spread an
    # effect of 0.1 (against none) would be found with power Φ(0.1 / 0.0414 − 1.645) = 0.78 only
    z = np.array([-1.5, 1.2, -0.7, 0.9, -0.3, 0.4, 0.1, -0.1])
    z = (z - z.mean()) / z.std(ddof=1)
    vals = 0.001 + 0.098 * np.sqrt(8) / stats.t.ppf(0.975, 7) * z
    lo, hi = stats.ttest_1samp(vals, 0.1).confidence_interval(0.95)
    assert hi < 0.1 and lo < 0
    v = evaluate(units(vals), "threshold", {"metric": "m", "min": 0.1})
    assert v.outcome is Outcome.INCONCLUSIVE and "could not have shown the effect: power" in v.reason
    assert "units needed" in v.reason and v.sensitivity is None


def test_powered_refutation_carries_its_power():
    v = evaluate(units(0.2 + 0.01 * np.random.default_rng(0).standard_normal(30)), "threshold",
                 {"metric": "m", "min": 0.5})
    assert v.outcome is Outcome.REFUTED and v.sensitivity.startswith("power 1.00 at the bound 0.5")


def test_binary_power_is_exact_binomial():
    assert sensitivity.binomial_power(60, 0.0, 0.245, 0.05) == pytest.approx(1 - 0.755 ** 60)
    # H0 p = 0.5 at n = 10: the test rejects at X ≥ 9 (P = 0.0107); power at 0.9 = P(X ≥ 9 | 0.9)
    assert sensitivity.binomial_power(10, 0.5, 0.9, 0.05) == pytest.approx(stats.binom.sf(8, 10, 0.9))


# ── point 5: refutable existence claims ───────────────────────────────────────────────────────────────────────

EXIST = {"metric": "m", "min": 0.0, "smallest_effect": 0.245, "smallest_effect_source": "the paper's erosion"}


def test_existence_claim_with_no_events_is_refuted_against_the_smallest_effect():
    v = evaluate(units([0.0] * 60), "threshold", EXIST)
    assert v.outcome is Outcome.REFUTED and "no effect as large as 0.245 (the paper's erosion)" in v.reason
    assert v.sensitivity.startswith("power 1.00 at smallest effect 0.245 vs bound 0")


def test_existence_claim_without_smallest_effect_cannot_be_refuted():
    v = evaluate(units([0.0] * 60), "threshold", {"metric": "m", "min": 0.0})
    assert v.outcome is Outcome.INCONCLUSIVE


def test_existence_claim_with_events_near_the_smallest_effect_is_not_refuted():
    v = evaluate(units([1.0] * 5 + [0.0] * 25), "threshold", EXIST)
    assert v.outcome is Outcome.SUPPORTED  # 5 of 30 > 0


# ── point 6: residues ──────────────────────────────────────────────────────────────────────────────────────────

def test_estimate_on_the_bound_is_not_on_the_claimed_side():
    v = _decide("threshold", "m", 0.5, 0.45, 0.55, 0.001, 30, 0.5, +1, "≥ 0.5", 0.05, effect=0.0,
                effect_name="margin", resampled=False)
    assert v.outcome is Outcome.INCONCLUSIVE


def test_approximate_measurement_is_never_refuted():
    base = np.random.default_rng(4).normal(0, 1, 199)
    frame = pd.concat([pd.DataFrame({"kind": "observed", "metric": "s", "value": [0.0]}),
                       pd.DataFrame({"kind": "baseline", "metric": "r", "value": base}),
                       pd.DataFrame({"kind": "flag", "metric": "qk_norm", "value": [1.0]})])
    params = {"observed": {"kind": "observed"}, "baselines": [{"kind": "baseline"}], "flag": {"kind": "flag"}}
    v = evaluate(frame, "exceeds_baselines", params)
    assert v.outcome is Outcome.INCONCLUSIVE and "approximate" in v.reason
    exact = evaluate(frame[frame["kind"] != "flag"], "exceeds_baselines", params)
    assert exact.outcome is Outcome.REFUTED and exact.sensitivity.startswith("exact comparison with 199")


def test_refuted_states_its_per_cell_alpha_in_a_family():
    refuted = Verdict(Outcome.REFUTED, "below", "threshold", "m", 0.1, 0.0, 0.2, 0.9, sensitivity="power 0.9")
    out = adjust([refuted, Verdict(Outcome.SUPPORTED, "x", "threshold", "m", 1.0, p_value=0.001)])
    assert "per-cell α = 0.05" in out[0].reason and out[0].outcome is Outcome.REFUTED


# ── the field travels: record, old records, results.csv ───────────────────────────────────────────────────────

def test_sensitivity_round_trips_and_old_records_read_as_none():
    v = evaluate(units([0.0] * 60), "threshold", EXIST)
    assert Verdict.from_json(v.to_json()) == v
    old = {k: val for k, val in v.to_json().items() if k != "sensitivity"}
    assert Verdict.from_json(old).sensitivity is None


def test_results_csv_has_the_sensitivity_column():
    v = evaluate(units([0.0] * 60), "threshold", EXIST)
    cell = {"spec": {"id": "f.c", "family": "f", "references": []}, "model": "m", "verdict": v.to_json()}
    table = results.rows({"run_id": "r", "cells": [cell]})
    assert "sensitivity" in results.COLUMNS and table[0]["sensitivity"] == v.sensitivity
    assert v.sensitivity in results.to_csv(table)


def test_bh_adjustment_never_turns_a_precondition_inconclusive_back_into_refuted():
    """A combined rule whose REFUTED part was held back by an unmet precondition stays INCONCLUSIVE after the
    family's correction (re-combining the adjusted parts used to restore the REFUTED)."""
    import pandas as pd

    from bench.stats import adjust, evaluate

    rows = [{"sample": i, "metric": "a", "value": 0.0} for i in range(30)]
    rows += [{"sample": i, "metric": "b", "value": 1.0} for i in range(30)]
    rows += [{"sample": None, "metric": "converged", "value": 0.0}]
    frame = pd.DataFrame(rows)
    params = {"of": [{"rule": "paired_difference", "a": {"metric": "a"}, "b": {"metric": "b"}, "min": 0.0}],
                     "requires": [{"metric": "converged", "min": 1.0, "why": "training finished"}]}
    v = evaluate(frame, "all", params)
    assert v.outcome.value == "INCONCLUSIVE" and "could not have shown the effect" in v.reason
    (after,) = adjust([v], unseen=3)
    assert after.outcome.value == "INCONCLUSIVE"


def _groups(a: list[float], b: list[float]) -> pd.DataFrame:
    vals = np.asarray(a + b, float)
    return pd.DataFrame({"sample": np.arange(len(vals)), "metric": "m", "value": vals,
                         "cls": ["A"] * len(a) + ["B"] * len(b)})


GROUPS = {"metric": "m", "a": ["A"], "b": ["B"], "side": "greater", "min_n": 5}


def test_two_groups_of_0_1_units_use_boschloos_exact_test():
    """One 0/1 value per unit: δ is the difference of shares, p is Boschloo's exact p, the interval Newcombe's."""
    v = evaluate(_groups([1.0] * 7 + [0.0], [1.0] * 2 + [0.0] * 6), "group_comparison", GROUPS)
    assert v.estimate == pytest.approx(7 / 8 - 2 / 8)
    assert v.p_value == pytest.approx(stats.boschloo_exact([[7, 2], [1, 6]], alternative="greater").pvalue)
    assert v.outcome is Outcome.SUPPORTED and v.ci_low < v.estimate < v.ci_high


def test_two_groups_all_ones_are_not_a_point_or_p_zero():
    v = evaluate(_groups([1.0] * 8, [1.0] * 8), "group_comparison", GROUPS)
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value == pytest.approx(1.0)
    assert v.ci_low < 0 < v.ci_high


def test_a_precondition_can_name_the_rows_it_reads():
    """`where` picks the rows a precondition averages: here the full fine-tune fitted 1 of 10 facts and the LoRA
    run 9 of 10, so "the full fine-tune fitted its facts" fails (0.1) although the mean over both is 0.5."""
    learned = units([0.0] * 7, "learned").assign(condition="full_ft")
    fitted = pd.DataFrame({"metric": "fitted", "sample": list(range(20)), "value": [1.0] + [0.0] * 9 + [1.0] * 9 + [0.0],
                           "condition": ["full_ft"] * 10 + ["lora"] * 10})
    frame = pd.concat([learned, fitted], ignore_index=True)
    req = [{"metric": "fitted", "min": 0.5, "why": "the full fine-tune fitted its facts",
            "where": {"condition": "full_ft"}}]
    v = evaluate(frame, "threshold", {"metric": "learned", "min": 0.5, "requires": req})
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "the full fine-tune fitted its facts (measured 0.1, condition = full_ft)" in v.reason
    both = [{**req[0], "where": {"condition": ["full_ft", "lora"]}}]
    held = evaluate(frame, "threshold", {"metric": "learned", "min": 0.5, "requires": both})
    assert held.outcome is Outcome.REFUTED
    assert held.sensitivity == "precondition held: the full fine-tune fitted its facts (0.5, condition = ['full_ft', 'lora'])"
    none = evaluate(frame, "threshold", {"metric": "learned", "min": 0.5,
                                         "requires": [{**req[0], "where": {"condition": "uk_only"}}]})
    assert none.outcome is Outcome.INCONCLUSIVE and "no 'fitted' rows where condition = uk_only" in none.reason
    with pytest.raises(ValueError, match="'arm', which is not a column"):
        evaluate(frame, "threshold", {"metric": "learned", "min": 0.5,
                                      "requires": [{**req[0], "where": {"arm": "x"}}]})
