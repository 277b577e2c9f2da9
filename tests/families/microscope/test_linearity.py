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


def _fit_reference(h):
    """Plain least squares on centred, Frobenius-normalised states of one fold: per pair (A, mean, scale)."""
    out = []
    z = h - h.mean(dim=1, keepdim=True)
    scale = torch.linalg.matrix_norm(z)
    for l in range(h.shape[0] - 1):
        A = torch.linalg.lstsq(z[l] / scale[l], z[l + 1] / scale[l + 1], rcond=None, driver="gelsd").solution
        out.append(A)
    return out, h.mean(dim=1), scale


def test_crossfit_sums_match_a_hand_fitted_held_out_score():
    from bench.families.microscope.linearity import GramStats, crossfit_sums, solve

    g = torch.Generator().manual_seed(3)
    h = torch.randn(3, 300, 6, generator=g, dtype=torch.float64)
    h[1] = h[0] @ torch.randn(6, 6, generator=g, dtype=torch.float64) + 0.3 * h[1]
    h[2] = torch.tanh(h[1]) + 0.1 * h[2]
    fit, test = h[:, :200], h[:, 200:]
    st = GramStats.empty(2, 6)
    st.update(fit)
    resid, total = crossfit_sums(solve(st), test)
    A, mean, scale = _fit_reference(fit)
    for l in range(2):
        x = (test[l] - mean[l]) / scale[l]
        y = test[l + 1] - mean[l + 1]
        r = ((x @ A[l]) * scale[l + 1] - y) ** 2
        expected = 1 - r.sum() / (y * y).sum()
        assert float(1 - resid[l].sum() / total[l].sum()) == pytest.approx(float(expected), rel=1e-8)


def test_in_sample_score_overfits_noise_but_the_crossfitted_rule_does_not():
    """Independent noise layers with N = 3·d: the in-sample score is far above 0, the cross-fitted one is not."""
    import pandas as pd

    from bench.families.microscope.layerpass import _crossfit_rows
    from bench.families.microscope.linearity import GramStats, solve
    from bench.stats import Outcome, evaluate

    g = torch.Generator().manual_seed(0)
    d, n_texts, per = 24, 12, 6
    h = torch.randn(3, n_texts * per, d, generator=g, dtype=torch.float64)
    index = [(s, p, "x") for s in range(n_texts) for p in range(per)]
    odd = torch.tensor([s % 2 == 1 for s, _, _ in index])
    total, test = GramStats.empty(2, d), GramStats.empty(2, d)
    total.update(h)
    test.update(h[:, odd])
    assert float(solve(total).score.min()) > 0.2  # optimism of fitting d² coefficients to 3·d tokens
    rows = pd.concat(_crossfit_rows((solve(test), solve(total.minus(test))), h, index), ignore_index=True)
    v = evaluate(rows, "crossfit_summary", dict(resid="linearity_cv_resid", total="linearity_cv_total",
                                                min=0.9, min_n=5, n_resamples=200))
    assert v.estimate < 0.1 and v.outcome is Outcome.REFUTED
