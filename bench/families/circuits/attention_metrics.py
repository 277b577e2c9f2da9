"""Pure tensor measurements on attention patterns and logits of repeated sequences.

A repeated sequence has period ``L``: tokens ``t_0 … t_{L-1}`` followed by the same ``L`` tokens again, so the
whole sequence has ``T = 2L`` positions.  These functions take plain tensors, touch no model, and are shared
by the induction probes on real models and the toy models trained in :mod:`bench.families.circuits.toy`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def induction_scores(pattern: torch.Tensor, period: int) -> torch.Tensor:
    """Mean attention from each position of the second copy to the token after its previous occurrence.

    pattern: (B, H, T, T) attention probabilities, query on dim -2, key on dim -1, with T >= 2 * period.
    Query position ``i`` in ``[period, 2*period)`` is scored on key ``i - period + 1`` (the diagonal at offset
    ``1 - period``, second copy only).  Returns (B, H).
    """
    _check(pattern, period)
    q = torch.arange(period, 2 * period, device=pattern.device)  # (L,)
    k = q - period + 1  # (L,)
    return pattern[..., q, k].mean(dim=-1)  # (B, H)


def previous_token_scores(pattern: torch.Tensor) -> torch.Tensor:
    """Mean attention from position ``i`` to ``i - 1`` over ``i >= 1``.  pattern (B, H, T, T) -> (B, H)."""
    if pattern.dim() != 4 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"pattern must be (B, H, T, T), got {tuple(pattern.shape)}")
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)  # (B, H)


def copy_losses(logits: torch.Tensor, ids: torch.Tensor, period: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean next-token loss on the first and on the second copy of each sequence.

    logits: (B, T, V); ids: (B, T) with T == 2 * period.  The first copy scores targets ``1 … L-1`` and the
    second copy targets ``L+1 … 2L-1``: both ``L-1`` tokens, and position ``L`` (the restart, which no
    mechanism can predict) is left out of both.  Returns two (B,) tensors in nats.
    """
    if ids.shape[1] != 2 * period or logits.shape[:2] != ids.shape:
        raise ValueError(f"need ids (B, {2 * period}) and logits (B, {2 * period}, V)")
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T-1, V) predicts ids[:, 1:]
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1); nll[:, j] is the loss of target j+1
    first = nll[:, 0 : period - 1].mean(dim=1)  # targets 1 … L-1
    second = nll[:, period : 2 * period - 1].mean(dim=1)  # targets L+1 … 2L-1
    return first, second


def repeated_random_tokens(
    candidates: torch.Tensor, n_seq: int, period: int, generator: torch.Generator
) -> torch.Tensor:
    """``n_seq`` sequences of ``period`` ids drawn uniformly from ``candidates``, each repeated twice -> (n, 2L)."""
    if candidates.numel() < 2:
        raise ValueError("need at least two candidate token ids")
    picks = torch.randint(0, candidates.numel(), (n_seq, period), generator=generator)
    half = candidates[picks]  # (n, L)
    return torch.cat([half, half], dim=1)  # (n, 2L)


def _check(pattern: torch.Tensor, period: int) -> None:
    if pattern.dim() != 4 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"pattern must be (B, H, T, T), got {tuple(pattern.shape)}")
    if period < 2 or pattern.shape[-1] < 2 * period:
        raise ValueError(f"period {period} needs T >= {2 * period}, got T = {pattern.shape[-1]}")
