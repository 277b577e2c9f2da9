"""Greedy generation for many short prompts that share a few prefixes: batched, left-padded, with a KV cache.

A row is ``prefix + prompt``.  Each distinct prefix (header and demonstrations) is run through the model once;
its cache rows are copied into every batch that needs them, so a batch is laid out as
``[pad… prefix][pad… prompt][generated…]`` with the attention mask hiding both paddings and position ids
counting only real tokens.  Rows stop at the first `stop` in their decoded continuation, at end-of-sequence or
at their own token budget, and finished rows leave the batch (cache included).  Only the last position's
logits are computed (``logits_to_keep=1``), which matters for large vocabularies.  ``use_cache=False``
re-runs every row's whole sequence at each step: the same tokens, for the benchmark of what the cache saves.
On CPU a decoding step costs about one read of the weights whatever the batch, so wide batches pay.
"""

from __future__ import annotations

import copy
from typing import Callable, Sequence

import torch

from bench.models.decoding import pad_id


def left_pad(seqs: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists -> (ids (B, T), mask (B, T)), padded on the left."""
    T = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), T), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, T - len(s):] = torch.tensor(list(s), dtype=torch.long)
            mask[i, T - len(s):] = 1
    return ids, mask


def cut(text: str, stop: str | None) -> str:
    """`text` up to (not including) the first `stop`."""
    if not stop:
        return text
    i = text.find(stop)
    return text if i < 0 else text[:i]


def positions(mask: torch.Tensor, last: int) -> torch.Tensor:
    """Position ids of the last `last` columns of `mask` (B, T), counting only unmasked tokens."""
    return (mask.cumsum(-1) - 1).clamp(min=0)[:, mask.shape[1] - last:]


@torch.no_grad()
def _prefix_cache(hf, ids: torch.Tensor, mask: torch.Tensor):
    """KV cache of the padded prefixes (U, P); None when they are empty."""
    if ids.shape[1] == 0:
        return None
    return hf(input_ids=ids, attention_mask=mask, position_ids=positions(mask, ids.shape[1]), use_cache=True,
              logits_to_keep=1).cache


def _rows_of(cache, rows: torch.Tensor):
    c = copy.deepcopy(cache)
    c.batch_select_indices(rows)
    return c


@torch.no_grad()
def _batch(hf, tok, pre_ids, pre_mask, shared, which: torch.Tensor, seqs, budgets: list[int],
           stop: str | None, use_cache: bool, device) -> list[list[int]]:
    """Generate for rows ``prefix[which[r]] + seqs[r]``; returns the new token ids of each row."""
    suf, suf_mask = left_pad(seqs, pad_id(tok))  # (B, S)
    ids = torch.cat([pre_ids[which], suf], 1).to(device)  # (B, P + S)
    mask = torch.cat([pre_mask[which], suf_mask], 1).to(device)
    B = len(seqs)
    new: list[list[int]] = [[] for _ in range(B)]
    alive = torch.arange(B)  # original row of each batch row
    past, step = None, ids
    if use_cache and shared is not None:
        past, step = _rows_of(shared, which.to(device)), suf.to(device)
    eos = tok.eos_token_id
    for _ in range(max(budgets)):
        out = hf(input_ids=step, attention_mask=mask, position_ids=positions(mask, step.shape[1]), cache=past,
                 use_cache=use_cache, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1).cpu()  # (b,)
        keep = []
        for j, r in enumerate(alive.tolist()):
            t = int(nxt[j])
            if eos is not None and t == eos:
                continue
            new[r].append(t)
            if len(new[r]) >= budgets[r] or (stop and stop in tok.decode(new[r], skip_special_tokens=True)):
                continue
            keep.append(j)
        if not keep:
            break
        k = torch.tensor(keep)
        alive, tokens = alive[k], nxt[k][:, None].to(device)  # (b', 1)
        mask = torch.cat([mask[k.to(device)], torch.ones_like(tokens)], dim=1)
        if use_cache:
            past = out.cache
            if len(keep) < len(nxt):
                past.batch_select_indices(k.to(device))
            step = tokens
        else:
            ids = torch.cat([ids[k.to(device)], tokens], dim=1)
            step = ids
    return new


def greedy(model, prompts: list[str], *, prefix: str | Sequence[str] = "", max_new_tokens: int | Sequence[int],
           stop: str | None = "\n", batch: int = 64, use_cache: bool = True,
           progress: Callable[[float, str], None] = lambda f, m="": None) -> list[str]:
    """Greedy continuations of ``prefix + prompt`` for each prompt (one prefix for all, or one per prompt),
    each cut before its first `stop`.  The tokenizer's special tokens (BOS) go in front of the prefix."""
    tok = model.tokenizer
    n = len(prompts)
    prefixes = [prefix] * n if isinstance(prefix, str) else list(prefix)
    budgets = [max_new_tokens] * n if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(prefixes) != n or len(budgets) != n or min(budgets, default=1) < 1:
        raise ValueError("need one prefix and one token budget ≥ 1 per prompt")
    uniq = list(dict.fromkeys(prefixes))
    pre_seqs = [tok(p)["input_ids"] if p else [] for p in uniq]
    seqs = [tok(s, add_special_tokens=not p)["input_ids"] for s, p in zip(prompts, prefixes)]
    if any(not s for s in seqs):
        raise ValueError("every prompt needs at least one token of its own")
    pre_ids, pre_mask = left_pad(pre_seqs, pad_id(tok))  # (U, P)
    shared = _prefix_cache(model.hf, pre_ids.to(model.device), pre_mask.to(model.device)) if use_cache else None
    of = torch.tensor([uniq.index(p) for p in prefixes])
    order = sorted(range(n), key=lambda i: (len(pre_seqs[int(of[i])]) + len(seqs[i]), budgets[i]))
    out: list[str] = [""] * n
    for start in range(0, n, batch):
        idx = order[start : start + batch]
        gen = _batch(model.hf, tok, pre_ids, pre_mask, shared, of[idx], [seqs[i] for i in idx],
                     [budgets[i] for i in idx], stop, use_cache, model.device)
        for i, g in zip(idx, gen):
            out[i] = cut(tok.decode(g, skip_special_tokens=True), stop)
        progress(min(1.0, (start + len(idx)) / max(1, n)), "generating")
    return out
