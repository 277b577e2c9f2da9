"""Intrinsic dimension (TwoNN, Facco et al. 2017), anisotropy, and centrality of point clouds.

TwoNN: for every point the ratio μ = r₂ / r₁ of the distances to its second and first nearest neighbours is
Pareto distributed with exponent d on a d-dimensional manifold, so log(1 − F(μ)) = −d · log μ.  Fit that line
through the origin on the empirical distribution after discarding the largest `discard` fraction of μ.
Exact duplicates (r₁ = 0: the same token embedding twice) carry no distance information and are removed first.
"""

from __future__ import annotations

import numpy as np
import torch


def _dedupe(x: torch.Tensor) -> torch.Tensor:
    return torch.unique(x, dim=0)


def twonn(points: torch.Tensor, discard: float = 0.1) -> tuple[float, int]:
    """(TwoNN intrinsic dimension, number of distinct points used) of `points` (n, D)."""
    x = _dedupe(points.to(torch.float64))
    n = x.shape[0]
    if n < 3:
        return float("nan"), n
    sq = (x * x).sum(dim=1)
    d2 = (sq[:, None] + sq[None, :] - 2 * x @ x.T).clamp(min=0)  # (n, n) squared distances
    d2.fill_diagonal_(float("inf"))
    r = torch.topk(d2, 2, dim=1, largest=False).values.sqrt()  # (n, 2) first and second neighbour
    ok = r[:, 0] > 0
    mu = (r[ok, 1] / r[ok, 0]).numpy()
    mu = np.sort(mu)
    m = len(mu)
    F = np.arange(1, m + 1) / m  # empirical CDF at each sorted μ
    keep = int(np.floor(m * (1 - discard)))
    keep = min(keep, m - 1)  # F = 1 at the last point: log(0) is undefined
    x_fit = np.log(mu[:keep])
    y_fit = -np.log(1 - F[:keep])
    denom = float(np.sum(x_fit * x_fit))
    return (float(np.sum(x_fit * y_fit) / denom) if denom > 0 else float("nan")), n


def top_eigenvalue(m: torch.Tensor, iters: int = 300) -> float:
    """Largest eigenvalue of a symmetric PSD matrix by power iteration (Rayleigh quotient)."""
    v = torch.ones(m.shape[0], dtype=m.dtype) + 0.01 * torch.arange(m.shape[0], dtype=m.dtype).sin()
    v = v / torch.linalg.vector_norm(v)
    for _ in range(iters):
        w = m @ v
        norm = torch.linalg.vector_norm(w)
        if norm == 0:
            return 0.0
        v = w / norm
    return float(v @ (m @ v))


def anisotropy(cov: torch.Tensor) -> float:
    """λ_max / Σλ of a (centred) covariance matrix (Σλ is its trace)."""
    cov = cov.to(torch.float64)
    total = float(torch.trace(cov))
    return top_eigenvalue(cov) / total if total > 0 else float("nan")


def mean_cosine_to_others(unit: torch.Tensor, unit_sum: torch.Tensor, count: int) -> torch.Tensor:
    """(n,) mean cosine similarity of each unit vector (n, d) to the other `count − 1` vectors of a set whose
    unit vectors add up to `unit_sum` (d,) — each row of `unit` must be one of the set's members."""
    return (unit.to(torch.float64) @ unit_sum.to(torch.float64) - 1.0) / max(count - 1, 1)
