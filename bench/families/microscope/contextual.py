"""Prefix reconstruction (LLM-Microscope's contextualization score C_i), built so that it learns on a CPU budget.

Token i's states at every layer h_i^0 … h_i^L are standardised per layer and coordinate (mean and standard
deviation over the training tokens: without it one outlier coordinate dominates every layer and all tokens look
alike), pooled with trainable softmax weights over layers and mapped by a 2-layer MLP to one vector e_i.  A copy
of the LM, adapted with LoRA, reads

    [start token, e_i, w_{i−k} … w_{i−2}]   and is trained (teacher forcing) to emit   [w_{i−k} … w_{i−1}].

The start token stays at position 0, where these models keep their attention sink, so e_i is not swallowed by
it.  C_i is the mean cross-entropy per prefix token over the k most recent tokens; only positions with k tokens
before them are scored, so every C_i averages the same number of tokens at the same distances from i.

``reader = "readout"`` replaces the LM copy by a cheaper decoder that learns on a CPU budget: the MLP maps the
pooled states to k vectors in the model's residual space (one per offset; its last layer starts at zero, so the
trained and the state-blind decoder start from the same uniform guess), each read through the model's frozen
unembedding.  It reconstructs each prefix token from the states alone, without the LM's prior over the prefix.

Two controls say whether a decoder read the states at all (the probe turns them into the spec's gates):

* blind — the same encoder and decoder trained the same way with the input states replaced by zeros: e_i is then
  one learned constant, so it learns the prior over prefixes and nothing about the token (a decoder that sees
  only the start token and a constant);
* shuffled — the trained decoder fed the states of another token (another text, same position).

With ``vocab = "corpus"`` the softmax runs over the token ids of the training and scored texts, for the trained
decoder and both controls alike; on a 262k-word vocabulary the head would otherwise cost more than the decoder.

API: :func:`fit` trains one encoder + decoder on a :class:`Pool` and returns a :class:`Fitted`, whose
:meth:`Fitted.loss` gives the per-example loss on another pool.  The loop is self-contained on purpose.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn

from bench.ground.errors import BenchError
from bench.ground.resume import Resume, maybe_save, restore, snapshot
from bench.models import logits as logits_mod
from bench.models.train import lora_targets


@dataclass(frozen=True)
class DecoderConfig:
    prefix: int = 6  # k: prefix tokens reconstructed (the most recent ones before i); shorter prefixes unscored
    hidden: int = 0  # MLP width; 0 = the model's hidden size
    decoder_layers: int = 0  # blocks kept in the decoder copy (the first ones); 0 = all, as in the paper
    lora_rank: int = 8  # LoRA on every attention and FFN projection of the kept blocks
    lora_alpha: float = 16.0
    steps: int = 100  # optimiser steps
    batch: int = 32  # examples (token, prefix) per step
    lr: float = 3e-3  # encoder (pooling weights, MLP), AdamW
    lr_lora: float = 1e-3  # LoRA matrices, AdamW
    warmup: float = 0.1  # share of the steps with a linear warm-up; then cosine decay to 0
    vocab: Literal["corpus", "full"] = "corpus"
    reader: Literal["lm", "readout"] = "lm"  # the LoRA-adapted LM copy (the paper's decoder) or per-offset readouts
    dropout: float = 0.0  # on the pooled states and the MLP's hidden layer
    weight_decay: float = 0.0  # AdamW, encoder (pooling weights, MLP)
    eval_batch: int = field(default=64, metadata={"param": False})  # examples per held-out loss batch


@dataclass(frozen=True)
class Pool:
    """Examples: `states` (n, L+1, d) float32 of the tokens, `prefixes` (n, k) their k previous token ids."""

    states: torch.Tensor
    prefixes: torch.Tensor

    def __post_init__(self):
        if self.states.ndim != 3 or self.prefixes.ndim != 2 or len(self.states) != len(self.prefixes):
            raise BenchError(f"a pool needs states (n, L+1, d) and prefixes (n, k); got {tuple(self.states.shape)} "
                             f"and {tuple(self.prefixes.shape)}")

    def __len__(self) -> int:
        return len(self.prefixes)

    def take(self, idx) -> "Pool":
        return Pool(self.states[idx], self.prefixes[idx])


class Encoder(nn.Module):
    """States of all layers (n, L+1, d) → one input embedding (n, d) at the embeddings' RMS `out_scale`, or, with
    `out_scale=None`, `out_dim` raw outputs from a last layer that starts at zero.  `blind`: the states are
    replaced by zeros."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, hidden: int, out_scale: float | None,
                 blind: bool = False, out_dim: int | None = None, dropout: float = 0.0):
        super().__init__()
        n_layers, d = mean.shape
        self.register_buffer("mean", mean)  # (L+1, d)
        self.register_buffer("std", std)  # (L+1, d)
        self.blind = blind
        self.pool = nn.Parameter(torch.zeros(n_layers))  # softmax weights over layers, uniform at start
        self.mlp = nn.Sequential(nn.Dropout(dropout), nn.Linear(d, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, out_dim or d))
        self.out_scale = None if out_scale is None else nn.Parameter(torch.tensor(float(out_scale)))
        if out_scale is None:  # start from the uniform guess, identical for the trained and the blind encoder
            nn.init.zeros_(self.mlp[-1].weight)
            nn.init.zeros_(self.mlp[-1].bias)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        x = (states - self.mean) / self.std  # (n, L+1, d)
        if self.blind:
            x = torch.zeros_like(x)
        pooled = torch.einsum("nld,l->nd", x, torch.softmax(self.pool, dim=0))  # (n, d)
        e = self.mlp(pooled)
        if self.out_scale is None:
            return e
        return self.out_scale * e / e.pow(2).mean(dim=-1, keepdim=True).add(1e-6).sqrt()  # the embeddings' RMS

    def weights(self) -> np.ndarray:
        return torch.softmax(self.pool.detach(), 0).cpu().numpy()


def standardiser(states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per layer and coordinate: mean and standard deviation (L+1, d) over the examples of (n, L+1, d)."""
    mean = states.mean(dim=0)
    std = states.std(dim=0, unbiased=False)
    return mean, std.clamp_min(1e-4 * float(std.mean()) + 1e-8)


def decoder_copy(model, n_layers: int):
    """A copy of the model keeping only its first `n_layers` blocks (0 = all).  The input embedding and the head
    are shared with the original, not copied (they stay frozen and are read without gradient)."""
    hf = model.hf
    shared = {id(m): m for m in (hf.get_input_embeddings(), hf.get_output_embeddings()) if m is not None}
    L = model.arch.n_layers
    list_path = model.arch.blocks[0].path.rpartition(".")[0]
    blocks = hf.get_submodule(list_path)
    if not 0 <= n_layers <= L:
        raise ValueError(f"decoder_layers = {n_layers}, but this model has {L} blocks (0 keeps them all)")
    keep = n_layers or L
    shared.update({id(b): b for b in list(blocks)[keep:]})  # dropped below, so never copied
    decoder = copy.deepcopy(hf, memo=shared)
    decoder.eval()  # no dropout; gradients still flow
    if keep < L:
        parent_path, _, name = list_path.rpartition(".")
        parent = decoder.get_submodule(parent_path) if parent_path else decoder
        setattr(parent, name, nn.ModuleList(list(getattr(parent, name))[:keep]))
        for cfg in {id(c): c for c in (decoder.config, decoder.config.get_text_config())}.values():
            cfg.num_hidden_layers = keep
            if isinstance(getattr(cfg, "layer_types", None), list):
                cfg.layer_types = cfg.layer_types[:keep]
    return decoder


class _Head(nn.Module):
    """The model's output head restricted to the sorted ids `vocab`, frozen: (…, d) → (…, V') logits, and
    prefix ids → indices into `vocab`."""

    def __init__(self, head: nn.Module, vocab: torch.Tensor, softcap: float | None = None):
        super().__init__()
        self.register_buffer("vocab", vocab.to(head.weight.device))
        self.register_buffer("w_head", head.weight.detach()[self.vocab].clone())  # (V', d)
        bias = getattr(head, "bias", None)
        self.register_buffer("b_head", bias.detach()[self.vocab].clone() if bias is not None else None)
        self.softcap = softcap

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        out = h.float() @ self.w_head.float().T
        if self.b_head is not None:
            out = out + self.b_head.float()
        return logits_mod.softcap(out, self.softcap)

    def nll(self, h: torch.Tensor, prefixes: torch.Tensor) -> torch.Tensor:
        """(n, k, d) outputs and (n, k) target ids → (n,) mean cross-entropy per prefix token."""
        target = torch.searchsorted(self.vocab, prefixes.to(self.vocab.device))  # (n, k) indices into vocab
        return nn.functional.cross_entropy(self.logits(h).transpose(1, 2), target, reduction="none").mean(dim=1)


class Readout(_Head):
    """Per-offset readouts: the encoder's (n, k·d) output read as k vectors through the frozen unembedding."""

    lora: tuple = ()  # nothing of its own is trained

    def forward(self, e: torch.Tensor, prefixes: torch.Tensor) -> torch.Tensor:
        n, k = prefixes.shape
        return self.nll(e.view(n, k, -1), prefixes)


class Decoder(nn.Module):
    """The LoRA-adapted copy with its head restricted to `vocab`: (e (n, d), prefixes (n, k)) → (n,) loss."""

    def __init__(self, model, cfg: DecoderConfig, vocab: torch.Tensor, start_id: int):
        super().__init__()
        from peft import LoraConfig, inject_adapter_in_model

        full = decoder_copy(model, cfg.decoder_layers)
        shared = {id(p) for m in (full.get_input_embeddings(), full.get_output_embeddings()) if m is not None
               for p in m.parameters()}
        for p in full.parameters():
            if id(p) not in shared:
                p.requires_grad_(False)  # the copy's own (not shared) weights; shared ones are read under no_grad
        lcfg = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                          target_modules=lora_targets(model.arch, "all", cfg.decoder_layers))
        inject_adapter_in_model(lcfg, full)
        self.lora = nn.ParameterList([p for n, p in full.named_parameters() if "lora_" in n])
        for p in self.lora:
            p.requires_grad_(True)
        self.body = full.base_model  # blocks + final norm: (n, t, d) → (n, t, d)
        self.embed = full.get_input_embeddings()
        self.head = _Head(full.get_output_embeddings(), vocab,
                          logits_mod.logit_cap(full))
        self.start_id = int(start_id)

    @property
    def vocab(self) -> torch.Tensor:
        return self.head.vocab

    def forward(self, e: torch.Tensor, prefixes: torch.Tensor) -> torch.Tensor:
        n, k = prefixes.shape
        dev = self.vocab.device
        prefixes = prefixes.to(dev)
        with torch.no_grad():  # the shared embedding stays frozen: no gradient into the original model
            start = self.embed(torch.full((n, 1), self.start_id, dtype=torch.long, device=dev))  # (n, 1, d)
            tok = self.embed(prefixes[:, :-1])  # (n, k−1, d)
        inputs = torch.cat([start, e[:, None, :].to(tok.dtype), tok], dim=1)  # (n, k+1, d)
        h = self.body(inputs_embeds=inputs, use_cache=False).last_hidden_state[:, 1:]  # (n, k, d)
        return self.head.nll(h, prefixes)


@dataclass(frozen=True)
class Fitted:
    """A trained encoder + decoder, with its per-step training loss and learning rate."""

    encoder: Encoder
    decoder: Decoder | Readout
    train_loss: np.ndarray
    lr: np.ndarray
    seconds: float
    eval_batch: int = 64

    @torch.no_grad()
    def loss(self, pool: Pool) -> np.ndarray:
        """(n,) mean loss per prefix token of each example of `pool`."""
        out = []
        dev = self.decoder.vocab.device
        for i in range(0, len(pool), self.eval_batch):
            part = pool.take(slice(i, i + self.eval_batch))
            out.append(self.decoder(self.encoder(part.states.to(dev)), part.prefixes).cpu())
        return torch.cat(out).numpy().astype(float) if out else np.zeros(0)


def schedule(step: int, steps: int, warmup: float) -> float:
    """Learning-rate factor: linear warm-up over the first `warmup` share of the steps, then cosine to 0."""
    w = max(1, int(round(warmup * steps)))
    if step < w:
        return (step + 1) / w
    return 0.5 * (1 + math.cos(math.pi * (step - w) / max(1, steps - w)))


def check_vocab(vocab: torch.Tensor, *pools: Pool) -> None:
    for p in pools:
        ids = p.prefixes.unique()
        missing = ids[~torch.isin(ids, vocab)]
        if len(missing):
            raise BenchError(f"prefix token ids {missing[:5].tolist()} are not in the decoder's vocabulary")


def fit(model, train: Pool, cfg: DecoderConfig, *, vocab: torch.Tensor, start_id: int, seed: int,
        blind: bool = False, progress=lambda f, m="": None, resume: Resume | None = None) -> Fitted:
    """Train an encoder (`blind`: one that sees zeros instead of states) and a decoder (a LoRA copy of `model`, or
    the readouts) on `train`; same seed → same initial weights, batches and dropout masks, whatever the process
    drew before (the global generator is left as it was).  The original model is not changed.  With `resume`,
    the training's state is saved there now and then (and at the end) and a killed run picks it up again; its
    ``seconds`` are then those of all the runs that trained it."""
    if len(train) == 0:
        raise BenchError("no training example has a full prefix: lower measure.prefix or raise data.max_tokens")
    vocab = torch.unique(vocab)
    check_vocab(vocab, train)
    t0 = time.perf_counter()
    dev = model.device
    with torch.random.fork_rng(devices=[]):  # initial weights and dropout masks from `seed` alone
        torch.manual_seed(seed)
        mean, std = standardiser(train.states)
        d, k = model.arch.d_model, train.prefixes.shape[1]
        if cfg.reader == "readout":
            dec = Readout(model.hf.get_output_embeddings(), vocab)
            enc = Encoder(mean, std, cfg.hidden or d, None, blind, out_dim=k * d, dropout=cfg.dropout).to(dev)
        else:
            dec = Decoder(model, cfg, vocab, start_id)
            with torch.no_grad():
                some = torch.arange(min(1000, model.arch.vocab_size), device=dev)
                scale = float(dec.embed(some).float().pow(2).mean().sqrt())
            enc = Encoder(mean, std, cfg.hidden or d, scale, blind, dropout=cfg.dropout).to(dev)
        groups = [{"params": list(enc.parameters()), "lr": cfg.lr, "weight_decay": cfg.weight_decay},
                  {"params": list(dec.lora), "lr": cfg.lr_lora, "weight_decay": 0.0}]
        opt = torch.optim.AdamW([g for g in groups if g["params"]])
        base = [g["lr"] for g in opt.param_groups]
        gen = torch.Generator().manual_seed(seed)
        order, at = torch.randperm(len(train), generator=gen), 0
        losses, lrs, before = [], [], 0.0
        params = [(f"encoder.{n}", p) for n, p in enc.named_parameters()] + \
                 [(f"lora.{i}", p) for i, p in enumerate(dec.lora)]
        saved = restore(resume, params, opt, generators=[gen])
        if saved:
            order, at, losses, lrs, before = saved["order"], saved["at"], saved["losses"], saved["lrs"], saved["seconds"]
        for step in range(saved["step"] if saved else 0, cfg.steps):
            if at + cfg.batch > len(order):
                order, at = torch.randperm(len(train), generator=gen), 0
            batch = train.take(order[at : at + cfg.batch])
            at += cfg.batch
            f = schedule(step, cfg.steps, cfg.warmup)
            for g, lr in zip(opt.param_groups, base):
                g["lr"] = lr * f
            loss = dec(enc(batch.states.to(dev)), batch.prefixes).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([*enc.parameters(), *dec.lora], 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            lrs.append(f)
            progress((step + 1) / cfg.steps,
                     f"prefix decoder{' (blind)' if blind else ''}: step {step + 1}/{cfg.steps} loss {losses[-1]:.2f}")
            maybe_save(resume, step + 1, cfg.steps, lambda: snapshot(
                params, opt, generators=[gen], step=step + 1, order=order, at=at, losses=list(losses), lrs=list(lrs),
                seconds=before + time.perf_counter() - t0))
    enc.eval()
    return Fitted(enc, dec, np.array(losses), np.array(lrs), before + time.perf_counter() - t0, cfg.eval_batch)


def other_text(samples: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """For each example, the index of an example of the next text (cyclically) at the same position, or the
    nearest one: states of another token, whose prefix they do not encode."""
    texts = np.unique(samples)
    if len(texts) < 2:
        raise BenchError("the shuffled control needs at least two scored texts")
    nxt = {s: texts[(k + 1) % len(texts)] for k, s in enumerate(texts)}
    out = np.empty(len(samples), dtype=int)
    for j, (s, p) in enumerate(zip(samples, positions)):
        cand = np.flatnonzero(samples == nxt[s])
        out[j] = cand[np.argmin(np.abs(positions[cand] - p))]
    return out
