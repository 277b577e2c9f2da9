"""The family's rules: an accuracy floor and an accuracy ceiling, each an exact binomial test (items are the unit)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from scipy import stats

from bench.core.registry import rule_def
from bench.stats import Outcome, Verdict, _label, _missing, _select, sensitivity


@rule_def("accuracy_floor")
def accuracy_floor(frame: pd.DataFrame, *, min: float, metric: str = "correct",
                   where: dict[str, Any] = {},  # noqa: B006 (never mutated)
                   min_n: int = 10, alpha: float = 0.05) -> Verdict:
    """The share of correct items (0/1 rows of `metric` selected by `where`) exceeds `min`.

    One-sided exact binomial test against `min`; the CI is Clopper–Pearson.  SUPPORTED when p < alpha,
    REFUTED when the upper end of the CI is at or below `min`, INCONCLUSIVE otherwise.
    """
    rows = _select(frame, {"metric": metric, **where})
    name = f"{metric}[{_label(where)}]"
    if rows.empty:
        return _missing(frame, "accuracy_floor", name, where)
    vals = rows["value"].to_numpy(float)
    if not set(vals.tolist()) <= {0.0, 1.0}:
        raise ValueError(f"accuracy_floor needs 0/1 values, '{metric}' has others")
    n, k = len(vals), int(vals.sum())
    est = k / n
    label = f"> {min:g}"
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} items (< {min_n})", "accuracy_floor", name, est, n=n,
                       threshold=label, alpha=alpha)
    test = stats.binomtest(k, n, min, alternative="greater")
    ci = stats.binomtest(k, n, min).proportion_ci(confidence_level=1 - alpha, method="exact")  # two-sided
    lo, hi, p = float(ci.low), float(ci.high), float(test.pvalue)
    text = f"{k}/{n} correct = {est:.3g}, {100 * (1 - alpha):g}% CI [{lo:.3g}, {hi:.3g}]"
    if est > min and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"{text} {label}, binomial p = {p:.3g}"
    elif hi <= min:
        outcome, why = Outcome.REFUTED, f"{text}: not above the floor {min:g}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, f"{text} vs floor {label}, binomial p = {p:.3g}"
    v = Verdict(outcome, why, "accuracy_floor", name, est, lo, hi, p, None, n, est - min, "margin", label, alpha)
    return sensitivity.judge(v, min, +1, binary=True)



@rule_def("accuracy_ceiling")
def accuracy_ceiling(frame: pd.DataFrame, *, max: float, metric: str = "format_ok",
                     where: dict[str, Any] = {},  # noqa: B006 (never mutated)
                     min_n: int = 10, alpha: float = 0.05) -> Verdict:
    """The share of 0/1 rows of `metric` selected by `where` lies below `max` (e.g. "the base model cannot
    follow the output format").  One-sided exact binomial test against `max`, Clopper–Pearson CI; SUPPORTED
    when p < alpha, REFUTED when the lower end of the CI is at or above `max`, INCONCLUSIVE otherwise."""
    rows = _select(frame, {"metric": metric, **where})
    name = f"{metric}[{_label(where)}]"
    if rows.empty:
        return _missing(frame, "accuracy_ceiling", name, where)
    vals = rows["value"].to_numpy(float)
    if not set(vals.tolist()) <= {0.0, 1.0}:
        raise ValueError(f"accuracy_ceiling needs 0/1 values, '{metric}' has others")
    n, k = len(vals), int(vals.sum())
    est = k / n
    label = f"< {max:g}"
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} items (< {min_n})", "accuracy_ceiling", name, est, n=n,
                       threshold=label, alpha=alpha)
    p = float(stats.binomtest(k, n, max, alternative="less").pvalue)
    ci = stats.binomtest(k, n, max).proportion_ci(confidence_level=1 - alpha, method="exact")
    lo, hi = float(ci.low), float(ci.high)
    text = f"{k}/{n} = {est:.3g}, {100 * (1 - alpha):g}% CI [{lo:.3g}, {hi:.3g}]"
    if est < max and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"{text} {label}, binomial p = {p:.3g}"
    elif lo >= max:
        outcome, why = Outcome.REFUTED, f"{text}: not below the ceiling {max:g}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, f"{text} vs ceiling {label}, binomial p = {p:.3g}"
    v = Verdict(outcome, why, "accuracy_ceiling", name, est, lo, hi, p, None, n, max - est, "margin", label, alpha)
    return sensitivity.judge(v, max, -1, binary=True)
