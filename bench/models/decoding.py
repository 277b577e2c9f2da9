"""The one decoder (greedy or seeded sampling, with a KV cache) and per-sequence log-probabilities.

Every decoding in bench ends in :func:`steps`, one loop over a batch: per-row token budgets, per-row stop
strings, end-of-sequence, finished rows leaving a greedy batch.  What differs is how prompts are laid out
before it, three ways:

:func:`decode`       prompts that share their leading tokens (a task statement and demonstrations), laid out as
                     :class:`Prompts`: the common token prefix runs once and its cache is copied along the batch;
                     each prompt's rest is left-padded so every sequence's next token sits in the last column.
                     Returns the tokens too (:class:`Completions`), for training on them.
:func:`greedy`       prompts with one of several text prefixes (a header and demonstrations each): every
                     distinct prefix runs once, several prefixes share a batch.
:func:`decode_groups` several groups of such prompts, each group's prefix once, all rows sharing the batches.
:func:`greedy_rows`  whole token rows, left-padded into one batch, nothing shared.

Position ids follow the attention mask, so neither padding nor a split changes what the model computes: every
layout gives the numbers of whole left-padded prompts, up to float rounding.  The shared prefix is what makes
this cheap: few-shot prompts repeat their instructions and demonstrations (in the generalization family's smoke
task ~80 of a prompt's ~100 tokens).

The prefix's KV cache is copied along the batch.  Under autograd (:func:`token_logprobs` in a training step) it
is computed with gradients and expanded by ``repeat_interleave``, whose backward sums the copies' gradients, so
the loss and its gradient equal those of the whole prompts.

:func:`decode` stops by default at the first newline (an answer is one line) or the end-of-sequence token, per
sequence; the tokens kept are those up to and including the stopping one.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

Stop = str | Sequence[str | None] | None  # one stop string for all rows, or one per row


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
    width = max(1, max((len(r) for r in rows), default=0))
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
def decode(model, tok, prompts: list[str], max_new_tokens: int | Sequence[int], *,
           generator: torch.Generator | None = None, temperature: float = 1.0, micro_batch: int = 32,
           share: bool = True, stop: Stop = "\n") -> Completions:
    """Greedy decoding when `generator` is None, else sampling at `temperature` drawn from `generator`;
    `share`: run the prompts' common prefix once (else every prompt whole).  `max_new_tokens`: one budget for
    all prompts or one per prompt; a row stops at its budget, at its stop string (`stop`: one for all prompts or
    one per prompt, None for none) in its text or at end-of-sequence."""
    device = next(model.parameters()).device
    budgets, stops = _budgets(max_new_tokens, len(prompts)), _stops(stop, len(prompts))
    enc = fitting(model, encode(tok, prompts, device, share=share), max(budgets))
    base = prefix_cache(model, enc)
    outs = []
    for i in range(0, len(enc), micro_batch):
        part = enc.rows(slice(i, i + micro_batch))
        outs.append(steps(model, tok, part.ids, part.full_mask(), _expanded(base, len(part), keep=True),
                          budgets[i: i + micro_batch], stop=stops[i: i + micro_batch], generator=generator, temperature=temperature))
    C = max(o[0].shape[1] for o in outs)
    pid = pad_id(tok)

    def right(t, fill):  # (b, c) -> (b, C), padded on the right
        return torch.cat([t, torch.full((t.shape[0], C - t.shape[1]), fill, dtype=t.dtype, device=t.device)], 1)

    return Completions(enc, torch.cat([right(o[0], pid) for o in outs]), torch.cat([right(o[1], 0) for o in outs]),
                       tuple(t for o in outs for t in o[2]))


def _budgets(max_new_tokens: int | Sequence[int], n: int) -> list[int]:
    budgets = [max_new_tokens] * n if isinstance(max_new_tokens, int) else [int(b) for b in max_new_tokens]
    if len(budgets) != n or min(budgets, default=1) < 1:
        raise ValueError("need one token budget ≥ 1 per prompt")
    return budgets


def _stops(stop: Stop, n: int) -> list[str | None]:
    stops = [stop] * n if stop is None or isinstance(stop, str) else list(stop)
    if len(stops) != n:
        raise ValueError("need one stop string (or None) per prompt")
    return stops


def cut(text: str, stop: str | None) -> str:
    """`text` up to (not including) the first `stop`."""
    return text[: text.find(stop)] if stop and stop in text else text


@torch.no_grad()
def steps(model, tok, ids: torch.Tensor, mask: torch.Tensor, past, budgets: Sequence[int], *,
          stop: Stop = "\n", generator: torch.Generator | None = None, temperature: float = 1.0,
          drop: bool | None = None, use_cache: bool = True):
    """The decoding loop every layout ends in: (ids (B, c), kept-token mask (B, c), texts) of one batch.

    `ids` (B, S) are the tokens still to run (all of them when `past` is None), `mask` (B, ·) the attention mask
    over `past` and `ids`.  Row r keeps at most ``budgets[r]`` tokens and stops after end-of-sequence (kept) or
    once its stop string (`stop`, or ``stop[r]``) occurs in its decoded text; its text is cut before it.  `drop` (default: when greedy):
    finished rows leave the batch, cache rows included, so a batch costs what its longest answers cost only for
    those answers; sampling keeps every row, so that the generator's draws, and with them the samples, do not
    depend on when other rows finish.  ``use_cache=False`` re-runs every row's whole sequence at each step (the
    same tokens; the baseline of what the cache saves)."""
    B, n = ids.shape[0], max(budgets)
    stops = _stops(stop, B)
    device = ids.device
    drop = generator is None if drop is None else drop
    eos = getattr(tok, "eos_token_id", None)
    out = torch.full((B, n), pad_id(tok), dtype=torch.long, device=device)
    keep = torch.zeros((B, n), dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    texts = [""] * B
    alive = torch.arange(B, device=device)  # the original row of each batch row
    cur_ids, cur_mask = ids, mask
    used = 0
    for t in range(n):
        used = t + 1
        pos = _positions(cur_mask)[:, -cur_ids.shape[1]:]
        res = model(input_ids=cur_ids, attention_mask=cur_mask, position_ids=pos,
                    cache=past if use_cache else None, use_cache=use_cache, logits_to_keep=1)
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
            if stops[i]:
                texts[i] = tok.decode(out[i, : t + 1][keep[i, : t + 1].bool()], skip_special_tokens=True)
            if (stops[i] and stops[i] in texts[i]) or (eos is not None and int(out[i, t]) == eos) or t + 1 >= budgets[i]:
                done[i] = True
        if bool(done.all()):
            break
        if use_cache:
            past = res.cache
        if drop and bool(done[alive].any()):  # finished rows leave the batch
            stay = (~done[alive]).nonzero().squeeze(1)
            alive, nxt, cur_mask = alive[stay], nxt[stay], cur_mask[stay]
            if use_cache:
                past.batch_select_indices(stay)
            else:
                cur_ids = cur_ids[stay]
        cur_ids = nxt[:, None] if use_cache else torch.cat([cur_ids, nxt[:, None]], 1)
        cur_mask = torch.cat([cur_mask, torch.ones((len(alive), 1), dtype=cur_mask.dtype, device=device)], 1)
    texts = [cut(tok.decode(out[i, :used][keep[i, :used].bool()], skip_special_tokens=True), stops[i])
             for i in range(B)]
    return out[:, :used], keep[:, :used], tuple(texts)


def left_pad(seqs: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists -> (ids (B, T), mask (B, T)) on the CPU, padded on the left (empty lists allowed)."""
    ids, mask = _padded([list(s) for s in seqs], pad, "cpu")
    return (ids, mask) if any(len(s) for s in seqs) else (ids[:, :0], mask[:, :0])


@torch.no_grad()
def greedy(model, prompts: list[str], *, prefix: str | Sequence[str] = "", max_new_tokens: int | Sequence[int],
           stop: Stop = "\n", batch: int = 64, use_cache: bool = True,
           progress: Callable[[float, str], None] = lambda f, m="": None) -> list[str]:
    """Greedy continuations of ``prefix + prompt`` for each prompt of a loaded model (one prefix for all, or one
    per prompt: several prefixes share a batch), each cut before its first stop string, with one token budget
    and one stop string for all or one per prompt.  A prefix and its prompt are tokenized apart, the tokenizer's special tokens (BOS) in front
    of the prefix.  Each distinct prefix runs through the model once, all in one padded batch; its cache rows are
    copied into every batch that needs them, laid out as ``[pad… prefix][pad… prompt][generated…]`` with the
    mask hiding both paddings.  Rows are batched shortest first."""
    tok = model.tokenizer
    n = len(prompts)
    prefixes = [prefix] * n if isinstance(prefix, str) else list(prefix)
    budgets, stops = _budgets(max_new_tokens, n), _stops(stop, n)
    if len(prefixes) != n:
        raise ValueError("need one prefix and one token budget ≥ 1 per prompt")
    uniq = list(dict.fromkeys(prefixes))
    pre_seqs = [tok(p)["input_ids"] if p else [] for p in uniq]
    seqs = [tok(s, add_special_tokens=not p)["input_ids"] for s, p in zip(prompts, prefixes)]
    if any(not s for s in seqs):
        raise ValueError("every prompt needs at least one token of its own")
    pre_ids, pre_mask = (t.to(model.device) for t in left_pad(pre_seqs, pad_id(tok)))  # (U, P)
    shared = None
    if use_cache and pre_ids.shape[1]:
        shared = model.hf(input_ids=pre_ids, attention_mask=pre_mask, position_ids=_positions(pre_mask),
                          use_cache=True, logits_to_keep=1).cache
    of = torch.tensor([uniq.index(p) for p in prefixes], device=model.device)
    order = sorted(range(n), key=lambda i: (len(pre_seqs[int(of[i])]) + len(seqs[i]), budgets[i]))
    out: list[str] = [""] * n
    for start in range(0, n, batch):
        idx = order[start: start + batch]
        suf, suf_mask = (t.to(model.device) for t in left_pad([seqs[i] for i in idx], pad_id(tok)))  # (B, S)
        which = of[idx]
        mask = torch.cat([pre_mask[which], suf_mask], 1)  # (B, P + S)
        past = None
        if shared is not None:
            past = copy.deepcopy(shared)
            past.batch_select_indices(which)
        ids = suf if past is not None else torch.cat([pre_ids[which], suf], 1)
        _, _, texts = steps(model.hf, tok, ids, mask, past, [budgets[i] for i in idx],
                            stop=[stops[i] for i in idx], use_cache=use_cache)
        for i, t in zip(idx, texts):
            out[i] = t
        progress(min(1.0, (start + len(idx)) / max(1, n)), "generating")
    return out


@torch.no_grad()
def greedy_rows(model, rows: Sequence[Sequence[int]], max_new_tokens: int | Sequence[int], *, pad: int,
                stop: Stop = None, drop: bool = False) -> list[str]:
    """Greedy continuations of whole token rows of a loaded model, left-padded with `pad` into one batch, in
    their order; `drop`: finished rows leave the batch (by default they run on, so every row is computed at the
    batch's full width at every step, as ``transformers``' ``generate`` computes it)."""
    ids, mask = (t.to(model.device) for t in left_pad(rows, pad))
    return list(steps(model.hf, model.tokenizer, ids, mask, None, _budgets(max_new_tokens, len(rows)), stop=stop,
                      drop=drop)[2])


def token_logprobs(model, prompts: Prompts, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, C) log-probabilities of the completion tokens `ids` after their prompts (0 where `mask` is 0).

    The shared prefix runs once and its cache is expanded along the batch; then one forward over the rest of
    each prompt + its completion, computing only the logits that predict completion tokens (``logits_to_keep``),
    which spares most of the LM head."""
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


@torch.no_grad()
def decode_groups(model, tok, groups: Sequence[Sequence[str]], max_new_tokens: int, *, micro_batch: int = 32,
                  stop: Stop = "\n", progress: Callable[[float], None] = lambda f: None) -> list[tuple[str, ...]]:
    """Greedy texts of non-empty groups of prompts, decoded in shared batches: each group's common token prefix
    (split as :func:`decode` splits it) runs once, every group's in one left-padded pass, and the rows of all
    groups fill the micro-batches together as ``[pad… prefix][pad… rest][generated…]``.  The texts of
    :func:`decode` on each group alone, up to float rounding, in fewer steps (a step reads every weight however
    few rows it has); group by group when the layout could outgrow a sliding window.  `progress(f)`: the share
    of the prompts decoded, after each micro-batch (after each group, group by group)."""
    device = next(model.parameters()).device
    encs = [encode(tok, list(g), device) for g in groups]
    P, S, w = max(e.n_prefix for e in encs), max(e.ids.shape[1] for e in encs), window(model)
    if not P or (w is not None and P + S + max_new_tokens > w):
        out = []
        for k, g in enumerate(groups):
            out.append(decode(model, tok, list(g), max_new_tokens, micro_batch=micro_batch, stop=stop).texts)
            progress((k + 1) / len(groups))
        return out
    pre_ids, pre_mask = _padded([e.prefix.tolist() for e in encs], pad_id(tok), device)  # (G, P)
    shared = model(input_ids=pre_ids, attention_mask=pre_mask, position_ids=_positions(pre_mask), use_cache=True,
                   logits_to_keep=1).cache
    rows = [(g, e.ids[r][e.mask[r].bool()].tolist()) for g, e in enumerate(encs) for r in range(len(e))]
    texts: list[str] = []
    for i in range(0, len(rows), micro_batch):
        part = rows[i: i + micro_batch]
        which = torch.tensor([g for g, _ in part], device=device)
        ids, mask = _padded([r for _, r in part], pad_id(tok), device)
        past = copy.deepcopy(shared)
        past.batch_select_indices(which)
        texts += steps(model, tok, ids, torch.cat([pre_mask[which], mask], 1), past, [max_new_tokens] * len(part),
                       stop=stop)[2]
        progress(len(texts) / len(rows))
    ends = list(itertools.accumulate(len(e) for e in encs))
    return [tuple(texts[b - len(e): b]) for e, b in zip(encs, ends)]
