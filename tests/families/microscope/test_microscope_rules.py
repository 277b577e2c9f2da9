"""The ``beside`` rule and its words on hand-built frames and verdicts: which rule decides, what the reason shows
of the others (estimate, interval, unadjusted p, what each would conclude alone), the labels, α and refusals."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.families.microscope.rules import shown
from bench.ground import registry
from bench.ground.verdicts import Outcome, Verdict
from bench.stats import evaluate


def _frame() -> pd.DataFrame:
    """Two layers: metric a peaks at 0.08 (≤ 0.1 holds), metric b at 0.3 (≤ 0.1 fails)."""
    rows = [(0, "a", 0.05), (1, "a", 0.08), (0, "b", 0.3), (1, "b", 0.2)]
    return pd.DataFrame(rows, columns=["layer", "metric", "value"])


def _peak(metric: str, **kw) -> dict:
    return {"rule": "layer_summary", "metric": metric, "reduce": "max", "max": 0.1, **kw}


def _alone(frame: pd.DataFrame, sub: dict) -> Verdict:
    return evaluate(frame, sub["rule"], {k: v for k, v in sub.items() if k != "rule"})


def test_shown_writes_estimate_interval_threshold_and_the_unadjusted_p():
    v = Verdict(Outcome.SUPPORTED, "why", "threshold", "acc", 0.123456, 0.1, 0.2, 0.00123, threshold="mean ≥ 0.05")
    assert shown(v, "code") == ("code — acc: 0.123 [0.1, 0.2] vs mean ≥ 0.05, alone it would be SUPPORTED "
                                "(p = 0.00123, unadjusted)")


def test_shown_without_interval_p_or_threshold_uses_dashes():
    v = Verdict(Outcome.REFUTED, "why", "layer_summary", "id", 0.3)
    assert shown(v, "beside") == "beside — id: 0.3 vs —, alone it would be REFUTED"
    nan = Verdict(Outcome.INCONCLUSIVE, "why", "r", "id", math.nan, math.nan, 0.5, None, threshold="≤ 1")
    assert shown(nan, "x") == "x — id: — [—, 0.5] vs ≤ 1, alone it would be INCONCLUSIVE"
    none = Verdict(Outcome.INCONCLUSIVE, "why", "r", "id", None)
    assert shown(none, "x") == "x — id: — vs —, alone it would be INCONCLUSIVE"


def test_the_first_rule_decides_and_the_second_is_written_beside_it():
    f = _frame()
    decide, other = _alone(f, _peak("a")), _alone(f, _peak("b"))
    v = evaluate(f, "beside", {"of": [_peak("a"), _peak("b")]})
    assert v.outcome is decide.outcome is Outcome.SUPPORTED and other.outcome is Outcome.REFUTED
    assert (v.rule, v.metric, v.estimate, v.threshold, v.alpha) == (decide.rule, "a", 0.08, "max ≤ 0.1", 0.05)
    assert v.reason == f"decides: {decide.reason}; beside — b: 0.3 vs max ≤ 0.1, alone it would be REFUTED"


def test_labels_name_each_rule_and_every_further_rule_is_shown():
    f = _frame()
    decide = _alone(f, _peak("b"))
    v = evaluate(f, "beside", {"of": [_peak("b"), _peak("a"), _peak("a", max=0.07)],
                               "labels": ["paper", "code", "strict"]})
    assert v.outcome is Outcome.REFUTED and v.metric == "b"
    assert v.reason == (f"paper: {decide.reason}; code — a: 0.08 vs max ≤ 0.1, alone it would be SUPPORTED; "
                        "strict — a: 0.08 vs max ≤ 0.07, alone it would be REFUTED")


def test_alpha_is_handed_to_the_rules():
    v = evaluate(_frame(), "beside", {"of": [_peak("a"), _peak("b")], "alpha": 0.01})
    assert v.alpha == 0.01


def test_refusals_name_what_is_wrong():
    f = _frame()
    with pytest.raises(ValueError, match=r"^beside: 1 labels for 2 rules$"):
        evaluate(f, "beside", {"of": [_peak("a"), _peak("b")], "labels": ["only"]})
    with pytest.raises(ValueError, match=r"^beside needs the deciding rule and at least one rule to show beside it "
                                         r"in 'of'$"):
        evaluate(f, "beside", {"of": [_peak("a")]})
    with pytest.raises(ValueError, match=r"^beside: the deciding rule must be a single rule \(its parts would be "
                                         r"re-combined and the shown rules' text lost\); put a precondition in a "
                                         r"'gated' rule around 'beside'$"):
        evaluate(f, "beside", {"of": [{"rule": "all", "of": [_peak("a")]}, _peak("b")]})


def test_the_sentence_says_which_rule_decides_and_which_are_only_shown():
    say = registry.rule("beside").sentence
    a = "the max over layers of the per-layer mean `a` is ≤ 0.1, exactly (no sampling)"
    b = "the max over layers of the per-layer mean `b` is ≤ 0.1, exactly (no sampling)"
    assert say({"of": [_peak("a"), _peak("b")]}) == (
        f"decides: {a} (this decides); shown beside it, deciding nothing — beside: {b}")
    assert say({"of": [_peak("a"), _peak("b"), _peak("a")], "labels": ["paper", "code", "again"]}) == (
        f"paper: {a} (this decides); shown beside it, deciding nothing — code: {b}; again: {a}")
    assert say({"of": []}) == "no rules given"
