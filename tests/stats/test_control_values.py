"""`bench.stats.control` with scripted arms whose every number is known: the replicated difference (full
estimates, per-replicate spread centred and scaled, quantile interval, p = (1 + #wrong) / (1 + R)), the resampled
one (each arm's statistic on its own columns), the refusals and the words of the combined verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, Verdict, _bootstrap, control
from bench.stats.control import POLICY, RULE, Arm, against, difference


def script(monkeypatch, arms: dict[str, Arm | Verdict], rule: str = "threshold"):
    """Replace `rule`'s arm by one that returns the arm named by the frame's `who` attribute."""
    seen = []
    control.supports(rule)  # imports every rule module first, so that none registers its arm over the script

    def arm(frame, **params):
        seen.append(params)
        return arms[frame.attrs["who"]]

    monkeypatch.setitem(control.ARMS, rule, arm)
    return seen


def tagged(who: str) -> pd.DataFrame:
    f = pd.DataFrame({"sample": [0], "metric": ["m"], "value": [0.0]})
    f.attrs["who"] = who
    return f


def replicated(full, values, *, side=+1, shrink=1.0, min_n=1, units=None):
    idx = pd.Index(units if units is not None else range(len(values)), name="sample")
    return Arm(pd.DataFrame({"r": np.asarray(values, float)}, index=idx), side=side, unit="replicate",
               name="edge_share", full=full, shrink=shrink, min_n=min_n)


def test_replicated_difference_by_hand(monkeypatch):
    """Full estimates 0.7 and 0.5; per-replicate differences d = t − c = 0.3, 0.1, 0.2, 0.4, 0.0, scaled by 0.5
    around 0.2: values 0.2 + (d − 0.2) · 0.5 = 0.25, 0.15, 0.2, 0.3, 0.1."""
    t = replicated(0.7, [0.8, 0.6, 0.7, 0.9, 0.5], shrink=0.5)
    c = replicated(0.5, [0.5, 0.5, 0.5, 0.5, 0.5])
    seen = script(monkeypatch, {"t": t, "c": c})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5, "alpha": 0.1})
    values = np.array([0.25, 0.15, 0.2, 0.3, 0.1])
    lo, hi = np.quantile(values, 0.025), np.quantile(values, 0.975)
    assert seen == [{"metric": "m", "min": 0.5, "alpha": 0.1}] * 2  # each arm gets the rule's own parameters
    assert (v.rule, v.metric, v.n, v.alpha) == (RULE, "edge_share: trained − control", 5, 0.1)
    assert v.estimate == pytest.approx(0.2) and v.effect == pytest.approx(0.2)
    assert v.effect_name == "edge_share: trained − control" and v.threshold == "> 0"
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi)) and v.p_value == pytest.approx(1 / 6)
    assert v.outcome is Outcome.INCONCLUSIVE  # p = 1/6 > 0.1
    assert v.reason == (f"trained 0.7 − control 0.5 = 0.2, 95% CI [{lo:.4g}, {hi:.4g}], p = 0.167 "
                        "(p and CI over 5 units 'replicate')")
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5, "alpha": 0.2,
                                                             "confidence": 0.5})
    assert v.outcome is Outcome.SUPPORTED
    assert (v.ci_low, v.ci_high) == pytest.approx((np.quantile(values, 0.25), np.quantile(values, 0.75)))


def test_replicated_difference_counts_values_on_zero_as_wrong(monkeypatch):
    """Numbers exact in binary, so that the values land on 0 exactly."""
    t = replicated(0.75, [0.75, 1.0, 0.5, 0.75])
    c = replicated(0.5, [0.25, 0.5, 0.5, 0.75])  # d = 0.5, 0.5, 0, 0 around 0.25: values 0.5, 0.5, 0, 0
    script(monkeypatch, {"t": t, "c": c})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5})
    assert v.estimate == 0.25 and v.p_value == pytest.approx((1 + 2) / 5)
    lower = replicated(0.5, [0.5, 0.25, 0.75, 0.5], side=-1)  # trained − control = −0.25, claim "below"
    c = replicated(0.75, [0.5, 0.75, 0.75, 1.0])  # d = 0, −0.5, 0, −0.5 around −0.25: values 0, −0.5, 0, −0.5
    script(monkeypatch, {"t": lower, "c": c})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "max": 0.5})
    assert v.threshold == "< 0" and v.estimate == -0.25 and v.p_value == pytest.approx(3 / 5)


def test_replicated_difference_subtracts_the_control_replicate_by_replicate(monkeypatch):
    """The same trained replicates against two controls with the same full estimate: the spread comes from the
    per-replicate differences, so a control that moves with the trained arm narrows the interval to a point."""
    t = replicated(0.75, [0.5, 1.0, 0.75, 0.75])
    script(monkeypatch, {"t": t, "c": replicated(0.5, [0.25, 0.75, 0.5, 0.5])})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5})
    assert (v.ci_low, v.ci_high) == (0.25, 0.25)
    script(monkeypatch, {"t": t, "c": replicated(0.5, [0.75, 0.25, 0.5, 0.5])})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5})
    values = 0.25 + (np.array([-0.25, 0.75, 0.25, 0.25]) - 0.25)
    assert (v.ci_low, v.ci_high) == pytest.approx((np.quantile(values, 0.025), np.quantile(values, 0.975)))


def test_replicated_difference_needs_min_n_shared_replicates(monkeypatch):
    t = replicated(0.7, [0.8, 0.6, 0.7, 0.9], min_n=5, units=[0, 1, 2, 3])
    c = replicated(0.5, [0.5, 0.5, 0.5, 0.5, 0.5], units=[1, 2, 3, 4, 5])
    script(monkeypatch, {"t": t, "c": c})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5, "alpha": 0.01})
    assert v.outcome is Outcome.INCONCLUSIVE and v.n == 3 and v.estimate == pytest.approx(0.2)
    assert v.reason == "trained − control 0.2 but only 3 shared replicates (< 5)"
    assert (v.rule, v.metric, v.alpha) == (RULE, "edge_share: trained − control", 0.01)
    t = replicated(0.7, [0.8, 0.6, 0.7], min_n=3, units=[1, 2, 3])
    script(monkeypatch, {"t": t, "c": c})
    assert difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5}).p_value == pytest.approx(
        (1 + 0) / 4)  # exactly min_n shared: decided, values 0.3, 0.1, 0.2 all above 0


def test_resampled_difference_reads_each_arms_own_columns(monkeypatch):
    """Two columns per arm; each arm's statistic is column 0 minus column 1 (its own).  Per unit the trained
    arm gives 0.75 − 0.25 and the control 0.5 − 0.25: the difference is 0.5 − 0.25 = 0.25 on every unit (numbers
    exact in binary, so the estimate and the resampled values agree to the last bit)."""
    n = 10
    idx = pd.Index(range(n), name="sample")
    tt = pd.DataFrame({"a": [0.75] * n, "b": [0.25] * n}, index=idx)
    cc = pd.DataFrame({"a": [0.5] * n, "b": [0.25] * n}, index=idx)
    stat = lambda m: np.asarray(m).mean(axis=-2)[..., 0] - np.asarray(m).mean(axis=-2)[..., 1]  # noqa: E731
    script(monkeypatch, {"t": Arm(tt, +1, "sample", "gap", stat=stat), "c": Arm(cc, +1, "sample", "gap", stat=stat)})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.0})
    assert v.estimate == 0.25 and (v.ci_low, v.ci_high) == (0.25, 0.25) and v.n == n
    # every resample gives 0.25: p = T₉(Φ⁻¹(1/2001)·√(9/10)), the corrected bootstrap p of 2,000 resamples
    p = stats.t.cdf(stats.norm.ppf(1 / 2001) * np.sqrt(9 / 10), 9)
    assert v.p_value == pytest.approx(p, rel=1e-9)
    assert v.reason == f"trained 0.5 − control 0.25 = 0.25, 95% CI [0.25, 0.25], p = {p:.3g} (p and CI over 10 units 'sample')"
    assert v.outcome is Outcome.SUPPORTED and (v.rule, v.metric, v.threshold) == (RULE, "gap: trained − control", "> 0")
    assert v.effect == 0.25 and v.effect_name == "gap: trained − control"
    lower = Arm(cc, -1, "sample", "gap", stat=stat)
    script(monkeypatch, {"t": lower, "c": Arm(tt, -1, "sample", "gap", stat=stat)})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "max": 0.0})
    assert v.outcome is Outcome.SUPPORTED and v.threshold == "< 0" and v.p_value == pytest.approx(p, rel=1e-9)


def test_resampled_difference_bootstraps_the_shared_units_jointly(monkeypatch):
    rng = np.random.default_rng(7)
    n = 12
    base = rng.normal(0, 1, n)
    idx = pd.Index(range(n), name="sample")
    tt = pd.DataFrame({"v": base + 0.2 + rng.normal(0, 0.1, n)}, index=idx)
    cc = pd.DataFrame({"v": base}, index=idx)
    mean = lambda m: np.asarray(m).mean(axis=-2)[..., 0]  # noqa: E731
    script(monkeypatch, {"t": Arm(tt, +1, "sample", "m", stat=mean), "c": Arm(cc, +1, "sample", "m", stat=mean)})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.0, "n_resamples": 300,
                                                             "confidence": 0.9})
    both = np.column_stack([tt["v"], cc["v"]])

    def by_hand(m):  # resample by resample: the mean of trained minus the mean of control over the same units
        m = np.asarray(m)
        flat = m.reshape(-1, n, 2)
        return np.array([one[:, 0].mean() - one[:, 1].mean() for one in flat]).reshape(m.shape[:-2])

    lo, hi, _ = _bootstrap(by_hand, both, 0.9, 300, bca=False)
    assert (v.ci_low, v.ci_high) == pytest.approx((lo, hi), rel=1e-9)
    assert v.ci_high - v.ci_low < 0.2  # the shared per-unit spread (sd 1) cancels


def test_refusals_name_the_arm_and_the_unit(monkeypatch):
    none = Verdict(Outcome.INCONCLUSIVE, "no rows for m", "threshold")
    ok = replicated(0.5, [0.5, 0.5])
    script(monkeypatch, {"t": none, "c": ok})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5, "alpha": 0.01})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "trained − control: no trained estimate (no rows for m)"
    assert (v.rule, v.metric, v.alpha) == (RULE, "trained − control", 0.01)
    script(monkeypatch, {"t": ok, "c": none})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5})
    assert v.reason == "trained − control: no control estimate (no rows for m)"
    script(monkeypatch, {"t": replicated(0.5, [0.5], units=[0]), "c": replicated(0.5, [0.5], units=[1])})
    v = difference(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5, "alpha": 0.02})
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason == "trained − control: no replicate is in both frames"
    assert (v.rule, v.metric, v.alpha, v.n) == (RULE, "edge_share: trained − control", 0.02, None)


def test_the_shipped_threshold_arm_pairs_per_unit_means():
    """The real threshold arm: two rows per text averaged first; trained − control per text = 0.25."""
    def frame(shift):
        return pd.DataFrame({"sample": np.repeat(np.arange(10), 2), "metric": "m",
                             "value": np.tile([0.0, 1.0], 10) + shift})
    v = difference(frame(0.75), frame(0.5), "threshold", {"metric": "m", "min": 0.5})
    assert v.estimate == pytest.approx(0.25) and v.n == 10 and v.metric == "m: trained − control"


# ── against ───────────────────────────────────────────────────────────────────────────────────────────────

def own(outcome, reason="own words"):
    return Verdict(outcome, reason, "threshold", "m", 0.9, 0.8, 1.0, 0.001, n=20, threshold="≥ 0.5")


def test_against_keeps_errors_skips_and_frameless_cells():
    for o in (Outcome.ERROR, Outcome.SKIPPED):
        assert against(tagged("t"), tagged("c"), "threshold", {}, own(o), None, "ctl") == own(o)
    assert against(None, tagged("c"), "threshold", {}, own(Outcome.SUPPORTED), None, "ctl") == own(Outcome.SUPPORTED)


def test_against_without_a_control_frame_says_why(monkeypatch):
    v = against(tagged("t"), None, "threshold", {"alpha": 0.01}, own(Outcome.SUPPORTED), None, "m+init")
    assert v.outcome is Outcome.INCONCLUSIVE and v.rule == RULE and v.alpha == 0.01
    assert v.reason == (f"trained − control: the control m+init gave no frame to compare with: it did not run "
                        f"({POLICY})")
    crashed = Verdict(Outcome.ERROR, "out of memory", "-")
    v = against(tagged("t"), None, "threshold", {"alpha": 0.02}, own(Outcome.SUPPORTED), crashed, "m+init")
    d = v.parts[1]
    assert d.reason == "the control m+init gave no frame to compare with: out of memory"
    assert (d.outcome, d.rule, d.metric, d.alpha, v.alpha) == (Outcome.INCONCLUSIVE, RULE, "trained − control", 0.02,
                                                               0.02)
    v = against(tagged("t"), None, "threshold", {}, own(Outcome.SUPPORTED).__class__(
        Outcome.SUPPORTED, "w", "threshold", alpha=0.2), None, "m+init")
    assert v.alpha == 0.2  # without an alpha parameter the rule's own


def test_against_words_when_both_hold_on_either_side(monkeypatch):
    up = replicated(0.9, [0.9, 0.91, 0.89, 0.9, 0.9, 0.92, 0.88, 0.9, 0.9, 0.9] * 2)  # 20: p = 1/21
    ctl = replicated(0.2, [0.2] * 20)
    script(monkeypatch, {"t": up, "c": ctl})
    v = against(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5}, own(Outcome.SUPPORTED), None,
                "m+init")
    d = v.parts[1]
    assert v.outcome is Outcome.SUPPORTED and v.rule == RULE
    assert v.reason == f"own words; and above its control m+init: {d.reason} ({POLICY})"
    down = replicated(0.1, [0.1, 0.11, 0.09, 0.1, 0.1, 0.12, 0.08, 0.1, 0.1, 0.1] * 2, side=-1)
    script(monkeypatch, {"t": down, "c": ctl})
    v = against(tagged("t"), tagged("c"), "threshold", {"metric": "m", "max": 0.5}, own(Outcome.SUPPORTED), None,
                "m+init")
    assert v.outcome is Outcome.SUPPORTED and v.reason.startswith("own words; and below its control m+init: ")
    script(monkeypatch, {"t": up, "c": replicated(0.9, [0.9] * 20)})
    v = against(tagged("t"), tagged("c"), "threshold", {"metric": "m", "min": 0.5}, own(Outcome.INCONCLUSIVE, "w"),
                None, "m+init")
    d = v.parts[1]
    assert v.reason == f"m: w; edge_share: trained − control: {d.reason} ({POLICY})"


def test_arm_def_registers_the_function_it_decorates(monkeypatch):
    monkeypatch.setattr(control, "ARMS", dict(control.ARMS))

    def arm(frame, **_):
        return None

    assert control.arm_def("some_rule")(arm) is arm and control.ARMS["some_rule"] is arm
