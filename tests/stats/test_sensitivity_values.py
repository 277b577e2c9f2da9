"""`bench.stats.sensitivity` function by function, each against a number or sentence known by hand.

The power figures are written from their definitions (docs in the module): the exact one-sided binomial test
rejects at the smallest count whose tail probability under the null is below α, and its power is that tail
under the alternative; the normal approximation is Φ(|Δ| / se − z_{1−α}) with se = half the interval's width ÷
t_{n−1, 0.975}, and the units needed n · ((z_{1−α} + z_{0.8}) · se / |Δ|)².
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, Verdict, sensitivity


def units(values, metric="m") -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(len(values)), "metric": metric, "value": list(values)})


def exact_power(n, null, alt, alpha):
    """By counting: the rejection region of the one-sided exact test, then its probability under `alt`."""
    if alt > null:
        k = next((k for k in range(n + 1) if stats.binom.sf(k - 1, n, null) < alpha), None)
        return 0.0 if k is None else float(stats.binom.sf(k - 1, n, alt))
    k = next((k for k in range(n, -1, -1) if stats.binom.cdf(k, n, null) < alpha), None)
    return 0.0 if k is None else float(stats.binom.cdf(k, n, alt))


# ── check_requires and reference ──────────────────────────────────────────────────────────────────────────

def test_check_requires_accepts_complete_tables_and_names_what_it_got():
    ok = [{"metric": "loss", "max": 0.1, "why": "converged"}, {"metric": "acc", "min": 0.5, "why": "solvable"}]
    assert sensitivity.check_requires(ok) == ok and sensitivity.check_requires(None) == []
    for bad in ({"metric": "loss", "why": "w"}, {"max": 1, "why": "w"}, {"metric": "loss", "max": 1},
                {"metric": "loss", "max": 1, "why": "w", "extra": 2}):
        with pytest.raises(ValueError) as err:
            sensitivity.check_requires([ok[0], bad])
        assert str(err.value) == (f"requires[1] needs metric, why and min and/or max, and may have where "
                                  f"(got {sorted(bad)})")
    with_where = {"metric": "fitted", "min": 0.5, "why": "w", "where": {"condition": "full_ft"}}
    assert sensitivity.check_requires([with_where]) == [with_where]
    with pytest.raises(ValueError) as err:
        sensitivity.check_requires([{**with_where, "where": "full_ft"}])
    assert str(err.value) == "requires[0].where must be a table of column = value (got 'full_ft')"


def test_reference_is_visible_inside_and_reset_after():
    v = Verdict(Outcome.REFUTED, "r", "x", n=30, ci_low=0.1, ci_high=0.2, estimate=0.15)
    with sensitivity.reference({"smallest_effect": 0.4, "smallest_effect_source": "the paper"}):
        assert sensitivity.power_of(v, 0.3, +1, False)[2] == "smallest effect 0.4 vs bound 0.3 (the paper)"
    assert sensitivity.power_of(v, 0.3, +1, False)[2] == "the bound 0.3 vs no effect (0)"
    with pytest.raises(ValueError, match="requires"):
        with sensitivity.reference({"requires": [{"metric": "m"}]}):
            pass
    with sensitivity.reference({"smallest_effect": 0.4}):
        assert sensitivity.power_of(v, 0.3, +1, False)[2] == "smallest effect 0.4 vs bound 0.3 (the spec)"


# ── holding ───────────────────────────────────────────────────────────────────────────────────────────────

def test_holding_widens_to_the_estimate_and_says_so():
    assert sensitivity.holding(0.5, 0.4, 0.6) == (0.4, 0.6, "")
    assert sensitivity.holding(0.4, 0.4, 0.6) == (0.4, 0.6, "")  # on an end: held
    assert sensitivity.holding(0.6, 0.4, 0.6) == (0.4, 0.6, "")
    assert sensitivity.holding(0.3, 0.41234, 0.6) == (
        0.3, 0.6, "interval widened down to the estimate (the resampled values lay above it, from 0.4123)")
    assert sensitivity.holding(0.7, 0.4, 0.61234) == (
        0.4, 0.7, "interval widened up to the estimate (the resampled values lay below it, to 0.6123)")
    for args in ((None, 0.4, 0.6), (0.5, None, 0.6), (0.5, 0.4, None), (float("nan"), 0.4, 0.6),
                 (0.9, 0.4, float("inf"))):
        assert sensitivity.holding(*args) == (args[1], args[2], "")


# ── binomial power and the n needed ───────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("n, null, alt", [(10, 0.5, 0.9), (25, 0.5, 0.8), (25, 0.5, 0.2), (40, 0.9, 0.7),
                                          (12, 0.3, 0.05), (8, 0.5, 0.99)])
def test_binomial_power_is_the_tail_of_the_rejection_region(n, null, alt):
    assert sensitivity.binomial_power(n, null, alt, 0.05) == pytest.approx(exact_power(n, null, alt, 0.05), abs=1e-12)


def test_binomial_power_edges():
    assert sensitivity.binomial_power(0, 0.5, 0.9, 0.05) == 0.0
    assert sensitivity.binomial_power(10, 0.5, 0.5, 0.05) == 0.05
    assert sensitivity.binomial_power(0, 0.5, 0.5, 0.05) == 0.0
    assert sensitivity.binomial_power(3, 0.5, 0.9, 0.05) == 0.0  # 3 of 3 has P = 0.125: no rejection at all
    assert sensitivity.binomial_power(3, 0.5, 0.1, 0.05) == 0.0
    # n = 5: X = 5 has P = 0.03125 < 0.05, the only rejection; the same at α = 0.03125 (strictly below needed)
    assert sensitivity.binomial_power(5, 0.5, 0.9, 0.05) == pytest.approx(0.9 ** 5)
    assert sensitivity.binomial_power(5, 0.5, 0.9, 0.03125) == 0.0
    assert sensitivity.binomial_power(5, 0.5, 0.1, 0.05) == pytest.approx(0.9 ** 5)
    assert sensitivity.binomial_power(5, 0.5, 0.1, 0.03125) == 0.0  # P(X ≤ 0) = α is not below α
    assert sensitivity.binomial_power(1, 0.5, 0.5, 0.05) == 0.05  # one unit and no effect: the level itself


def test_binomial_units_needed_is_the_first_n_with_power_0_8():
    need = next(n for n in range(1, 500) if exact_power(n, 0.5, 0.8, 0.05) >= 0.8)
    assert sensitivity._binomial_need(0.5, 0.8, 0.05, 1) == need
    assert sensitivity._binomial_need(0.5, 0.8, 0.05, 0) == need  # a start below 1 starts at 1
    assert sensitivity._binomial_need(0.5, 0.8, 0.05, need) == need
    assert sensitivity._binomial_need(0.5, 0.8, 0.05, need + 3) == need + 3
    assert sensitivity._binomial_need(0.5, 0.5, 0.05, 1) is None  # no effect: the power stays at α
    # the search ends at 20,000 units: from there on it gives up, whatever the power
    assert sensitivity._binomial_need(0.5, 0.9, 0.05, 20000) == 20000
    assert sensitivity._binomial_need(0.5, 0.9, 0.05, 20001) is None
    # power exactly 0.8 counts as enough: at n = 1 and α = 0.6 the test rejects at X = 1 (P = 0.5 under the
    # null), so its power at 0.8 is P(X = 1 | 0.8) = 0.8
    assert sensitivity.binomial_power(1, 0.5, 0.8, 0.6) == 0.8
    assert sensitivity._binomial_need(0.5, 0.8, 0.6, 1) == 1


# ── power_of ──────────────────────────────────────────────────────────────────────────────────────────────

def verdict(n, lo, hi, alpha=0.05):
    return Verdict(Outcome.REFUTED, "below", "threshold", "m", (lo + hi) / 2 if lo is not None else None, lo, hi,
                   0.9, n=n, alpha=alpha)


def test_power_of_the_normal_approximation():
    v = verdict(20, 0.0, 0.1)
    se = 0.05 / stats.t.ppf(0.975, 19)
    za, zb = stats.norm.ppf(0.95), stats.norm.ppf(0.8)
    pw, need, words = sensitivity.power_of(v, 0.3, +1, False)
    assert pw == pytest.approx(stats.norm.cdf(0.3 / se - za), rel=1e-12)
    assert need == math.ceil(20 * ((za + zb) * se / 0.3) ** 2) and words == "the bound 0.3 vs no effect (0)"
    pw, need, _ = sensitivity.power_of(verdict(20, 0.0, 0.1, alpha=0.01), 0.3, +1, False)
    assert pw == pytest.approx(stats.norm.cdf(0.3 / se - stats.norm.ppf(0.99)), rel=1e-12)
    with sensitivity.reference({"smallest_effect": 0.25}):  # Δ = |0.25 − 0.3| against the bound
        pw, need, _ = sensitivity.power_of(v, 0.3, -1, False)
    assert pw == pytest.approx(stats.norm.cdf(0.05 / se - za), rel=1e-12)
    assert need == math.ceil(20 * ((za + zb) * se / 0.05) ** 2)


def test_power_of_edges():
    assert sensitivity.power_of(verdict(20, 0.0, 0.1), 0.0, +1, False) == (0.05, None, "the bound 0 vs no effect (0)")
    assert sensitivity.power_of(verdict(1, 0.0, 0.1), 0.3, +1, False)[:2] == (0.0, None)
    assert sensitivity.power_of(verdict(2, 0.0, 0.1), 0.3, +1, False)[0] > 0  # n = 2 is computed
    for lo, hi in ((None, None), (0.0, None), (None, 0.1)):  # no interval, or half of one
        pw, need, _ = sensitivity.power_of(Verdict(Outcome.REFUTED, "r", "t", "m", 0.05, lo, hi, n=20), 0.3, +1, False)
        assert math.isnan(pw) and need is None
    assert sensitivity.power_of(verdict(20, 0.1, 0.1), 0.3, +1, False)[:2] == (1.0, 20)
    n_none = Verdict(Outcome.REFUTED, "r", "threshold", "m", 0.1, 0.0, 0.2)
    assert sensitivity.power_of(n_none, 0.3, +1, False)[:2] == (0.0, None)  # no n: no power
    assert sensitivity.power_of(n_none, 0.3, +1, True)[0] == 0.0  # exact as well: no unit, no rejection
    pw, need, _ = sensitivity.power_of(verdict(30, 0.0, 0.1), 0.2, +1, True)  # binary: exact, CI not read
    assert pw == pytest.approx(exact_power(30, 0.0, 0.2, 0.05)) and need == 30
    pw, need, _ = sensitivity.power_of(verdict(6, 0.0, 0.1), 0.2, +1, True)
    assert pw == pytest.approx(exact_power(6, 0.0, 0.2, 0.05))
    assert need == next(n for n in range(6, 200) if exact_power(n, 0.0, 0.2, 0.05) >= 0.8)


def test_power_of_one_binary_unit_is_exact_and_sized():
    """An exact test has a power at any n, one unit included: 0.2 against p = 0 at n = 1 is 0.2 (one success
    rejects), and the n it needs is sized like any other (it was "no n suffices" below two units)."""
    pw, need, _ = sensitivity.power_of(verdict(1, 0.0, 0.1), 0.2, +1, True)
    assert pw == pytest.approx(0.2) and need == next(n for n in range(1, 100) if exact_power(n, 0.0, 0.2, 0.05) >= 0.8)


def _need_by_scan(null, alt, alpha, start):
    return next((n for n in range(max(1, start), 3000) if exact_power(n, null, alt, alpha) >= 0.8), None)


NEED_CASES = ((0.5, 0.7, 0.05, 1), (0.5, 0.3, 0.05, 1), (0.0, 0.1, 0.05, 1), (1.0, 0.9, 0.05, 1),
              (0.2, 0.25, 0.01, 5), (0.8, 0.75, 0.05, 3), (0.5, 0.6, 1 / 16, 1), (0.1, 0.02, 0.05, 40),
              (0.95, 0.99, 0.05, 1), (0.5, 0.95, 1 / 16, 1), (0.5, 0.05, 1 / 16, 1), (0.5, 0.01, 0.05, 1),
              (0.5, 0.99, 0.05, 1))


def test_binomial_need_is_the_first_n_an_exact_scan_finds():
    """Known answer: the n of a one-by-one scan of the exact test's power (counted afresh by exact_power), in both
    tails, at α = 0.05, 0.01 and 1/16 (a tail probability of ½-binomials, where p < α must not reject at p = α), and
    from a later start; a critical count off by one anywhere in the range names another n."""
    for null, alt, alpha, start in NEED_CASES:
        assert sensitivity._binomial_need(null, alt, alpha, start) == _need_by_scan(null, alt, alpha, start), (null, alt)


@pytest.mark.parametrize("off", [-3, 3])
def test_binomial_need_settles_a_quantile_guess_that_is_off(monkeypatch, off):
    """The quantiles only start the search: with every guess `off` counts from them, the critical counts are moved
    onto the same edges and the n named is the scan's."""
    isf, ppf = stats.binom.isf, stats.binom.ppf
    monkeypatch.setattr(sensitivity.stats.binom, "isf", lambda q, n, p: isf(q, n, p) + off)
    monkeypatch.setattr(sensitivity.stats.binom, "ppf", lambda q, n, p: ppf(q, n, p) + off)
    for null, alt, alpha, start in NEED_CASES:
        assert sensitivity._binomial_need(null, alt, alpha, start) == _need_by_scan(null, alt, alpha, start), (null, alt)


def test_binomial_need_of_thousands_and_beyond_the_range():
    """½ against 0.49 needs 15,486 units (a one-by-one scan's answer, 16 s of scanning), at 15,486 and not at 15,485;
    ½ against 0.498 needs more than MAX_NEED, said None."""
    assert sensitivity._binomial_need(0.5, 0.49, 0.05, 2) == 15486
    assert sensitivity.binomial_power(15486, 0.5, 0.49, 0.05) >= 0.8 > sensitivity.binomial_power(15485, 0.5, 0.49, 0.05)
    assert sensitivity._binomial_need(0.5, 0.498, 0.05, 2) is None


# ── judge ─────────────────────────────────────────────────────────────────────────────────────────────────

def inconclusive(lo, hi, n=30):
    return Verdict(Outcome.INCONCLUSIVE, "between", "threshold", "m", (lo + hi) / 2, lo, hi, 0.3, n=n)


def test_judge_refutes_an_existence_claim_short_of_its_smallest_effect():
    with sensitivity.reference({"smallest_effect": 0.2, "smallest_effect_source": "Fig. 2"}):
        v = sensitivity.judge(inconclusive(-0.01, 0.1234), 0.0, +1)
        assert v.outcome is Outcome.REFUTED
        assert v.reason == "between; no effect as large as 0.2 (Fig. 2): the interval's upper bound 0.1234 lies short of it"
        assert v.sensitivity.startswith("power ")
        assert sensitivity.judge(inconclusive(-0.01, 0.2), 0.0, +1).outcome is Outcome.INCONCLUSIVE  # reaches it
        assert sensitivity.judge(inconclusive(-0.01, 0.1), 0.0, +1, calibrated=False).outcome is Outcome.INCONCLUSIVE
        # a claim of "below 0" with a smallest effect above 0 is no existence claim on that side
        assert sensitivity.judge(inconclusive(-0.1, 0.01), 0.0, -1).outcome is Outcome.INCONCLUSIVE
    with sensitivity.reference({"smallest_effect": -0.2}):
        v = sensitivity.judge(inconclusive(-0.1234, 0.01), 0.0, -1)
        assert v.outcome is Outcome.REFUTED and v.reason == (
            "between; no effect as large as -0.2 (the spec's smallest effect): the interval's lower bound -0.1234 "
            "lies short of it")
        assert sensitivity.judge(inconclusive(-0.2, 0.01), 0.0, -1).outcome is Outcome.INCONCLUSIVE
        assert sensitivity.judge(inconclusive(-0.1, 0.01), 0.0, +1).outcome is Outcome.INCONCLUSIVE
    with sensitivity.reference({"smallest_effect": 0.3}):  # a smallest effect short of a non-zero bound (0.5):
        assert sensitivity.judge(inconclusive(0.1, 0.2), 0.5, +1).outcome is Outcome.INCONCLUSIVE  # no existence claim
        assert sensitivity.judge(inconclusive(0.1, 0.2), -0.5, +1).outcome is Outcome.REFUTED  # beyond -0.5: one
    with sensitivity.reference({"smallest_effect": 0.0}):  # the smallest effect on the bound: not an existence claim
        assert sensitivity.judge(inconclusive(-0.1, -0.05), 0.0, +1).outcome is Outcome.INCONCLUSIVE
    with sensitivity.reference({"smallest_effect": 0.2}):
        no_ci = Verdict(Outcome.INCONCLUSIVE, "x", "t", "m", 0.0, None, 0.1, n=30)
        assert sensitivity.judge(no_ci, 0.0, +1).outcome is Outcome.INCONCLUSIVE
        no_ci = Verdict(Outcome.INCONCLUSIVE, "x", "t", "m", 0.0, -0.1, None, n=30)
        assert sensitivity.judge(no_ci, 0.0, +1).outcome is Outcome.INCONCLUSIVE
        supported = replace_outcome(inconclusive(0.3, 0.5), Outcome.SUPPORTED)
        assert sensitivity.judge(supported, 0.0, +1) == supported


def replace_outcome(v, outcome):
    from dataclasses import replace

    return replace(v, outcome=outcome)


def test_judge_states_the_power_of_a_refuted_or_withdraws_it():
    strong = Verdict(Outcome.REFUTED, "below", "threshold", "m", 0.1, 0.09, 0.11, 1.0, n=30)
    v = sensitivity.judge(strong, 0.5, +1)
    se = 0.01 / stats.t.ppf(0.975, 29)
    assert v.outcome is Outcome.REFUTED and v.reason == "below"
    assert v.sensitivity == (f"power {stats.norm.cdf(0.5 / se - stats.norm.ppf(0.95)):.2f} at the bound 0.5 vs no "
                             "effect (0) with n = 30")
    weak = Verdict(Outcome.REFUTED, "below", "threshold", "m", 0.01, -0.2, 0.09, 1.0, n=8)
    v = sensitivity.judge(weak, 0.1, +1)
    se = 0.145 / stats.t.ppf(0.975, 7)
    pw = stats.norm.cdf(0.1 / se - stats.norm.ppf(0.95))
    need = math.ceil(8 * ((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * se / 0.1) ** 2)
    assert v.outcome is Outcome.INCONCLUSIVE and v.sensitivity is None
    assert v.reason == (f"could not have shown the effect: power {pw:.2f} at the bound 0.1 vs no effect (0) with "
                        f"n = 8; about {need} units needed (below)")
    no_ci = Verdict(Outcome.REFUTED, "below", "threshold", "m", 0.01, None, None, 1.0, n=8)
    v = sensitivity.judge(no_ci, 0.1, +1)
    assert v.reason == "could not have shown the effect: the rule gives no interval to judge its power (below)"
    tiny = Verdict(Outcome.REFUTED, "below", "threshold", "m", 0.5, 0.4, 0.6, 1.0, n=3)
    v = sensitivity.judge(tiny, 1.0, +1, binary=True)  # exact: against p = 0 one success rejects, power 1
    assert v.outcome is Outcome.REFUTED and v.sensitivity == "power 1.00 at the bound 1 vs no effect (0) with n = 3"


def test_judge_says_why_no_n_is_named_and_drops_a_sensitivity_it_withdraws():
    """A REFUTED whose power falls short names the units needed, or why it names none: an exact test needing more
    than MAX_NEED units, or a single unit (no spread to size an n by).  The INCONCLUSIVE it becomes carries no
    sensitivity, even one the rule had stated."""
    far = sensitivity.judge(Verdict(Outcome.REFUTED, "r", "t", "m", 0.0, 0.0, 0.0, 1.0, n=10), 5e-5, +1, binary=True)
    assert far.outcome is Outcome.INCONCLUSIVE
    assert far.reason == ("could not have shown the effect: power 0.00 at the bound 5e-05 vs no effect (0) with n = 10; "
                          "more than 20,000 units needed (r)")
    one = sensitivity.judge(Verdict(Outcome.REFUTED, "r", "t", "m", 0.0, -0.1, 0.1, 1.0, n=1), 0.3, +1)
    assert one.reason == ("could not have shown the effect: power 0.00 at the bound 0.3 vs no effect (0) with n = 1; "
                          "one unit gives no spread to size the n it needs (r)")
    stated = Verdict(Outcome.REFUTED, "r", "t", "m", 0.01, -0.2, 0.09, 1.0, n=8, sensitivity="the rule's own")
    v = sensitivity.judge(stated, 0.1, +1)
    assert v.outcome is Outcome.INCONCLUSIVE and v.sensitivity is None


def test_judge_opposite_effect_needs_no_power_and_requires_defers_to_guard():
    opposite = "the interval lies wholly on the other side of no effect (0): the opposite of the claim is measured, at any power"
    below = Verdict(Outcome.REFUTED, "r", "t", "m", -0.3, -0.5, -0.1, 1.0, n=4)
    assert sensitivity.judge(below, 0.2, +1).sensitivity == opposite
    assert sensitivity.judge(replace_outcome(below, Outcome.REFUTED), 0.0, +1).sensitivity == opposite
    touching = Verdict(Outcome.REFUTED, "r", "t", "m", -0.3, -0.5, 0.0, 1.0, n=4)
    assert sensitivity.judge(touching, 0.2, +1).sensitivity != opposite  # an interval ending at 0 is not beyond it
    above = Verdict(Outcome.REFUTED, "r", "t", "m", 0.3, 0.1, 0.5, 1.0, n=4)
    assert sensitivity.judge(above, -0.2, -1).sensitivity == opposite
    touching = Verdict(Outcome.REFUTED, "r", "t", "m", 0.3, 0.0, 0.5, 1.0, n=4)
    assert sensitivity.judge(touching, -0.2, -1).sensitivity != opposite
    # a bound of 0 with no smallest effect: no reference effect, the interval's side is the whole argument
    no_ref = Verdict(Outcome.REFUTED, "r", "t", "m", 0.3, 0.1, 0.5, 1.0, n=4)
    assert sensitivity.judge(no_ref, 0.0, +1).sensitivity == opposite
    with sensitivity.reference({"requires": [{"metric": "x", "min": 0, "why": "w"}]}):
        assert sensitivity.judge(touching, -0.2, -1) == touching  # the precondition decides, in guard


# ── _requirement and guard ────────────────────────────────────────────────────────────────────────────────

def test_requirement_reads_the_mean_of_the_metric_and_its_bounds():
    f = pd.concat([units([0.25, 0.75], "loss"), units([9.0], "other")], ignore_index=True)  # mean 0.5 exactly
    assert sensitivity._requirement(f, {"metric": "loss", "max": 0.5, "why": "w"}) == (True, "w (0.5)")
    assert sensitivity._requirement(f, {"metric": "loss", "max": 0.49, "why": "w"}) == (False, "w (measured 0.5)")
    assert sensitivity._requirement(f, {"metric": "loss", "min": 0.5, "why": "w"}) == (True, "w (0.5)")
    assert sensitivity._requirement(f, {"metric": "loss", "min": 0.51, "why": "w"}) == (False, "w (measured 0.5)")
    assert sensitivity._requirement(f, {"metric": "loss", "min": 0.1, "max": 0.6, "why": "w"})[0] is True
    assert sensitivity._requirement(f, {"metric": "loss", "min": None, "max": 0.6, "why": "w"})[0] is True
    assert sensitivity._requirement(f, {"metric": "loss", "min": 0.1, "max": None, "why": "w"})[0] is True
    assert sensitivity._requirement(f, {"metric": "gone", "max": 1, "why": "w"}) == (
        False, "w (measured nothing: no 'gone' rows)")
    no_metric = pd.DataFrame({"sample": [0, 1], "value": [0.1, 0.2]})  # a frame without a metric column
    assert sensitivity._requirement(no_metric, {"metric": "loss", "max": 1, "why": "w"}) == (
        False, "w (measured nothing: no 'loss' rows)")
    text = pd.DataFrame({"metric": ["loss", "loss", "loss"], "value": ["0.25", "n/a", 0.75]})
    assert sensitivity._requirement(text, {"metric": "loss", "max": 0.6, "why": "w"}) == (True, "w (0.5)")


def test_guard_takes_the_refuted_parts_sensitivity_and_checks_every_precondition():
    part_a = Verdict(Outcome.REFUTED, "a", "t", "m", sensitivity="power 0.90 at x")
    part_b = Verdict(Outcome.SUPPORTED, "b", "t", "m", sensitivity="ignored")
    part_c = Verdict(Outcome.REFUTED, "c", "t", "m", sensitivity="power 0.85 at y")
    top = Verdict(Outcome.REFUTED, "a; c", "all", "m", parts=(part_a, part_b, part_c))
    assert sensitivity.guard(units([0.0]), top, {}).sensitivity == "power 0.90 at x; power 0.85 at y"
    bare = Verdict(Outcome.REFUTED, "a", "all", "m", parts=(replace_outcome(part_a, Outcome.INCONCLUSIVE),))
    v = sensitivity.guard(units([0.0]), bare, {})
    assert v.outcome is Outcome.INCONCLUSIVE
    assert v.reason == "could not have shown the effect: the rule states no sensitivity (a)"
    own = Verdict(Outcome.REFUTED, "a", "t", "m", sensitivity="mine", parts=(part_c,))
    assert sensitivity.guard(units([0.0]), own, {}).sensitivity == "mine"
    f = pd.concat([units([0.01], "loss"), units([0.9], "acc")], ignore_index=True)
    req = [{"metric": "loss", "max": 0.05, "why": "converged"}, {"metric": "acc", "min": 0.5, "why": "solvable"}]
    v = sensitivity.guard(f, own, {"requires": req})
    assert v.outcome is Outcome.REFUTED and v.sensitivity == "precondition held: converged (0.01); solvable (0.9)"
    req[1]["min"] = 0.95
    req.append({"metric": "gone", "min": 0, "why": "measured"})
    v = sensitivity.guard(f, own, {"requires": req})
    assert v.outcome is Outcome.INCONCLUSIVE and v.sensitivity is None
    assert v.reason == ("could not have shown the effect: solvable (measured 0.9); measured (measured nothing: no "
                        "'gone' rows) (a)")
    supported = Verdict(Outcome.SUPPORTED, "s", "t", "m")
    assert sensitivity.guard(f, supported, {"requires": [{"metric": "m"}]}) is supported  # not even checked
