"""The general rules: a threshold on a reduced metric, a paired difference, a value against a baseline
distribution, and the conjunction of other rules."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bench.ground.registry import rule_def
from bench.stats import exact
from bench.stats.control import Arm, arm_def
from bench.stats import (
    Outcome,
    Reduce,
    Verdict,
    _boot_p,
    _bootstrap,
    _bound,
    _decide,
    ci_name,
    _label,
    _matrix,
    _missing,
    _reducer,
    _select,
    combine,
    evaluate_parts,
)
from bench.stats import words


@rule_def("threshold", sentence=words.threshold)
def threshold(
    frame: pd.DataFrame,
    *,
    metric: str,
    min: float | None = None,
    max: float | None = None,
    reduce: Reduce = "mean",
    by: list[str] = [],  # noqa: B006  (never mutated; a tuple default would not type-check against TOML)
    where: dict[str, Any] = {},  # noqa: B006
    unit: str = "sample",
    min_n: int = 5,
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 2000,
) -> Verdict:
    """The reduced metric lies above `min` (or below `max`).

    reduce: ``mean`` — mean over units: with one 0/1 value per unit the exact binomial test and the
    Clopper–Pearson interval, otherwise the one-sample t-test and the t interval on the unit means;
    ``max_group_mean`` — mean over units within each group of `by` columns, then the largest group (e.g. the
    best head; bootstrap test); ``max``/``min`` — the exact worst case over all rows (no sampling, no p-value).
    """
    bound, side = _bound(min, max)
    name = metric
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "threshold", metric, where)
    label = f"{'≥' if side > 0 else '≤'} {bound:g}"
    if reduce in ("max", "min"):
        est = float(rows["value"].max() if reduce == "max" else rows["value"].min())
        ok = (est >= bound) if side > 0 else (est <= bound)
        outcome = Outcome.SUPPORTED if ok else Outcome.REFUTED
        why = f"{reduce} {name} = {est:.4g} {'meets' if ok else 'misses'} {label} (exact, {len(rows)} rows)"
        return Verdict(outcome, why, "threshold", metric, est, n=len(rows), threshold=label, alpha=alpha,
                       effect=est - bound, effect_name="margin",
                       sensitivity=None if ok else f"exact: the {reduce} over all {len(rows)} rows, no sampling")
    mat = _matrix(rows, unit, by).to_numpy(float)
    n = mat.shape[0]
    stat = _reducer(reduce)
    est = float(stat(mat))
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} {unit}s (< {min_n})", "threshold", metric, est, n=n,
                       threshold=label, alpha=alpha)
    if reduce == "mean" and mat.shape[1] == 1 and exact.is_binary(mat):
        k = int(mat.sum())
        p, lo, hi = exact.one_sample(k, n, bound, side, confidence)
        return _decide("threshold", metric, est, lo, hi, p, n, bound, side, label, alpha, effect=est - bound,
                       effect_name="margin", unit=unit, resampled=False, binary=True,
                       detail=f"{k} of {n} = {est:.4g}, Clopper–Pearson {ci_name(confidence)} [{lo:.4g}, {hi:.4g}], "
                              f"exact binomial test vs {label}", confidence=confidence)
    if reduce == "mean":
        vals = mat.mean(axis=1)
        p, lo, hi = _t_test(vals, bound, side, confidence)
        p, lo, hi, capped = share_cap(vals, bound, side, confidence, p, lo, hi)
        detail = (f"{est:.4g}, {ci_name(confidence)} [{lo:.4g}, {hi:.4g}], {capped}" if capped else None)
        return _decide("threshold", metric, est, lo, hi, p, n, bound, side, label, alpha, detail=detail,
                       effect=est - bound, effect_name="margin", unit=unit, resampled=False, confidence=confidence)
    lo, hi, boot = _bootstrap(lambda m: stat(m), mat, confidence, n_resamples, bca=False)
    p = _boot_p(boot, bound, side, n)
    return _decide("threshold", metric, est, lo, hi, p, n, bound, side, label, alpha,
                   effect=est - bound, effect_name="margin", unit=unit, confidence=confidence)


def share_cap(values: np.ndarray, bound: float, side: int, confidence: float, p: float, lo: float,
              hi: float) -> tuple[float, float, float, str]:
    """Values that all lie in [0, 1] (shares: a fact's share of prompts answered) cannot show a mean beyond a
    bound b inside (0, 1) more surely than n of n 0/1 values would: a null that puts every unit at 0 or 1 with
    mean b gives the most extreme sample (all 1 for a claim "≥ b") probability bⁿ, so no valid test of the mean
    has p below it, and the interval reaches at least to Clopper–Pearson's end for n of n, ((1 − c) / 2)^(1/n):
    the exact test of :func:`bench.stats.exact.one_sample` on all n of n (none of n for a claim "≤ b").
    The t-test ignores the bound and, with values crowded against 1, claims far more (nine facts at 1 and one at
    0.75 give p = 0.007 against 0.9; ten at 1 give the exact 0.35).  Returns (p, low, high, and what was raised,
    "" when nothing was)."""
    v = np.asarray(values, float)
    n = len(v)
    if (not (0.0 < bound < 1.0) or n == 0 or v.min() < 0.0 or v.max() > 1.0
            or not np.isfinite(lo) or not np.isfinite(hi)):  # identical values: no interval, p = 1
        return p, lo, hi, ""
    floor, n_lo, n_hi = exact.one_sample(n if side > 0 else 0, n, bound, side, confidence)  # all n, or none, of n
    p2 = max(p, floor)
    lo2, hi2 = (min(lo, n_lo), hi) if side > 0 else (lo, max(hi, n_hi))
    if p2 == p and (lo2, hi2) == (lo, hi):
        return p, lo, hi, ""
    tail = f"{bound:g}^{n}" if side > 0 else f"(1 − {bound:g})^{n}"
    return p2, lo2, hi2, (f"t-test raised to what {n} of {n} 0/1 values could show, values in [0, 1] "
                          f"(p ≥ {tail} = {floor:.3g})")


def _t_test(values: np.ndarray, bound: float, side: int, confidence: float) -> tuple[float, float, float]:
    """(one-sided p, low, high): the one-sample t-test of the per-unit values against `bound` and the t interval
    of their mean.  Zero variance gives p = 1 and no interval (NaN, NaN): every unit gave the same value, so the
    data say nothing of the spread, and a point would claim certainty (0/1 data never get here: they go to exact)."""
    values = np.asarray(values, float)
    if np.ptp(values) == 0:
        return 1.0, float("nan"), float("nan")
    res = stats.ttest_1samp(values, popmean=bound, alternative="greater" if side > 0 else "less")
    ci = stats.ttest_1samp(values, popmean=bound).confidence_interval(confidence_level=confidence)
    return float(res.pvalue), float(ci.low), float(ci.high)


@rule_def("paired_difference", sentence=words.paired_difference)
def paired_difference(
    frame: pd.DataFrame,
    *,
    a: dict[str, Any],
    b: dict[str, Any],
    min: float = 0.0,
    reduce: Reduce = "mean",
    by: list[str] = [],  # noqa: B006
    unit: str = "sample",
    min_n: int = 5,
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 2000,
) -> Verdict:
    """reduce(a) − reduce(b), paired by unit, is at least `min`.

    `a` and `b` select rows by column values (e.g. ``{metric = "loss_first"}``).  With ``reduce = "mean"``:
    when both sides hold one 0/1 value per unit, the exact McNemar test and its exact interval
    (:func:`bench.stats.exact.paired`; `min` must then be 0); otherwise the one-sided Wilcoxon signed-rank test
    of the per-unit differences minus `min` (exact null distribution for up to 50 units without ties) and the t
    interval of their mean.  Other reductions: a bootstrap test.  Effect
    size: Cohen's d_z of the per-unit differences.
    """
    ra, rb = _select(frame, a), _select(frame, b)
    metric = f"{_label(a)} − {_label(b)}"
    if ra.empty or rb.empty:
        return _missing(frame, "paired_difference", metric, a if ra.empty else b)
    ma, mb = _matrix(ra, unit, by), _matrix(rb, unit, by)
    common = ma.index.intersection(mb.index)
    ma, mb = ma.loc[common], mb.loc[common]
    n = len(common)
    label = f"≥ {min:g}"
    stat = _reducer(reduce)
    if n == 0:
        return Verdict(Outcome.INCONCLUSIVE, f"no {unit} has both sides", "paired_difference", metric, alpha=alpha)
    A, B = ma.to_numpy(float), mb.to_numpy(float)
    est = float(stat(A) - stat(B))
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} paired {unit}s (< {min_n})", "paired_difference", metric,
                       est, n=n, threshold=label, alpha=alpha)
    d = A.mean(axis=1) - B.mean(axis=1)
    sd = float(np.std(d, ddof=1)) if n > 1 else float("nan")
    dz = float(np.mean(d) / sd) if sd > 0 else float("nan")
    if reduce == "mean" and A.shape[1] == B.shape[1] == 1 and exact.is_binary(A) and exact.is_binary(B):
        if min != 0:
            raise ValueError("paired_difference on 0/1 values tests with McNemar, which needs min = 0")
        n10, n01 = int(((A == 1) & (B == 0)).sum()), int(((A == 0) & (B == 1)).sum())
        p, lo, hi = exact.paired(n10, n01, n, confidence)
        return _decide("paired_difference", metric, est, lo, hi, p, n, min, +1, label, alpha, effect=dz,
                       effect_name="Cohen's d_z", unit=unit, resampled=False,
                       detail=f"{est:.4g}, exact {ci_name(confidence)} [{lo:.4g}, {hi:.4g}], exact McNemar: {n10} "
                              f"{unit}s only under a, {n01} only under b", confidence=confidence)
    if reduce == "mean":
        shifted = d - min
        _, lo, hi = _t_test(shifted, 0.0, +1, confidence)
        lo, hi = lo + min, hi + min
        p = 1.0 if np.allclose(shifted, 0) else float(stats.wilcoxon(shifted, alternative="greater").pvalue)
        return _decide("paired_difference", metric, est, lo, hi, p, n, min, +1, label, alpha,
                       effect=dz, effect_name="Cohen's d_z", unit=unit, resampled=False, confidence=confidence)
    both = np.concatenate([A, B], axis=1)
    ka = A.shape[1]
    lo, hi, boot = _bootstrap(lambda m: stat(m[..., :ka]) - stat(m[..., ka:]), both, confidence, n_resamples,
                              bca=False)
    p = _boot_p(boot, min, +1, n)
    return _decide("paired_difference", metric, est, lo, hi, p, n, min, +1, label, alpha,
                   effect=dz, effect_name="Cohen's d_z", unit=unit, confidence=confidence)


@rule_def("exceeds_baseline", sentence=words.exceeds_baseline)
def exceeds_baseline(
    frame: pd.DataFrame,
    *,
    observed: dict[str, Any],
    baseline: dict[str, Any],
    quantile: float = 0.99,
    alpha: float = 0.05,
) -> Verdict:
    """The observed value exceeds the `quantile` of a baseline distribution (e.g. random matrices).

    p-value: the Monte Carlo rank p = (1 + #{baseline ≥ observed}) / (1 + N).  Effect size: z-score of the
    observed value against the baseline.
    """
    ro, rb = _select(frame, observed), _select(frame, baseline)
    metric = _label(observed)
    if ro.empty or rb.empty:
        return _missing(frame, "exceeds_baseline", metric, observed if ro.empty else baseline)
    obs = float(ro["value"].mean())
    base = rb["value"].to_numpy(float)
    n = len(base)
    cut = float(np.quantile(base, quantile))
    label = f"> q{quantile:g} of baseline ({cut:.4g})"
    p = float((1 + np.sum(base >= obs)) / (1 + n))
    sd = float(np.std(base, ddof=1)) if n > 1 else float("nan")
    z = (obs - float(np.mean(base))) / sd if sd > 0 else float("nan")
    if n < math.ceil(1 / (1 - quantile)):
        return Verdict(Outcome.INCONCLUSIVE, f"{n} baseline draws cannot resolve the {quantile:g} quantile",
                       "exceeds_baseline", metric, obs, p_value=p, n=n, threshold=label, alpha=alpha)
    if obs > cut and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"{obs:.4g} exceeds the baseline's q{quantile:g} = {cut:.4g}"
    elif obs > cut:
        outcome, why = Outcome.INCONCLUSIVE, f"{obs:.4g} exceeds q{quantile:g} but p = {p:.3g} ≥ α"
    else:
        outcome, why = Outcome.REFUTED, f"{obs:.4g} does not exceed the baseline's q{quantile:g} = {cut:.4g}"
    sens = (f"exact comparison with {n} baseline draws (smallest attainable p {1 / (1 + n):.2g} < α)"
            if outcome is Outcome.REFUTED and 1 / (1 + n) < alpha else None)
    return Verdict(outcome, why, "exceeds_baseline", metric, obs, p_value=p, n=n, effect=z,
                   effect_name="z vs baseline", threshold=label, alpha=alpha, sensitivity=sens)


@rule_def("all", nested="of", sentence=words.all_of)
def all_of(frame: pd.DataFrame, *, of: list[dict[str, Any]], alpha: float = 0.05) -> Verdict:
    """Every sub-rule in `of` must hold.  REFUTED if any is refuted; the headline numbers are the first part's."""
    return combine(evaluate_parts(frame, of, alpha), alpha)




@arm_def("threshold")
def _threshold_arm(frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None,
                   reduce: Reduce = "mean", by: list[str] = [], where: dict[str, Any] = {},  # noqa: B006
                   unit: str = "sample", **_: Any):
    """The reduced metric over units.  A worst case over rows (``max``, ``min``) is exact: its rows pair by
    `unit` (one row each, e.g. a count per language) and the difference is the sign test's."""
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "threshold", metric, where)
    side = _bound(min, max)[1]
    if reduce in ("max", "min"):
        if unit not in rows.columns or rows[unit].isna().any() or rows[unit].duplicated().any():
            return Verdict(Outcome.INCONCLUSIVE, f"reduce '{reduce}' is an exact worst case: its rows pair with the "
                           f"control's only by a '{unit}' column that names each row once", "threshold")
        return Arm(rows.set_index(unit)[["value"]].astype(float), side=side, unit=unit, name=metric, exact=True)
    return Arm(_matrix(rows, unit, by), side=side, unit=unit, name=metric, stat=_reducer(reduce))


@arm_def("paired_difference")
def _paired_arm(frame: pd.DataFrame, *, a: dict[str, Any], b: dict[str, Any], reduce: Reduce = "mean",
                by: list[str] = [], unit: str = "sample", **_: Any):  # noqa: B006
    """reduce(a) − reduce(b) over the units (and `by` groups) that have both sides."""
    ra, rb = _select(frame, a), _select(frame, b)
    if ra.empty or rb.empty:
        return _missing(frame, "paired_difference", f"{_label(a)} − {_label(b)}", a if ra.empty else b)
    ma, mb = _matrix(ra, unit, by), _matrix(rb, unit, by)
    common = ma.index.intersection(mb.index)
    k, stat = ma.shape[1], _reducer(reduce)
    table = pd.concat([ma.loc[common], mb.loc[common]], axis=1, ignore_index=True)
    return Arm(table, side=+1, unit=unit, name=f"{_label(a)} − {_label(b)}",
               stat=lambda m: stat(m[..., :k]) - stat(m[..., k:]))
