"""``exceeds_baselines`` on hand-built frames whose Monte Carlo rank p-values are known: the combined p is the
largest part's, the verdict names the rule, the observed metric and α, and a flag marks the measurement
approximate only when a flagged row is positive."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.ground import registry
from bench.stats import Outcome, evaluate

OBS = {"kind": "observed", "metric": "k"}


def _frame(flag: float | None = None) -> pd.DataFrame:
    """The observed value 0.5 (first row) and three baselines of 199 draws each, whose rank p-values against 0.5
    are (1 + #{draw ≥ 0.5}) / 200:

    * ``low``: every draw below 0.5 → p = 1/200 = 0.005, q0.99 < 0.5;
    * ``one_above``: one draw above 0.5 → p = 2/200 = 0.01, q0.99 still below 0.5 (it interpolates between the
      197th and 198th smallest draws);
    * ``high``: every draw above 0.5 → p = 1, REFUTED with the sensitivity of 199 draws (1/200 < α)."""
    rows = [("observed", "k", 0.5)]
    rows += [("baseline", "low", 0.1 + 0.001 * i) for i in range(199)]
    rows += [("baseline", "one_above", 0.2 + 0.001 * i) for i in range(198)] + [("baseline", "one_above", 0.9)]
    rows += [("baseline", "high", 0.6 + 0.001 * i) for i in range(199)]
    if flag is not None:
        rows.append(("observed", "flag", flag))
    return pd.DataFrame(rows, columns=["kind", "metric", "value"])


def _base(metric: str) -> dict:
    return {"kind": "baseline", "metric": metric}


def _alone(frame: pd.DataFrame, metric: str, **kw):
    return evaluate(frame, "exceeds_baseline", {"observed": OBS, "baseline": _base(metric), **kw})


def test_supported_takes_the_largest_part_p_and_names_the_rule_metric_and_alpha():
    f = _frame()
    v = evaluate(f, "exceeds_baselines", {"observed": OBS, "baselines": [_base("low"), _base("one_above")]})
    assert v.outcome is Outcome.SUPPORTED
    assert v.p_value == pytest.approx(0.01)  # max(1/200, 2/200): the intersection–union p
    assert (v.rule, v.metric, v.alpha, v.estimate, v.sensitivity) == ("exceeds_baselines", "k", 0.05, 0.5, None)
    low, one = _alone(f, "low"), _alone(f, "one_above")
    assert (low.p_value, one.p_value) == (pytest.approx(0.005), pytest.approx(0.01))
    assert low.threshold != one.threshold and low.effect != one.effect  # the first baseline gives the headline
    assert (v.threshold, v.effect, v.n) == (low.threshold, low.effect, 199)
    assert v.reason == f"vs low: SUPPORTED — {low.reason}; vs one_above: SUPPORTED — {one.reason}"


def test_alpha_reaches_every_part_and_the_verdict():
    """At α = 0.008 the part with p = 0.01 exceeds its quantile but is not significant: INCONCLUSIVE."""
    v = evaluate(_frame(), "exceeds_baselines",
                 {"observed": OBS, "baselines": [_base("low"), _base("one_above")], "alpha": 0.008})
    assert v.outcome is Outcome.INCONCLUSIVE and v.alpha == 0.008 and v.p_value == pytest.approx(0.01)
    assert "vs one_above: INCONCLUSIVE" in v.reason


def test_refuted_joins_the_refuted_parts_sensitivities_only():
    f = _frame()
    v = evaluate(f, "exceeds_baselines", {"observed": OBS, "baselines": [_base("high"), _base("high")]})
    high = _alone(f, "high")
    assert v.outcome is Outcome.REFUTED and high.sensitivity
    assert v.sensitivity == f"{high.sensitivity}; {high.sensitivity}"
    mixed = evaluate(f, "exceeds_baselines", {"observed": OBS, "baselines": [_base("low"), _base("high")]})
    assert mixed.outcome is Outcome.REFUTED and mixed.sensitivity == high.sensitivity  # the supported part adds none


def test_a_part_without_rows_leaves_the_combined_p_undefined():
    v = evaluate(_frame(), "exceeds_baselines", {"observed": OBS, "baselines": [_base("low"), _base("absent")]})
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value is None


def test_a_baseline_without_a_metric_is_named_by_its_selector_and_an_unnamed_observed_is_observed():
    sel = {"metric": "low"}  # no kind: the observed row has metric k, so it is not among the draws
    v = evaluate(_frame(), "exceeds_baselines", {"observed": {"kind": "observed"}, "baselines": [{"kind": "baseline"}, sel]})
    assert v.metric == "observed"
    assert v.reason.startswith(f"vs {({'kind': 'baseline'})}: ")
    assert "; vs low: " in v.reason


def test_the_flag_marks_the_measurement_approximate_only_when_positive():
    params = {"observed": OBS, "baselines": [_base("low"), _base("one_above")], "flag": {"metric": "flag"}}
    plain = evaluate(_frame(), "exceeds_baselines", {k: v for k, v in params.items() if k != "flag"})
    off = evaluate(_frame(flag=0.0), "exceeds_baselines", params)
    assert off.outcome is Outcome.SUPPORTED and off.reason == plain.reason  # a zero flag marks nothing
    on = evaluate(_frame(flag=1.0), "exceeds_baselines", params)
    assert on.outcome is Outcome.SUPPORTED and on.reason == plain.reason + " [approximate]"
    named = evaluate(_frame(flag=1.0), "exceeds_baselines", {**params, "flag_text": "qk-normed"})
    assert named.reason == plain.reason + " [qk-normed]"


def test_an_approximate_refutation_becomes_inconclusive_with_its_reason():
    f = _frame(flag=1.0)
    params = {"observed": OBS, "baselines": [_base("high")], "flag": {"metric": "flag"}}
    exact = evaluate(f[f["metric"] != "flag"], "exceeds_baselines", params)
    v = evaluate(f, "exceeds_baselines", params)
    assert exact.outcome is Outcome.REFUTED
    assert v.outcome is Outcome.INCONCLUSIVE and v.sensitivity is None
    assert v.reason == f"could not have shown the effect: the measurement is approximate ({exact.reason} [approximate])"


def test_no_baseline_is_refused_with_its_message():
    with pytest.raises(ValueError, match=r"^exceeds_baselines needs at least one baseline$"):
        evaluate(_frame(), "exceeds_baselines", {"observed": OBS, "baselines": []})


def test_the_sentence_names_every_baseline_the_quantile_and_alpha():
    say = registry.rule("exceeds_baselines").sentence
    params = {"observed": OBS, "baselines": [_base("gauss"), _base("perm")]}
    assert say(params) == ("[kind = observed, metric = k] exceeds the 0.99 quantile of every baseline "
                           "([kind = baseline, metric = gauss], [kind = baseline, metric = perm]); the claim holds "
                           "only when it beats each one (intersection–union test, p = the largest p, α = 0.05)")
    assert say({**params, "quantile": 0.95, "alpha": 0.01}).startswith(
        "[kind = observed, metric = k] exceeds the 0.95 quantile of every baseline")
    assert say({**params, "quantile": 0.95, "alpha": 0.01}).endswith("α = 0.01)")
