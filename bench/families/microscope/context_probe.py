"""LLM-Microscope contextualization: how much of its prefix a token's states let a decoder reconstruct (C_i),
beside the token's non-linearity E_i from the shared layer pass, for the class and correlation claims; and the
same pair of numbers for a base and an instruction-tuned variant of one model.

Texts: the first `n_eval` texts of the shared pass are scored; texts `n_texts` … `n_texts + n_train − 1` of the
same corpus train the decoders, so no scored text is seen in training.  Only tokens with `prefix` non-special
tokens before them are examples (see :mod:`bench.families.microscope.contextual`).

Frame: per scored token ``context_loss`` (trained decoder), ``context_loss_blind`` (state-blind decoder) and
``context_loss_shuffled`` (trained decoder, another token's states); per scored text ``decoder_gain_vs_blind``
and ``decoder_gain_vs_shuffled`` (control loss − trained loss, means over the text's tokens); ``train_loss``
per optimiser step (the step in `sample`, the decoder in `condition`: ``states`` or ``blind``); and
``token_error_mean`` (E_i) of the scored texts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from bench.core.errors import BenchError, ModelError
from bench.core.registry import probe_def
from bench.corpora.tagged import SPECIAL
from bench.families.microscope.contextual import DecoderConfig, Pool, fit, other_text
from bench.families.microscope.layerpass import (
    Item,
    Sample,
    batches,
    block_states,
    finish,
    layer_pass_memo,
    prepare_items,
)
from bench.families.microscope.schemas import TokenLayerMetrics
from bench.models.decoding import pad_id

METRICS = ("context_loss", "context_loss_blind", "context_loss_shuffled", "token_error_mean",
           "decoder_gain_vs_blind", "decoder_gain_vs_shuffled", "train_loss")


def full_prefix_examples(item: Item, k: int) -> list[tuple[int, tuple[int, ...]]]:
    """(position, the k most recent non-special token ids before it) for every usable position that has k."""
    out = []
    real = [(p, t) for p, (t, c) in enumerate(zip(item.ids, item.classes)) if c != SPECIAL]
    for p in np.flatnonzero(item.usable):
        before = [t for q, t in real if q < p]
        if len(before) >= k:
            out.append((int(p), tuple(before[-k:])))
    return out


def build_pool(model, items: list[Item], k: int, micro: int) -> tuple[Pool, pd.DataFrame]:
    """States (n, L+1, d) and prefixes (n, k) of every full-prefix token of `items`, and their (sample, position,
    cls) index."""
    states, prefixes, index = [], [], []
    for group, ids, mask in batches(items, micro, pad_id(model.tokenizer)):
        st, _ = block_states(model, ids, mask)  # (L+1, B, T, d)
        for j, it in enumerate(group):
            for p, pre in full_prefix_examples(it, k):
                states.append(st[:, j, p])
                prefixes.append(pre)
                index.append((it.sample, p, it.classes[p]))
    if not states:
        return (Pool(torch.zeros(0, model.arch.n_layers + 1, model.arch.d_model), torch.zeros(0, k, dtype=torch.long)),
                pd.DataFrame(columns=["sample", "position", "cls"]))
    return (Pool(torch.stack(states), torch.tensor(prefixes, dtype=torch.long)),
            pd.DataFrame(index, columns=["sample", "position", "cls"]))


def start_id(tokenizer, items: list[Item]) -> int:
    """The token the decoder starts from: the one the tokenizer puts before every text, else its BOS (or EOS)."""
    firsts = {it.ids[0] for it in items if it.classes[0] == SPECIAL}
    if len(firsts) == 1:
        return int(firsts.pop())
    for tid in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    raise BenchError("the tokenizer has no BOS or EOS token to start the prefix decoder from")


def control_rows(index: pd.DataFrame, loss: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per-token rows of the three losses (aligned with `index`) and, per text, the gains over each control:
    mean control loss − mean trained loss over the text's tokens (the gates' unit is the text)."""
    frame = pd.concat([index.assign(metric=m, value=np.asarray(v, float)) for m, v in loss.items()],
                      ignore_index=True)
    per_text = pd.DataFrame({m: index.assign(v=np.asarray(v, float)).groupby("sample")["v"].mean()
                             for m, v in loss.items()})
    gains = [pd.DataFrame({"sample": per_text.index, "metric": f"decoder_gain_vs_{c}",
                           "value": (per_text[f"context_loss_{c}"] - per_text["context_loss"]).to_numpy()})
             for c in ("blind", "shuffled")]
    return pd.concat([frame, *gains], ignore_index=True)


def measure(ctx, model, *, corpus, n_texts, max_tokens, micro_batch, n_eval, n_train, cfg: DecoderConfig,
            subject: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """C_i with its controls, and E_i, for the scored tokens of `model`."""
    if n_eval > n_texts or n_eval < 2 or n_train < 1:
        raise BenchError("need 2 ≤ n_eval ≤ n_texts and n_train ≥ 1")
    items = prepare_items(model.tokenizer, corpus, n_texts + n_train, max_tokens)
    eval_items = [it for it in items if it.sample < n_eval]
    train_items = [it for it in items if it.sample >= n_texts]
    if not train_items:
        raise BenchError(f"corpus {corpus} has no text beyond the first {n_texts} to train the decoder on")
    shared = layer_pass_memo(ctx, corpus=corpus, n_texts=n_texts, max_tokens=max_tokens, micro=micro_batch,
                             model=model)
    err = shared[(shared["metric"] == "token_error_mean") & (shared["sample"] < n_eval)]
    ctx.progress(0.0, "prefix decoder: hidden states")
    train, _ = build_pool(model, train_items, cfg.prefix, micro_batch)
    test, index = build_pool(model, eval_items, cfg.prefix, micro_batch)
    if len(test) == 0 or index["sample"].nunique() < 2:
        raise BenchError(f"fewer than two scored texts have a token with {cfg.prefix} tokens before it")
    vocab = (torch.cat([train.prefixes.reshape(-1), test.prefixes.reshape(-1)]) if cfg.vocab == "corpus"
             else torch.arange(model.arch.vocab_size))
    start = start_id(model.tokenizer, items)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator(stream=11)))
    kw = dict(vocab=vocab, start_id=start, seed=seed)
    trained = fit(model, train, cfg, **kw, progress=lambda f, m="": ctx.progress(0.05 + 0.45 * f, m))
    blind = fit(model, train, cfg, **kw, blind=True, progress=lambda f, m="": ctx.progress(0.5 + 0.45 * f, m))
    ctx.progress(0.95, "prefix decoder: held-out losses")
    swap = other_text(index["sample"].to_numpy(), index["position"].to_numpy())
    loss = {"context_loss": trained.loss(test), "context_loss_blind": blind.loss(test),
            "context_loss_shuffled": trained.loss(Pool(test.states[swap], test.prefixes))}
    frame = control_rows(index, loss)
    extra = [pd.DataFrame({"sample": np.arange(len(f.train_loss)), "metric": "train_loss", "value": f.train_loss,
                            "condition": cond}) for f, cond in ((trained, "states"), (blind, "blind"))]
    frame = pd.concat([frame, err[["sample", "position", "cls", "metric", "value"]], *extra], ignore_index=True)
    frame["subject"] = subject
    w = trained.encoder.weights()
    top = int(np.argmax(w))
    n_v = len(torch.unique(vocab))
    if cfg.reader == "readout":
        how = (f"decoder: per-offset readouts ({cfg.prefix} vectors in the residual space, read through the frozen "
               f"unembedding) from an MLP of width {cfg.hidden or model.arch.d_model}, dropout {cfg.dropout:g}, "
               f"weight decay {cfg.weight_decay:g}")
    else:
        how = (f"decoder: {cfg.decoder_layers or 'all'} of {model.arch.n_layers} blocks of a copy of the model with "
               f"LoRA r = {cfg.lora_rank} (α = {cfg.lora_alpha:g}, lr {cfg.lr_lora:g}) on every projection; MLP width "
               f"{cfg.hidden or model.arch.d_model}")
    notes = [f"{how}; {cfg.steps} steps × {cfg.batch} examples, lr {cfg.lr:g} (encoder), warm-up {cfg.warmup:.0%} "
             f"then cosine; prefix of {cfg.prefix} tokens; softmax over {n_v} token ids ({cfg.vocab}); {len(train)} "
             f"training tokens of {len(train_items)} texts; trained in {trained.seconds:.0f} s, blind control in "
             f"{blind.seconds:.0f} s",
             f"held-out loss per prefix token on {len(test)} tokens of {index['sample'].nunique()} texts: trained "
             f"{loss['context_loss'].mean():.3f}, state-blind {loss['context_loss_blind'].mean():.3f}, trained "
             f"with another token's states {loss['context_loss_shuffled'].mean():.3f}; training loss "
             f"{trained.train_loss[:5].mean():.2f} → {trained.train_loss[-5:].mean():.2f} (blind "
             f"{blind.train_loss[:5].mean():.2f} → {blind.train_loss[-5:].mean():.2f}); pooling weight peaks at "
             f"layer {top} ({w[top]:.2f})"]
    del trained, blind
    return frame, notes


@dataclass(frozen=True)
class ContextParams:
    sample: Sample = Sample(n_texts=64)  # the shared pass; its first n_eval texts are scored
    n_eval: int = 12
    n_train: int = 96  # texts after the sample's that train the decoders
    decoder: DecoderConfig = DecoderConfig(decoder_layers=2)


@dataclass(frozen=True)
class PairParams(ContextParams):
    instruct_of: dict[str, str] = field(default_factory=dict)


def _measure(ctx, model, p: ContextParams, subject: str | None = None):
    s = p.sample
    return measure(ctx, model, corpus=s.corpus, n_texts=s.n_texts, max_tokens=s.max_tokens,
                   micro_batch=s.micro_batch, n_eval=p.n_eval, n_train=p.n_train, cfg=p.decoder, subject=subject)


@probe_def("contextualization", version=4, schema=TokenLayerMetrics, metrics=METRICS)
def contextualization(ctx, p: ContextParams) -> pd.DataFrame:
    """Prefix-reconstruction loss C_i per token (with state-blind and shuffled controls) and E_i per token."""
    frame, notes = _measure(ctx, ctx.model, p)
    return finish(frame, notes)


def _counterpart(params, model: str) -> list[str]:
    """The other side of the model's base/instruct pair in `instruct_of`, if it has one."""
    return [b if model == i else i for b, i in (params.get("instruct_of") or {}).items() if model in (b, i)][:1]


@probe_def("context_pair", version=5, schema=TokenLayerMetrics, metrics=METRICS, companions=_counterpart)
def context_pair(ctx, p: PairParams) -> pd.DataFrame:
    """C_i and E_i of a base model (subject "base") and of its instruction-tuned variant ("instruct").

    `instruct_of` maps a base model's name to its instruction-tuned variant's name; the cell's model may be
    either side.  A model with no entry has no counterpart: the frame is empty and says so.
    """
    name, instruct_of = ctx.model.name, p.instruct_of
    pair = next(((b, i) for b, i in instruct_of.items() if name in (b, i)), None)
    if pair is None:
        frame = finish(pd.DataFrame(columns=["metric", "value"]))
        frame.attrs["notes"] = [f"no base/instruct counterpart of '{name}' is given in the spec's measure.instruct_of "
                                f"(pairs: {', '.join(f'{b} → {i}' for b, i in instruct_of.items()) or 'none'}): "
                                f"the claim needs the same model before and after instruction tuning, and no "
                                f"pair is invented"]
        return frame
    other = pair[1] if name == pair[0] else pair[0]
    try:
        counterpart = ctx.companion(other)
    except ModelError as exc:
        frame = finish(pd.DataFrame(columns=["metric", "value"]))
        frame.attrs["notes"] = [f"the counterpart '{other}' of '{name}' is not available: {exc}"]
        return frame
    frames, notes = [], []
    for model, role in ((ctx.model, "base" if name == pair[0] else "instruct"),
                        (counterpart, "instruct" if name == pair[0] else "base")):
        f, n = _measure(ctx, model, p, subject=role)
        frames.append(f)
        notes += [f"{role} ({model.name}): {x}" for x in n]
    return finish(pd.concat(frames, ignore_index=True), notes)
