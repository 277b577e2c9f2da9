"""Known answers for the pure attention measurements."""

from __future__ import annotations

import math

import pytest
import torch

from bench.families.circuits import attention_metrics as am


def causal_uniform(T: int) -> torch.Tensor:
    p = torch.tril(torch.ones(T, T))
    return (p / p.sum(-1, keepdim=True))[None, None]  # (1, 1, T, T)


def induction_pattern(L: int) -> torch.Tensor:
    """Each second-copy position attends fully to the token after its previous occurrence."""
    T = 2 * L
    p = torch.zeros(T, T)
    p[0, 0] = 1
    for i in range(1, T):
        p[i, i - L + 1 if i >= L else i - 1] = 1.0
    return p[None, None]


def test_perfect_induction_head_scores_one():
    assert am.induction_scores(induction_pattern(20), 20).item() == pytest.approx(1.0)


def test_uniform_attention_scores_low():
    L = 50
    score = am.induction_scores(causal_uniform(2 * L), L).item()
    expected = sum(1 / (i + 1) for i in range(L, 2 * L)) / L  # mean of 1/(i+1) over the second copy
    assert score == pytest.approx(expected) and score < 0.1


def test_previous_token_head():
    T = 10
    p = torch.zeros(T, T)
    p[0, 0] = 1
    for i in range(1, T):
        p[i, i - 1] = 1
    assert am.previous_token_scores(p[None, None]).item() == pytest.approx(1.0)
    assert am.previous_token_scores(causal_uniform(T)).item() < 0.5


def test_copy_losses_on_hand_made_logits():
    L, V = 4, 5
    ids = torch.tensor([[1, 2, 3, 4, 1, 2, 3, 4]])
    logits = torch.zeros(1, 2 * L, V)  # uniform everywhere: every loss is log V
    first, second = am.copy_losses(logits, ids, L)
    assert first.item() == pytest.approx(math.log(V)) and second.item() == pytest.approx(math.log(V))
    logits[0, L : 2 * L - 1, :] = -1e4  # the second copy's predictions become certain and right
    for j in range(L, 2 * L - 1):
        logits[0, j, ids[0, j + 1]] = 1e4
    first, second = am.copy_losses(logits, ids, L)
    assert second.item() == pytest.approx(0.0, abs=1e-6) and first.item() == pytest.approx(math.log(V))


def test_repeated_tokens_are_repeated_and_seeded():
    cand = torch.tensor([5, 7, 9, 11])
    a = am.repeated_random_tokens(cand, 3, 6, torch.Generator().manual_seed(1))
    b = am.repeated_random_tokens(cand, 3, 6, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.shape == (3, 12)
    assert torch.equal(a[:, :6], a[:, 6:]) and set(a.unique().tolist()) <= {5, 7, 9, 11}


def test_bad_shapes_raise():
    with pytest.raises(ValueError):
        am.induction_scores(torch.zeros(2, 3, 5), 2)
    with pytest.raises(ValueError):
        am.induction_scores(torch.zeros(1, 1, 6, 6), 4)
