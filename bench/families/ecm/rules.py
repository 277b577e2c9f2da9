"""The ecm family's rule: a paired accuracy gain of one prompt condition over another, on the same items.

``mcnemar_gain`` — accuracy under `a` minus accuracy under `b` (0/1 rows, paired by `unit`) is above `min`:
exact McNemar test (``scipy.stats.binomtest`` on the discordant pairs, one-sided), percentile bootstrap
interval over items.  (The demonstration-count claim uses the generic ``trend`` rule.)
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from scipy import stats

from bench.core.registry import rule_def
from bench.stats import Outcome, Verdict, _bootstrap, _decide, _label, _missing, _select


@rule_def("mcnemar_gain")
def mcnemar_gain(
    frame: pd.DataFrame, *, a: dict[str, Any], b: dict[str, Any], min: float = 0.0, unit: str = "item",
    min_n: int = 10, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """acc(a) − acc(b) > `min` on the same items; p from the exact McNemar test of a-only vs b-only wins."""
    name = f"accuracy {_label(a)} − {_label(b)}"
    ra, rb = _select(frame, a), _select(frame, b)
    if ra.empty or rb.empty:
        return _missing(frame, "mcnemar_gain", name, a if ra.empty else b)
    m = pd.concat([ra.groupby(unit)["value"].mean().rename("a"), rb.groupby(unit)["value"].mean().rename("b")],
                  axis=1).dropna()
    n = len(m)
    est = float(m["a"].mean() - m["b"].mean())
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} paired items (< {min_n})", "mcnemar_gain", name, est,
                       n=n, alpha=alpha)
    only_a = int(((m["a"] > 0.5) & (m["b"] <= 0.5)).sum())
    only_b = int(((m["a"] <= 0.5) & (m["b"] > 0.5)).sum())
    p = float(stats.binomtest(only_a, only_a + only_b, 0.5, alternative="greater").pvalue) if only_a + only_b else 1.0
    lo, hi, _ = _bootstrap(lambda x: x[..., 0].mean(axis=-1) - x[..., 1].mean(axis=-1), m[["a", "b"]].to_numpy(float),
                           confidence, n_resamples, bca=False)
    v = _decide("mcnemar_gain", name, est, lo, hi, p, n, min, +1, f"gain > {min:g}", alpha, effect=est,
                effect_name="accuracy gain")
    detail = (f" (accuracy {m['b'].mean():.3f} → {m['a'].mean():.3f}; McNemar: {only_a} items right only with "
              f"{_label(a)}, {only_b} only with {_label(b)})")
    return Verdict(**{**v.__dict__, "reason": v.reason + detail})
