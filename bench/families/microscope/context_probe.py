"""LLM-Microscope contextualization: how much of its prefix a token's states let a decoder reconstruct (C_i),
beside the token's non-linearity E_i from the shared layer pass, for the class and correlation claims; and the
same pair of numbers for a base and an instruction-tuned variant of one model.

Texts: the first `n_eval` texts of the shared pass are scored; texts `n_texts` … `n_texts + n_train − 1` of the
same corpus train the decoders, so no scored text is seen in training.  Only tokens with `prefix` non-special
tokens before them are examples (see :mod:`bench.families.microscope.contextual`).

Three decoders are trained the same way (same seed, steps and batches) on the same tokens: ``states`` reads every
layer's states, ``blind`` reads zeros (the prior over prefixes), ``layer0`` reads layer 0 alone (the token's
embedding: the prior plus what the token's identity predicts about its neighbours).  The frame holds their
held-out losses per scored token, the trained decoder's loss on another token's states, the derived per-token
and per-text metrics of :mod:`bench.families.microscope.context_metrics`, ``train_loss`` per optimiser step
(the step in `sample`, the decoder in `condition`) and ``token_error_mean`` (E_i) of the scored texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from bench.ground.context import part
from bench.ground.errors import BenchError, ModelError
from bench.ground.registry import probe_def
from bench.ground.resume import Resume
from bench.corpora.tagged import SPECIAL
from bench.families.microscope.context_metrics import control_rows, summary
from bench.families.microscope.contextual import DecoderConfig, Fitted, Pool, fit, other_text
from bench.families.microscope.layerpass import (
    Item,
    Sample,
    batches,
    block_states,
    finish,
    layer_pass_memo,
    prepare_items,
)
from bench.families.microscope.schemas import TrainedTokenMetrics
from bench.models.decoding import pad_id

METRICS = ("context_loss", "context_loss_blind", "context_loss_layer0", "context_loss_shuffled", "token_error_mean",
           "decoder_gain_vs_blind", "decoder_gain_vs_shuffled", "decoder_gain_vs_layer0", "context_added_pos_centred",
           "context_loss_pos_centred", "context_loss_blind_pos_centred", "context_loss_layer0_pos_centred",
           "token_error_pos_centred", "train_loss")


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
    cls) index.  The pool is allocated once and each batch's selected tokens copied into it: a view of a token in
    the batch's (L+1, B, T, d) states would keep the whole batch alive until the end (every position of every
    training text at once: the full profile was killed for memory on a 24 GiB machine)."""
    chosen = [full_prefix_examples(it, k) for it in items]
    n = sum(map(len, chosen))
    shape = (n, model.arch.n_layers + 1, model.arch.d_model)
    states, prefixes, index, at = None, [], [], 0
    for start, (group, ids, mask) in zip(range(0, len(items), micro), batches(items, micro, pad_id(model.tokenizer))):
        st, _ = block_states(model, ids, mask)  # (L+1, B, T, d)
        rows = [(j, p, pre) for j, it in enumerate(group) for p, pre in chosen[start + j]]
        if rows:
            states = st.new_empty(shape) if states is None else states
            js, ps = torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])
            states[at: at + len(rows)] = st[:, js, ps].transpose(0, 1)
            at += len(rows)
            prefixes += [pre for _, _, pre in rows]
            index += [(group[j].sample, p, group[j].classes[p]) for j, p, _ in rows]
        del st  # before the next batch's states are computed, a batch with no chosen token included
    if not n:
        return (Pool(torch.zeros(0, *shape[1:]), torch.zeros(0, k, dtype=torch.long)),
                pd.DataFrame(columns=["sample", "position", "cls"]))
    return (Pool(states, torch.tensor(prefixes, dtype=torch.long)),
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


def layer0(pool: Pool) -> Pool:
    """The same examples with layer 0 (the embedding output, the block stack's input) as their only state."""
    return Pool(pool.states[:, :1], pool.prefixes)


DECODERS = ("states", "blind", "layer0")  # the trained decoder and its two controls, in the order they train


@dataclass(frozen=True)
class Trained:
    """A finished decoder training with its LoRA copy let go: its per-step training loss, its seconds, its encoder's
    pooling weights over layers and its held-out losses (:func:`scored`)."""

    train_loss: np.ndarray
    seconds: float
    weights: np.ndarray
    heldout: dict[str, np.ndarray]


def scored(name: str, fitted: Fitted, test: Pool, swap: np.ndarray) -> Trained:
    """Decoder `name` of :func:`fit_decoders` scored on the held-out examples of `test`, as soon as its training
    ends: on what it was trained to read, and (the trained decoder) on another text's token at the nearest position
    (`swap`, :func:`.contextual.other_text`).  Scoring draws nothing at random, so when it runs changes no number."""
    if name == "states":
        heldout = {"context_loss": fitted.loss(test),
                   "context_loss_shuffled": fitted.loss(Pool(test.states[swap], test.prefixes))}
    elif name == "blind":
        heldout = {"context_loss_blind": fitted.loss(test)}
    else:
        heldout = {"context_loss_layer0": fitted.loss(layer0(test))}
    return Trained(fitted.train_loss, fitted.seconds, fitted.encoder.weights(), heldout)


def fit_decoders(model, train: Pool, cfg: DecoderConfig, *, progress=lambda f, m="": None,
                 resume: Callable[[str], Resume | None] = lambda name: None,
                 keep: Callable[[str, Fitted], Any] = lambda name, fitted: fitted, **kw) -> dict:
    """The trained decoder and its two trained controls, each for `cfg.steps` steps from the same seed:
    {"states": all layers, "blind": zeros instead of states, "layer0": layer 0 alone}; ``resume(name)`` is where
    each one's training saves its state (None: nowhere).  ``keep(name, fitted)`` is what is kept of each as its
    training ends (:func:`scored`: its numbers, so that one LoRA copy of the model is alive at a time, not three)."""
    runs = dict(zip(DECODERS, (dict(pool=train), dict(pool=train, blind=True), dict(pool=layer0(train)))))
    out = {}
    for k, (name, run) in enumerate(runs.items()):
        fitted = fit(model, run["pool"], cfg, **kw, blind=run.get("blind", False), resume=resume(name),
                     progress=part(progress, k, len(runs)))
        out[name] = keep(name, fitted)
        del fitted  # else it would stay alive through the next training
    return out


def heldout_losses(fits: dict[str, Trained]) -> dict[str, np.ndarray]:
    """Per scored example: each decoder's held-out losses (:func:`scored`), in the frame's order."""
    got = {k: v for t in fits.values() for k, v in t.heldout.items()}
    return {k: got[k] for k in ("context_loss", "context_loss_blind", "context_loss_layer0", "context_loss_shuffled")}


def measure(ctx, model, *, corpus, n_texts, max_tokens, micro_batch, n_eval, n_train, cfg: DecoderConfig,
            subject: str | None = None, runs: int = 1) -> tuple[pd.DataFrame, list[str]]:
    """C_i with its controls, and E_i, for the scored tokens of `model`; the decoders are trained `runs` times
    (column ``train_seed``; E_i, which no training touches, has none)."""
    if n_eval > n_texts or n_eval < 2 or n_train < 1:
        raise BenchError("need 2 ≤ n_eval ≤ n_texts and n_train ≥ 1")
    if runs < 1:
        raise BenchError(f"decoder_runs must be at least 1, got {runs}")
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
    frames, losses, saves = [], [], []

    def saved(r: int, name: str) -> Resume | None:  # a decoder training's saved state, for a killed run to resume
        saves.append(ctx.resume({"probe": "prefix-decoder", "model": model.fingerprint, "corpus": corpus,
                                 "n_texts": n_texts, "n_train": n_train, "max_tokens": max_tokens,
                                 "micro_batch": micro_batch, "decoder": asdict(cfg), "seed": seed + r, "fit": name},
                                label=f"microscope: prefix decoder '{name}', run {r + 1} of {runs}"))
        return saves[-1]

    swap = other_text(index["sample"].to_numpy(), index["position"].to_numpy())

    def keep(r: int, name: str, fitted: Fitted) -> Trained:  # scored as its training ends, then let go
        done = (r + (DECODERS.index(name) + 1) / len(DECODERS)) / runs
        ctx.progress(0.05 + 0.9 * done, f"prefix decoder '{name}': held-out losses (run {r + 1} of {runs})")
        return scored(name, fitted, test, swap)

    for r in range(runs):  # independent decoder trainings (seeds seed, seed + 1, …) on the same pools
        kw = dict(vocab=vocab, start_id=start, seed=seed + r)
        fits = fit_decoders(model, train, cfg, **kw, resume=lambda name, r=r: saved(r, name),
                            keep=lambda name, fitted, r=r: keep(r, name, fitted),
                            progress=lambda f, m="", r=r: ctx.progress(0.05 + 0.9 * (r + f) / runs,
                                                                       f"{m} (run {r + 1} of {runs})"))
        loss = heldout_losses(fits)
        extra = [pd.DataFrame({"sample": np.arange(len(f.train_loss)), "metric": "train_loss", "value": f.train_loss,
                                "condition": cond}) for cond, f in fits.items()]
        frames.append(pd.concat([control_rows(index, loss, err), *extra], ignore_index=True).assign(train_seed=r))
        losses.append(loss)
        if r == 0:
            first_fits = fits  # numbers only (:class:`Trained`): the decoders themselves are gone
    fits, loss = first_fits, losses[0]
    trained, blind, first = fits["states"], fits["blind"], fits["layer0"]
    frame = pd.concat([*frames, err[["sample", "position", "cls", "metric", "value"]].assign(train_seed=pd.NA)],
                      ignore_index=True)
    frame["train_seed"] = frame["train_seed"].astype("Int64")
    frame["subject"] = subject
    w = trained.weights
    top = int(np.argmax(w))
    n_v = len(torch.unique(vocab))
    if cfg.reader == "readout":
        how = (f"decoder: a probing approximation of C_i, not the paper's decoder — per-offset readouts "
               f"({cfg.prefix} vectors in the residual space, read through the frozen unembedding) from an MLP of "
               f"width {cfg.hidden or model.arch.d_model}, dropout {cfg.dropout:g}, weight decay "
               f"{cfg.weight_decay:g}")
    else:
        how = (f"decoder: the paper's — {cfg.decoder_layers or 'all'} of {model.arch.n_layers} blocks of a copy of "
               f"the model with LoRA r = {cfg.lora_rank} (α = {cfg.lora_alpha:g}, lr {cfg.lr_lora:g}) on every "
               f"projection; MLP width {cfg.hidden or model.arch.d_model}")
    curve = "; ".join(f"{c} {f.train_loss[:5].mean():.2f} → {f.train_loss[-5:].mean():.2f}" for c, f in fits.items())
    notes = [f"{how}; {cfg.steps} steps × {cfg.batch} examples for each of the three decoders, lr {cfg.lr:g} "
             f"(encoder), warm-up {cfg.warmup:.0%} then cosine; prefix of {cfg.prefix} tokens; softmax over {n_v} "
             f"token ids ({cfg.vocab}); {len(train)} training tokens of {len(train_items)} texts; trained in "
             f"{trained.seconds:.0f} s, state-blind control in {blind.seconds:.0f} s, layer-0 control in "
             f"{first.seconds:.0f} s",
             f"held-out loss per prefix token on {len(test)} tokens of {index['sample'].nunique()} texts: trained "
             f"{loss['context_loss'].mean():.3f}, state-blind {loss['context_loss_blind'].mean():.3f}, layer 0 only "
             f"{loss['context_loss_layer0'].mean():.3f}, trained with another token's states "
             f"{loss['context_loss_shuffled'].mean():.3f}; training loss (first 5 → last 5 steps) {curve}; pooling "
             f"weight peaks at layer {top} ({w[top]:.2f})",
             *([f"{runs} decoder trainings (seeds {seed}…{seed + runs - 1}, column train_seed): held-out C per "
                "run " + ", ".join(f"{x['context_loss'].mean():.3f}" for x in losses) + "; the lines above describe "
                "the first"] if runs > 1 else []),
             *summary(frame[frame["train_seed"].isna() | (frame["train_seed"] == 0)])]
    for r in saves:  # the result is complete (the cell stores it next): the saved trainings have done their job
        if r is not None:
            r.clear()
    return frame, notes


@dataclass(frozen=True)
class ContextParams:
    sample: Sample = Sample(n_texts=64)  # the shared pass; its first n_eval texts are scored
    n_eval: int = 12
    n_train: int = 96  # texts after the sample's that train the decoders
    decoder: DecoderConfig = DecoderConfig(decoder_layers=2)
    decoder_runs: int = 1  # independent trainings of the three decoders (seeds as units: a rule's `training_runs`)


@dataclass(frozen=True)
class PairParams(ContextParams):
    instruct_of: dict[str, str] = field(default_factory=dict)


def _measure(ctx, model, p: ContextParams, subject: str | None = None):
    s = p.sample
    return measure(ctx, model, corpus=s.corpus, n_texts=s.n_texts, max_tokens=s.max_tokens,
                   micro_batch=s.micro_batch, n_eval=p.n_eval, n_train=p.n_train, cfg=p.decoder, subject=subject,
                   runs=p.decoder_runs)


@probe_def("contextualization", version=6, schema=TrainedTokenMetrics, metrics=METRICS)
def contextualization(ctx, p: ContextParams) -> pd.DataFrame:
    """Prefix-reconstruction loss C_i per token (with state-blind, layer-0 and shuffled controls), E_i per token,
    and both centred per position."""
    frame, notes = _measure(ctx, ctx.model, p)
    return finish(frame, notes, trained=True)


def _counterpart(params, model: str) -> list[str]:
    """The other side of the model's base/instruct pair in `instruct_of`, if it has one."""
    return [b if model == i else i for b, i in (params.get("instruct_of") or {}).items() if model in (b, i)][:1]


@probe_def("context_pair", version=7, schema=TrainedTokenMetrics, metrics=METRICS, companions=_counterpart)
def context_pair(ctx, p: PairParams) -> pd.DataFrame:
    """C_i and E_i of a base model (subject "base") and of its instruction-tuned variant ("instruct").

    `instruct_of` maps a base model's name to its instruction-tuned variant's name; the cell's model may be
    either side.  A model with no entry has no counterpart: the frame is empty and says so.
    """
    name, instruct_of = ctx.model.name, p.instruct_of
    pair = next(((b, i) for b, i in instruct_of.items() if name in (b, i)), None)
    if pair is None:
        frame = finish(pd.DataFrame(columns=["metric", "value"]), trained=True)
        frame.attrs["notes"] = [f"no base/instruct counterpart of '{name}' is given in the spec's measure.instruct_of "
                                f"(pairs: {', '.join(f'{b} → {i}' for b, i in instruct_of.items()) or 'none'}): "
                                f"the claim needs the same model before and after instruction tuning, and no "
                                f"pair is invented"]
        return frame
    other = pair[1] if name == pair[0] else pair[0]
    try:
        counterpart = ctx.companion(other)
    except ModelError as exc:
        frame = finish(pd.DataFrame(columns=["metric", "value"]), trained=True)
        frame.attrs["notes"] = [f"the counterpart '{other}' of '{name}' is not available: {exc}"]
        return frame
    frames, notes = [], []
    for model, role in ((ctx.model, "base" if name == pair[0] else "instruct"),
                        (counterpart, "instruct" if name == pair[0] else "base")):
        f, n = _measure(ctx, model, p, subject=role)
        frames.append(f)
        notes += [f"{role} ({model.name}): {x}" for x in n]
    return finish(pd.concat(frames, ignore_index=True), notes, trained=True)
