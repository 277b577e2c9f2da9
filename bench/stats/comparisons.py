"""Layer-wise rules of the LLM-Microscope family (and the reading notes' claims that go with it).

* ``trend`` — Spearman ρ between layer index and the per-layer mean of a metric;
* ``layer_majority`` — the share of layers whose mean lies on the claimed side of a bound (> ½ to hold);
* ``layer_summary`` — a median / min / max over per-layer values, optionally without the first and last layers;
* ``accuracy_drop`` — paired accuracy difference between two input conditions, exact McNemar test over questions;
* ``gated`` — preconditions first (e.g. "the decoder learned"): if any fails the claim is INCONCLUSIVE.

``group_comparison`` lives in :mod:`bench.stats.groups`, the correlation rules in :mod:`bench.stats.correlations`.
Tokens of one text are not independent, so every interval and p-value resamples whole texts (the `unit` column).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from bench.ground.registry import rule_def
from bench.stats import exact
from bench.stats import (
    Outcome,
    Verdict,
    _boot_p,
    _bootstrap,
    _bound,
    _decide,
    _label,
    _matrix,
    _missing,
    _select,
    evaluate_parts,
    unit_note,
)
from bench.stats.correlations import _corr, _paired, _unit_boot, _weighted_boot, weighted_pearson  # noqa: F401
from bench.stats.groups import SEED, _delta_of, _pair_sums, _weights, cliffs_delta, majority  # noqa: F401
from bench.stats import words
from bench.stats.control import Arm, arm_def

_majority = majority


def _spearman_rows(m: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Spearman ρ between `levels` (G,) and the column means of resampled matrices (..., n, G)."""
    means = np.asarray(m, float).mean(axis=-2)  # (..., G)
    rm = stats.rankdata(means, axis=-1)
    rl = stats.rankdata(levels)
    rm = rm - rm.mean(axis=-1, keepdims=True)
    rl = rl - rl.mean()
    return (rm @ rl) / np.sqrt((rm * rm).sum(axis=-1) * (rl @ rl))


@rule_def("trend", sentence=words.trend)
def trend(
    frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None, over: str = "layer",
    where: dict[str, Any] = {}, unit: str = "sample", min_n: int = 5,  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """Spearman ρ between `over` (layer index) and the mean of `metric` per layer lies above `min` / below
    `max`; interval and p-value by bootstrap over units."""
    bound, side = _bound(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "trend", metric, where)
    mat = _matrix(rows, unit, [over])
    levels = np.asarray(mat.columns, float)
    m = mat.to_numpy(float)
    est = float(_spearman_rows(m, levels))
    label = f"ρ({over}, {metric}) {'≥' if side > 0 else '≤'} {bound:g}"
    if m.shape[0] < min_n or len(levels) < 3:
        return Verdict(Outcome.INCONCLUSIVE, f"only {m.shape[0]} {unit}s and {len(levels)} {over}s", "trend",
                       metric, est, n=m.shape[0], threshold=label, alpha=alpha)
    lo, hi, boot = _bootstrap(lambda x: _spearman_rows(x, levels), m, confidence, n_resamples, bca=False)
    p = _boot_p(boot, bound, side, m.shape[0])
    return _decide("trend", metric, est, lo, hi, p, m.shape[0], bound, side, label, alpha, effect=est,
                   effect_name="Spearman ρ", unit=unit, confidence=confidence)


def _in_layers(min: float | None, max: float | None) -> tuple[str, Any]:
    """The bound's words and the per-layer test of `layer_majority`: above `min`, below `max`, or between."""
    if min is not None and max is not None:
        if min >= max:
            raise ValueError(f"layer_majority: min ({min:g}) must lie below max ({max:g})")
        return f"in [{min:g}, {max:g}]", lambda means: (means >= min) & (means <= max)
    bound, side = _bound(min, max)
    return f"{'≥' if side > 0 else '≤'} {bound:g}", lambda means: side * (means - bound) >= 0


def _layer_share(holds):
    """units × layers (… × n × L) → the share of layers whose mean over units passes `holds`."""
    return lambda x: holds(np.asarray(x, float).mean(axis=-2)).mean(axis=-1)


@rule_def("layer_majority", band=True, sentence=words.layer_majority)
def layer_majority(
    frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None, over: str = "layer",
    where: dict[str, Any] = {}, unit: str = "sample", min_n: int = 5,  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """In more than half of the layers, the mean of `metric` over units lies above `min` (below `max`; between
    them when both are given)."""
    label, holds = _in_layers(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "layer_majority", metric, where)
    m = _matrix(rows, unit, [over]).to_numpy(float)
    if m.shape[0] < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {m.shape[0]} {unit}s (< {min_n})", "layer_majority", metric,
                       n=m.shape[0], alpha=alpha)
    share = _layer_share(holds)
    est = float(share(m))
    lo, hi, boot = _bootstrap(share, m, confidence, n_resamples, bca=False)
    p = _boot_p(boot, 0.5, +1, m.shape[0])
    means = m.mean(axis=0)
    return _majority("layer_majority", metric, est, lo, hi, p, m.shape[1], alpha, over,
                     f"per-{over} means from {means.min():.3g} to {means.max():.3g} vs {label}; "
                     f"{unit_note(unit, m.shape[0])}", n_units=m.shape[0], confidence=confidence)


@arm_def("layer_majority")
def _layer_majority_arm(frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None,
                        over: str = "layer", where: dict[str, Any] = {}, unit: str = "sample",  # noqa: B006
                        **_: Any):
    """The share of layers that pass, from the units × layers table: trained − control pairs the units (texts),
    and both models have the same layers (the control is the trained model's config)."""
    label, holds = _in_layers(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "layer_majority", metric, where)
    return Arm(_matrix(rows, unit, [over]), side=+1, unit=unit, name=f"share of {over}s {label}",
               stat=_layer_share(holds))


def check_skips(skip_first: int, skip_last: int, n: int, over: str = "layer") -> None:
    """A spec's skips must leave at least one of the model's `n` layers: otherwise the spec does not fit it."""
    if skip_first < 0 or skip_last < 0 or skip_first + skip_last >= n:
        raise ValueError(f"skip_first = {skip_first} and skip_last = {skip_last} leave none of this model's "
                         f"{n} {over}s")


@rule_def("layer_summary", sentence=words.layer_summary)
def layer_summary(
    frame: pd.DataFrame, *, metric: str, reduce: Literal["median", "min", "max", "mean"] = "median",
    min: float | None = None, max: float | None = None, over: str = "layer", skip_first: int = 0,
    skip_last: int = 0, where: dict[str, Any] = {}, alpha: float = 0.05,  # noqa: B006
) -> Verdict:
    """`reduce` over per-layer values (rows averaged per layer), after dropping the first `skip_first` and
    last `skip_last` layers, lies above `min` / below `max`.  Exact: the values are not a sample."""
    bound, side = _bound(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "layer_summary", metric, where)
    per = rows.groupby(over)["value"].mean().sort_index()
    check_skips(skip_first, skip_last, len(per), over)
    per = per.iloc[skip_first : len(per) - skip_last]
    est = float(getattr(np, reduce)(per.to_numpy(float)))
    label = f"{reduce} {'≥' if side > 0 else '≤'} {bound:g}"
    ok = side * (est - bound) >= 0
    why = (f"{reduce} over {len(per)} {over}s ({per.index[0]}–{per.index[-1]}) = {est:.4g} "
           f"{'meets' if ok else 'misses'} {label}; range {per.min():.4g}–{per.max():.4g} (exact)")
    return Verdict(Outcome.SUPPORTED if ok else Outcome.REFUTED, why, "layer_summary", metric, est, n=len(per),
                   effect=est - bound, effect_name="margin", threshold=label, alpha=alpha,
                   sensitivity=None if ok else f"exact: the {reduce} over all {len(per)} {over}s, no sampling")


def paired_accuracy(frame: pd.DataFrame, rule: str, a: dict[str, Any], b: dict[str, Any], min: float, unit: str,
                    min_n: int, alpha: float, confidence: float, n_resamples: int, word: str, units: str):
    """acc(a) − acc(b) > `min` over the `unit`s both conditions share (0/1 rows): the exact one-sided McNemar test
    (binomial on the discordant pairs) and its exact interval on the difference (:func:`bench.stats.exact.paired`).
    Returns the verdict, the paired table (None when there is nothing to test), and the counts right only under
    a / only under b."""
    name = f"accuracy {_label(a)} − {_label(b)}"
    ra, rb = _select(frame, a), _select(frame, b)
    if ra.empty or rb.empty:
        return _missing(frame, rule, name, a if ra.empty else b), None, 0, 0
    m = pd.concat([ra.groupby(unit)["value"].mean().rename("a"), rb.groupby(unit)["value"].mean().rename("b")],
                  axis=1).dropna()
    n = len(m)
    est = float(m["a"].mean() - m["b"].mean())
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} paired {units} (< {min_n})", rule, name, est, n=n,
                       alpha=alpha), None, 0, 0
    n10 = int(((m["a"] > 0.5) & (m["b"] <= 0.5)).sum())
    n01 = int(((m["a"] <= 0.5) & (m["b"] > 0.5)).sum())
    p, lo, hi = exact.paired(n10, n01, n, confidence)
    v = _decide(rule, name, est, lo, hi, p, n, min, +1, f"{word} > {min:g}", alpha, unit=unit, effect=est,
                effect_name=f"accuracy {word}", resampled=False, confidence=confidence)
    return v, m, n10, n01


@rule_def("accuracy_drop", sentence=words.accuracy_drop)
def accuracy_drop(
    frame: pd.DataFrame, *, a: dict[str, Any], b: dict[str, Any], min: float = 0.0, unit: str = "sample",
    min_n: int = 10, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
    smallest_effect: float | None = None, power: float = 0.8,
) -> Verdict:
    """Accuracy (0/1 rows) under `a` minus under `b`, paired by question, is above `min`: exact McNemar test
    (binomial on the discordant pairs), exact interval (:func:`bench.stats.exact.paired`).  With `smallest_effect` (the smallest drop
    the paper reports) the reason states the test's power to detect it at this n and the n that `power` needs."""
    v, m, n10, n01 = paired_accuracy(frame, "accuracy_drop", a, b, min, unit, min_n, alpha, confidence, n_resamples,
                                     "drop", "questions")
    if m is None:
        return v
    n = len(m)
    detail = f" (accuracy {m['a'].mean():.3f} → {m['b'].mean():.3f}; McNemar {n10} lost vs {n01} gained)"
    if smallest_effect:
        pw, need = mcnemar_power(smallest_effect, (n10 + n01) / n, n, alpha, power)
        needs = f"n > {MAX_PAIRS}" if need > MAX_PAIRS else f"n ≈ {need}"
        detail += f"; power to detect a drop of {smallest_effect:g} at n = {n}: {pw:.2f} ({power:.0%} needs {needs})"
        if v.outcome is Outcome.INCONCLUSIVE and pw < power:
            detail += ", so the test is underpowered for the paper's effect"
    return Verdict(**{**v.__dict__, "reason": v.reason + detail})


MAX_PAIRS = 20_000  # the most pairs mcnemar_power searches for the n a power needs
_SCREEN = 1e-9  # an m whose recurrence is this close to the power is checked exactly (its rounding: ≤ m·ε ≈ 4e-12)


def mcnemar_power(effect: float, discordant: float, n: int, alpha: float, power: float) -> tuple[float, int]:
    """Exact power of the one-sided McNemar test at `n` pairs for a drop `effect` = p10 − p01 with discordant share
    ψ = p10 + p01 (at least `effect`), and the fewest pairs that reach `power` (MAX_PAIRS + 1 when even
    :data:`MAX_PAIRS` pairs do not).

    The discordant pairs D are Binomial(n, ψ); given D, those favouring a are Binomial(D, p10/ψ), and the test
    (:func:`bench.stats.exact.paired`) rejects where their exact binomial p-value against ½ is below `alpha`:
    power = Σ_D P(D) · P(reject | D), the test the verdict takes, not a normal approximation of it."""
    psi = min(1.0, max(float(discordant), abs(effect) + 1e-9))
    q = (psi + effect) / (2 * psi)

    # P(reject | D = d) for every d at once: the exact test's rejection region (p < α against ½), for all d
    # together, since the search below reads it up to MAX_PAIRS
    d = np.arange(max(int(n), MAX_PAIRS) + 1)
    reject = stats.binom.sf(exact.upper_critical(d, 0.5, alpha) - 1, d, q)  # (d = 0: k = 1, never a rejection)

    def at(m: int) -> float:
        return float(np.dot(stats.binom.pmf(d[: m + 1], m, psi), reject[: m + 1]))

    if at(MAX_PAIRS) < power:  # not reached in the range searched (said "n > MAX_PAIRS")
        return at(int(n)), MAX_PAIRS + 1
    return at(int(n)), _first_reaching(psi, reject, power, at)


def _first_reaching(psi: float, reject: np.ndarray, power: float, at) -> int:
    """The fewest pairs m ≥ 1 with at(m) ≥ `power` (one exists at or below MAX_PAIRS).  Power is not monotone in m
    (an exact test's saw-tooth), so every m is looked at, in order; evaluating scipy's pmf afresh at each m cost
    seconds when m reaches thousands.  Each m's distribution of discordant pairs is built from the last one's
    (P_m(d) = (1 − ψ)·P_(m−1)(d) + ψ·P_(m−1)(d − 1), a convex combination: its rounding stays near m·ε), and an m
    that comes within _SCREEN of `power` is settled by the exact at(m), so the answer is the exact scan's."""
    for m, pmf in _discordant_pmfs(psi, MAX_PAIRS):
        if float(np.dot(pmf, reject[: m + 1])) >= power - _SCREEN and at(m) >= power:
            return m
    raise AssertionError("at(MAX_PAIRS) reached the power, so some m does")  # pragma: no cover


def _discordant_pmfs(psi: float, last: int):
    """(m, the Binomial(m, ψ) pmf over 0 … m) for m = 1 … `last`, each built from the one before (a view into one
    buffer: read it before the next)."""
    f = np.zeros(last + 1)
    f[0] = 1.0
    for m in range(1, last + 1):
        shifted = f[: m] * psi
        f[: m] *= 1.0 - psi
        f[1: m + 1] += shifted
        yield m, f[: m + 1]



@rule_def("gated", nested="of", sentence=words.gated)
def gated(frame: pd.DataFrame, *, of: list[dict[str, Any]], alpha: float = 0.05) -> Verdict:
    """Every rule of `of` but the last is a precondition; the last one decides the claim.  A precondition
    that is not SUPPORTED makes the verdict INCONCLUSIVE with its reason (no p-value: nothing was tested)."""
    if not of:
        raise ValueError("gated needs at least the claim's rule in 'of'")
    *gates, claim = evaluate_parts(frame, of, alpha)
    failed = [g for g in gates if g.outcome is not Outcome.SUPPORTED]
    if failed:
        why = "precondition not met: " + "; ".join(f"{g.metric}: {g.reason}" for g in failed)
        return Verdict(Outcome.INCONCLUSIVE, why, "gated", claim.metric, claim.estimate, claim.ci_low, claim.ci_high,
                       None, None, claim.n, claim.effect, claim.effect_name, claim.threshold, alpha)
    return claim
