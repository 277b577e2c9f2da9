"""The family's rules decided against an untrained control (bench.families.langneurons.arms): known answers on
hand-made frame pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.families.langneurons.probes import frame
from bench.stats import Outcome, evaluate
from bench.stats.control import against, difference
from tests.families.langneurons.test_langneurons_rules import STRONG, deact_frame, diag_only


def shares_frame(edge: int, shares: np.ndarray) -> pd.DataFrame:
    """A full selection of `edge` of 100 neurons at the edges, and one split-half replicate per share (of 1,000)."""
    rows = [("lape", None, None, None, None, None, "edge_count", edge),
            ("lape", None, None, None, None, None, "total_count", 100),
            ("lape", None, None, None, None, None, "uniform_share", 0.4)]
    for r, sh in enumerate(shares):
        rows += [("lape", None, None, None, None, r, "edge_count", round(sh * 1000)),
                 ("lape", None, None, None, None, r, "total_count", 1000)]
    return frame(rows)


SPREAD = np.linspace(-0.05, 0.05, 21)  # steps of 0.005: exact in thousandths


def test_share_difference_is_full_minus_full_spread_by_paired_replicates_over_root_two():
    trained = shares_frame(90, 0.9 + SPREAD)
    control = shares_frame(70, 0.7 - SPREAD)  # replicate r: trained high where the control is low
    d = difference(trained, control, "binomial_share", {"min_share": 0.6})
    assert d.estimate == pytest.approx(0.2) and d.n == 21 and "split-half replicate" in d.reason
    values = 0.2 + 2 * SPREAD / np.sqrt(2)  # per-replicate differences 0.2 + 2·spread, centred, ÷ √2
    assert (d.ci_low, d.ci_high) == pytest.approx(tuple(np.quantile(values, [0.025, 0.975])))
    assert d.p_value == pytest.approx((1 + np.sum(values <= 0)) / 22) and d.outcome is Outcome.SUPPORTED


def test_share_above_the_bar_on_both_models_is_not_a_difference():
    """The issue's case: 0.9 trained and 0.9 on the control both pass ≥ 0.6; the difference is 0."""
    trained, control = shares_frame(90, 0.9 + SPREAD), shares_frame(90, 0.9 + SPREAD[::-1])
    assert evaluate(control, "binomial_share", {"min_share": 0.6}).outcome is Outcome.SUPPORTED
    d = difference(trained, control, "binomial_share", {"min_share": 0.6})
    assert d.estimate == pytest.approx(0.0) and d.outcome is not Outcome.SUPPORTED


RATIO = {"numerator": {"method": "rs", "entries": "diagonal"},
         "denominator": {"method": "lape", "entries": "diagonal"}, "max": 0.25}


def test_ratio_difference_is_the_difference_of_the_rules_margins_paired_by_text():
    """The rule decides on rs − 0.25·lape ΔBPB; the arm differences that margin: trained 0.01 − 0.25·0.2875,
    control 0.01 − 0.25·0.02, so trained − control = −0.066875 (the texts' noise moves it by < 0.005)."""
    trained = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)}, seed=0)
    control = deact_frame({"lape": diag_only([0.02] * 4), "rs": diag_only([0.01] * 4)}, seed=1)
    d = difference(trained, control, "baseline_ratio", RATIO)
    assert d.estimate == pytest.approx(-0.066875, abs=0.005) and d.ci_low <= d.estimate <= d.ci_high
    assert d.outcome is Outcome.SUPPORTED and d.ci_high < 0 and d.n == 30
    same = difference(trained, trained, "baseline_ratio", RATIO)
    assert same.estimate == pytest.approx(0.0) and same.outcome is not Outcome.SUPPORTED


def test_a_control_whose_lape_neurons_do_nothing_leaves_the_difference_defined():
    """gemma3-270m's case: on the untrained model zeroing LAPE's neurons changes BPB by noise around 0, so its
    ratio is noise over noise (52.8 there) and a ratio difference's interval missed its own estimate.  The margin
    stays in bits per byte: trained −0.0619 against a control near 0."""
    trained = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)}, seed=0)
    control = deact_frame({"lape": diag_only([0.0] * 4), "rs": diag_only([0.0] * 4)}, seed=2)
    d = difference(trained, control, "baseline_ratio", RATIO)
    assert d.estimate == pytest.approx(-0.061875, abs=0.005) and d.ci_low <= d.estimate <= d.ci_high < 0
    assert d.outcome is Outcome.SUPPORTED
    v = against(trained, control, "baseline_ratio", RATIO, evaluate(trained, "baseline_ratio", RATIO), None, "ctl")
    assert v.outcome is Outcome.SUPPORTED and "below its control ctl" in v.reason  # a ≤ claim: below, not above


def test_too_few_shared_replicates_leave_the_difference_undecided():
    trained, control = shares_frame(90, 0.9 + SPREAD), shares_frame(50, 0.5 + SPREAD[:9])
    d = difference(trained, control, "binomial_share", {"min_share": 0.6})
    assert d.outcome is Outcome.INCONCLUSIVE and d.n == 9 and "only 9 shared" in d.reason
    assert d.estimate == pytest.approx(0.4)
