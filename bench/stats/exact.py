"""Exact tests for 0/1 data per unit (a fact learned or not, a question answered right or wrong).

A rule that reduces its rows to one value per unit calls :func:`is_binary` on those values itself, so no spec can
put a normal approximation (a t-test, a Wilcoxon test, a bootstrap percentile) on counts by accident:

* one sample: :func:`one_sample` — the exact binomial test of the share against the bound and the
  Clopper–Pearson interval (``scipy.stats.binomtest``);
* paired: :func:`paired` — the exact McNemar test (the binomial test of the discordant pairs) and an exact
  interval on the difference of the two shares (below).

Degenerate data (all 0, all 1) keep a real interval: Clopper–Pearson of 5 of 5 is [0.478, 1], never [1, 1].
"""

from __future__ import annotations

import numpy as np

from bench.stats import stats


def is_binary(values) -> bool:
    v = np.asarray(values, float)
    return v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def one_sample(k: int, n: int, bound: float, side: int, confidence: float) -> tuple[float, float, float]:
    """(p, low, high): the one-sided exact binomial p of H0 "share on the wrong side of `bound`" and the
    two-sided Clopper–Pearson interval."""
    p = float(stats.binomtest(k, n, min(max(bound, 0.0), 1.0),
                              alternative="greater" if side > 0 else "less").pvalue)
    lo, hi = clopper_pearson(k, n, confidence)
    return p, lo, hi


def paired(n10: int, n01: int, n: int, confidence: float) -> tuple[float, float, float]:
    """(p, low, high) for Δ = share(a) − share(b) over `n` paired 0/1 units, `n10` right only under a and `n01`
    only under b.

    p: the exact one-sided McNemar test of Δ > 0 (binomial test of n10 among the n10 + n01 discordant pairs).
    Interval: Δ = ψ(2π − 1), with ψ the discordant share and π the share of discordant pairs that favour a; each
    gets a Clopper–Pearson interval at level 1 − (1 − confidence)/2 (Bonferroni, so the pair covers with at least
    `confidence`), and Δ's interval is the range of ψ(2π − 1) over that box.  It is conservative, never a point
    (no discordant pair gives [−u, u] with u the upper bound of 0 of n), and always holds the estimate."""
    nd = n10 + n01
    p = float(stats.binomtest(n10, nd, 0.5, alternative="greater").pvalue) if nd else 1.0
    level = 1 - (1 - confidence) / 2
    psi_lo, psi_hi = clopper_pearson(nd, n, level)
    pi_lo, pi_hi = clopper_pearson(n10, nd, level) if nd else (0.0, 1.0)
    corners_lo = [psi_lo * (2 * pi_lo - 1), psi_hi * (2 * pi_lo - 1)]
    corners_hi = [psi_lo * (2 * pi_hi - 1), psi_hi * (2 * pi_hi - 1)]
    return p, float(min(corners_lo)), float(max(corners_hi))


# ── rejection regions of the one-sided exact binomial test, for many n at once (power searches) ─────────────

def upper_critical(n: np.ndarray, p: float, alpha: float) -> np.ndarray:
    """For each n, the smallest count k with P(X ≥ k) < `alpha`, X ~ Binomial(n, `p`): the test of `p` against a
    larger share rejects X ≥ k (k = n + 1: never).  Started from scipy's quantile and moved onto the region's edge
    by the tails themselves, since the quantile can be a count off in floating point."""
    n = np.asarray(n)
    k = np.clip(np.floor(stats.binom.isf(alpha, n, p)) + 1, 0, n + 1)
    return _settle(k, lambda k: stats.binom.sf(k - 1, n, p) < alpha, inward=+1, lo=np.zeros_like(n), hi=n + 1)


def lower_critical(n: np.ndarray, p: float, alpha: float) -> np.ndarray:
    """For each n, the largest count k with P(X ≤ k) < `alpha`: the test of `p` against a smaller share rejects
    X ≤ k (k = −1: never)."""
    n = np.asarray(n)
    k = np.clip(np.ceil(stats.binom.ppf(alpha, n, p)) - 1, -1, n)
    return _settle(k, lambda k: (k >= 0) & (stats.binom.cdf(k, n, p) < alpha), inward=-1, lo=np.full_like(n, -1),
                   hi=n)


def _settle(k: np.ndarray, rejects, inward: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Move each critical count `k` to the rejection region's edge: into the region (`inward`: +1 for an upper
    tail) while it does not reject, then outward while its neighbour still rejects.  The region's far end always
    rejects (or is the "never" count), so both moves stop."""
    inner, outer = (hi, lo) if inward > 0 else (lo, hi)
    while (move := ~rejects(k) & (k != inner)).any():
        k = np.where(move, k + inward, k)
    while (move := (k != outer) & rejects(k - inward)).any():
        k = np.where(move, k - inward, k)
    return k
