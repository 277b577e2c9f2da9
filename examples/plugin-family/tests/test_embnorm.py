"""Known answers for the plugin's probe and rule: hand-built tensors and frames whose right numbers are known."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from bench.ground import registry


def test_first_token_norms_known_answer():
    from bench_embnorm.probes import first_token_norms

    emb = torch.tensor([[3.0, 4.0], [0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [6.0, 8.0]])  # norms 5, 1, 1, 2, 10
    frame = first_token_norms(emb, [0, 2, 4])  # median row norm is 2
    got = frame.pivot(index="sample", columns="metric", values="value")
    assert got["first_norm"].tolist() == [5.0, 1.0, 10.0]
    assert got["ratio"].tolist() == [2.5, 0.5, 5.0]


def _frame(ratios):
    return pd.DataFrame({"sample": range(len(ratios)), "metric": "ratio", "value": ratios})


def test_majority_above_known_answers():
    import scipy.stats

    from bench.stats import Outcome, evaluate

    v = evaluate(_frame([2.0] * 14 + [0.5] * 2), "majority_above", {"metric": "ratio"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 14 / 16 and v.n == 16
    assert v.p_value == pytest.approx(scipy.stats.binomtest(14, 16, 0.5, alternative="greater").pvalue)
    v = evaluate(_frame([2.0] * 8 + [0.5] * 8), "majority_above", {"metric": "ratio"})
    assert v.outcome is Outcome.INCONCLUSIVE  # exactly half is not a majority
    v = evaluate(_frame([2.0] * 9 + [0.5] * 7), "majority_above", {"metric": "ratio"})
    assert v.outcome is Outcome.INCONCLUSIVE and v.p_value > 0.05  # a majority, but not a significant one
    v = evaluate(_frame([0.5] * 40), "majority_above", {"metric": "ratio"})
    assert v.outcome is Outcome.REFUTED and v.ci_high < 0.5 and v.sensitivity


def test_the_family_is_found_through_its_entry_point():
    assert registry.family_packages()["embnorm"] == "bench_embnorm"
    assert "first_token_norm" in registry.probes() and "majority_above" in registry.rules()
