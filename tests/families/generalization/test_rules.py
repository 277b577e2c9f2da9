"""accuracy_floor on hand-made frames with known binomial answers."""

from __future__ import annotations

import pandas as pd
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
