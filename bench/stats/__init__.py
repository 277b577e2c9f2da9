"""Decision rules: a tidy frame and the spec's rule parameters in, a :class:`Verdict` out.

Every rule follows one policy so that verdicts mean the same thing across claims:

* SUPPORTED — the estimate lies on the claimed side of the threshold and the test's p-value is below ``alpha``
  (after Benjamini–Hochberg adjustment over the claim's family — one spec set × model — see :func:`adjust`);
* REFUTED — the confidence interval lies entirely on the wrong side (or, for exact checks, the value does), *and*
  the measurement could have shown the effect: the verdict's ``sensitivity`` says why (the power at the claim's
  reference effect, or a precondition the spec declares, see :mod:`bench.stats.sensitivity`); without one the
  outcome is INCONCLUSIVE, "could not have shown the effect: …";
* INCONCLUSIVE — anything between, too few samples, or rows the rule needs are missing (the reason says which).

An estimate exactly on the bound is not on the claimed side.  0/1 values per unit are decided with exact tests
(:mod:`bench.stats.exact`: binomial with a Clopper–Pearson interval, McNemar), found by the rule from the values
themselves.  Bootstrap intervals and p-values are small-sample corrected (the expanded percentile method:
:func:`expanded_confidence`, :func:`_boot_p`) and a bootstrap rule refuses to decide below
:data:`CALIBRATED_MIN_N` units, the smallest count at which tests/stats/test_calibration.py shows its false-positive
rate at α.

Rules never touch a model.  Every p-value comes from the same resampling unit as its confidence interval: the
spec names it (the `unit` parameter, ``sample`` = text unless a rule says otherwise), the rule first reduces the
rows to one value (or one row of a matrix) per unit, and both the interval (``scipy.stats.bootstrap`` over units)
and the test (a cluster-bootstrap p, or a scipy test of the per-unit values) work on those.  No test treats
tokens or neurons of one unit as independent draws; the reason names the unit and how many there were.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any, Literal, Mapping

import numpy as np
import pandas as pd

from bench.ground.verdicts import Outcome, Verdict, errored, skipped  # noqa: F401 - the types rules return


class _Scipy:
    """``scipy.stats``, imported on first use: a run replayed from its record never needs it."""

    def __getattr__(self, name: str):
        import scipy.stats

        return getattr(scipy.stats, name)


stats = _Scipy()

Reduce = Literal["mean", "max_group_mean", "max", "min"]


def evaluate(frame: pd.DataFrame, rule_name: str, params: Mapping[str, Any]) -> Verdict:
    """Run the registered rule `rule_name` on `frame`, then check that a REFUTED could have shown the effect.

    The keys every rule takes (``requires``, ``smallest_effect``, ``smallest_effect_source``, ``training_runs``; see
    :data:`bench.ground.registry.COMMON_RULE_PARAMS`) are handled here and by :func:`_decide`, not by the rule."""
    import inspect

    from bench.ground import registry
    from bench.stats import sensitivity

    info = registry.rule(rule_name)
    params = dict(params)
    own = inspect.signature(info.fn).parameters
    column = params.pop("training_runs", None) if "training_runs" not in own else None
    if column:
        from bench.stats import training_runs

        return training_runs.decide(frame, column, lambda rows: evaluate(rows, rule_name, params))
    common = {k: params[k] for k in sensitivity.KEYS if k in params}
    for k in common:
        if k not in own:
            params.pop(k)
    with warnings.catch_warnings(), sensitivity.reference(common):
        warnings.simplefilter("ignore", category=RuntimeWarning)
        verdict = info.fn(frame, **params)
    return sensitivity.guard(frame, verdict, common)


def evaluate_parts(frame: pd.DataFrame, of: list[dict[str, Any]], alpha: float) -> list[Verdict]:
    """Evaluate each sub-rule table of a combining rule; a part without its own `alpha` gets the parent's."""
    parts = []
    for sub in of:
        sub = dict(sub)
        name = sub.pop("rule")
        sub.setdefault("alpha", alpha)
        parts.append(evaluate(frame, name, sub))
    return parts


def conjunction(outcomes: list[Outcome] | tuple[Outcome, ...]) -> Outcome:
    """The one policy of every rule whose claim holds only when all of its parts hold ("all of", "beats every
    baseline"): ERROR when a part failed; SUPPORTED when every part is; REFUTED when any part is (a conjunction
    with one false part is false, and that part's REFUTED already carries its sensitivity); else INCONCLUSIVE."""
    if Outcome.ERROR in outcomes:
        return Outcome.ERROR
    if outcomes and all(o is Outcome.SUPPORTED for o in outcomes):
        return Outcome.SUPPORTED
    if Outcome.REFUTED in outcomes:
        return Outcome.REFUTED
    return Outcome.INCONCLUSIVE


def combine(parts: list[Verdict] | tuple[Verdict, ...], alpha: float) -> Verdict:
    outcome = conjunction([p.outcome for p in parts])
    if outcome is Outcome.SUPPORTED:
        reason = f"all {len(parts)} conditions hold"
    else:
        reason = "; ".join(f"{p.metric}: {p.reason}" for p in parts if p.outcome is not Outcome.SUPPORTED)
    head = parts[0]
    sens = "; ".join(p.sensitivity for p in parts if p.outcome is Outcome.REFUTED and p.sensitivity)
    return replace(head, outcome=outcome, reason=reason, rule="all", alpha=alpha, parts=tuple(parts),
                   sensitivity=sens if outcome is Outcome.REFUTED and sens else None)


# ── Benjamini–Hochberg over a declared family ─────────────────────────────────────────────────────────────

def adjust(verdicts: list[Verdict], unseen: int = 0) -> list[Verdict]:
    """BH-adjust every p-value of one family (parts included) and re-decide SUPPORTED verdicts on the adjusted p.

    The family is fixed by the caller (one spec set × model, :func:`bench.spine.run.adjust_by_family`), so the
    same cell gets the same adjusted p whichever subset of runs contains its whole family.  `unseen` counts the
    family's p-values that this run did not compute (members not run): they enter as p = 1, which can only raise
    the adjusted p of the others (BH is monotone in every p-value), so a partial run errs on the safe side.
    """
    flat: list[float] = []

    def collect(v: Verdict) -> None:  # same traversal order as `apply`: a combined verdict is its parts
        if v.parts:
            for p in v.parts:
                collect(p)
        elif v.p_value is not None and not math.isnan(v.p_value):
            flat.append(v.p_value)

    for v in verdicts:
        collect(v)
    padded = flat + [1.0] * max(0, int(unseen))
    size = len(padded)
    adjusted = iter(stats.false_discovery_control(padded, method="bh").tolist()[: len(flat)] if flat else [])

    def apply(v: Verdict) -> Verdict:
        parts = tuple(apply(p) for p in v.parts)
        if parts:
            # a verdict over training runs has the largest p of its runs (intersection–union); others their first part's
            padj = (max(p.p_adjusted for p in parts) if v.runs and None not in [p.p_adjusted for p in parts]
                    else parts[0].p_adjusted)
            if v.outcome is not Outcome.SUPPORTED:  # the correction only withdraws a SUPPORTED: re-combining the
                # parts would drop what the rule decided beyond them (a failed gate, an unmet precondition)
                return replace(v, parts=parts, p_adjusted=padj)
            withdrawn = [p for p in parts if p.outcome is not Outcome.SUPPORTED]
            if not withdrawn:
                return replace(v, parts=parts, p_adjusted=padj)
            return replace(v, parts=parts, p_adjusted=padj, outcome=Outcome.INCONCLUSIVE,
                           reason="not significant after BH adjustment: " + "; ".join(
                               f"{p.metric}: {p.reason}" for p in withdrawn))
        if v.p_value is None or math.isnan(v.p_value):
            return v
        padj = float(next(adjusted))
        if v.outcome is Outcome.SUPPORTED and padj >= v.alpha:
            return replace(v, p_adjusted=padj, outcome=Outcome.INCONCLUSIVE,
                           reason=f"{v.reason}, but not significant after BH adjustment (p_adj = {padj:.3g})")
        if v.outcome is Outcome.REFUTED and size > 1 and "per-cell α" not in v.reason:
            # a REFUTED rests on one interval at the cell's own level: say so rather than imply a family-wise claim
            return replace(v, p_adjusted=padj, reason=f"{v.reason} (REFUTED at per-cell α = {v.alpha:g}; the "
                                                      f"interval is not widened for the family's {size} tests)")
        return replace(v, p_adjusted=padj)

    return [apply(v) for v in verdicts]


# ── helpers ────────────────────────────────────────────────────────────────────────────────────────────────

def _bound(lo: float | None, hi: float | None) -> tuple[float, int]:
    if (lo is None) == (hi is None):
        raise ValueError("threshold needs exactly one of 'min' and 'max'")
    return (float(lo), +1) if lo is not None else (float(hi), -1)


def _select(frame: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for col, val in where.items():
        if col not in frame.columns:
            return frame.iloc[0:0]
        mask &= frame[col] == val
    return frame[mask]


def _matrix(rows: pd.DataFrame, unit: str, by: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Units × groups table of mean values; units with a missing group are dropped."""
    if unit not in rows.columns:
        raise ValueError(f"frame has no unit column '{unit}'")
    if by:
        mat = rows.pivot_table(index=unit, columns=list(by), values="value", aggfunc="mean")
    else:
        mat = rows.groupby(unit)["value"].mean().to_frame()
    return mat.dropna(axis=0, how="any")


def _reducer(reduce: str):
    """Vectorised statistic: (..., n, G) resampled matrices -> (...) values."""
    if reduce == "mean":
        return lambda m: np.asarray(m, float).mean(axis=-2).mean(axis=-1)
    if reduce == "max_group_mean":
        return lambda m: np.asarray(m, float).mean(axis=-2).max(axis=-1)
    raise ValueError(f"reduce '{reduce}' has no sampling distribution")


CALIBRATED_MIN_N = 8  # the smallest unit count at which the corrected bootstrap keeps its level (test_calibration)


def expanded_confidence(confidence: float, n: int) -> float:
    """The percentile level that makes a bootstrap interval over `n` units as wide as a t interval would be.

    A percentile bootstrap over few units is too narrow (it uses the plug-in variance and normal tails); the
    expanded percentile method takes the percentiles at the level whose normal quantile is
    √(n/(n−1)) · t_{n−1} of the nominal one (exact for the mean of normal data)."""
    if n < 3:
        return confidence
    tail = (1 - confidence) / 2
    z = math.sqrt(n / (n - 1)) * float(stats.t.ppf(1 - tail, n - 1))
    return float(1 - 2 * stats.norm.sf(z))


def _bootstrap(stat, mat, confidence: float, n_resamples: int, bca: bool):
    """Bootstrap over rows (units) of `mat` (n, G); returns (low, high, bootstrap distribution).  The interval is
    the expanded percentile interval (:func:`expanded_confidence`); with no variation at all it is the point."""
    m = np.asarray(mat, float)
    idx = np.arange(m.shape[0])

    def on_idx(i, axis=-1):
        return stat(m[np.asarray(i, int)])  # (..., n) indices -> (..., n, G) -> (...)

    if np.ptp(m, axis=0).max() == 0:  # no variation: the interval is the point (rules on 0/1 data use exact.py)
        v = float(on_idx(idx))
        return v, v, np.full(n_resamples, v)
    rng = np.random.default_rng(12345)
    level = expanded_confidence(confidence, m.shape[0])
    res = stats.bootstrap((idx,), on_idx, vectorized=True, n_resamples=n_resamples, confidence_level=level,
                          method="BCa" if bca else "percentile", random_state=rng)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        res = stats.bootstrap((idx,), on_idx, vectorized=True, n_resamples=n_resamples,
                              confidence_level=level, method="percentile", random_state=rng)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return lo, hi, np.asarray(res.bootstrap_distribution, float)


def _boot_p(boot: np.ndarray, bound: float, side: int, n: int | None = None) -> float:
    """One-sided bootstrap p-value for H0: statistic on the wrong side of `bound`.

    The raw share s = (1 + #{wrong side}) / (1 + B) is corrected for `n` units the way
    :func:`expanded_confidence` corrects the interval: p = T_{n−1}(Φ⁻¹(s) · √((n−1)/n)), never 0."""
    boot = np.asarray(boot, float)
    boot = boot[np.isfinite(boot)]
    wrong = np.sum(boot <= bound) if side > 0 else np.sum(boot >= bound)
    raw = float((1 + wrong) / (1 + len(boot)))
    if n is None or n < 3 or raw >= 1:
        return raw
    z = float(stats.norm.ppf(raw))
    return float(stats.t.cdf(z * math.sqrt((n - 1) / n), n - 1))


def ci_name(confidence: float) -> str:
    """How a reason names an interval at `confidence`: "95% CI", "90% CI", "97.5% CI"."""
    return f"{100 * confidence:.10g}% CI"


def unit_note(unit: str, n: int) -> str:
    """How a rule names its resampling unit in a reason: which column, how many distinct values."""
    return f"p and CI over {n} units '{unit}'"


def _decide(rule, metric, est, lo, hi, p, n, bound, side, label, alpha, *, effect, effect_name,
            detail: str | None = None, unit: str | None = None, resampled: bool = True,
            binary: bool = False, confidence: float = 0.95) -> Verdict:
    """The shared policy (module docstring).  `detail`, when given, replaces the default estimate-and-CI text;
    `unit`, when given, names the resampling unit (and `n` its count) at the end of the reason.  `resampled`:
    the interval and p come from a bootstrap (below :data:`CALIBRATED_MIN_N` units the rule does not decide);
    `binary`: they come from exact tests on `n` 0/1 values (the power of a REFUTED is then exact binomial)."""
    from bench.stats import sensitivity

    lo, hi, widened = sensitivity.holding(est, lo, hi)
    right = est > bound if side > 0 else est < bound  # an estimate on the bound is not on the claimed side
    ci_wrong = hi < bound if side > 0 else lo > bound
    ci = f"{ci_name(confidence)} [{lo:.4g}, {hi:.4g}]"
    if not (np.isfinite(lo) and np.isfinite(hi)) and detail is None:
        ci = f"no interval: all {n} units gave the same value"
    if resampled and n < CALIBRATED_MIN_N:
        outcome, why = Outcome.INCONCLUSIVE, (f"{detail or f'{est:.4g}, {ci}'}: only {n} units, and the bootstrap "
                                              f"is calibrated from {CALIBRATED_MIN_N}")
    elif right and p < alpha:
        outcome, why = Outcome.SUPPORTED, (f"{detail}, p = {p:.3g}" if detail else f"{est:.4g} {label}, {ci}, p = {p:.3g}")
    elif ci_wrong:
        outcome, why = Outcome.REFUTED, f"{detail or f'{est:.4g}, {ci}'} lies entirely outside {label}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, (f"{detail}, p = {p:.3g}" if detail else f"{est:.4g}, {ci} vs {label}, p = {p:.3g}")
    if widened:
        why += f"; {widened}"
    if unit:
        why += f" ({unit_note(unit, n)})"
    lo, hi = (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else (None, None)
    v = Verdict(outcome, why, rule, metric, est, lo, hi, p, None, n, effect, effect_name, label, alpha)
    return sensitivity.judge(v, bound, side, binary=binary, calibrated=not (resampled and n < CALIBRATED_MIN_N))


def _missing(frame: pd.DataFrame, rule: str, metric: str, where: Mapping[str, Any]) -> Verdict:
    notes = "; ".join(frame.attrs.get("notes", []))
    why = f"the frame has no rows for {dict(where)}" + (f" ({notes})" if notes else "")
    return Verdict(Outcome.INCONCLUSIVE, why, rule, metric)


def _label(sel: Mapping[str, Any]) -> str:
    return ",".join(f"{v}" for k, v in sel.items()) if sel else "all"
