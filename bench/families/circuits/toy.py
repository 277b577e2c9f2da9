"""Tiny attention-only transformers trained on repeated random spans, for testing induction-head claims.

The claim under test (Elhage et al. 2021; Olsson et al. 2022) is that an induction head needs two attention
layers that compose: a first-layer head moves "the previous token" into each position, and a second-layer head
uses that as its key.  A single attention layer has no such input to its keys, so it cannot attend from a token
to whatever followed that token's earlier occurrence.

:func:`train` fits a 1- or 2-layer :class:`AttnOnlyTransformer` on synthetic sequences, and :func:`evaluate`
measures it on held-out repeated random sequences with the shared functions of :mod:`bench.families.circuits.attention_metrics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.families.circuits.attention_metrics import (
    copy_losses,
    induction_scores,
    previous_token_scores,
    repeated_random_tokens,
)


@dataclass(frozen=True)
class ToyConfig:
    vocab: int = 64  # token ids 0 … vocab-1, all drawn uniformly
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    period: int = 24  # L of the held-out sequences; the context is 2L positions
    min_span: int = 4  # shortest repeated span in the training data
    steps: int = 500
    batch: int = 64
    lr: float = 1e-2
    weight_decay: float = 0.01
    warmup: int = 50  # linear learning-rate warm-up steps, then constant
    seed: int = 0

    @property
    def n_ctx(self) -> int:
        return 2 * self.period


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention that also returns its attention probabilities."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        # separate bias-free projections, so weights can be set by hand head by head (rows h*d_head … )
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, d = x.shape
        H, dh = self.n_heads, self.d_head
        q = self.q(x).view(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
        k = self.k(x).view(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
        v = self.v(x).view(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, T, T), query on dim -2
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # (T, T) True above the diagonal
        scores = scores.masked_fill(future, float("-inf"))
        pattern = scores.softmax(dim=-1)  # (B, H, T, T)
        y = (pattern @ v).transpose(1, 2).reshape(B, T, d)  # (B, T, d) heads side by side
        return self.o(y), pattern  # (B, T, d), (B, H, T, T)


class Block(nn.Module):
    """Pre-LayerNorm attention with a residual connection; no MLP."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, pattern = self.attn(self.ln(x))  # (B, T, d), (B, H, T, T)
        return x + out, pattern


class AttnOnlyTransformer(nn.Module):
    """Token + learned position embeddings, ``n_layers`` attention-only blocks, final LayerNorm, unembedding."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, n_ctx: int):
        super().__init__()
        self.n_ctx = n_ctx
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(n_ctx, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, vocab, bias=False)

    @classmethod
    def from_config(cls, cfg: ToyConfig) -> AttnOnlyTransformer:
        return cls(cfg.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.n_ctx)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        B, T = ids.shape
        if T > self.n_ctx:
            raise ValueError(f"sequence of {T} tokens exceeds the context of {self.n_ctx}")
        pos = torch.arange(T, device=ids.device)  # (T,)
        x = self.tok_emb(ids) + self.pos_emb(pos)  # (B, T, d)
        patterns = []
        for block in self.blocks:
            x, pattern = block(x)  # (B, T, d), (B, H, T, T)
            patterns.append(pattern)
        logits = self.unembed(self.ln_f(x))  # (B, T, V)
        return logits, patterns


def training_batch(cfg: ToyConfig, batch: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, 2L) sequences: a random prefix, then one random span repeated periodically to the end.

    Each row draws its span length ``k`` uniformly from ``[min_span, L]`` and its prefix length from
    ``[0, 2L - 2k]``, so every row holds at least two full copies of its span.  Both the period and the
    place where the repetition starts vary from row to row, so no fixed positional offset predicts the next
    token: a model can only profit from the repeats by looking at content ("which token followed the
    previous occurrence of this one"), which is the induction mechanism.  All tokens are uniform over the
    vocabulary, so bigram statistics carry no information either.

    The variation matters: trained only on the held-out format (``min_span = L``, so every row is L tokens
    twice from position 0), a 1-layer model scores about 0.95 on the induction metric by attending to the
    fixed position ``i - L + 1``, a positional shortcut that the metric alone cannot tell from induction.
    """
    T = cfg.n_ctx
    raw = torch.randint(0, cfg.vocab, (batch, T), generator=generator)  # (B, T)
    k = torch.randint(cfg.min_span, cfg.period + 1, (batch, 1), generator=generator)  # (B, 1) span lengths
    p = (torch.rand(batch, 1, generator=generator) * (T - 2 * k + 1)).long()  # (B, 1) prefix in [0, T-2k]
    t = torch.arange(T)[None, :]  # (1, T)
    src = torch.where(t < p, t, p + (t - p) % k)  # (B, T) where each position copies its token from
    return raw.gather(1, src)  # (B, T)


def train(cfg: ToyConfig, progress: Callable[[int, int], None] | None = None,
          device: torch.device | str = "cpu") -> AttnOnlyTransformer:
    """Train a fresh model on :func:`training_batch` data with AdamW; deterministic given ``cfg.seed``.

    The initialisation uses the global torch RNG inside :func:`torch.random.fork_rng`, so the caller's RNG
    state is restored afterwards; the data come from a private generator seeded from ``cfg.seed``.  Weights and
    data are drawn on the CPU, whatever `device` the model then trains on, so every device starts from the same
    draws.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = AttnOnlyTransformer.from_config(cfg)
    model.to(device)
    gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup)))
    every = max(1, cfg.steps // 20)
    model.train()
    for step in range(cfg.steps):
        ids = training_batch(cfg, cfg.batch, gen).to(device)  # (B, T)
        logits, _ = model(ids[:, :-1])  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if progress is not None and (step % every == 0 or step == cfg.steps - 1):
            progress(step + 1, cfg.steps)
    model.eval()
    return model


@torch.no_grad()
def evaluate(model: AttnOnlyTransformer, cfg: ToyConfig, n_seq: int, seed: int, chunk: int = 128) -> dict:
    """Per-sequence measurements on ``n_seq`` fresh repeated random sequences (L random tokens, then again).

    Returns ``induction`` and ``prev_token`` as (n_seq, n_layers, n_heads) tensors, ``loss_first`` and
    ``loss_second`` as (n_seq,) tensors in nats (see :func:`bench.families.circuits.attention_metrics.copy_losses`).  The
    sequences come from their own generator seeded with ``seed``; :func:`train` seeds its data generator
    with ``cfg.seed + 1_000_003`` and draws differently shaped sequences, so the two streams never coincide.
    """
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    ids = repeated_random_tokens(torch.arange(cfg.vocab), n_seq, cfg.period, gen).to(device)  # (n, 2L)
    was_training = model.training
    model.eval()
    ind, prev, first, second = [], [], [], []
    for start in range(0, n_seq, chunk):
        part = ids[start : start + chunk]  # (b, 2L)
        logits, patterns = model(part)  # (b, 2L, V), n_layers x (b, H, 2L, 2L)
        ind.append(torch.stack([induction_scores(p, cfg.period) for p in patterns], dim=1))  # (b, n_layers, H)
        prev.append(torch.stack([previous_token_scores(p) for p in patterns], dim=1))  # (b, n_layers, H)
        f, s = copy_losses(logits, part, cfg.period)  # (b,), (b,)
        first.append(f)
        second.append(s)
    model.train(was_training)
    return {
        "induction": torch.cat(ind).cpu(),
        "prev_token": torch.cat(prev).cpu(),
        "loss_first": torch.cat(first).cpu(),
        "loss_second": torch.cat(second).cpu(),
    }
