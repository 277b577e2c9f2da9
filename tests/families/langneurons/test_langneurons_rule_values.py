"""The language-neuron rules' verdicts field by field, on frames whose every number is known by hand.

`test_langneurons_rules.py` checks the outcomes; here the estimate, interval, p, n, effect, threshold and the
reason's words are pinned too.  Most frames have no noise: every evaluation text then gives the same ΔBPB, the
bootstrap interval is the point itself and the bootstrap p is the smallest one 2,000 resamples can give,
(1 + 0) / 2001 corrected for n units as `bench.stats._boot_p` documents (Φ⁻¹ of it scaled by √((n−1)/n), then
the t distribution with n − 1 degrees of freedom).  The noisy frames compare the rules' bootstrap with the same
statistic written out by hand, one resample at a time.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.families.langneurons.probes import frame
from bench.stats import Outcome, _bootstrap, evaluate

sys.path.insert(0, str(Path(__file__).parent))
from test_langneurons_rules import STRONG, counts_frame, deact_frame, diag_only, layer_frame  # noqa: E402


def point_p(n: int, resamples: int = 2000) -> float:
    """The bootstrap p of a statistic that every resample puts on the claimed side, for n units."""
    z = stats.norm.ppf(1 / (1 + resamples))
    return float(stats.t.cdf(z * math.sqrt((n - 1) / n), n - 1))


def with_notes(f, *notes):
    """A copy of `f` carrying the probe's notes (which a rule that cannot decide repeats)."""
    g = f.copy()
    g.attrs = {"notes": list(notes)}
    return g


# ── diagonal_dominance ─────────────────────────────────────────────────────────────────────────────────────

def test_diagonal_dominance_fields_on_a_known_matrix():
    """STRONG: off-diagonal 0.01, diagonal 0.31, 0.21, 0.26, 0.41 (ΔBPB = Δbits / bytes exactly, no noise):
    every row dominant (share 1), margin = mean(diag − 0.01) = 0.2875."""
    v = evaluate(deact_frame({"lape": STRONG}, n=12, noise=0.0), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.SUPPORTED and v.reason == "all 2 conditions hold"
    assert (v.rule, v.metric, v.n, v.threshold, v.effect_name) == ("diagonal_dominance", "dominant_share", 12,
                                                                    "≥ 0.8", "margin")
    assert v.estimate == 1.0 and v.ci_low == 1.0 and v.ci_high == 1.0 and v.effect == pytest.approx(0.2)
    assert v.p_value == pytest.approx(point_p(12), rel=1e-9) and v.alpha == 0.05
    share, margin = v.parts
    assert share.reason == f"1 ≥ 0.8, 95% CI [1, 1], p = {point_p(12):.3g}"
    assert (margin.rule, margin.metric, margin.threshold, margin.effect_name) == (
        "diagonal_dominance", "diagonal_margin", "> 0", "margin")
    assert margin.estimate == pytest.approx(0.2875, abs=1e-12) and margin.effect == pytest.approx(0.2875, abs=1e-12)
    assert margin.ci_low == pytest.approx(0.2875, abs=1e-12) and margin.ci_high == pytest.approx(0.2875, abs=1e-12)


def test_diagonal_dominance_one_row_not_dominant_and_the_share_bound():
    """Row de's diagonal (0.005) is below its off-diagonal 0.01: share 3 of 4 = 0.75 < 0.8, while the margin
    (mean of −0.005, 0.2, 0.25, 0.4 = 0.21125) still holds; with min_share 0.7 both hold."""
    m = STRONG.copy()
    m[0, 0] = 0.005
    f = deact_frame({"lape": m}, n=12, noise=0.0)
    v = evaluate(f, "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.REFUTED and v.estimate == 0.75 and v.effect == pytest.approx(-0.05)
    assert v.parts[1].outcome is Outcome.SUPPORTED and v.parts[1].estimate == pytest.approx(0.21125, abs=1e-12)
    assert v.reason == "dominant_share: 0.75, 95% CI [0.75, 0.75] lies entirely outside ≥ 0.8"
    v = evaluate(f, "diagonal_dominance", {"method": "lape", "min_share": 0.7})
    assert v.outcome is Outcome.SUPPORTED and v.threshold == "≥ 0.7" and v.effect == pytest.approx(0.05)
    # an off-diagonal entry equal to the diagonal is not dominated by it (strictly greater needed)
    m = STRONG.copy()
    m[0, 1] = m[0, 0]
    assert evaluate(deact_frame({"lape": m}, n=12, noise=0.0), "diagonal_dominance",
                    {"method": "lape"}).estimate == 0.75


def test_diagonal_dominance_reads_only_its_method_and_needs_two_full_rows():
    f = deact_frame({"lape": STRONG, "rs": np.full((4, 4), 0.3) - np.diag([0.29] * 4)}, n=12, noise=0.0)
    assert evaluate(f, "diagonal_dominance", {"method": "lape"}).estimate == 1.0
    assert evaluate(f, "diagonal_dominance", {"method": "rs"}).estimate == 0.0
    v = evaluate(f, "diagonal_dominance", {"method": "lap"})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "no full ΔBPB matrix for method 'lap'"
    assert (v.rule, v.metric) == ("diagonal_dominance", "dominant_share")
    two = np.full((4, 4), np.nan)
    two[:2, :] = STRONG[:2, :]  # rows de and en evaluated on every language: two full rows suffice
    v = evaluate(deact_frame({"lape": two}, n=12, noise=0.0), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.SUPPORTED and v.parts[1].estimate == pytest.approx((0.30 + 0.20) / 2, abs=1e-12)
    one = np.full((4, 4), np.nan)
    one[:1, :] = STRONG[:1, :]
    v = evaluate(with_notes(deact_frame({"lape": one}, n=12), "a note", "another"), "diagonal_dominance",
                 {"method": "lape"})
    assert v.reason == "no full ΔBPB matrix for method 'lape' (a note; another)"


def test_diagonal_dominance_min_n_and_calibration():
    v = evaluate(deact_frame({"lape": STRONG}, n=6, noise=0.0), "diagonal_dominance", {"method": "lape", "min_n": 7})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 6 evaluation texts (< 7)"
    assert (v.rule, v.metric) == ("diagonal_dominance", "dominant_share")
    v = evaluate(deact_frame({"lape": STRONG}, n=6, noise=0.0), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.INCONCLUSIVE and "only 6 units, and the bootstrap is calibrated from 8" in v.reason
    assert evaluate(deact_frame({"lape": STRONG}, n=5, noise=0.0), "diagonal_dominance",
                    {"method": "lape"}).parts  # n = min_n = 5 decides (to INCONCLUSIVE below 8), no refusal


def _hand_bootstrap(f, stat_by_hand, n_resamples=300):
    """The rule's bootstrap machinery with a statistic computed resample by resample from per-text arrays."""
    def stat(m):
        m = np.asarray(m, float)
        flat = m.reshape(-1, m.shape[-2], m.shape[-1])
        return np.array([stat_by_hand(one) for one in flat]).reshape(m.shape[:-2])
    return stat


def test_diagonal_dominance_margin_interval_matches_a_by_hand_bootstrap():
    """With noise the interval comes from resampling texts jointly for every cell; the same bootstrap of the
    margin written cell by cell, from the per-text Δbits of the frame, gives the same interval."""
    f = deact_frame({"lape": STRONG}, n=12, noise=0.05, seed=3)
    v = evaluate(f, "diagonal_dominance", {"method": "lape", "n_resamples": 300})
    langs = ["de", "en", "es", "fr"]
    bits = f[f["metric"] == "bits"]
    base = {y: bits[(bits["method"] == "none") & (bits["language"] == y)].set_index("sample")["value"] for y in langs}
    cols = [bits[(bits["method"] == "lape") & (bits["set_lang"] == x) & (bits["language"] == y)]
            .set_index("sample")["value"] - base[y] for x in langs for y in langs]
    mat = np.column_stack([c.sort_index().to_numpy() for c in cols] + [np.full(12, 100.0)] * 4)

    def margin(one):  # one resample: (texts, 16 cells + 4 byte columns)
        cell = [[one[:, 4 * a + b].sum() / one[:, 16 + b].sum() for b in range(4)] for a in range(4)]
        return np.mean([cell[a][a] - (sum(cell[a]) - cell[a][a]) / 3 for a in range(4)])

    lo, hi, _ = _bootstrap(_hand_bootstrap(f, margin), mat, 0.95, 300, bca=False)
    assert v.parts[1].estimate == pytest.approx(margin(mat), rel=1e-9)
    assert (v.parts[1].ci_low, v.parts[1].ci_high) == pytest.approx((lo, hi), rel=1e-9)


# ── baseline_ratio ────────────────────────────────────────────────────────────────────────────────────────

RATIO = {"numerator": {"method": "rs", "entries": "diagonal"}, "denominator": {"method": "lape", "entries": "diagonal"}}


def test_baseline_ratio_fields_on_a_known_matrix():
    """rs diagonal 0.01, LAPE diagonal mean 0.2975: ratio 0.0336; d = 0.01 − 0.25 · 0.2975 = −0.064375."""
    f = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)}, n=12, noise=0.0)
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.25})
    assert v.outcome is Outcome.SUPPORTED and (v.rule, v.metric, v.n) == ("baseline_ratio", "ratio", 12)
    assert v.estimate == pytest.approx(0.01 / 0.2975, rel=1e-9) and v.ci_low is None and v.ci_high is None
    assert v.effect == pytest.approx(-0.064375, rel=1e-9) and v.effect_name == "num − 0.25·den"
    assert v.threshold == "≤ 0.25 × baseline" and v.p_value == pytest.approx(point_p(12), rel=1e-9)
    assert v.reason == ("ratio 0.0336 (0.01 vs 0.2975 ΔBPB); num − 0.25·den = -0.06438, 95% CI [-0.06438, "
                        f"-0.06438], p = {point_p(12):.3g}")
    v = evaluate(f, "baseline_ratio", {**RATIO, "min": 5.0})
    assert v.outcome is Outcome.REFUTED and v.threshold == "≥ 5 × baseline" and v.p_value == 1.0
    assert v.effect == pytest.approx(0.01 - 5 * 0.2975, rel=1e-9) and v.effect_name == "num − 5·den"
    assert v.reason.endswith("lies entirely outside ≥ 5 × baseline")


def test_baseline_ratio_zero_denominator_and_the_bound_itself():
    f = deact_frame({"lape": diag_only([0.0] * 4), "rs": diag_only([0.02] * 4)}, n=12, noise=0.0)
    v = evaluate(f, "baseline_ratio", {**RATIO, "min": 1.0})
    assert v.estimate is None and v.effect == pytest.approx(0.02) and v.reason.startswith("ratio inf (0.02 vs 0")
    # numerator exactly 0.5 × denominator: d = 0 lies on the bound, not on the claimed side
    f = deact_frame({"lape": diag_only([0.2] * 4), "rs": diag_only([0.1] * 4)}, n=12, noise=0.0)
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.5})
    assert v.outcome is not Outcome.SUPPORTED and v.estimate == pytest.approx(0.5)


def test_baseline_ratio_refusals():
    f = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)}, n=6, noise=0.0)
    with pytest.raises(ValueError, match="^baseline_ratio needs exactly one of 'min' and 'max'$"):
        evaluate(f, "baseline_ratio", RATIO)
    with pytest.raises(ValueError, match="^baseline_ratio needs exactly one of 'min' and 'max'$"):
        evaluate(f, "baseline_ratio", {**RATIO, "min": 1.0, "max": 2.0})
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.25, "min_n": 7})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 6 evaluation texts (< 7)"
    assert (v.rule, v.metric) == ("baseline_ratio", "ratio")
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.25, "min_n": 6})
    assert "only 6 units, and the bootstrap is calibrated from 8" in v.reason
    bad = {**RATIO, "numerator": {"method": "lap", "entries": "diagonal"}, "max": 0.25}
    v = evaluate(with_notes(f, "n1"), "baseline_ratio", bad)
    assert v.reason == "no ΔBPB cells for the numerator {'method': 'lap', 'entries': 'diagonal'} (n1)"
    bad = {**RATIO, "denominator": {"method": "lape", "entries": "off_diagonal", "exclude": LANGS4}, "max": 0.25}
    v = evaluate(f, "baseline_ratio", bad)
    assert v.reason.startswith("no ΔBPB cells for the denominator")


LANGS4 = ["de", "en", "es", "fr"]


def test_baseline_ratio_selectors_default_to_the_diagonal_and_read_entries():
    m = np.full((4, 4), 0.04)
    np.fill_diagonal(m, 0.2)
    f = deact_frame({"lape": m}, n=12, noise=0.0)
    v = evaluate(f, "baseline_ratio", {"numerator": {"method": "lape"}, "denominator": {"method": "lape"},
                                       "min": 0.5})
    assert v.estimate == pytest.approx(1.0)  # both default to the diagonal
    v = evaluate(f, "baseline_ratio", {"numerator": {"method": "lape", "entries": "all"},
                                       "denominator": {"method": "lape", "entries": "off_diagonal"}, "min": 0.5})
    assert v.estimate == pytest.approx((4 * 0.2 + 12 * 0.04) / 16 / 0.04)
    v = evaluate(f, "baseline_ratio", {"numerator": {"method": "lape", "languages": ["de", "en"]},
                                       "denominator": {"method": "lape", "entries": "off_diagonal",
                                                       "exclude": ["de"]}, "min": 0.5})
    assert v.estimate == pytest.approx(0.2 / 0.04)


# ── largest_of ────────────────────────────────────────────────────────────────────────────────────────────

def test_largest_of_fields_on_known_means():
    """Diagonal means: lape 0.2975, lap 0.1, rs 0; the runner-up of lape is lap."""
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.1] * 4), "rs": diag_only([0.0] * 4)}, n=12, noise=0.0)
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap", "rs"]})
    assert v.outcome is Outcome.SUPPORTED and (v.rule, v.metric, v.n) == ("largest_of", "mean_delta_bpb", 12)
    assert v.estimate == pytest.approx(0.1975) and v.effect == pytest.approx(0.1975)
    assert (v.ci_low, v.ci_high) == pytest.approx((0.1975, 0.1975))
    assert v.effect_name == "lape − lap" and v.threshold == "lape largest, CIs apart"
    assert v.p_value == pytest.approx(point_p(12), rel=1e-9)
    assert v.reason == ("mean ΔBPB: lape 0.2975, lap 0.1, rs 0; lape CI [0.2975, 0.2975] vs runner-up lap "
                        "[0.1, 0.1] do not overlap")
    v = evaluate(f, "largest_of", {"target": "rs", "methods": ["lape", "lap"]})
    assert v.outcome is Outcome.REFUTED and v.effect_name == "rs − lape" and v.estimate == pytest.approx(-0.2975)
    assert v.reason == "mean ΔBPB: lape 0.2975, lap 0.1, rs 0; lape beats rs (difference CI [-0.2975, -0.2975])"
    assert v.p_value == 1.0


def test_largest_of_ties_missing_methods_and_few_texts():
    f = deact_frame({"lape": diag_only([0.1] * 4), "lap": diag_only([0.1] * 4)}, n=12, noise=0.0)
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"]})
    assert v.outcome is Outcome.INCONCLUSIVE and v.estimate == 0.0
    assert v.reason == ("mean ΔBPB: lape 0.1, lap 0.1; lape CI [0.1, 0.1] vs runner-up lap [0.1, 0.1]; "
                        "p = 1")
    v = evaluate(with_notes(f, "n"), "largest_of", {"target": "lape", "methods": ["lap", "pv"]})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "no ΔBPB cells for ['pv'] (n)"
    assert (v.rule, v.metric) == ("largest_of", "mean_delta_bpb")
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"], "min_n": 13})
    assert v.reason == "only 12 evaluation texts (< 13)"
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.1] * 4)}, n=7, noise=0.0)
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"], "min_n": 7})
    assert v.outcome is Outcome.INCONCLUSIVE
    assert v.reason.endswith("do not overlap: only 7 texts, and the bootstrap is calibrated from 8")
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.1] * 4)}, n=8, noise=0.0)
    assert evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"]}).outcome is Outcome.SUPPORTED


def test_largest_of_reads_the_entries_asked_for():
    off = np.full((4, 4), 0.2)
    np.fill_diagonal(off, 0.0)
    f = deact_frame({"lape": STRONG, "lap": off}, n=12, noise=0.0)
    assert evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"]}).outcome is Outcome.SUPPORTED
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"], "entries": "off_diagonal"})
    assert v.outcome is Outcome.REFUTED and v.estimate == pytest.approx(0.01 - 0.2)


# ── related_exceeds_unrelated ─────────────────────────────────────────────────────────────────────────────

def test_related_exceeds_unrelated_fields():
    """Rows es and fr: relative 0.1, unrelated languages (de, en) 0.01 → 0.09."""
    m = np.full((4, 4), 0.01)
    np.fill_diagonal(m, 0.3)
    m[2, 3] = m[3, 2] = 0.1
    f = deact_frame({"lape": m}, n=12, noise=0.0)
    v = evaluate(f, "related_exceeds_unrelated", {"method": "lape", "groups": [["es", "fr"]]})
    assert v.outcome is Outcome.SUPPORTED and (v.rule, v.metric, v.n) == (
        "related_exceeds_unrelated", "related_minus_unrelated", 12)
    assert v.estimate == pytest.approx(0.09) and v.effect == pytest.approx(0.09) and v.threshold == "> 0"
    assert v.effect_name == "ΔBPB difference" and v.p_value == pytest.approx(point_p(12), rel=1e-9)
    # es's row alone with a different unrelated value: the terms are averaged over rows
    m[2, 0] = m[2, 1] = 0.05
    v = evaluate(deact_frame({"lape": m}, n=12, noise=0.0), "related_exceeds_unrelated",
                 {"method": "lape", "groups": [["es", "fr"]]})
    assert v.estimate == pytest.approx(((0.1 - 0.05) + (0.1 - 0.01)) / 2)


def test_related_exceeds_unrelated_refusals():
    m = np.full((4, 4), 0.01)
    f = deact_frame({"lape": m}, n=6, noise=0.0)
    v = evaluate(with_notes(f, "x"), "related_exceeds_unrelated", {"method": "lape", "groups": [LANGS4]})
    assert v.outcome is Outcome.INCONCLUSIVE and (v.rule, v.metric) == ("related_exceeds_unrelated",
                                                                         "related_minus_unrelated")
    assert v.reason == "no row of method 'lape' has both related and unrelated languages evaluated (x)"
    v = evaluate(f, "related_exceeds_unrelated", {"method": "lape", "groups": [["es", "fr"]], "min_n": 7})
    assert v.reason == "only 6 texts (< 7)"
    only = diag_only([0.3] * 4)
    only[2, 3] = 0.1  # row es has a relative but no unrelated language evaluated
    v = evaluate(deact_frame({"lape": only}, n=12, noise=0.0), "related_exceeds_unrelated",
                 {"method": "lape", "groups": [["es", "fr"]]})
    assert v.reason.startswith("no row of method 'lape'")


# ── binomial_share ────────────────────────────────────────────────────────────────────────────────────────

def test_binomial_share_fields_from_the_replicates():
    """40 replicate shares 0.85 … 0.95 (of 1,000 each) around 90 of 100: centred on 0.9 and ÷ √2; interval their
    2.5% and 97.5% quantiles; p = (1 + #{< 0.6}) / 41."""
    v = evaluate(layer_frame(90, 100), "binomial_share", {"min_share": 0.6})
    raw = np.round(0.9 + np.linspace(-0.05, 0.05, 40), 3)
    shares = 0.9 + (raw - raw.mean()) / math.sqrt(2)
    assert v.outcome is Outcome.SUPPORTED and (v.rule, v.metric, v.n) == ("binomial_share", "edge_share", 40)
    assert v.estimate == pytest.approx(0.9) and v.p_value == pytest.approx(1 / 41)
    assert (v.ci_low, v.ci_high) == pytest.approx((np.quantile(shares, 0.025), np.quantile(shares, 0.975)))
    assert v.effect == pytest.approx(0.5) and v.effect_name == "share − uniform share" and v.threshold == "≥ 0.6"
    assert v.reason == (f"0.9 ≥ 0.6, 95% CI [{v.ci_low:.4g}, {v.ci_high:.4g}], p = 0.0244 (p and CI over 40 units "
                        "'split-half replicate'); 90 of 100 neurons; replicate shares 0.85–0.95 (halves, before "
                        "centring and ÷√2); uniform spread would give 0.4; replicate totals 1000–1000 neurons")
    v = evaluate(layer_frame(90, 100), "binomial_share", {"min_share": 0.6, "confidence": 0.5})
    assert (v.ci_low, v.ci_high) == pytest.approx((np.quantile(shares, 0.25), np.quantile(shares, 0.75)))
    assert "50% CI" in v.reason
    # the share bound itself: 13 replicates below 0.9 + … − 0.9 + 0.6 count as wrong
    v = evaluate(layer_frame(90, 100), "binomial_share", {"min_share": 0.9})
    assert v.p_value == pytest.approx((1 + np.sum(shares < 0.9)) / 41)


def test_binomial_share_refusals_and_jaccard():
    v = evaluate(layer_frame(3, 9), "binomial_share", {"min_share": 0.6})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 9 selected neurons (< 10)"
    assert (v.rule, v.metric, v.n, v.estimate) == ("binomial_share", "edge_share", 9, pytest.approx(1 / 3))
    assert evaluate(layer_frame(3, 10), "binomial_share", {"min_share": 0.6}).n == 40  # n = min_n decides
    v = evaluate(layer_frame(900, 1000, reps=9), "binomial_share", {"min_share": 0.6})
    assert v.reason == ("share 0.9 (900 of 1000 neurons) but only 9 split-half replicates (< 10; set split_halves): "
                        "the selection's uncertainty is unknown")
    assert (v.rule, v.metric, v.n, v.estimate) == ("binomial_share", "edge_share", 9, 0.9)
    assert evaluate(layer_frame(900, 1000, reps=10), "binomial_share", {"min_share": 0.6}).n == 10
    v = evaluate(layer_frame(900, 1000), "binomial_share", {"min_share": 0.6, "method": "plnd"})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "the frame has no rows for {'method': 'plnd'}"
    f = layer_frame(90, 100)
    jac = frame([("lape", None, None, None, None, r, "selection_jaccard", j) for r, j in enumerate([0.5, 0.7])])
    v = evaluate(pd.concat([f, jac], ignore_index=True), "binomial_share", {"min_share": 0.6})
    assert v.reason.endswith("; Jaccard of the halves' sets 0.60 (0.50–0.70)")


def test_binomial_share_leaves_out_empty_replicates():
    f = layer_frame(90, 100, reps=12)
    f.loc[(f["sample"] == 0) & (f["metric"] == "total_count"), "value"] = 0
    f.loc[(f["sample"] == 0) & (f["metric"] == "edge_count"), "value"] = 0
    assert evaluate(f, "binomial_share", {"min_share": 0.6}).n == 11


# ── arg_extreme ───────────────────────────────────────────────────────────────────────────────────────────

def test_arg_extreme_exact_fields():
    p = {"metric": "n_selected", "where": {"method": "lape"}, "over": "set_lang", "extreme": "min", "expect": ["en"]}
    v = evaluate(counts_frame({"en": 3, "de": 9, "fr": 7}), "arg_extreme", p)
    assert v.reason == "argmin = en (de: 9, en: 3, fr: 7; exact)" and v.estimate == 3.0 and v.n == 3
    assert (v.rule, v.metric, v.threshold) == ("arg_extreme", "n_selected", "argmin of n_selected over set_lang in ['en']")
    assert v.sensitivity is None and v.p_value is None
    v = evaluate(counts_frame({"en": 8, "de": 9, "fr": 7}), "arg_extreme", p)
    assert v.reason == "argmin = fr (de: 9, en: 8, fr: 7; exact)" and v.estimate == 7.0
    assert v.sensitivity == "exact: all 3 values of set_lang measured"
    v = evaluate(counts_frame({"en": 7, "de": 9, "fr": 7}), "arg_extreme", p)
    assert v.reason == "tie at 7 between ['en', 'fr'] (de: 9, en: 7, fr: 7)" and v.estimate == 7.0 and v.n == 3
    assert (v.rule, v.metric, v.threshold) == ("arg_extreme", "n_selected", "argmin of n_selected over set_lang in ['en']")
    # a tie between values none of which is expected is a plain REFUTED: the first winner is reported
    v = evaluate(counts_frame({"en": 9, "de": 7, "fr": 7}), "arg_extreme", p)
    assert v.outcome is Outcome.REFUTED and v.reason == "argmin = de (de: 7, en: 9, fr: 7; exact)"
    v = evaluate(counts_frame({"en": 3, "de": 9, "fr": 7}), "arg_extreme", {**p, "extreme": "max", "expect": ["de"]})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 9.0 and v.reason.startswith("argmax = de")
    v = evaluate(counts_frame({"en": 3}), "arg_extreme", {**p, "metric": "n_other"})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "the frame has no rows for {'method': 'lape'}"
    assert (v.rule, v.metric) == ("arg_extreme", "n_other")


def layer_rows(means_by_sample):
    return frame([(None, None, None, l, None, s, "m", v)
                  for s, means in enumerate(means_by_sample) for l, v in enumerate(means)])


def test_arg_extreme_band_exact_positions():
    """Layers 0..10 (positions l / 10): the maximum at layer 2 lies in [0.2, 0.8] (its edge), at layer 1 not."""
    full = lambda peak: frame([(None, None, None, l, None, None, "m", -abs(l - peak)) for l in range(11)])  # noqa: E731
    p = {"metric": "m", "over": "layer", "band": [0.2, 0.8]}
    assert evaluate(full(2), "arg_extreme", p).outcome is Outcome.SUPPORTED
    assert evaluate(full(8), "arg_extreme", p).outcome is Outcome.SUPPORTED
    assert evaluate(full(1), "arg_extreme", p).outcome is Outcome.REFUTED
    assert evaluate(full(9), "arg_extreme", p).outcome is Outcome.REFUTED
    # the exact check reads the rows without a unit only
    mixed = frame([(None, None, None, l, None, None, "m", -abs(l - 5)) for l in range(11)]
                  + [(None, None, None, l, None, 0, "m", -abs(l - 0)) for l in range(11)])
    assert evaluate(mixed, "arg_extreme", p).estimate == 0.0 and "argmax = 5" in evaluate(mixed, "arg_extreme", p).reason


def test_arg_extreme_bootstrap_fields():
    """20 texts × 10 layers, every text peaking at layer 5 (or 9): no variation in the argmax, so the interval
    of positions is the point and p = 1/2001 (inside every time) or 1 (never)."""
    rows = [[1.0 - 0.05 * abs(l - 5) for l in range(10)] for _ in range(20)]
    p = {"metric": "m", "over": "layer", "extreme": "max", "band": [0.2, 0.8], "unit": "sample"}
    v = evaluate(layer_rows(rows), "arg_extreme", p)
    assert v.outcome is Outcome.SUPPORTED and (v.estimate, v.ci_low, v.ci_high, v.n) == (5.0, 5.0, 5.0, 20)
    assert v.p_value == pytest.approx(1 / 2001) and v.effect == 1.0 and v.effect_name == "bootstrap share inside"
    assert v.reason == "argmax layer = 5 (bootstrap 100% inside; positions [5, 5]), p = 0.0005"
    assert v.threshold == "argmax of m over layer in [0.2, 0.8]" and v.rule == "arg_extreme"
    rows9 = [[1.0 - 0.05 * abs(l - 9) for l in range(10)] for _ in range(20)]
    v = evaluate(layer_rows(rows9), "arg_extreme", p)
    assert v.outcome is Outcome.REFUTED and v.p_value == 1.0 and v.effect == 0.0
    assert v.sensitivity == "the layer falls outside [0.2, 0.8] in 100% of 2000 resamples"
    v = evaluate(layer_rows(rows[:7]), "arg_extreme", p)
    assert v.outcome is Outcome.INCONCLUSIVE and v.n == 7
    assert v.reason == ("argmax layer = 5 (bootstrap 100% inside; positions [5, 5]): only 7 units, and the "
                        "bootstrap is calibrated from 8, p = 0.0005")
    assert evaluate(layer_rows(rows[:8]), "arg_extreme", p).outcome is Outcome.SUPPORTED
    v = evaluate(layer_rows([[-x for x in r] for r in rows]), "arg_extreme", {**p, "extreme": "min"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 5.0


def test_arg_extreme_bootstrap_share_inside_is_counted_per_resample():
    """12 texts peak at layer 5, 8 at layer 9: the mean profile peaks at 5 and a resample puts the peak outside the
    band only when it draws mostly layer-9 texts; the share inside and p are the bootstrap's own counts."""
    rows = [[1.0 - 0.05 * abs(l - (5 if s < 12 else 9)) for l in range(10)] for s in range(20)]
    p = {"metric": "m", "over": "layer", "extreme": "max", "band": [0.2, 0.8], "unit": "sample", "n_resamples": 400}
    v = evaluate(layer_rows(rows), "arg_extreme", p)
    mat = np.array(rows)
    _, _, boot = _bootstrap(lambda m: np.argmax(np.asarray(m).mean(axis=-2), axis=-1).astype(float), mat, 0.95, 400,
                            bca=False)
    inside = (boot / 9 >= 0.2) & (boot / 9 <= 0.8)
    assert v.effect == pytest.approx(inside.mean()) and v.p_value == pytest.approx((1 + np.sum(~inside)) / 401)
    assert v.estimate == 5.0


def test_arg_extreme_over_replicates_fields():
    rows = [("lape", k, None, None, None, None, "n_selected", v) for k, v in {"en": 3, "de": 9, "fr": 7}.items()]
    for r in range(30):
        counts = {"en": 3, "de": 9, "fr": 7} if r >= 2 else {"en": 8, "de": 9, "fr": 7}
        rows += [("lape", k, None, None, None, r, "n_selected", v) for k, v in counts.items()]
    p = {"metric": "n_selected", "over": "set_lang", "extreme": "min", "expect": ["en"], "unit": "sample",
         "replicates": True}
    v = evaluate(frame(rows), "arg_extreme", p)
    assert v.reason == ("argmin set_lang = en on all selection text; per split-half replicate: en 28×, fr 2× of 30 "
                        "(93% inside), p = 0.0968 (over 30 split-half replicates)")
    assert (v.rule, v.metric, v.estimate, v.n, v.effect_name) == ("arg_extreme", "n_selected", 3.0, 30,
                                                                   "replicate share inside")
    assert v.threshold == "argmin of n_selected over set_lang in ['en']" and v.ci_low is None
    v = evaluate(frame(rows), "arg_extreme", {**p, "extreme": "max", "expect": ["de"]})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 9.0 and v.p_value == pytest.approx(1 / 31)
    v = evaluate(frame(rows), "arg_extreme", {**p, "expect": ["de"]})  # every replicate and the full data: not de
    assert v.outcome is Outcome.REFUTED and v.sensitivity == "30 of 30 split-half replicates put it outside"
    v = evaluate(frame([r for r in rows if r[5] is None or r[5] < 4]), "arg_extreme", p)
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "only 4 replicates" and v.n == 4
    five = evaluate(frame([r for r in rows if r[5] is None or 2 <= r[5] < 7]), "arg_extreme", p)
    assert five.n == 5 and five.p_value == pytest.approx(1 / 6)
    # without full-selection rows the replicates' majority stands in for the estimate
    reps_only = [r for r in rows if r[5] is not None]
    v = evaluate(frame(reps_only), "arg_extreme", p)
    assert v.estimate is None and "argmin set_lang = None" in v.reason and v.outcome is Outcome.INCONCLUSIVE


# ── the survivors of the mutation run (docs/mutation.md): edges the tests above did not reach ───────────────

def test_a_frame_without_notes_is_refused_plainly():
    f = deact_frame({"lape": diag_only([0.3] * 4)}, n=12, noise=0.0)
    f.attrs = {}
    v = evaluate(f, "diagonal_dominance", {"method": "lape"})
    assert v.reason == "no full ΔBPB matrix for method 'lape'"


def rep_rows(full: dict[str, int] | None, per_rep: list[dict[str, int]]):
    rows = [] if full is None else [("lape", k, None, None, None, None, "n_selected", v) for k, v in full.items()]
    for r, counts in enumerate(per_rep):
        rows += [("lape", k, None, None, None, r, "n_selected", v) for k, v in counts.items()]
    return frame(rows)


EN_LOW, FR_LOW = {"en": 3, "de": 9, "fr": 7}, {"en": 8, "de": 9, "fr": 7}
REP = {"metric": "n_selected", "over": "set_lang", "extreme": "min", "expect": ["en"], "unit": "sample",
       "replicates": True}


def test_replicate_argmax_fields_refusal_and_alpha():
    v = evaluate(rep_rows(EN_LOW, [EN_LOW] * 4), "arg_extreme", {**REP, "alpha": 0.1})
    assert v.reason == "only 4 replicates" and (v.rule, v.metric, v.n, v.alpha) == ("arg_extreme", "n_selected", 4, 0.1)
    assert v.threshold == "argmin of n_selected over set_lang in ['en']"
    v = evaluate(rep_rows(EN_LOW, [EN_LOW] * 30), "arg_extreme", {**REP, "alpha": 0.1})
    assert v.outcome is Outcome.SUPPORTED and v.alpha == 0.1 and v.sensitivity is None
    v = evaluate(rep_rows(EN_LOW, [EN_LOW] * 30), "arg_extreme", {**REP, "extreme": "max", "expect": ["de"]})
    assert v.reason.startswith("argmax set_lang = de on all selection text")


def test_replicate_argmax_the_full_data_decides_and_the_replicates_weigh_it():
    # the full selection puts the minimum at en, every replicate at fr: not REFUTED (the estimate is inside), not
    # SUPPORTED (p = 31/31)
    v = evaluate(rep_rows(EN_LOW, [FR_LOW] * 30), "arg_extreme", REP)
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value == 1.0 and v.effect == 0.0
    # without full-selection rows the replicates' majority stands in: all inside → SUPPORTED, p = 1/31
    v = evaluate(rep_rows(None, [EN_LOW] * 30), "arg_extreme", REP)
    assert v.outcome is Outcome.SUPPORTED and v.estimate is None and v.p_value == pytest.approx(1 / 31)
    v = evaluate(rep_rows(None, [FR_LOW] * 30), "arg_extreme", REP)
    assert v.outcome is Outcome.REFUTED and v.sensitivity == "30 of 30 split-half replicates put it outside"
    # p exactly α (19 replicates, all inside: 1/20) is not below it
    v = evaluate(rep_rows(EN_LOW, [EN_LOW] * 19), "arg_extreme", REP)
    assert v.p_value == pytest.approx(0.05) and v.outcome is Outcome.INCONCLUSIVE
    # a share inside of exactly α (1 of 20) still refutes a full-data winner outside
    v = evaluate(rep_rows(FR_LOW, [EN_LOW] + [FR_LOW] * 19), "arg_extreme", REP)
    assert v.effect == pytest.approx(0.05) and v.outcome is Outcome.REFUTED


def test_replicate_argmax_with_another_unit_column():
    """Replicates named by a `rep` column in a frame that has no `sample` column: no full-selection rows are
    found, and the replicates' majority decides."""
    rows = [{"metric": "n_selected", "set_lang": k, "rep": r, "value": v}
            for r in range(30) for k, v in EN_LOW.items()]
    rows += [{"metric": "n_selected", "set_lang": k, "rep": None, "value": v} for k, v in FR_LOW.items()]
    v = evaluate(pd.DataFrame(rows), "arg_extreme", {**REP, "unit": "rep"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate is None and v.n == 30


def test_arg_extreme_exact_alpha_and_positions_off_zero():
    p = {"metric": "n_selected", "where": {"method": "lape"}, "over": "set_lang", "extreme": "min", "expect": ["en"],
         "alpha": 0.1}
    assert evaluate(counts_frame({"en": 3, "de": 9}), "arg_extreme", p).alpha == 0.1
    assert evaluate(counts_frame({"en": 3, "de": 3}), "arg_extreme", p).alpha == 0.1  # the tie
    # layers 10..20: relative positions (layer − 10) / 10
    full = lambda peak: frame([(None, None, None, l, None, None, "m", -abs(l - peak)) for l in range(10, 21)])  # noqa: E731
    band = {"metric": "m", "over": "layer", "band": [0.2, 0.8]}
    assert evaluate(full(12), "arg_extreme", band).outcome is Outcome.SUPPORTED
    assert evaluate(full(11), "arg_extreme", band).outcome is Outcome.REFUTED
    assert evaluate(full(19), "arg_extreme", band).outcome is Outcome.REFUTED
    # one layer only: its relative position is 0
    one = frame([(None, None, None, 7, None, None, "m", 1.0)])
    assert evaluate(one, "arg_extreme", {"metric": "m", "over": "layer", "band": [0.0, 0.5]}).outcome is Outcome.SUPPORTED
    assert evaluate(one, "arg_extreme", {"metric": "m", "over": "layer", "band": [0.1, 0.5]}).outcome is Outcome.REFUTED


def test_arg_extreme_bootstrap_edges():
    p = {"metric": "m", "over": "layer", "extreme": "max", "band": [0.2, 0.8], "unit": "sample"}
    rows = [[1.0 - 0.05 * abs(l - 5) for l in range(10)] for _ in range(20)]
    v = evaluate(layer_rows(rows), "arg_extreme", p)
    assert v.sensitivity is None
    v = evaluate(layer_rows(rows), "arg_extreme", {**p, "n_resamples": 19})  # p = 1/20 = α: not below it
    assert v.p_value == pytest.approx(0.05) and v.outcome is Outcome.INCONCLUSIVE
    # 12 texts peak at layer 5 (inside), 8 at layer 1 (outside): the estimate is inside, the interval's low end
    # outside, and p well above α — INCONCLUSIVE, neither SUPPORTED nor REFUTED
    mixed = [[1.0 - 0.05 * abs(l - (5 if s < 12 else 1)) for l in range(10)] for s in range(20)]
    v = evaluate(layer_rows(mixed), "arg_extreme", {**p, "n_resamples": 400})
    assert v.estimate == 5.0 and v.ci_low == 1.0 and v.p_value > 0.05 and v.outcome is Outcome.INCONCLUSIVE


def test_arg_extreme_refutes_only_when_few_resamples_land_inside():
    """Peaks (1 at one layer, 0 elsewhere) at layers 1 and 9 in 8 texts each and at 5 in k texts; band [0.4, 0.6]
    holds layers 4 and 5 only.  The interval of positions runs from 1 to 9, both outside; whether the claim is
    refuted depends on how many resamples still put the maximum at 5: 2.75% with k = 4 (REFUTED), 11.75% with
    k = 6 (INCONCLUSIVE)."""
    p = {"metric": "m", "over": "layer", "extreme": "max", "band": [0.4, 0.6], "unit": "sample", "n_resamples": 400}
    for k, outcome, share in ((4, Outcome.REFUTED, 0.0275), (6, Outcome.INCONCLUSIVE, 0.1175)):
        peaks = [1] * 8 + [9] * 8 + [5] * k
        v = evaluate(layer_rows([[1.0 if l == pk else 0.0 for l in range(10)] for pk in peaks]), "arg_extreme", p)
        assert (v.ci_low, v.ci_high) == (1.0, 9.0) and v.effect == pytest.approx(share) and v.outcome is outcome


# ── the survivors of the second mutation run (docs/mutation.md) ──────────────────────────────────────────

def _lang_cols(f, method="lape", langs=LANGS4, n=12):
    """The per-text Δbits columns of every (x, y) cell of `method`, then the four byte columns, as the rules
    lay them out (cells sorted by set language, then language)."""
    bits = f[f["metric"] == "bits"]
    base = {y: bits[(bits["method"] == "none") & (bits["language"] == y)].set_index("sample")["value"] for y in langs}
    cols = [bits[(bits["method"] == method) & (bits["set_lang"] == x) & (bits["language"] == y)]
            .set_index("sample")["value"] - base[y] for x in langs for y in langs]
    return np.column_stack([c.sort_index().to_numpy() for c in cols] + [np.full(n, 100.0)] * 4)


def test_related_exceeds_unrelated_interval_matches_a_by_hand_bootstrap():
    """With noise: es and fr are related; each row's mean over its relatives minus its mean over de and en,
    averaged over the two rows, written resample by resample (a percentile interval, not BCa)."""
    m = np.full((4, 4), 0.01)
    np.fill_diagonal(m, 0.3)
    m[2, 3] = m[3, 2] = 0.1
    f = deact_frame({"lape": m}, n=12, noise=0.05, seed=5)
    v = evaluate(f, "related_exceeds_unrelated", {"groups": [["es", "fr"]], "n_resamples": 300,
                                                   "confidence": 0.9})
    mat = _lang_cols(f)

    def diff(one):
        cell = lambda a, b: one[:, 4 * a + b].sum() / one[:, 16 + b].sum()  # noqa: E731
        return np.mean([cell(2, 3) - (cell(2, 0) + cell(2, 1)) / 2, cell(3, 2) - (cell(3, 0) + cell(3, 1)) / 2])

    lo, hi, _ = _bootstrap(_hand_bootstrap(f, diff), mat, 0.9, 300, bca=False)
    assert v.estimate == pytest.approx(diff(mat), rel=1e-9)
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi), rel=1e-9) and "90% CI" in v.reason
    assert v.alpha == 0.05  # the default, with `method` left at its default, lape


def test_related_exceeds_unrelated_min_n_is_the_least_count_decided():
    m = np.full((4, 4), 0.01)
    m[2, 3] = m[3, 2] = 0.1
    f = deact_frame({"lape": m}, n=5, noise=0.0)
    v = evaluate(f, "related_exceeds_unrelated", {"groups": [["es", "fr"]]})  # min_n 5 by default
    assert v.reason.endswith("only 5 units, and the bootstrap is calibrated from 8")
    v = evaluate(f, "related_exceeds_unrelated", {"groups": [["es", "fr"]], "min_n": 6, "alpha": 0.1})
    assert v.reason == "only 5 texts (< 6)"
    assert (v.rule, v.metric, v.outcome) == ("related_exceeds_unrelated", "related_minus_unrelated",
                                             Outcome.INCONCLUSIVE)


def test_largest_of_defaults_and_its_refusal_fields():
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.1] * 4)}, n=5, noise=0.0)
    v = evaluate(f, "largest_of", {"methods": ["lap"]})  # target lape, min_n 5, α 0.05 by default
    assert v.reason.endswith("do not overlap: only 5 texts, and the bootstrap is calibrated from 8")
    assert v.effect_name == "lape − lap" and v.alpha == 0.05
    v = evaluate(f, "largest_of", {"methods": ["lap"], "min_n": 6})
    assert v.reason == "only 5 evaluation texts (< 6)" and (v.rule, v.metric) == ("largest_of", "mean_delta_bpb")


def share_frame(full: tuple[int, int], reps: list[tuple[int, int]], uniform: float = 0.4) -> pd.DataFrame:
    rows = [("lape", None, None, None, None, None, "edge_count", full[0]),
            ("lape", None, None, None, None, None, "total_count", full[1]),
            ("lape", None, None, None, None, None, "uniform_share", uniform)]
    for r, (e, t) in enumerate(reps):
        rows += [("lape", None, None, None, None, r, "edge_count", e), ("lape", None, None, None, None, r, "total_count", t)]
    return frame(rows)


def test_binomial_share_counts_a_replicate_on_the_bound_as_holding():
    """Replicate shares 1/2, 3/4, 1 around 3 of 4: centred, the middle one is exactly 0.75, which holds "≥ 0.75":
    p = (1 + 1) / 4."""
    v = evaluate(share_frame((3, 4), [(2, 4), (3, 4), (4, 4)]), "binomial_share",
                 {"min_share": 0.75, "min_n": 4, "min_replicates": 3})
    assert v.p_value == pytest.approx(2 / 4) and v.n == 3


def test_binomial_share_centres_the_replicates_on_the_full_share_without_mirroring():
    """Skewed replicates (1/2, 1/2, 1 of 1): the values are the full share plus each deviation ÷ √2 (not minus)."""
    reps = [(1, 2), (1, 2), (2, 2)] * 4
    v = evaluate(share_frame((9, 10), reps), "binomial_share", {"min_share": 0.6})
    raw = np.array([e / t for e, t in reps])
    shares = 0.9 + (raw - raw.mean()) / math.sqrt(2)
    assert (v.ci_low, v.ci_high) == pytest.approx((np.quantile(shares, 0.025), np.quantile(shares, 0.975)))
    assert v.threshold == "≥ 0.6"
    default = evaluate(share_frame((9, 10), reps), "binomial_share", {})  # min_share 0.6 by default
    assert default.threshold == "≥ 0.6" and default.p_value == v.p_value


def test_binomial_share_few_replicates_are_decided_exactly_not_as_a_bootstrap():
    """Seven replicates all above the bound: p = 1/8, which α = 0.2 accepts; the replicates are the selection's
    own spread, not a bootstrap, so no bootstrap floor of 8 units applies."""
    reps = [(9, 10)] * 7
    v = evaluate(share_frame((9, 10), reps), "binomial_share", {"min_share": 0.6, "min_replicates": 7, "alpha": 0.2})
    assert v.outcome is Outcome.SUPPORTED and v.p_value == pytest.approx(1 / 8)
    ten = evaluate(share_frame((9, 10), [(9, 10)] * 10), "binomial_share", {"min_share": 0.6})
    assert ten.reason.startswith("0.9, 95% CI [0.9, 0.9] vs ≥ 0.6, p = 0.0909")  # 10 with min_replicates 10: decided


def test_binomial_share_refusals_carry_alpha_and_names():
    few = evaluate(layer_frame(3, 9), "binomial_share", {"min_share": 0.6, "alpha": 0.1})
    assert few.alpha == 0.1
    none = evaluate(share_frame((0, 0), [(0, 1)] * 12), "binomial_share", {"min_share": 0.6, "alpha": 0.1})
    assert none.reason == "only 0 selected neurons (< 10)" and none.estimate is None and none.alpha == 0.1
    reps = evaluate(layer_frame(900, 1000, reps=9), "binomial_share", {"min_share": 0.6, "alpha": 0.1})
    assert reps.alpha == 0.1 and reps.n == 9
    gone = evaluate(layer_frame(900, 1000), "binomial_share", {"min_share": 0.6, "method": "plnd"})
    assert (gone.rule, gone.metric) == ("binomial_share", "edge_share")


def test_baseline_ratio_defaults():
    f = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)}, n=5, noise=0.0)
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.5})  # min_n 5 by default: 5 texts are decided
    assert v.reason.endswith("only 5 units, and the bootstrap is calibrated from 8") and v.alpha == 0.05


def test_largest_of_intervals_with_noise_match_a_by_hand_bootstrap():
    """lape's diagonal mean above lap's, with per-text noise: the target's and the runner-up's intervals and the
    difference's, each a percentile bootstrap over texts written cell by cell, and the sentence that prints them."""
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.2] * 4)}, n=12, noise=0.3, seed=7)
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap"], "n_resamples": 300, "alpha": 0.1})
    lape, lap = _lang_cols(f, "lape"), _lang_cols(f.assign(method=f["method"].replace({"lap": "lape", "lape": "x"})))

    def diag(mat):
        return lambda one: np.mean([one[:, 5 * a].sum() / one[:, 16 + a].sum() for a in range(4)])

    ci = {name: _bootstrap(_hand_bootstrap(f, diag(m)), m, 0.95, 300, bca=False)[:2]
          for name, m in (("lape", lape), ("lap", lap))}
    both = np.hstack([lape, lap])
    diff = lambda one: diag(None)(one[:, :20]) - diag(None)(one[:, 20:])  # noqa: E731
    lo, hi, _ = _bootstrap(_hand_bootstrap(f, diff), both, 0.95, 300, bca=False)
    assert v.estimate == pytest.approx(diff(both), rel=1e-9) and (v.ci_low, v.ci_high) == pytest.approx((lo, hi))
    assert f"lape CI [{ci['lape'][0]:.4g}, {ci['lape'][1]:.4g}] vs runner-up lap [{ci['lap'][0]:.4g}, " \
           f"{ci['lap'][1]:.4g}]" in v.reason
    apart = ci["lape"][0] > ci["lap"][1]
    assert not apart and ci["lape"][1] > ci["lap"][1] and v.estimate > 0  # overlapping, lape's top higher
    assert v.outcome is Outcome.INCONCLUSIVE and v.alpha == 0.1 and v.p_value < 0.1  # p alone does not decide


def test_largest_of_is_refuted_short_of_a_smallest_effect_from_eight_texts():
    """An undecided difference (the intervals overlap) whose own interval lies short of a smallest effect is
    REFUTED from 8 texts on, and stays INCONCLUSIVE at 7, where the bootstrap is not calibrated."""
    strong = {"lape": STRONG, "lap": diag_only([0.2] * 4)}
    for n, want in ((8, Outcome.REFUTED), (7, Outcome.INCONCLUSIVE)):
        f = deact_frame(strong, n=n, noise=0.3, seed=7)
        spec = {"target": "lape", "methods": ["lap"], "min_n": 7, "n_resamples": 300}
        plain = evaluate(f, "largest_of", spec)
        assert plain.outcome is Outcome.INCONCLUSIVE and plain.ci_high > 0
        e = round(plain.ci_high + 0.05, 3)
        v = evaluate(f, "largest_of", {**spec, "smallest_effect": e})
        assert v.outcome is want, n
        assert (f"no effect as large as {e:g}" in v.reason) == (want is Outcome.REFUTED)


ASYM = np.array([[0.30, 0.02, 0.05, 0.01],
                 [0.01, 0.20, 0.01, 0.08],
                 [0.09, 0.01, 0.25, 0.02],
                 [0.01, 0.06, 0.01, 0.40]])  # rows ≠ columns: a row mean and a column mean differ


def test_diagonal_dominance_reads_rows_on_an_asymmetric_noisy_matrix():
    """Row x is the language whose neurons were zeroed: its off-diagonal mean and its largest other cell come from
    the row, not the column, in the full data and in every resample (a by-hand bootstrap of the margin)."""
    f = deact_frame({"lape": ASYM}, n=12, noise=0.05, seed=11)
    v = evaluate(f, "diagonal_dominance", {"n_resamples": 300, "confidence": 0.9})  # method lape by default
    mat = _lang_cols(f)

    def cells(one):
        return np.array([[one[:, 4 * a + b].sum() / one[:, 16 + b].sum() for b in range(4)] for a in range(4)])

    def margin(one):
        c = cells(one)
        return np.mean([c[a, a] - (c[a].sum() - c[a, a]) / 3 for a in range(4)])

    lo, hi, _ = _bootstrap(_hand_bootstrap(f, margin), mat, 0.9, 300, bca=False)
    share, marg = v.parts
    assert marg.estimate == pytest.approx(margin(mat), rel=1e-9)
    assert (marg.ci_low, marg.ci_high) == pytest.approx((lo, hi), rel=1e-9) and "90% CI" in marg.reason
    full = cells(mat)
    off = np.where(np.eye(4, dtype=bool), -np.inf, full).max(axis=1)
    assert share.estimate == pytest.approx(np.mean(np.diag(full) > off))


def test_baseline_ratio_with_noise_matches_a_by_hand_bootstrap_and_refuses_by_name():
    f = deact_frame({"lape": ASYM, "rs": ASYM * 0.5}, n=12, noise=0.05, seed=12)
    v = evaluate(f, "baseline_ratio", {**RATIO, "max": 0.6, "n_resamples": 300, "confidence": 0.9})
    both = np.hstack([_lang_cols(f, "rs"), _lang_cols(f, "lape")])

    def diag(one):
        return np.mean([one[:, 5 * a].sum() / one[:, 16 + a].sum() for a in range(4)])

    d = lambda one: diag(one[:, :20]) - 0.6 * diag(one[:, 20:])  # noqa: E731
    lo, hi, _ = _bootstrap(_hand_bootstrap(f, d), both, 0.9, 300, bca=False)
    assert f"90% CI [{lo:.4g}, {hi:.4g}]" in v.reason and v.effect == pytest.approx(d(both), rel=1e-9)
    gone = evaluate(f, "baseline_ratio", {"numerator": {"method": "pv"}, "denominator": {"method": "lape"},
                                          "max": 0.6})
    assert (gone.rule, gone.metric, gone.outcome) == ("baseline_ratio", "ratio", Outcome.INCONCLUSIVE)
    assert gone.reason == "no ΔBPB cells for the numerator {'method': 'pv'}"


def test_cells_keep_every_language_with_a_baseline_and_drop_texts_not_columns():
    """A language evaluated under an edit but never without one has no ΔBPB: its cells are skipped and the
    others kept (not the loop stopped); a text missing from one cell leaves every cell's other texts."""
    from bench.families.langneurons.rules import _Cells

    f = deact_frame({"lape": STRONG}, n=6, noise=0.0)
    orphan = frame([("lape", "de", "aa", None, None, i, "bits", 150.0) for i in range(6)])
    c = _Cells(pd.concat([orphan, f], ignore_index=True))
    assert len(c.keys) == 16 and ("lape", "de", "aa") not in c.col
    assert list(c.units) == list(range(6)) and c.n == 6
    gap = f.drop(f.index[(f["method"] == "lape") & (f["set_lang"] == "en") & (f["language"] == "fr")
                         & (f["sample"] == 0)])
    c = _Cells(gap)
    assert c.n == 5 and list(c.units) == [1, 2, 3, 4, 5] and c.mat.shape == (5, 16 + 4)


def test_replicate_table_reads_the_full_counts_and_sums_each_replicate_over_layers():
    """Full-selection counts are the rows with no layer, no set language and no replicate; a replicate's counts
    may come per layer and are summed; a replicate of one neuron is kept; uniform share may be absent."""
    from bench.families.langneurons.rules import replicate_table

    rows = [("lape", None, None, None, None, None, "edge_count", 9), ("lape", None, None, None, None, None, "total_count", 10),
            ("lape", None, None, 3, None, None, "edge_count", 1), ("lape", None, None, 3, None, None, "total_count", 5),
            ("lape", "de", None, None, None, None, "edge_count", 2), ("lape", "de", None, None, None, None, "total_count", 7)]
    for r in range(3):
        rows += [("lape", None, None, layer, None, r, metric, value) for layer in (0, 5)
                 for metric, value in (("edge_count", 2 + r), ("total_count", 4))]
    rows += [("lape", None, None, None, None, 3, "edge_count", 1), ("lape", None, None, None, None, 3, "total_count", 1)]
    k, n, uniform, table = replicate_table(frame(rows), "lape")
    assert (k, n) == (9, 10) and np.isnan(uniform)
    assert table["edge_count"].tolist() == [4, 6, 8, 1] and table["total_count"].tolist() == [8, 8, 8, 1]
    only_edge = frame([r for r in rows if not (r[6] == "total_count" and r[5] is None and r[3] is None
                                               and r[1] is None)])
    assert replicate_table(only_edge, "lape") is None
    no_totals = frame([r for r in rows if not (r[6] == "total_count" and r[5] is not None)])
    assert len(replicate_table(no_totals, "lape")[3]) == 0  # replicates without totals count as none (no error)
    v = evaluate(no_totals, "binomial_share", {"min_share": 0.6, "min_n": 5})
    assert v.outcome is Outcome.INCONCLUSIVE and "but only 0 split-half replicates" in v.reason


def test_diagonal_dominance_share_reads_each_row_not_each_column():
    """Row en (zeroing English's neurons) hurts German more than English: row en is not dominant, although every
    column's own language is hurt most in it (a column-wise reading would say 4 of 4)."""
    m = ASYM.copy()
    m[1, 0] = 0.25
    v = evaluate(deact_frame({"lape": m}, n=12, noise=0.0), "diagonal_dominance", {"method": "lape"})
    assert v.parts[0].estimate == pytest.approx(0.75)
