"""A reason names its interval at the level the spec asked for: every rule said "95% CI" whatever `confidence`
was, so a spec at 0.9 printed a 90% interval labelled 95%."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import ci_name, evaluate


def _frame(values) -> pd.DataFrame:
    return pd.DataFrame({"metric": "x", "sample": range(len(values)), "value": np.asarray(values, float)})


def test_the_name_of_each_level():
    assert [ci_name(c) for c in (0.95, 0.9, 0.975, 0.99)] == ["95% CI", "90% CI", "97.5% CI", "99% CI"]


@pytest.mark.parametrize("values,words", [
    ([1.0] * 18 + [0.0] * 2, "Clopper–Pearson 90% CI ["),                          # 0/1: exact binomial
    (np.linspace(0.4, 0.9, 20), "90% CI ["),                                       # t interval on unit means
])
def test_a_threshold_at_90_percent_says_90(values, words):
    v = evaluate(_frame(values), "threshold", {"metric": "x", "min": 0.3, "confidence": 0.9})
    assert words in v.reason and "95% CI" not in v.reason, v.reason
    default = evaluate(_frame(values), "threshold", {"metric": "x", "min": 0.3})
    assert words.replace("90%", "95%") in default.reason, default.reason


def test_paired_and_group_rules_name_their_level():
    a = _frame([1.0] * 10 + [0.0] * 10).assign(cond="a")
    b = _frame([0.0] * 20).assign(cond="b")
    frame = pd.concat([a, b], ignore_index=True)
    v = evaluate(frame, "paired_difference", {"a": {"metric": "x", "cond": "a"}, "b": {"metric": "x", "cond": "b"},
                                              "min": 0.0, "confidence": 0.9})
    assert "exact 90% CI [" in v.reason, v.reason
