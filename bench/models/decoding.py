"""Batched decoding with a KV cache (greedy or seeded sampling) and per-sequence log-probabilities.

A batch of prompts is laid out as :class:`Prompts`: the token prefix they all share (the task statement and
the demonstrations), run once, and each prompt's remaining tokens, left-padded so every sequence's next token
sits in the last column.  Position ids follow the attention mask, so neither the padding nor the split changes
what the model computes: both give the numbers of whole left-padded prompts, up to float rounding.  The shared
prefix is what makes this cheap: few-shot prompts repeat their instructions and demonstrations (in the
generalization family's smoke task ~80 of a prompt's ~100 tokens).

The prefix's KV cache is copied along the batch.  Under autograd (:func:`token_logprobs` in a training step) it
is computed with gradients and expanded by ``repeat_interleave``, whose backward sums the copies' gradients, so
the loss and its gradient equal those of the whole prompts.

Decoding stops at the first newline (an answer is one line) or the end-of-sequence token, per sequence; the
tokens kept are those up to and including the stopping one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Prompts:
    """Prompts as one shared token prefix (P,) and each prompt's rest (B, S), left-padded.  At least one token
    of every prompt stays in `ids`, so the last column always predicts the first new token."""

    prefix: torch.Tensor  # (P,) ids every prompt starts with (P may be 0)
    ids: torch.Tensor     # (B, S) left-padded
    mask: torch.Tensor    # (B, S)

    def __len__(self) -> int:
        return self.ids.shape[0]

    @property
    def n_prefix(self) -> int:
        return int(self.prefix.numel())

    def full_mask(self) -> torch.Tensor:
        """(B, P + S) attention mask over the prefix and the rest."""
        ones = torch.ones((len(self), self.n_prefix), dtype=self.mask.dtype, device=self.mask.device)
        return torch.cat([ones, self.mask], 1)

    def rows(self, index) -> "Prompts":
        return Prompts(self.prefix, self.ids[index], self.mask[index])

    def unshared(self) -> "Prompts":
        """The same prompts with no shared prefix, each left-padded whole (real tokens flush right)."""
        rows = [torch.cat([self.prefix, r[m.bool()]]).tolist() for r, m in zip(self.ids, self.mask)]
        ids, mask = _padded(rows, 0, self.ids.device)  # the padding's id is masked out: any id does
        return Prompts(self.prefix[:0], ids, mask)

    def whole(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, P + S) ids and mask of the whole prompts (the prefix written out in every row)."""
        pre = self.prefix[None].expand(len(self), -1)
        return torch.cat([pre, self.ids], 1), self.full_mask()


@dataclass(frozen=True)
class Completions:
    prompts: Prompts
    ids: torch.Tensor          # (B, C) right-padded with the pad id
    mask: torch.Tensor         # (B, C) 1 on kept tokens
    texts: tuple[str, ...]


def pad_id(tok) -> int:
    for cand in (tok.pad_token_id, tok.eos_token_id, 0):
        if cand is not None:
            return int(cand)
    return 0


def _padded(rows: list[list[int]], pid: int, device, left: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and mask of token rows, padded with `pid` on the left (real tokens flush right) or the right."""
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), pid, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            span = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, span] = torch.tensor(r, dtype=torch.long)
            mask[i, span] = 1
    return ids.to(device), mask.to(device)


def shared_length(rows: list[list[int]]) -> int:
    """Length of the longest token prefix common to every row, leaving at least one token of each row out."""
    n = min(len(r) for r in rows) - 1
    first = rows[0]
    for r in rows[1:]:
        k = 0
        while k < n and r[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def encode(tok, prompts: list[str], device, share: bool = True) -> Prompts:
    """Tokenize whole prompts (special tokens added as for one text) and split off their common prefix; the
    split is on token ids, so prefix + rest is exactly each prompt's tokenization."""
    rows = [tok(p, add_special_tokens=True)["input_ids"] for p in prompts]
    n = shared_length(rows) if share else 0
    ids, mask = _padded([r[n:] for r in rows], pad_id(tok), device)
    return Prompts(torch.tensor(rows[0][:n], dtype=torch.long, device=device), ids, mask)


def encode_prompts(tok, prompts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (B, P) ids and mask of whole prompts, no prefix split (what ``generate`` is given)."""
    return encode(tok, prompts, device, share=False).whole()


def encode_completions(tok, texts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (B, C) ids and mask of completion texts (no special tokens)."""
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    return _padded(rows, pad_id(tok), device, left=False)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def window(model) -> int | None:
    """The smallest sliding attention window of `model`'s layers, or None (every layer sees everything)."""
    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    w = getattr(cfg, "sliding_window", None)
    return int(w) if w else None


def fitting(model, prompts: Prompts, new_tokens: int) -> Prompts:
    """`prompts`, or the same prompts unshared when a sequence could outgrow a sliding attention window.

    A window counts cache slots, and the split layout puts a shorter prompt's padding between the prefix and its
    rest: once the sequence is longer than the window, that padding would take slots of the window that real
    tokens fill when the prompt runs alone.  Whole left-padded prompts keep their padding out of every window."""
    w = window(model)
    if w is None or not prompts.n_prefix or prompts.n_prefix + prompts.ids.shape[1] + new_tokens <= w:
        return prompts
    return prompts.unshared()


def prefix_cache(model, prompts: Prompts):
    """The KV cache of the shared prefix, computed once (with gradients when autograd is on), or None."""
    if not prompts.n_prefix:
        return None
    return model(input_ids=prompts.prefix[None], use_cache=True, logits_to_keep=1).cache


def _expanded(cache, n: int, keep: bool):
    """`cache` (batch 1) repeated along the batch `n` times; `keep`: on a copy, leaving `cache` for reuse."""
    if cache is None:
        return None
    out = copy.deepcopy(cache) if keep else cache
    out.batch_repeat_interleave(n)
    return out


@torch.no_grad()
def decode(model, tok, prompts: list[str], max_new_tokens: int, *, generator: torch.Generator | None = None,
           temperature: float = 1.0, micro_batch: int = 32, share: bool = True) -> Completions:
    """Greedy decoding when `generator` is None, else sampling at `temperature` drawn from `generator`;
    `share`: run the prompts' common prefix once (else every prompt whole)."""
    device = next(model.parameters()).device
    enc = fitting(model, encode(tok, prompts, device, share=share), max_new_tokens)
    base = prefix_cache(model, enc)
    outs = []
    for i in range(0, len(enc), micro_batch):
        part = enc.rows(slice(i, i + micro_batch))
        outs.append(_decode_batch(model, tok, part, _expanded(base, len(part), keep=True), max_new_tokens,
                                  generator, temperature))
    C = max(o[0].shape[1] for o in outs)
    pid = pad_id(tok)

    def right(t, fill):  # (b, c) -> (b, C), padded on the right
        return torch.cat([t, torch.full((t.shape[0], C - t.shape[1]), fill, dtype=t.dtype, device=t.device)], 1)

    return Completions(enc, torch.cat([right(o[0], pid) for o in outs]), torch.cat([right(o[1], 0) for o in outs]),
                       tuple(t for o in outs for t in o[2]))


def _decode_batch(model, tok, prompts: Prompts, past, max_new_tokens, generator, temperature):
    """(ids (B, c), kept-token mask (B, c), texts) of one micro-batch whose shared prefix is in `past`.

    Greedy decoding drops finished rows from the batch (their cache rows too), so a batch costs what its longest
    answers cost only for those answers.  Sampling keeps every row, so that the generator's draws, and with
    them the samples, do not depend on when other rows finish."""
    B = len(prompts)
    device = prompts.ids.device
    eos = tok.eos_token_id
    out = torch.full((B, max_new_tokens), pad_id(tok), dtype=torch.long, device=device)
    keep = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    texts = [""] * B
    alive = torch.arange(B, device=device)  # the original row of each batch row
    cur_ids, cur_mask = prompts.ids, prompts.full_mask()
    used = 0
    for t in range(max_new_tokens):
        used = t + 1
        pos = _positions(cur_mask)[:, -cur_ids.shape[1]:]
        res = model(input_ids=cur_ids, attention_mask=cur_mask, position_ids=pos,
                    cache=past, use_cache=True, logits_to_keep=1)
        past = res.cache
        logits = res.logits[:, -1, :].float()  # (b, V)
        if generator is None:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(device)
        live = ~done[alive]  # (b,) rows of this batch still writing
        rows = alive[live]
        out[rows, t] = nxt[live]
        keep[rows, t] = 1
        for i in rows.tolist():
            texts[i] = tok.decode(out[i, : t + 1][keep[i, : t + 1].bool()], skip_special_tokens=True)
            if "\n" in texts[i] or (eos is not None and int(out[i, t]) == eos):
                done[i] = True
        if bool(done.all()):
            break
        if generator is None and bool(done[alive].any()):  # greedy: finished rows leave the batch
            stay = (~done[alive]).nonzero().squeeze(1)
            alive, nxt, cur_mask = alive[stay], nxt[stay], cur_mask[stay]
            past.batch_select_indices(stay)
        cur_ids = nxt[:, None]
        cur_mask = torch.cat([cur_mask, torch.ones((len(alive), 1), dtype=cur_mask.dtype, device=device)], 1)
    return out[:, :used], keep[:, :used], tuple(x.split("\n", 1)[0] for x in texts)


def token_logprobs(model, prompts: Prompts, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, C) log-probabilities of the completion tokens `ids` after their prompts (0 where `mask` is 0).

    The shared prefix runs once and its cache is expanded along the batch; then one forward over the rest of
    each prompt + its completion, computing only the logits that predict completion tokens (``logits_to_keep``),
    which spares most of the LM head.
    """
    prompts = fitting(model, prompts, ids.shape[1])
    past = _expanded(prefix_cache(model, prompts), len(prompts), keep=False)
    full_ids = torch.cat([prompts.ids, ids], 1)  # (B, S + C)
    full_mask = torch.cat([prompts.full_mask(), mask], 1)  # (B, P + S + C)
    C = ids.shape[1]
    res = model(input_ids=full_ids, attention_mask=full_mask, position_ids=_positions(full_mask)[:, prompts.n_prefix:],
                cache=past, use_cache=past is not None, logits_to_keep=C + 1)
    logits = res.logits[:, :-1, :].float()  # (B, C, V): the position before completion token t predicts it
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)  # (B, C)
    return logp * mask
