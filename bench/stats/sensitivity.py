"""Before a REFUTED: could the measurement have shown the effect?

An interval on the wrong side of a bound says "not this much here"; it is evidence against the claim only when
the same measurement would have found the claimed effect had it been there.  So a rule's REFUTED stands only
with a *sensitivity*, carried on the verdict (``Verdict.sensitivity``, the ``sensitivity`` column of
results.csv), from one of two sources:

* **a declared precondition** — ``[[verdict.requires]]`` tables ``{metric, min, max, why, where}``: the mean of
  the frame's rows of that metric (those matching `where`, a table of column → value or list of values, when
  given: ``where = { condition = "full_ft" }``) lies within the bounds ("the training loss converged", "the task is solvable").
  When one does not hold, or its metric was not measured, the outcome is INCONCLUSIVE, "could not have shown the
  effect: <why> (measured <value>)".  When all hold the sensitivity reads "precondition held: <why> (<value>)".
* **power**, when the spec declares no precondition: the power of the rule's one-sided level-α test to tell the
  claim's reference effect from no effect, at the n measured, must be ≥ :data:`POWER` (0.8).  The reference is
  ``smallest_effect`` (a value of the estimate, from the paper or a stated convention) against the rule's bound;
  without it, the bound itself against 0 (the threshold read as an effect size: "an induction score of 0.4",
  "a correlation of 0.3").  A claim whose bound is 0 and that declares no smallest effect ("X happens, > 0")
  has no reference effect: its interval can refute it only by lying wholly beyond 0, i.e. by measuring the
  opposite effect.  That needs no power argument for any claim (an interval wholly on the far side of 0 from the
  claim is the opposite effect, measured), so it stands as the sensitivity whatever the bound; a metric that cannot go below 0 (a rate of erosion) needs
  ``smallest_effect`` to be refutable at all.  How the power is computed depends on the data:

  - 0/1 values per unit (exact tests): exact binomial power, P(the exact one-sided test rejects | the
    reference proportion), from ``scipy.stats.binom``;
  - everything else (means of per-unit values, bootstrap statistics): the normal approximation
    Φ(|Δ| / se − z_{1−α}), with se the rule's own interval half-width ÷ t_{n−1, 0.975}, and the n needed
    n · ((z_{1−α} + z_{0.8}) · se / |Δ|)² (the standard error shrinking as 1/√n).

  Otherwise the outcome is INCONCLUSIVE, "could not have shown the effect: power P at effect E with n = N; about
  M units needed".  Rules whose check is exact (no sampling: a worst case over all rows, a value against a
  Monte Carlo baseline) state their own sensitivity; a REFUTED that carries none is turned INCONCLUSIVE.

``smallest_effect`` also makes an existence claim refutable: when the interval lies entirely short of it (upper
bound below it, for a claim of "at least"), the outcome is REFUTED, "no effect as large as <source>".
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import replace
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from bench.stats import Outcome, Verdict, exact, stats

KEYS = ("requires", "smallest_effect", "smallest_effect_source")
POWER = 0.8
_REF: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("bench_reference", default={})


def check_requires(requires: Any) -> list[dict[str, Any]]:
    """The ``requires`` tables, checked: each names a metric, a `why`, and at least one of min and max."""
    out = []
    for i, r in enumerate(requires or []):
        r = dict(r)
        unknown = set(r) - {"metric", "min", "max", "why", "where"}
        if unknown or "metric" not in r or "why" not in r or ("min" not in r and "max" not in r):
            raise ValueError(f"requires[{i}] needs metric, why and min and/or max, and may have where "
                             f"(got {sorted(r)})")
        if not isinstance(r.get("where", {}), Mapping):
            raise ValueError(f"requires[{i}].where must be a table of column = value (got {r['where']!r})")
        out.append(r)
    return out


@contextlib.contextmanager
def reference(common: Mapping[str, Any]) -> Iterator[None]:
    """Make the spec's `smallest_effect` and `requires` visible to :func:`judge` while one rule runs."""
    check_requires(common.get("requires"))
    token = _REF.set(dict(common))
    try:
        yield
    finally:
        _REF.reset(token)


def holding(est: float | None, lo: float | None, hi: float | None) -> tuple[Any, Any, str]:
    """Widen an interval that misses its own estimate (a biased resampled statistic, e.g. a maximum over groups)
    to reach it, and say so: (low, high, note or "")."""
    if est is None or lo is None or hi is None or not all(np.isfinite([est, lo, hi])):
        return lo, hi, ""
    if est < lo:
        return est, hi, f"interval widened down to the estimate (the resampled values lay above it, from {lo:.4g})"
    if est > hi:
        return lo, est, f"interval widened up to the estimate (the resampled values lay below it, to {hi:.4g})"
    return lo, hi, ""


def _reference(bound: float, side: int) -> tuple[float, float, str]:
    """(no-effect value, reference value, words) for the power of a rule with `bound` on `side`."""
    ref = _REF.get()
    e = ref.get("smallest_effect")
    if e is not None:
        src = ref.get("smallest_effect_source") or "the spec"
        return bound, float(e), f"smallest effect {float(e):g} vs bound {bound:g} ({src})"
    return 0.0, bound, f"the bound {bound:g} vs no effect (0)"


def binomial_power(n: int, null: float, alt: float, alpha: float) -> float:
    """Power of the exact one-sided binomial test of p = `null` against p = `alt` (either direction) at n."""
    if n < 1 or alt == null:
        return alpha if n >= 1 else 0.0
    k = np.arange(n + 2)
    if alt > null:
        pvals = stats.binom.sf(k - 1, n, null)  # P(X ≥ k | null)
        ok = np.flatnonzero(pvals < alpha)
        return float(stats.binom.sf(ok[0] - 1, n, alt)) if len(ok) else 0.0
    pvals = stats.binom.cdf(k, n, null)  # P(X ≤ k | null)
    ok = np.flatnonzero(pvals < alpha)
    return float(stats.binom.cdf(ok[-1], n, alt)) if len(ok) else 0.0


def _binomial_need(null: float, alt: float, alpha: float, start: int) -> int | None:
    """The fewest n ≥ `start` (at most :data:`MAX_NEED`) at which :func:`binomial_power` reaches :data:`POWER`, or
    None: the n an n-by-n scan finds, without its cost (it took 10-30 s when thousands of units were needed).
    Every n's critical count is found at once (:func:`bench.stats.exact.upper_critical`, judged by the same scipy
    tails as :func:`binomial_power`)."""
    n = np.arange(max(1, start), MAX_NEED + 1)
    if alt > null:  # reject X ≥ k for the smallest k with P(X ≥ k | null) < α (k = n + 1 always qualifies)
        power = stats.binom.sf(exact.upper_critical(n, null, alpha) - 1, n, alt)
    else:  # reject X ≤ k for the largest k with P(X ≤ k | null) < α (none: k = −1, power 0)
        k = exact.lower_critical(n, null, alpha)
        power = np.where(k >= 0, stats.binom.cdf(k, n, alt), 0.0)
    hit = np.flatnonzero(power >= POWER)
    return int(n[hit[0]]) if len(hit) else None


MAX_NEED = 20_000  # the most units a REFUTED's power is sized for


def power_of(v: Verdict, bound: float, side: int, binary: bool) -> tuple[float, int | None, str]:
    """(power, units needed for :data:`POWER` or None, words) of `v`'s test at the claim's reference effect."""
    null, alt, words = _reference(bound, side)
    n, alpha = int(v.n or 0), v.alpha
    delta = abs(alt - null)
    if delta == 0:
        return alpha, None, words
    if binary:  # exact at any n, one unit included
        pw = binomial_power(n, null, alt, alpha)
        return pw, (n if pw >= POWER else _binomial_need(null, alt, alpha, n)), words
    if n < 2:  # one value has no spread to size an n by
        return 0.0, None, words
    if v.ci_low is None or v.ci_high is None:
        return float("nan"), None, words
    se = (v.ci_high - v.ci_low) / 2 / float(stats.t.ppf(0.975, n - 1))
    if se <= 0:
        return 1.0, n, words
    za, zb = float(stats.norm.ppf(1 - alpha)), float(stats.norm.ppf(POWER))
    pw = float(stats.norm.cdf(delta / se - za))
    return pw, int(math.ceil(n * ((za + zb) * se / delta) ** 2)), words


def judge(v: Verdict, bound: float, side: int, *, binary: bool = False, calibrated: bool = True) -> Verdict:
    """Existence claims against their smallest effect, then the power behind a REFUTED (module docstring).
    `calibrated`: False when the rule refused to decide on too few units (no REFUTED then either)."""
    ref = _REF.get()
    e = ref.get("smallest_effect")
    if (e is not None and calibrated and v.outcome is Outcome.INCONCLUSIVE and side * (float(e) - bound) > 0
            and v.ci_low is not None and v.ci_high is not None):
        short = v.ci_high < float(e) if side > 0 else v.ci_low > float(e)
        if short:
            src = ref.get("smallest_effect_source") or "the spec's smallest effect"
            end = f"upper bound {v.ci_high:.4g}" if side > 0 else f"lower bound {v.ci_low:.4g}"
            v = replace(v, outcome=Outcome.REFUTED,
                        reason=f"{v.reason}; no effect as large as {float(e):g} ({src}): the interval's {end} "
                               f"lies short of it")
    if v.outcome is not Outcome.REFUTED or ref.get("requires"):
        return v  # a declared precondition decides instead of power (guard)
    null, alt, _ = _reference(bound, side)
    beyond = (v.ci_high is not None and v.ci_high < 0) if side > 0 else (v.ci_low is not None and v.ci_low > 0)
    if alt == null or beyond:  # an interval wholly beyond no effect (0) measures the opposite effect
        return replace(v, sensitivity="the interval lies wholly on the other side of no effect (0): the opposite "
                                      "of the claim is measured, at any power")
    pw, need, words = power_of(v, bound, side, binary)
    if np.isfinite(pw) and pw >= POWER:
        return replace(v, sensitivity=f"power {pw:.2f} at {words} with n = {v.n}")
    more = (f"about {need} units needed" if need else f"more than {MAX_NEED:,} units needed" if binary
            else "one unit gives no spread to size the n it needs")
    why = (f"could not have shown the effect: power {pw:.2f} at {words} with n = {v.n}; {more}"
           if np.isfinite(pw) else "could not have shown the effect: the rule gives no interval to judge its power")
    return replace(v, outcome=Outcome.INCONCLUSIVE, reason=f"{why} ({v.reason})", sensitivity=None)


def _requirement(frame: pd.DataFrame, r: Mapping[str, Any]) -> tuple[bool, str]:
    rows = frame[frame["metric"] == r["metric"]] if "metric" in frame.columns else frame.iloc[0:0]
    where = dict(r.get("where") or {})
    for col, want in where.items():
        if col not in frame.columns:
            raise ValueError(f"requires: where names '{col}', which is not a column of the frame "
                             f"({', '.join(map(str, frame.columns))})")
        rows = rows[rows[col].isin(want if isinstance(want, (list, tuple)) else [want])]
    at = "".join(f", {c} = {v}" for c, v in where.items())
    vals = pd.to_numeric(rows["value"], errors="coerce").dropna() if len(rows) else pd.Series(dtype=float)
    if vals.empty:
        return False, f"{r['why']} (measured nothing: no '{r['metric']}' rows{' where ' + at[2:] if at else ''})"
    val = float(vals.mean())
    ok = (r.get("min") is None or val >= float(r["min"])) and (r.get("max") is None or val <= float(r["max"]))
    return ok, f"{r['why']} (measured {val:.4g}{at})" if not ok else f"{r['why']} ({val:.4g}{at})"


def guard(frame: pd.DataFrame, v: Verdict, common: Mapping[str, Any]) -> Verdict:
    """After the rule: check the declared preconditions of a REFUTED, and never let a REFUTED pass without a
    sensitivity (a combined verdict takes its refuted parts')."""
    if v.outcome is not Outcome.REFUTED:
        return v
    requires = check_requires(common.get("requires"))
    if requires:
        checks = [_requirement(frame, r) for r in requires]
        failed = [why for ok, why in checks if not ok]
        if failed:
            return replace(v, outcome=Outcome.INCONCLUSIVE, sensitivity=None,
                           reason="could not have shown the effect: " + "; ".join(failed) + f" ({v.reason})")
        return replace(v, sensitivity="precondition held: " + "; ".join(why for _, why in checks))
    if not v.sensitivity and v.parts:
        found = "; ".join(p.sensitivity for p in v.parts if p.outcome is Outcome.REFUTED and p.sensitivity)
        v = replace(v, sensitivity=found or None)
    if not v.sensitivity:
        return replace(v, outcome=Outcome.INCONCLUSIVE,
                       reason=f"could not have shown the effect: the rule states no sensitivity ({v.reason})")
    return v
