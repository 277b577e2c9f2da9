"""Random-effects pooling of one claim's per-model effects (statsmodels' meta-analysis routines).

Each model contributes one effect: its verdict's estimate, with a standard error read off its confidence
interval under the normal approximation, ``se = (high − low) / (2 · z_{(1+level)/2})`` (1.96 for a 95% interval).
A bootstrap interval that is not symmetric is summarised by its width.

:func:`pool` hands the effects and variances to ``statsmodels.stats.meta_analysis.combine_effects``, which gives
the between-model variance τ² (Paule–Mandel by default, DerSimonian–Laird on request), Cochran's Q and the
random-effects mean.  On top of what it returns:

* the interval of the mean uses the Hartung–Knapp–Sidik–Jonkman scale and a t with k − 1 degrees of freedom
  (statsmodels' ``scale_hksj_re``, the weighted residual variance of the effects): with a handful of models the
  plain normal interval is too narrow (IntHout et al. 2014).  When that scale is below 1 (the effects agree more
  closely than their own errors say) it is taken as 1, so the interval is never narrower than the unscaled one
  with the same t (the modification of Röver, Knapp & Friede 2015);
* τ² below 0 (DerSimonian–Laird when Q < k − 1, which statsmodels does not truncate) is taken as 0, and the
  random-effects mean, SE and scale are then the fixed-effect ones;
* I² = max(0, (Q − (k − 1)) / Q) (Higgins & Thompson 2002; statsmodels leaves it negative when Q < k − 1);
* the prediction interval for the effect on a new model, μ̂ ± t_{k−2} · sqrt(τ̂² + SE(μ̂)²) (Higgins, Thompson &
  Spiegelhalter 2009, with the unscaled random-effects SE); it needs k ≥ 3 (statsmodels has no routine for it).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Sequence

METHODS = {"pm": "iterated", "dl": "dl"}  # our names → statsmodels' method_re


@dataclass(frozen=True)
class Pooled:
    k: int
    method: str
    estimate: float  # the random-effects mean
    se: float  # its standard error (unscaled)
    ci_low: float  # HKSJ, t with k − 1 df
    ci_high: float
    tau2: float
    q: float
    i2: float
    pi_low: float | None  # prediction interval for a new model; None when k < 3
    pi_high: float | None
    fixed_estimate: float
    confidence: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def se_from_ci(low: float, high: float, confidence: float = 0.95) -> float:
    """The standard error that a normal interval of this level and width implies."""
    from scipy import stats

    return (high - low) / (2 * stats.norm.ppf(0.5 + confidence / 2))


def pool(effects: Sequence[float], ses: Sequence[float], *, method: str = "pm",
         confidence: float = 0.95) -> Pooled:
    """Random-effects pooling of k ≥ 2 effects with their standard errors (see the module docstring)."""
    import numpy as np
    from scipy import stats
    from statsmodels.stats.meta_analysis import combine_effects

    eff = np.asarray(effects, float)
    var = np.asarray(ses, float) ** 2
    k = len(eff)
    if k < 2:
        raise ValueError("pooling needs at least two effects")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (use {', '.join(METHODS)})")
    if not (np.all(np.isfinite(eff)) and np.all(np.isfinite(var)) and np.all(var > 0)):
        raise ValueError("every effect needs a finite estimate and a positive standard error")
    alpha = 1 - confidence
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' convergence chatter; τ² is checked below
        if method == "dl":
            res = combine_effects(eff, var, method_re="dl", alpha=alpha, use_t=True)
        else:  # statsmodels' Paule–Mandel loop returns τ² = 0 when a step lands a rounding error below the root,
            for atol in (1e-10, 1e-8, 1e-6):  # so a tight tolerance can fail where a looser one converges
                res = combine_effects(eff, var, method_re="iterated", alpha=alpha, use_t=True, atol=atol,
                                      maxiter=500)
                if res.tau2 > 0 or res.q <= k - 1:  # Q ≤ k − 1: the root is τ² = 0
                    break
            else:
                raise ValueError("the Paule–Mandel iteration did not converge; try method='dl'")
    if res.tau2 > 0:
        mu, se, scale = float(res.mean_effect_re), float(res.sd_eff_w_re), float(res.scale_hksj_re)
    else:  # τ² = 0: the random-effects model is the fixed one (statsmodels leaves DL's τ² negative when Q < k − 1)
        mu, se, scale = float(res.mean_effect_fe), float(res.sd_eff_w_fe), float(res.scale_hksj_fe)
    half = stats.t.ppf(1 - alpha / 2, k - 1) * se * math.sqrt(max(1.0, scale))
    tau2 = float(max(res.tau2, 0.0))
    q = float(res.q)
    i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    pi_low = pi_high = None
    if k >= 3:
        spread = stats.t.ppf(1 - alpha / 2, k - 2) * math.sqrt(tau2 + se ** 2)
        pi_low, pi_high = mu - spread, mu + spread
    return Pooled(k=k, method=method, estimate=mu, se=se, ci_low=mu - half, ci_high=mu + half, tau2=tau2,
                  q=q, i2=float(i2), pi_low=pi_low, pi_high=pi_high, fixed_estimate=float(res.mean_effect_fe),
                  confidence=confidence)
