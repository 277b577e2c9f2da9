"""Per-head attention weights of one block, as detached float32 copies, for every layout :mod:`arch` knows."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bench.ground.errors import ArchError
from bench.models.arch import Arch, _in_out, get


@dataclass(frozen=True)
class HeadWeights:
    W_Q: torch.Tensor            # (H, d_model, d_head): q_h = x @ W_Q[h] (+ b_Q[h]), x the norm's output row
    W_K: torch.Tensor            # (H_kv, d_model, d_head)
    W_V: torch.Tensor            # (H_kv, d_model, d_head)
    W_O: torch.Tensor            # (H, d_head, d_model): head h adds z_h @ W_O[h] to the output
    b_Q: torch.Tensor | None     # (H, d_head)
    b_K: torch.Tensor | None     # (H_kv, d_head)
    b_V: torch.Tensor | None     # (H_kv, d_head)
    kv_head_of: tuple[int, ...]  # query head h reads K/V head kv_head_of[h]
    b_O: torch.Tensor | None = None  # (d_model,), added once (not per head)


def _per_head(w: torch.Tensor, b: torch.Tensor | None, n: int, d_head: int):
    """(d_model, n*d_head) in→out matrix and (n*d_head,) bias → (n, d_model, d_head) and (n, d_head)."""
    heads = w.reshape(w.shape[0], n, d_head).permute(1, 0, 2)
    return heads, None if b is None else b.reshape(n, d_head)


def _split_grouped(w: torch.Tensor, H: int, Hkv: int, dh: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, (H + 2·Hkv)·dh) grouped fused outputs → q (rows, H·dh), k (rows, Hkv·dh), v (rows, Hkv·dh)."""
    g = w.reshape(w.shape[0], Hkv, H // Hkv + 2, dh)
    q = g[:, :, :-2].reshape(w.shape[0], H * dh)  # query head h = group·(H/Hkv) + j
    return q, g[:, :, -2].reshape(w.shape[0], Hkv * dh), g[:, :, -1].reshape(w.shape[0], Hkv * dh)


def head_weights(model: nn.Module, arch: Arch, layer: int) -> HeadWeights:
    """Per-head attention weights of block ``layer`` as detached float32 copies."""
    if not 0 <= layer < arch.n_layers:
        raise ArchError(f"{arch.model_type}: layer {layer} out of range (model has {arch.n_layers})")
    blk = arch.blocks[layer]
    H, Hkv, dh = arch.n_heads, arch.n_kv_heads, arch.d_head
    with torch.no_grad():
        if blk.qkv_layout == "separate":
            parts = [_in_out(get(model, p)) for p in (blk.q, blk.k, blk.v)]
        else:
            w, b = _in_out(get(model, blk.qkv))  # (d_model, (H + 2·Hkv)·dh)
            if blk.qkv_layout in ("gpt2", "concat"):  # output is [q heads (H) | k heads (Hkv) | v heads (Hkv)]
                sizes = (H * dh, Hkv * dh, Hkv * dh)
                ws, bs = w.split(sizes, dim=1), (b.split(sizes) if b is not None else (None,) * 3)
            else:  # grouped: output viewed as (n_kv, H/n_kv + 2, dh): the group's query heads, then k, then v
                ws, bs = _split_grouped(w, H, Hkv, dh), (None,) * 3 if b is None else _split_grouped(b[None], H, Hkv, dh)
                bs = tuple(None if t is None else t[0] for t in bs)
            parts = list(zip(ws, bs))
        (W_Q, b_Q), (W_K, b_K), (W_V, b_V) = (_per_head(w, b, n, dh)
                                              for (w, b), n in zip(parts, (H, Hkv, Hkv)))
        w_o, b_o = _in_out(get(model, blk.o))  # (H*dh, d_model)
        W_O = w_o.reshape(H, dh, w_o.shape[1])

    def copy(t):
        return None if t is None else t.detach().to(torch.float32).clone()

    group = H // Hkv
    return HeadWeights(W_Q=copy(W_Q), W_K=copy(W_K), W_V=copy(W_V), W_O=copy(W_O), b_Q=copy(b_Q),
                       b_K=copy(b_K), b_V=copy(b_V), kv_head_of=tuple(h // group for h in range(H)),
                       b_O=copy(b_o))
