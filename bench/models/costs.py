"""Counted work of the shared model mechanisms (decoding, padded passes, training steps), for the probes' cost
models (:mod:`bench.ground.costs`).  Each function mirrors the batching of the function it is named after,
on token counts from the tokenizer, and counts a decoded answer at its full token budget (the worst case: a
stop string or end-of-sequence only shortens it)."""

from __future__ import annotations

from typing import Sequence

from bench.ground.costs import Work
from bench.models import decoding


def _ids(tok, text: str, special: bool = True) -> list[int]:
    return tok(text, add_special_tokens=special)["input_ids"]


def _steps(rows: int, width: int, budgets: Sequence[int], past: int) -> Work:
    """One batch of :func:`decoding.steps`: the first call runs `width` tokens of every row (logits of the last
    one), each later call one token of every row whose budget is not spent (finished rows leave the batch)."""
    n = max(budgets)
    generated = sum(b - 1 for b in budgets)
    length = past + width + n
    return Work(forward=rows * width, head=rows, generated=generated, calls=n, decoded_calls=n - 1, context=length,
                batch_tokens=rows * width, logit_rows=rows, kv_tokens=rows * length)


def greedy(tok, prompts: Sequence[str], *, prefix: str | Sequence[str] = "", max_new_tokens: int | Sequence[int],
           batch: int = 64) -> Work:
    """The work of :func:`bench.models.decoding.greedy` (prefixes once, in one padded batch; rows shortest
    first in batches of `batch`)."""
    n = len(prompts)
    prefixes = [prefix] * n if isinstance(prefix, str) else list(prefix)
    budgets = [max_new_tokens] * n if isinstance(max_new_tokens, int) else [int(b) for b in max_new_tokens]
    uniq = list(dict.fromkeys(prefixes))
    pre_len = {p: (len(_ids(tok, p)) if p else 0) for p in uniq}
    P = max(pre_len.values(), default=0)
    suf = [len(_ids(tok, s, special=not p)) for s, p in zip(prompts, prefixes)]
    w = Work()
    if P:
        w = w + Work(forward=len(uniq) * P, head=len(uniq), calls=1, context=P, batch_tokens=len(uniq) * P,
                     logit_rows=len(uniq), kv_tokens=len(uniq) * P)
    order = sorted(range(n), key=lambda i: (pre_len[prefixes[i]] + suf[i], budgets[i]))
    for start in range(0, n, batch):
        idx = order[start: start + batch]
        S = max(suf[i] for i in idx)
        w = w + _steps(len(idx), S, [budgets[i] for i in idx], P)
    return w


def decode(tok, prompts: Sequence[str], max_new_tokens: int | Sequence[int], *, micro_batch: int = 32,
           share: bool = True, window: int | None = None) -> Work:
    """The work of :func:`bench.models.decoding.decode` (the common token prefix once, then micro-batches of the
    left-padded rests); `window`: the model's smallest sliding window (a prefix that could outgrow it is not
    shared, as :func:`decoding.fitting` decides)."""
    n = len(prompts)
    budgets = [max_new_tokens] * n if isinstance(max_new_tokens, int) else [int(b) for b in max_new_tokens]
    rows = [_ids(tok, p) for p in prompts]
    P = decoding.shared_length(rows) if share else 0
    rest = [len(r) - P for r in rows]
    if P and window is not None and P + max(rest) + max(budgets) > window:
        P, rest = 0, [len(r) for r in rows]
    w = Work(forward=P, head=1, calls=1, context=P, batch_tokens=P, logit_rows=1) if P else Work()
    S = max(rest)  # every prompt's rest is left-padded to the longest of all, then cut into micro-batches
    for i in range(0, n, micro_batch):
        part = slice(i, i + micro_batch)
        w = w + _steps(len(rest[part]), S, budgets[part], P)
    return w


def decode_groups(tok, groups: Sequence[Sequence[str]], max_new_tokens: int, *, micro_batch: int = 32,
                  window: int | None = None, lengths: Sequence[Sequence[int]] | None = None) -> Work:
    """The work of :func:`bench.models.decoding.decode_groups`: every group's common prefix in one left-padded
    pass, then micro-batches of all groups' rests, each padded to its longest (group by group, as
    :func:`decode`, when the layout could outgrow a sliding `window`).  Every answer runs to `max_new_tokens`,
    or to its own entry of `lengths` (per group, per prompt; capped at `max_new_tokens`) where a stop string
    is expected to end it sooner."""
    kept = [i for i, g in enumerate(groups) if len(g)]
    live = [list(groups[i]) for i in kept]
    budgets = [[min(max_new_tokens, int(n)) for n in lengths[i]] if lengths is not None else
               [max_new_tokens] * len(groups[i]) for i in kept]
    rows = [[_ids(tok, p) for p in g] for g in live]
    pre = [decoding.shared_length(r) for r in rows]
    P = max(pre, default=0)
    rests = [len(r) - p for g, p in zip(rows, pre) for r in g]
    if not live or not P or (window is not None and P + max(rests) + max_new_tokens > window):
        return sum((decode(tok, g, b, micro_batch=micro_batch, window=window) for g, b in zip(live, budgets)),
                   Work())
    G = len(live)
    w = Work(forward=G * P, head=G, calls=1, context=P, batch_tokens=G * P, logit_rows=G)
    flat = [b for g in budgets for b in g]
    for i in range(0, len(rests), micro_batch):
        part = rests[i: i + micro_batch]
        w = w + _steps(len(part), max(part), flat[i: i + micro_batch], P)
    return w


def padded(lengths: Sequence[int], rows_per_batch: int) -> Work:
    """No-gradient passes over sequences of `lengths`, `rows_per_batch` at a time in the given order, each batch
    padded to its longest row, logits at every position."""
    w = Work()
    for i in range(0, len(lengths), rows_per_batch):
        part = lengths[i: i + rows_per_batch]
        T = max(part)
        w = w + Work(forward=len(part) * T, head=len(part) * T, calls=1, context=T, batch_tokens=len(part) * T,
                     logit_rows=len(part) * T)
    return w


def lora_params(shape, targets: str, r: int) -> int:
    """Parameters of rank-`r` adapters on the FFN linears, the attention linears or both ("all") of every
    block (:func:`bench.models.train.lora_targets`)."""
    d, f, q, kv = shape.d_model, shape.d_ff, shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim
    ffn = ((2 if shape.gated else 1) * (d + f) + (f + d)) * r
    attn = ((d + q) + 2 * (d + kv) + (q + d)) * r
    per = (ffn if targets in ("ffn", "all") else 0) + (attn if targets in ("attention", "all") else 0)
    return shape.n_layers * per


def full_fit_fresh(shape, fit: Work, dtype_bytes: int = 4) -> Work:
    """The memory a full fine-tune (:func:`bench.models.train.derived` with ``method = "full"``) whose steps are
    counted by `fit` (:func:`fit`) writes afresh, each page faulted in as it is first written (:attr:`Work.fresh`):
    the trained copy of the model once, AdamW's two float32 moments (and float32 master weights for a bfloat16 or
    float16 model) at its first step, and at every step the gradient of every parameter, which
    ``zero_grad(set_to_none=True)`` frees after the step, with the (vocabulary × d) buffers autograd adds into
    the embedding's and the head's gradients: a dense gradient per body call of the step (1, or 2 where the
    batch's shared prefix runs first), the head's product, and their sums (:func:`extra_embedding_buffers`).
    On gemma3-270m (262,144 × 640, tied) these are 2.4 GB a step of one call: a quarter of a step's time on this
    project's quiet CPU, nearly half on a loaded one (docs/scale.md)."""
    n, vd = shape.n_params, shape.vocab * shape.d_model
    once = n * dtype_bytes + n * 4 * (2 + (dtype_bytes < 4))
    per_steps = fit.steps * n + extra_embedding_buffers(fit.calls, fit.steps, shape.tied) * vd
    return Work(full_copy=True, fresh=once + per_steps * dtype_bytes)


def extra_embedding_buffers(calls: int, steps: int, tied: bool) -> int:
    """(vocabulary × d) buffers a full fine-tune's backward passes allocate beyond the gradients they become:
    each body call's embedding lookup writes a dense gradient, the head's product is one more, and autograd
    adds them up one by one, so 2·calls + 1 buffers a step (tied) become one gradient, or 2·calls (untied)
    become two (the embedding's and the head's).  `calls` and `steps` are a run's totals (:func:`fit`'s Work)."""
    return 2 * calls - (0 if tied else 2 * steps)


def fit(tok, examples, recipe, trainable: int, window: int | None = None) -> Work:
    """The work of :func:`bench.models.train.fit`: each step's examples right-padded into one batch, run
    forward and back through the body (the batch's common prompt prefix once, :func:`bench.models.train.
    prefix_sharing`, when the recipe draws no dropout and the rows fit the sliding `window`; a model whose own
    config draws dropout runs whole rows, which this count does not see), the head on the positions the loss
    reads."""
    from bench.models import train

    rows = train.encode(tok, examples)
    rows = [(ids, 1) for ids, _ in rows] if recipe.loss == "example" else rows
    share = recipe.method == "full" or not recipe.dropout
    w = Work()
    for idx in train.batch_order(len(rows), recipe):
        batch = [rows[i] for i in idx]
        T = max(len(ids) for ids, _ in batch)
        P = train.common_prefix(batch, window) if share else 0
        targets = sum(len(ids) - p for ids, p in batch)
        tokens = P + len(idx) * (T - P)
        w = w + Work(backward=tokens, backward_head=targets, calls=2 if P else 1, steps=1, context=T,
                     grad_tokens=tokens, logit_rows=targets, trainable=trainable)
    return w
