"""Intrinsic dimension (TwoNN, Facco et al. 2017), anisotropy, and centrality of point clouds.

TwoNN: for every point the ratio μ = r₂ / r₁ of the distances to its second and first nearest neighbours is
Pareto distributed with exponent d on a d-dimensional manifold, so log(1 − F(μ)) = −d · log μ.  Two fits of that
line through the origin, on the same ratios:

* **the paper's formula** (:func:`fit_paper`, Facco et al.): the empirical CDF F_i = i / N of the sorted μ,
  fitted after discarding the largest `discard` fraction (10%);
* **the authors' code** (:func:`fit_code`, ``intrinsic_dimension`` of the ``llm-microscope`` package 0.0.7):
  ratios with μ ≤ 1 + 10⁻⁸ (ties, and r₁ below 10⁻⁸ of the mean centred norm) are set aside but still count
  in the CDF, F_i = (u + i) / N for the i-th of the other ratios (u set aside), and the fit uses only the
  smallest fifth of those, ⌊(N − u) / 5⌋.

Duplicates: exact duplicate points (r₁ = 0: the same token embedding twice) carry no distance information and
are removed first, under both fits (the authors' code keeps them, which lifts its layer-0 estimate through the
CDF offset; bench states one rule for both).
"""

from __future__ import annotations

import numpy as np
import torch


def _dedupe(x: torch.Tensor) -> torch.Tensor:
    return torch.unique(x, dim=0)


CODE_EPS = 1e-8  # the authors' code: r₁ below this (in units of the mean centred norm) or μ ≤ 1 + this is set aside
CODE_REDUCTION = 5  # the authors' code fits the smallest 1/5 of the ratios


def neighbours(points: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(r (n, 2) distances of each distinct point to its first and second nearest neighbour, mean norm of the
    centred distinct points) of `points` (n, D); exact duplicates removed first."""
    x = _dedupe(points.to(torch.float64))
    n = x.shape[0]
    if n < 3:
        return torch.zeros(n, 2, dtype=torch.float64), float("nan")
    sq = (x * x).sum(dim=1)
    d2 = (sq[:, None] + sq[None, :] - 2 * x @ x.T).clamp(min=0)  # (n, n) squared distances
    d2.fill_diagonal_(float("inf"))
    r = torch.topk(d2, 2, dim=1, largest=False).values.sqrt()  # (n, 2) first and second neighbour
    scale = float(torch.linalg.vector_norm(x - x.mean(dim=0), dim=1).mean())
    return r, scale


def twonn(points: torch.Tensor, discard: float = 0.1) -> tuple[float, int]:
    """(TwoNN intrinsic dimension by the paper's formula, number of distinct points used) of `points` (n, D)."""
    r, _ = neighbours(points)
    return fit_paper(r, discard), r.shape[0]


def twonn_both(points: torch.Tensor, discard: float = 0.1) -> tuple[float, float, int]:
    """(paper's formula, authors' code, number of distinct points) on the same neighbour distances."""
    r, scale = neighbours(points)
    return fit_paper(r, discard), fit_code(r, scale), r.shape[0]


def fit_code(r: torch.Tensor, scale: float, reduction: int = CODE_REDUCTION, eps: float = CODE_EPS) -> float:
    """The authors' code's fit on neighbour distances r (n, 2) of points whose centred mean norm is `scale`."""
    n_all = r.shape[0]
    if n_all < 3:
        return float("nan")
    r1, r2 = (r[:, 0] / scale).numpy(), (r[:, 1] / scale).numpy()
    bad = r1 < eps
    mu = np.where(bad, -1.0, r2 / np.where(bad, 1.0, r1))
    mu = np.sort(mu)
    u = int(np.sum(mu <= 1 + eps))  # set aside, but counted below them in the CDF
    mu = mu[u:]
    m = len(mu)
    F = (u + np.arange(1, m + 1)) / n_all
    keep = min(m // reduction, m - 1)
    if keep < 1:
        return float("nan")
    x_fit, y_fit = np.log(mu[:keep]), -np.log(1 - F[:keep])
    denom = float(np.sum(x_fit * x_fit))
    return float(np.sum(x_fit * y_fit) / denom) if denom > 0 else float("nan")


def fit_paper(r: torch.Tensor, discard: float = 0.1) -> float:
    """The paper's formula (Facco et al.) on neighbour distances r (n, 2) of distinct points."""
    if r.shape[0] < 3:
        return float("nan")
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
    return float(np.sum(x_fit * y_fit) / denom) if denom > 0 else float("nan")


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
