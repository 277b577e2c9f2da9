"""The family's rules: an accuracy floor and an accuracy ceiling, each an exact binomial test (items are the unit)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from scipy import stats

from bench.ground.prose import alpha_text, where_clause
from bench.ground.registry import rule_def
from bench.stats import Outcome, Verdict, _label, _missing, _select, sensitivity


def _say_accuracy_floor(p):
    return (f"the share of correct `{p.get('metric', 'correct')}` items{where_clause(p)} is > {p['min']:g} (one-sided "
            f"exact binomial test, {alpha_text(p)}; Clopper–Pearson interval)")


@rule_def("accuracy_floor", sentence=_say_accuracy_floor)
def accuracy_floor(frame: pd.DataFrame, *, min: float, metric: str = "correct",
                   where: dict[str, Any] = {},  # noqa: B006 (never mutated)
                   min_n: int = 10, alpha: float = 0.05) -> Verdict:
    """The share of correct items (0/1 rows of `metric` selected by `where`) exceeds `min`.

    One-sided exact binomial test against `min`; the CI is Clopper–Pearson.  SUPPORTED when p < alpha,
    REFUTED when the upper end of the CI is at or below `min`, INCONCLUSIVE otherwise.
    """
    return _share_vs_bound(frame, "accuracy_floor", metric, where, min, +1, min_n, alpha)


def _say_accuracy_ceiling(p):
    return (f"the share of `{p.get('metric', 'format_ok')}` items{where_clause(p)} is < {p['max']:g} (one-sided exact "
            f"binomial test, {alpha_text(p)}; Clopper–Pearson interval)")


@rule_def("accuracy_ceiling", sentence=_say_accuracy_ceiling)
def accuracy_ceiling(frame: pd.DataFrame, *, max: float, metric: str = "format_ok",
                     where: dict[str, Any] = {},  # noqa: B006 (never mutated)
                     min_n: int = 10, alpha: float = 0.05) -> Verdict:
    """The share of 0/1 rows of `metric` selected by `where` lies below `max` (e.g. "the base model cannot
    follow the output format").  One-sided exact binomial test against `max`, Clopper–Pearson CI; SUPPORTED
    when p < alpha, REFUTED when the lower end of the CI is at or above `max`, INCONCLUSIVE otherwise."""
    return _share_vs_bound(frame, "accuracy_ceiling", metric, where, max, -1, min_n, alpha)


def _share_vs_bound(frame: pd.DataFrame, rule: str, metric: str, where: dict[str, Any], bound: float, side: int,
                    min_n: int, alpha: float) -> Verdict:
    """The share of 0/1 rows of `metric` (selected by `where`) above `bound` (side +1) or below it (side −1):
    a one-sided exact binomial test and a two-sided Clopper–Pearson interval; REFUTED when the interval lies
    wholly on the wrong side of the bound."""
    rows = _select(frame, {"metric": metric, **where})
    name = f"{metric}[{_label(where)}]"
    if rows.empty:
        return _missing(frame, rule, name, where)
    vals = rows["value"].to_numpy(float)
    if not set(vals.tolist()) <= {0.0, 1.0}:
        raise ValueError(f"{rule} needs 0/1 values, '{metric}' has others")
    n, k = len(vals), int(vals.sum())
    est = k / n
    label = f"{'>' if side > 0 else '<'} {bound:g}"
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} items (< {min_n})", rule, name, est, n=n,
                       threshold=label, alpha=alpha)
    p = float(stats.binomtest(k, n, bound, alternative="greater" if side > 0 else "less").pvalue)
    ci = stats.binomtest(k, n, bound).proportion_ci(confidence_level=1 - alpha, method="exact")  # two-sided
    lo, hi = float(ci.low), float(ci.high)
    text = f"{k}/{n}{' correct' if side > 0 else ''} = {est:.3g}, {100 * (1 - alpha):g}% CI [{lo:.3g}, {hi:.3g}]"
    if side * (est - bound) > 0 and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"{text} {label}, binomial p = {p:.3g}"
    elif (hi <= bound) if side > 0 else (lo >= bound):
        edge = "above the floor" if side > 0 else "below the ceiling"
        outcome, why = Outcome.REFUTED, f"{text}: not {edge} {bound:g}"
    else:
        edge = "floor" if side > 0 else "ceiling"
        outcome, why = Outcome.INCONCLUSIVE, f"{text} vs {edge} {label}, binomial p = {p:.3g}"
    v = Verdict(outcome, why, rule, name, est, lo, hi, p, None, n, side * (est - bound), "margin", label, alpha)
    return sensitivity.judge(v, bound, side, binary=True)
