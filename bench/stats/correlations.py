"""Correlation rules with texts as the unit: ``correlation`` and ``correlation_difference``.

Both rules pool the matched rows (tokens) into one coefficient, but every interval and every p-value comes from
the same bootstrap over whole units (the `unit` column, texts): a correlation between tokens of one text is not
a set of independent pairs, so scipy's token-level test would be far too optimistic.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from bench.ground.registry import rule_def
from bench.stats import Outcome, Verdict, _boot_p, _decide, _label, _missing, _select, expanded_confidence, unit_note
from bench.stats.groups import SEED, _weights
from bench.stats import words


def _paired(frame: pd.DataFrame, x: dict, y: dict, key: list[str]) -> pd.DataFrame:
    rx, ry = _select(frame, x), _select(frame, y)
    cols = [c for c in key if c in frame.columns]
    return rx[cols + ["value"]].merge(ry[cols + ["value"]], on=cols, suffixes=("_x", "_y")).dropna()


def _corr(method: str):
    f = stats.pearsonr if method == "pearson" else stats.spearmanr
    return lambda x, y: float(f(x, y)[0]) if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")


def weighted_pearson(Wt: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of (x, y) with each row counted Wt[..., i] times: (..., N) weights → (...)."""
    tot = Wt.sum(axis=-1, keepdims=True)
    mx, my = (Wt @ x)[..., None] / tot, (Wt @ y)[..., None] / tot
    dx, dy = x - mx, y - my
    cov = (Wt * dx * dy).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt((Wt * dx * dx).sum(axis=-1) * (Wt * dy * dy).sum(axis=-1))


def weighted_partial(Wt: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Partial Pearson r of (x, y) given z, rows weighted by Wt (..., N): the correlation of what is left of x and
    of y once each is regressed linearly on z."""
    rxy, rxz, ryz = weighted_pearson(Wt, x, y), weighted_pearson(Wt, x, z), weighted_pearson(Wt, y, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rxy - rxz * ryz) / np.sqrt((1 - rxz * rxz) * (1 - ryz * ryz))


def _weighted_boot(units: np.ndarray, stat, n_resamples: int, confidence: float):
    """Bootstrap over whole units, vectorised: `stat` gets per-row weights (..., N) = resampled unit counts."""
    uniq, idx = np.unique(units, return_inverse=True)
    res = stats.bootstrap((np.arange(len(uniq)),), lambda i, axis=-1: stat(_weights(i, len(uniq))[..., idx]),
                          vectorized=True, n_resamples=n_resamples,
                          confidence_level=expanded_confidence(confidence, len(uniq)),
                          method="percentile", random_state=np.random.default_rng(SEED))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high),
            np.asarray(res.bootstrap_distribution, float))


def _unit_boot(units: np.ndarray, stat, n_resamples: int, confidence: float):
    """Percentile bootstrap over distinct units (whole texts) for a statistic of row indices."""
    uniq = np.unique(units)
    groups = [np.flatnonzero(units == u) for u in uniq]

    def on(idx):
        return stat(np.concatenate([groups[int(i)] for i in idx]))

    res = stats.bootstrap((np.arange(len(uniq)),), on, vectorized=False, n_resamples=n_resamples,
                          confidence_level=expanded_confidence(confidence, len(uniq)), method="percentile",
                          random_state=np.random.default_rng(SEED))
    dist = np.asarray(res.bootstrap_distribution, float)
    return float(res.confidence_interval.low), float(res.confidence_interval.high), dist


@rule_def("correlation", sentence=words.correlation)
def correlation(
    frame: pd.DataFrame, *, x: dict[str, Any], y: dict[str, Any], key: list[str] = ["sample", "position"],  # noqa: B006
    method: Literal["pearson", "spearman"] = "pearson", min: float = 0.0, given: dict[str, Any] | None = None,
    unit: str = "sample", min_n: int = 20, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 1000,
) -> Verdict:
    """Correlation between the rows selected by `x` and by `y`, matched on `key`, exceeds `min` (its interval
    too).  Interval and one-sided p from one bootstrap over units; effect: the other coefficient.  With `given`
    (Pearson only), the partial correlation given the rows it selects: what x and y share beyond what each
    shares linearly with that covariate."""
    if given is not None and method != "pearson":
        raise ValueError("correlation: `given` (a partial correlation) needs method = 'pearson'")
    name = f"r({_label(x)}, {_label(y)}{f' | {_label(given)}' if given else ''})"
    pairs = _paired(frame, x, y, key)
    if given is not None and not pairs.empty:
        cov = _select(frame, given)
        cols = [c for c in key if c in frame.columns]
        pairs = pairs.merge(cov[cols + ["value"]].rename(columns={"value": "value_z"}), on=cols).dropna()
    if pairs.empty:
        return _missing(frame, "correlation", name, x)
    if unit not in pairs.columns:
        raise ValueError(f"correlation: `key` must contain the unit column '{unit}'")
    xs, ys, units = pairs["value_x"].to_numpy(float), pairs["value_y"].to_numpy(float), pairs[unit].to_numpy()
    n = len(pairs)
    U = len(np.unique(units))
    if n < min_n or U < 3:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} matched tokens (< {min_n}) from {U} {unit}s",
                       "correlation", name, n=U, alpha=alpha)
    if given is not None:
        zs = pairs["value_z"].to_numpy(float)
        stat = lambda Wt: weighted_partial(Wt, xs, ys, zs)  # noqa: E731
        r, other = float(stat(np.ones(n))), _corr("pearson")(xs, ys)
        lo, hi, dist = _weighted_boot(units, stat, n_resamples, confidence)
        label, effect_name = f"partial r > {min:g}", "Pearson r without the covariate"
    else:
        r = _corr(method)(xs, ys)
        other = _corr("spearman" if method == "pearson" else "pearson")(xs, ys)
        if method == "pearson":
            lo, hi, dist = _weighted_boot(units, lambda Wt: weighted_pearson(Wt, xs, ys), n_resamples, confidence)
        else:
            lo, hi, dist = _unit_boot(units, lambda rows: _corr(method)(xs[rows], ys[rows]), n_resamples, confidence)
        label, effect_name = f"{method} r > {min:g}", "Spearman ρ" if method == "pearson" else "Pearson r"
    p = _boot_p(dist, min, +1, U)
    v = _decide("correlation", name, r, lo, hi, p, U, min, +1, label, alpha, effect=other, effect_name=effect_name,
                confidence=confidence)
    if v.outcome is Outcome.SUPPORTED and lo <= min:
        return Verdict(**{**v.__dict__, "outcome": Outcome.INCONCLUSIVE,
                          "reason": v.reason + f", but the interval does not exclude {min:g}"})
    extra = f"; without the covariate r = {other:.3g}" if given is not None else ""
    return Verdict(**{**v.__dict__, "reason": v.reason + f" ({unit_note(unit, U)}; {n} tokens{extra})"})


@rule_def("correlation_difference", sentence=words.correlation_difference)
def correlation_difference(
    frame: pd.DataFrame, *, x: dict[str, Any], y: dict[str, Any], subjects: list[str] = ["base", "instruct"],  # noqa: B006
    key: list[str] = ["sample", "position"], min_abs: float = 0.2, unit: str = "sample",  # noqa: B006
    min_n: int = 20, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 1000,
) -> Verdict:
    """|r_a − r_b| ≥ `min_abs` for the Pearson r of `x` and `y` in two subjects measured on the same texts."""
    name = f"|r({subjects[0]}) − r({subjects[1]})|"
    if "subject" not in frame.columns or not set(subjects) <= set(frame["subject"].dropna()):
        notes = "; ".join(frame.attrs.get("notes", [])) or "the frame has no rows for both subjects"
        return Verdict(Outcome.INCONCLUSIVE, notes, "correlation_difference", name, alpha=alpha)
    pa_, pb_ = (_paired(frame, {**x, "subject": s}, {**y, "subject": s}, key) for s in subjects)
    if min(len(pa_), len(pb_)) < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"too few matched tokens ({len(pa_)}, {len(pb_)})",
                       "correlation_difference", name, alpha=alpha)
    both = pd.concat([pa_.assign(_s=0), pb_.assign(_s=1)], ignore_index=True)
    xs, ys = both["value_x"].to_numpy(float), both["value_y"].to_numpy(float)
    first, units = both["_s"].to_numpy() == 0, both[unit].to_numpy()
    U = len(np.unique(units))

    def diff(Wt):  # the same texts resampled for both subjects (paired)
        return np.abs(weighted_pearson(Wt * first, xs, ys) - weighted_pearson(Wt * ~first, xs, ys))

    est = float(diff(np.ones(len(both))))
    lo, hi, dist = _weighted_boot(units, diff, n_resamples, confidence)
    p = _boot_p(dist, min_abs, +1, U)
    v = _decide("correlation_difference", name, est, lo, hi, p, U, min_abs, +1, f"≥ {min_abs:g}",
                alpha, effect=est, effect_name="|Δr|", confidence=confidence)
    return Verdict(**{**v.__dict__, "reason": v.reason + f" ({unit_note(unit, U)})"})
