"""Neuron edits at the FFN activation, and bits per byte of texts under an edit.

An edit sets chosen neurons' activation (the output of each block's activation module — the gate activation
before ×up in gated FFNs) to 0 (deactivation) or to given values (steering).  Zeroing there removes the
neuron's whole contribution, exactly as zeroing its row of the down projection would.

Bits per byte: each text starts with the start token, so every text token is predicted; the text's bits are
Σ −log₂ p(token) and its bytes the length of its UTF-8 encoding.  Bits per byte compare across scripts, where
per-token losses do not (tokenisers cut scripts into pieces of very different sizes).  The LM head runs on
chunks of positions, so a 262k-word head never holds more than `head_rows` rows of logits at a time.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from bench.families.langneurons import text as tx
from bench.models import hooks
from bench.models.logits import head_logits

LN2 = math.log(2.0)


def neuron_edits(arch, flat: np.ndarray, values: np.ndarray | None = None) -> dict[str, Callable]:
    """Hook functions per activation module: neurons `flat` (layer·F + j) set to 0, or to `values` (same order)."""
    flat = np.asarray(flat, dtype=np.int64)
    F = arch.d_ffn
    edits = {}
    for layer in np.unique(flat // F):
        pick = flat // F == layer
        idx = torch.as_tensor(flat[pick] % F, dtype=torch.long)
        val = None if values is None else torch.as_tensor(np.asarray(values, float)[pick], dtype=torch.float32)

        def fn(t: torch.Tensor, idx=idx, val=val) -> torch.Tensor:
            t = t.clone()
            if val is None:
                t[..., idx.to(t.device)] = 0
            else:
                t[..., idx.to(t.device)] = val.to(device=t.device, dtype=t.dtype)
            return t

        edits[arch.blocks[int(layer)].ffn_act] = fn
    return edits


@torch.no_grad()
def token_nats(model, seqs: list[list[int]], *, max_tokens: int = 2048, head_rows: int = 256,
               edits: dict[str, Callable] | None = None) -> list[np.ndarray]:
    """−ln p of every token after the first, per sequence, under `edits`: one (len − 1,) array per sequence."""
    hf = model.hf
    out: list[np.ndarray | None] = [None] * len(seqs)
    with hooks.intervene(hf, edits or {}):
        for batch in tx.batches(seqs, max_tokens=max_tokens, pad=tx.pad_id(model.tokenizer)):
            ids, mask = batch.ids.to(model.device), batch.mask.to(model.device)
            hidden = hf.base_model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
            pos = mask[:, 1:].bool()  # (B, T-1): positions whose next token is real
            rows = hidden[:, :-1][pos]  # (N, d)
            targets = ids[:, 1:][pos]  # (N,)
            nats = torch.empty(rows.shape[0], dtype=torch.float64)
            for i in range(0, rows.shape[0], head_rows):
                logits = head_logits(hf, rows[i: i + head_rows])  # (n, V)
                tgt = targets[i: i + head_rows]
                lp = logits.gather(1, tgt[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
                nats[i: i + head_rows] = (-lp).double().cpu()
            lengths = pos.sum(dim=1).tolist()
            for r, piece in zip(batch.rows, torch.split(nats, lengths)):
                out[r] = piece.numpy()
    return out  # type: ignore[return-value]


def text_bits(model, texts: list[str], *, edits: dict[str, Callable] | None = None,
              max_tokens: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(bits per text, bytes per text) under `edits`."""
    seqs = [tx.encode(model.tokenizer, t) for t in texts]
    nats = token_nats(model, seqs, max_tokens=max_tokens, edits=edits)
    bits = np.array([float(n.sum()) / LN2 for n in nats])
    nbytes = np.array([len(t.encode("utf-8")) for t in texts], dtype=float)
    return bits, nbytes


def bits_per_byte(nats: np.ndarray, n_bytes: int) -> float:
    """Σ nats / ln 2 / bytes."""
    return float(np.sum(nats)) / LN2 / n_bytes
