"""The general rules: a threshold on a reduced metric, a paired difference, a value against a baseline
distribution, and the conjunction of other rules."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bench.core.registry import rule_def
from bench.stats import (
    Outcome,
    Reduce,
    Verdict,
    _boot_p,
    _bootstrap,
    _bound,
    _decide,
    _label,
    _matrix,
    _missing,
    _reducer,
    _select,
    combine,
    evaluate_parts,
)


@rule_def("threshold")
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

    reduce: ``mean`` — mean over units (one-sample t-test); ``max_group_mean`` — mean over units within each
    group of `by` columns, then the largest group (e.g. the best head; bootstrap test); ``max``/``min`` — the
    exact worst case over all rows (no sampling, no p-value).
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
                       effect=est - bound, effect_name="margin")
    mat = _matrix(rows, unit, by).to_numpy(float)
    n = mat.shape[0]
    stat = _reducer(reduce)
    est = float(stat(mat))
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} {unit}s (< {min_n})", "threshold", metric, est, n=n,
                       threshold=label, alpha=alpha)
    lo, hi, boot = _bootstrap(lambda m: stat(m), mat, confidence, n_resamples, bca=(reduce == "mean"))
    if reduce == "mean":
        alt = "greater" if side > 0 else "less"
        p = float(stats.ttest_1samp(mat.mean(axis=1), popmean=bound, alternative=alt).pvalue)
    else:
        p = _boot_p(boot, bound, side)
    return _decide("threshold", metric, est, lo, hi, p, n, bound, side, label, alpha,
                   effect=est - bound, effect_name="margin", unit=unit)


@rule_def("paired_difference")
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

    `a` and `b` select rows by column values (e.g. ``{metric = "loss_first"}``).  With ``reduce = "mean"`` the
    test is a one-sided Wilcoxon signed-rank test of the per-unit differences minus `min`; otherwise a
    bootstrap test.  Effect size: Cohen's d_z of the per-unit differences.
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
    both = np.concatenate([A, B], axis=1)
    ka = A.shape[1]
    lo, hi, boot = _bootstrap(lambda m: stat(m[..., :ka]) - stat(m[..., ka:]), both, confidence, n_resamples,
                              bca=(reduce == "mean"))
    d = A.mean(axis=1) - B.mean(axis=1)
    sd = float(np.std(d, ddof=1)) if n > 1 else float("nan")
    dz = float(np.mean(d) / sd) if sd > 0 else float("nan")
    if reduce == "mean":
        shifted = d - min
        p = 1.0 if np.allclose(shifted, 0) else float(stats.wilcoxon(shifted, alternative="greater").pvalue)
    else:
        p = _boot_p(boot, min, +1)
    return _decide("paired_difference", metric, est, lo, hi, p, n, min, +1, label, alpha,
                   effect=dz, effect_name="Cohen's d_z", unit=unit)


@rule_def("exceeds_baseline")
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
    return Verdict(outcome, why, "exceeds_baseline", metric, obs, p_value=p, n=n, effect=z,
                   effect_name="z vs baseline", threshold=label, alpha=alpha)


@rule_def("all", nested="of")
def all_of(frame: pd.DataFrame, *, of: list[dict[str, Any]], alpha: float = 0.05) -> Verdict:
    """Every sub-rule in `of` must hold.  REFUTED if any is refuted; the headline numbers are the first part's."""
    return combine(evaluate_parts(frame, of, alpha), alpha)


