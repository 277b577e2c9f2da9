"""TwoNN intrinsic dimension, anisotropy and centrality on point clouds with known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.microscope.intrinsic import anisotropy, mean_cosine_to_others, top_eigenvalue, twonn


@pytest.mark.parametrize("k", [2, 5, 10])
def test_twonn_recovers_the_dimension_of_a_linear_subspace(k):
    g = torch.Generator().manual_seed(k)
    basis = torch.linalg.qr(torch.randn(64, k, generator=g, dtype=torch.float64))[0]  # (D, k) orthonormal
    points = torch.randn(2500, k, generator=g, dtype=torch.float64) @ basis.T + 7.0  # k-dim plane in R^64
    dim, used = twonn(points)
    assert used == 2500
    assert dim == pytest.approx(k, rel=0.1)


def test_twonn_ignores_duplicate_points():
    g = torch.Generator().manual_seed(0)
    pts = torch.randn(800, 3, generator=g, dtype=torch.float64)
    dim, used = twonn(torch.cat([pts, pts[:100]]))
    assert used == 800 and dim == pytest.approx(twonn(pts)[0])


def test_anisotropy_of_known_spectra():
    assert anisotropy(torch.diag(torch.tensor([4.0, 1.0, 1.0, 2.0]))) == pytest.approx(0.5)
    assert anisotropy(torch.eye(10)) == pytest.approx(0.1, rel=1e-3)  # isotropic: 1/d (power iteration on ties)
    g = torch.Generator().manual_seed(1)
    a = torch.randn(30, 30, generator=g, dtype=torch.float64)
    m = a @ a.T
    assert top_eigenvalue(m) == pytest.approx(float(torch.linalg.eigvalsh(m)[-1]), rel=1e-9)


def test_mean_cosine_to_others_matches_the_pairwise_definition():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(50, 8, generator=g, dtype=torch.float64) + torch.tensor([3.0] + [0.0] * 7, dtype=torch.float64)
    unit = torch.nn.functional.normalize(x, dim=-1)
    cos = unit @ unit.T
    expected = (cos.sum(dim=1) - 1) / 49
    got = mean_cosine_to_others(unit, unit.sum(dim=0), 50)
    assert np.allclose(got.numpy(), expected.numpy())


def test_shift_fractions_on_hand_built_states():
    """Two layers, 4 dims, 2 tokens; the shares of moved dimensions are counted by hand."""
    import torch

    from bench.families.microscope.text_probes import shift_fractions

    a = torch.zeros(2, 2, 4, dtype=torch.float64)
    a[:, :, 0] = 1.0  # every state points along dim 0
    b = a.clone()
    b[0, 1, 1] = 1.0  # layer 0: the last token moves into dim 1 (raw mean of dim 1 moves by 0.5)
    b[1, :, 2] = 0.002  # layer 1: a shift below eps = 0.01 in dim 2
    fr = shift_fractions(a, b, eps=0.01)
    # layer 0: unit mean (1, 0.5)/|.| vs (1, 0) → dims 0 and 1 move; last token (1,1)/√2 vs (1,0) → dims 0, 1
    assert fr["frac_shifted_mean"].tolist() == [0.5, 0.0]
    assert fr["frac_shifted_last"].tolist() == [0.5, 0.0]
    assert fr["frac_shifted_raw"].tolist() == [0.25, 0.0]  # raw: only dim 1 moves (by 0.5)
