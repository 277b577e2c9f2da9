"""The ecm family's rule: a paired accuracy gain of one prompt condition over another, on the same items.

``mcnemar_gain`` — accuracy under `a` minus accuracy under `b` (0/1 rows, paired by `unit`) is above `min`:
exact McNemar test (``scipy.stats.binomtest`` on the discordant pairs, one-sided), exact interval from the
discordant pairs (:func:`bench.stats.exact.paired`).  (The demonstration-count claim uses the generic ``trend`` rule.)
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.stats.words import accuracy_drop
from bench.ground.registry import rule_def
from bench.stats import Verdict, _label
from bench.stats.comparisons import paired_accuracy


def _say_mcnemar_gain(p):
    return accuracy_drop(p, unit="item")


@rule_def("mcnemar_gain", sentence=_say_mcnemar_gain)
def mcnemar_gain(
    frame: pd.DataFrame, *, a: dict[str, Any], b: dict[str, Any], min: float = 0.0, unit: str = "item",
    min_n: int = 10, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """acc(a) − acc(b) > `min` on the same items; p from the exact McNemar test of a-only vs b-only wins."""
    v, m, only_a, only_b = paired_accuracy(frame, "mcnemar_gain", a, b, min, unit, min_n, alpha, confidence,
                                           n_resamples, "gain", "items")
    if m is None:
        return v
    detail = (f" (accuracy {m['b'].mean():.3f} → {m['a'].mean():.3f}; McNemar: {only_a} items right only with "
              f"{_label(a)}, {only_b} only with {_label(b)})")
    return Verdict(**{**v.__dict__, "reason": v.reason + detail})
