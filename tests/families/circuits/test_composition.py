"""K-composition scores: the low-rank formula equals the explicit one; aligned heads beat random ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.circuits.composition import k_composition_score, lowrank_fro, random_baseline


def explicit(W_V, W_O, W_Q, W_K) -> float:
    L = W_V @ W_O  # (d, d)
    R = (W_Q @ W_K.T).T  # (d, d)
    return float(torch.linalg.norm(L @ R) / (torch.linalg.norm(L) * torch.linalg.norm(R)))


def test_lowrank_frobenius_equals_explicit():
    g = torch.Generator().manual_seed(0)
    A, C = torch.randn(40, 6, generator=g, dtype=torch.float64), torch.randn(40, 5, generator=g, dtype=torch.float64)
    M = torch.randn(6, 5, generator=g, dtype=torch.float64)
    assert lowrank_fro(A, M, C).item() == pytest.approx(torch.linalg.norm(A @ M @ C.T).item(), rel=1e-10)


def test_score_equals_explicit_definition():
    g = torch.Generator().manual_seed(1)
    W_V, W_Q, W_K = (torch.randn(32, 8, generator=g, dtype=torch.float64) for _ in range(3))
    W_O = torch.randn(8, 32, generator=g, dtype=torch.float64)
    assert k_composition_score(W_V, W_O, W_Q, W_K) == pytest.approx(explicit(W_V, W_O, W_Q, W_K), rel=1e-9)


def test_aligned_heads_compose_far_above_random():
    """A later head whose keys read exactly the subspace the earlier head writes composes strongly."""
    g = torch.Generator().manual_seed(2)
    d, dh = 64, 8
    basis = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    U = basis[:, :dh]  # the subspace written by the earlier head
    W_V = torch.randn(d, dh, generator=g, dtype=torch.float64)
    W_O = torch.randn(dh, dh, generator=g, dtype=torch.float64) @ U.T  # writes only into U
    W_K = U @ torch.randn(dh, dh, generator=g, dtype=torch.float64)  # keys read only from U
    W_Q = torch.randn(d, dh, generator=g, dtype=torch.float64)
    aligned = k_composition_score(W_V, W_O, W_Q, W_K)
    W_K_orth = basis[:, dh : 2 * dh] @ torch.randn(dh, dh, generator=g, dtype=torch.float64)  # reads elsewhere
    assert k_composition_score(W_V, W_O, W_Q, W_K_orth) == pytest.approx(0.0, abs=1e-12)
    base = random_baseline(d, dh, 200, torch.Generator().manual_seed(3))
    assert aligned > np.quantile(base, 0.99) and aligned > 2 * base.mean()


def test_baseline_is_seeded():
    a = random_baseline(16, 4, 5, torch.Generator().manual_seed(9))
    b = random_baseline(16, 4, 5, torch.Generator().manual_seed(9))
    assert np.array_equal(a, b) and np.all((a > 0) & (a < 1))
