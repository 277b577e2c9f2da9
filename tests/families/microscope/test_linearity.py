"""Layer linearity from streamed Gram matrices: known answers and parity with the stacked SVD solution."""

from __future__ import annotations

import pytest
import torch

from bench.families.microscope.linearity import GramStats, heldout_score, solve, stacked_reference, token_errors


def _stream(states: torch.Tensor, batch: int = 37) -> GramStats:
    stats = GramStats.empty(states.shape[0] - 1, states.shape[2])
    for i in range(0, states.shape[1], batch):
        stats.update(states[:, i : i + batch])
    return stats


def _linear_stack(n=400, d=12, layers=4, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    h = [torch.randn(n, d, generator=g, dtype=torch.float64) * 3 + 5]
    for _ in range(layers):
        W = torch.randn(d, d, generator=g, dtype=torch.float64)
        b = torch.randn(d, generator=g, dtype=torch.float64)
        h.append(h[-1] @ W + b)  # exactly affine: centring removes the bias
    return torch.stack(h)


def test_exactly_linear_layers_score_one_with_zero_error():
    states = _linear_stack()
    maps = solve(_stream(states))
    assert torch.allclose(maps.score, torch.ones_like(maps.score), atol=1e-9)
    assert token_errors(maps, states).abs().max() < 1e-6


def test_pointwise_nonlinearity_scores_clearly_lower():
    states = _linear_stack(layers=3)
    states[2] = torch.tanh(2.0 * states[1] / states[1].std())  # a strong pointwise non-linearity at pair 1
    maps = solve(_stream(states))
    assert maps.score[0] > 0.999 and maps.score[2] < 0.999
    assert maps.score[1] < 0.9
    err = token_errors(maps, states)
    assert err[:, 1].mean() > 10 * err[:, 0].mean()


def test_streaming_equals_stacked_svd_solution():
    g = torch.Generator().manual_seed(3)
    states = torch.randn(5, 300, 16, generator=g, dtype=torch.float64)
    for l in range(4):
        states[l + 1] = states[l] + 0.5 * torch.relu(states[l] @ torch.randn(16, 16, generator=g, dtype=torch.float64))
    maps = solve(_stream(states, batch=13))
    score, err = stacked_reference(states)
    assert torch.allclose(maps.score, score, atol=1e-10)
    assert torch.allclose(token_errors(maps, states), err, atol=1e-10)
    assert maps.score.shape == (4,)  # every pair, the last one included


def test_batching_does_not_change_the_sums():
    states = _linear_stack(n=200)
    a, b = _stream(states, batch=200), _stream(states, batch=7)
    assert a.n == b.n == 200
    assert torch.allclose(a.gram, b.gram) and torch.allclose(a.cross, b.cross)


def test_rank_deficient_inputs_use_the_pseudo_inverse():
    """Repeated rows (the same token embedding many times) make XᵀX singular; the fit must still be exact."""
    g = torch.Generator().manual_seed(4)
    base = torch.randn(6, 10, generator=g, dtype=torch.float64)
    x = base[torch.randint(0, 6, (120,), generator=g)]  # rank ≤ 6 < d = 10
    y = x @ torch.randn(10, 10, generator=g, dtype=torch.float64)
    states = torch.stack([x, y])
    maps = solve(_stream(states))
    assert maps.score[0] == pytest.approx(1.0, abs=1e-8)
    assert torch.allclose(maps.score, stacked_reference(states)[0], atol=1e-8)


def test_heldout_score_of_a_linear_map_is_one_and_of_noise_is_low():
    states = _linear_stack(n=600)
    test = GramStats.empty(states.shape[0] - 1, states.shape[2])
    test.update(states[:, ::2])
    total = _stream(states)
    assert torch.allclose(heldout_score(total.minus(test), test), torch.ones(4, dtype=torch.float64), atol=1e-8)
    g = torch.Generator().manual_seed(5)
    noise = torch.randn(2, 60, 40, generator=g, dtype=torch.float64)  # n close to d: in-sample fit is optimistic
    t = GramStats.empty(1, 40)
    t.update(noise[:, 1::2])
    full = _stream(noise)
    assert solve(full).score[0] > 0.5 > heldout_score(full.minus(t), t)[0]
