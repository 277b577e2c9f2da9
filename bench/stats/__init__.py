"""Decision rules: a tidy frame and the spec's rule parameters in, a :class:`Verdict` out.

Every rule follows one policy so that verdicts mean the same thing across claims:

* SUPPORTED — the estimate lies on the claimed side of the threshold and the test's p-value is below ``alpha``
  (after Benjamini–Hochberg adjustment over the claim's family — one spec set × model — see :func:`adjust`);
* REFUTED — the confidence interval lies entirely on the wrong side (or, for exact checks, the value does);
* INCONCLUSIVE — anything between, too few samples, or rows the rule needs are missing (the reason says which).

Rules never touch a model.  Every p-value comes from the same resampling unit as its confidence interval: the
spec names it (the `unit` parameter, ``sample`` = text unless a rule says otherwise), the rule first reduces the
rows to one value (or one row of a matrix) per unit, and both the interval (``scipy.stats.bootstrap`` over units)
and the test (a cluster-bootstrap p, or a scipy test of the per-unit values) work on those.  No test treats
tokens or neurons of one unit as independent draws; the reason names the unit and how many there were.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any, Literal, Mapping

import numpy as np
import pandas as pd


class _Scipy:
    """``scipy.stats``, imported on first use: a run replayed from its record never needs it."""

    def __getattr__(self, name: str):
        import scipy.stats

        return getattr(scipy.stats, name)


stats = _Scipy()

Reduce = Literal["mean", "max_group_mean", "max", "min"]


class Outcome(str, Enum):
    SUPPORTED = "SUPPORTED"
    REFUTED = "REFUTED"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str
    rule: str
    metric: str | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    n: int | None = None
    effect: float | None = None
    effect_name: str | None = None
    threshold: str | None = None  # e.g. "≥ 0.4"
    alpha: float = 0.05
    parts: tuple["Verdict", ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        d["parts"] = [p.to_json() for p in self.parts]
        return {k: _clean(v) for k, v in d.items()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Verdict":
        d = dict(d)
        d["outcome"] = Outcome(d["outcome"])
        d["parts"] = tuple(cls.from_json(p) for p in d.get("parts", ()))
        return cls(**d)


def skipped(reason: str) -> Verdict:
    return Verdict(Outcome.SKIPPED, reason, rule="-")


def errored(reason: str) -> Verdict:
    return Verdict(Outcome.ERROR, reason, rule="-")


def evaluate(frame: pd.DataFrame, rule_name: str, params: Mapping[str, Any]) -> Verdict:
    """Run the registered rule `rule_name` on `frame`."""
    from bench.core import registry

    info = registry.rule(rule_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return info.fn(frame, **dict(params))


def evaluate_parts(frame: pd.DataFrame, of: list[dict[str, Any]], alpha: float) -> list[Verdict]:
    """Evaluate each sub-rule table of a combining rule; a part without its own `alpha` gets the parent's."""
    parts = []
    for sub in of:
        sub = dict(sub)
        name = sub.pop("rule")
        sub.setdefault("alpha", alpha)
        parts.append(evaluate(frame, name, sub))
    return parts


def combine(parts: list[Verdict] | tuple[Verdict, ...], alpha: float) -> Verdict:
    outcomes = [p.outcome for p in parts]
    if Outcome.ERROR in outcomes:
        outcome = Outcome.ERROR
    elif Outcome.REFUTED in outcomes:
        outcome = Outcome.REFUTED
    elif all(o is Outcome.SUPPORTED for o in outcomes):
        outcome = Outcome.SUPPORTED
    else:
        outcome = Outcome.INCONCLUSIVE
    if outcome is Outcome.SUPPORTED:
        reason = f"all {len(parts)} conditions hold"
    else:
        reason = "; ".join(f"{p.metric}: {p.reason}" for p in parts if p.outcome is not Outcome.SUPPORTED)
    head = parts[0]
    return replace(head, outcome=outcome, reason=reason, rule="all", alpha=alpha, parts=tuple(parts))


# ── Benjamini–Hochberg over a declared family ─────────────────────────────────────────────────────────────

def adjust(verdicts: list[Verdict], unseen: int = 0) -> list[Verdict]:
    """BH-adjust every p-value of one family (parts included) and re-decide SUPPORTED verdicts on the adjusted p.

    The family is fixed by the caller (one spec set × model, :func:`bench.core.run.adjust_by_family`), so the
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
    adjusted = iter(stats.false_discovery_control(padded, method="bh").tolist()[: len(flat)] if flat else [])

    def apply(v: Verdict) -> Verdict:
        parts = tuple(apply(p) for p in v.parts)
        if parts:
            merged = combine(parts, v.alpha)
            return replace(merged, p_adjusted=parts[0].p_adjusted)
        if v.p_value is None or math.isnan(v.p_value):
            return v
        padj = float(next(adjusted))
        if v.outcome is Outcome.SUPPORTED and padj >= v.alpha:
            return replace(v, p_adjusted=padj, outcome=Outcome.INCONCLUSIVE,
                           reason=f"{v.reason}, but not significant after BH adjustment (p_adj = {padj:.3g})")
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


def _bootstrap(stat, mat, confidence: float, n_resamples: int, bca: bool):
    """Bootstrap over rows (units) of `mat` (n, G); returns (low, high, bootstrap distribution)."""
    m = np.asarray(mat, float)
    idx = np.arange(m.shape[0])

    def on_idx(i, axis=-1):
        return stat(m[np.asarray(i, int)])  # (..., n) indices -> (..., n, G) -> (...)

    if np.ptp(m, axis=0).max() == 0:  # no variation: the interval is the point
        v = float(on_idx(idx))
        return v, v, np.full(n_resamples, v)
    rng = np.random.default_rng(12345)
    res = stats.bootstrap((idx,), on_idx, vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                          method="BCa" if bca else "percentile", random_state=rng)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        res = stats.bootstrap((idx,), on_idx, vectorized=True, n_resamples=n_resamples,
                              confidence_level=confidence, method="percentile", random_state=rng)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return lo, hi, np.asarray(res.bootstrap_distribution, float)


def _boot_p(boot: np.ndarray, bound: float, side: int) -> float:
    """One-sided bootstrap p-value for H0: statistic on the wrong side of `bound`."""
    wrong = np.sum(boot <= bound) if side > 0 else np.sum(boot >= bound)
    return float((1 + wrong) / (1 + len(boot)))


def unit_note(unit: str, n: int) -> str:
    """How a rule names its resampling unit in a reason: which column, how many distinct values."""
    return f"p and CI over {n} units '{unit}'"


def _decide(rule, metric, est, lo, hi, p, n, bound, side, label, alpha, *, effect, effect_name,
            detail: str | None = None, unit: str | None = None) -> Verdict:
    """The shared policy (module docstring).  `detail`, when given, replaces the default estimate-and-CI text;
    `unit`, when given, names the resampling unit (and `n` its count) at the end of the reason."""
    right = est >= bound if side > 0 else est <= bound
    ci_wrong = hi < bound if side > 0 else lo > bound
    ci = f"95% CI [{lo:.4g}, {hi:.4g}]"
    if right and p < alpha:
        outcome, why = Outcome.SUPPORTED, (f"{detail}, p = {p:.3g}" if detail else f"{est:.4g} {label}, {ci}, p = {p:.3g}")
    elif ci_wrong:
        outcome, why = Outcome.REFUTED, f"{detail or f'{est:.4g}, {ci}'} lies entirely outside {label}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, (f"{detail}, p = {p:.3g}" if detail else f"{est:.4g}, {ci} vs {label}, p = {p:.3g}")
    if unit:
        why += f" ({unit_note(unit, n)})"
    return Verdict(outcome, why, rule, metric, est, lo, hi, p, None, n, effect, effect_name, label, alpha)


def _missing(frame: pd.DataFrame, rule: str, metric: str, where: Mapping[str, Any]) -> Verdict:
    notes = "; ".join(frame.attrs.get("notes", []))
    why = f"the frame has no rows for {dict(where)}" + (f" ({notes})" if notes else "")
    return Verdict(Outcome.INCONCLUSIVE, why, rule, metric)


def _label(sel: Mapping[str, Any]) -> str:
    return ",".join(f"{v}" for k, v in sel.items()) if sel else "all"


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v
