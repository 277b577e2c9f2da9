"""Prefix reconstruction (LLM-Microscope's contextualization score C_i).

For token i, the states of all layers h_i^0 … h_i^L are RMS-normalised per layer, pooled with trainable
softmax weights over layers, mapped by a 2-layer MLP to one vector e_i, and fed as the only input embedding to a
trainable copy of the same LM, which is trained with cross-entropy (teacher forcing) to generate the prefix
w_1 … w_{i−1}:  decoder input [e_i, w_1 … w_{i−2}], targets [w_1 … w_{i−1}].  C_i is the mean loss per prefix
token on held-out texts; lower C = more of the prefix is recoverable from the token's states.

The paper publishes no hyper-parameters; :class:`DecoderConfig` holds ours (the spec sets them).  Two controls
tell whether the numbers mean anything: the loss of the same decoder before training (``untrained``) and the
loss of the trained decoder fed another text's embedding (``shuffled``).  A decoder whose loss did not fall
well below the untrained one, or that does no better with the right embedding than with a wrong one, has not
learned to read the representation.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from bench.corpora.tagged import SPECIAL
from bench.families.microscope.layerpass import Item, block_states


@dataclass(frozen=True)
class DecoderConfig:
    hidden: int = 0  # MLP width; 0 = the model's hidden size
    steps: int = 60  # optimiser steps
    texts_per_step: int = 2  # texts drawn per step
    positions_per_text: int = 8  # target tokens drawn per text (each one is a prefix to reconstruct)
    lr: float = 1e-3  # pooling weights and MLP (AdamW)
    lr_decoder: float = 1e-5  # the decoder copy's trainable weights
    train_decoder: Literal["all", "blocks", "none"] = "blocks"  # "blocks": all but the (tied) embedding/head
    max_prefix: int = 64  # longest prefix reconstructed (the most recent tokens before i)
    decoder_layers: int = 0  # blocks kept in the decoder copy (the first ones); 0 = all, as in the paper
    control_texts: int = 0  # evaluation texts that also get the untrained and shuffled controls; 0 = all
    eval_batch: int = 16  # prefixes per evaluation forward pass


class Encoder(nn.Module):
    """States of all layers (n, L+1, d) → one input embedding (n, d)."""

    def __init__(self, n_layers: int, d: int, hidden: int, out_scale: float):
        super().__init__()
        self.pool = nn.Parameter(torch.zeros(n_layers + 1))  # softmax weights over layers, uniform at start
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
        self.out_scale = nn.Parameter(torch.tensor(float(out_scale)))

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        x = states / states.pow(2).mean(dim=-1, keepdim=True).add(1e-6).sqrt()  # RMS-normalise each layer
        pooled = torch.einsum("nld,l->nd", x, torch.softmax(self.pool, dim=0))
        e = self.mlp(pooled)
        return self.out_scale * e / e.pow(2).mean(dim=-1, keepdim=True).add(1e-6).sqrt()


@dataclass(frozen=True)
class Example:
    sample: int
    position: int
    cls: str
    prefix: tuple[int, ...]


def examples(item: Item, max_prefix: int, positions: list[int] | None = None) -> list[Example]:
    """Prefix-reconstruction examples of a text: every usable position with at least one prefix token."""
    out = []
    for p in (positions if positions is not None else np.flatnonzero(item.usable)):
        prefix = [t for t, c in zip(item.ids[:p], item.classes[:p]) if c != SPECIAL][-max_prefix:]
        if prefix:
            out.append(Example(item.sample, int(p), item.classes[p], tuple(prefix)))
    return out


def _token_states(model, items: list[Item]) -> dict[int, torch.Tensor]:
    """sample → (T, L+1, d) states of the original model (no gradient)."""
    out = {}
    for it in items:
        ids = torch.tensor([it.ids])
        states, _ = block_states(model, ids, torch.ones_like(ids))
        out[it.sample] = states[:, 0].permute(1, 0, 2).contiguous()
    return out


def _decoder_loss(decoder, embed, e: torch.Tensor, exs: list[Example]) -> torch.Tensor:
    """(n,) mean cross-entropy per prefix token of each example; e (n, d) are the decoder's first inputs."""
    k = max(len(x.prefix) for x in exs)
    dev = e.device
    ids = torch.zeros(len(exs), k, dtype=torch.long)
    mask = torch.zeros(len(exs), k, dtype=torch.long)
    for j, x in enumerate(exs):
        ids[j, : len(x.prefix)] = torch.tensor(x.prefix)
        mask[j, : len(x.prefix)] = 1
    ids, mask = ids.to(dev), mask.to(dev)
    tok = embed(ids[:, :-1]) if k > 1 else e.new_zeros(len(exs), 0, e.shape[-1])
    inputs = torch.cat([e[:, None, :].to(tok.dtype), tok], dim=1)  # (n, k, d)
    logits = decoder(inputs_embeds=inputs, attention_mask=mask, use_cache=False).logits.float()  # (n, k, V)
    nll = nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")  # (n, k)
    return (nll * mask).sum(dim=1) / mask.sum(dim=1)


def decoder_copy(model, n_layers: int):
    """A trainable deep copy of the model, keeping only its first `n_layers` blocks (0 = all)."""
    decoder = copy.deepcopy(model.hf)
    decoder.eval()  # no dropout; gradients still flow
    L = model.arch.n_layers
    if 0 < n_layers < L:
        list_path = model.arch.blocks[0].path.rpartition(".")[0]
        parent_path, _, name = list_path.rpartition(".")
        parent = decoder.get_submodule(parent_path) if parent_path else decoder
        setattr(parent, name, nn.ModuleList(list(getattr(parent, name))[:n_layers]))
        for cfg in {id(c): c for c in (decoder.config, decoder.config.get_text_config())}.values():
            cfg.num_hidden_layers = n_layers
            if isinstance(getattr(cfg, "layer_types", None), list):
                cfg.layer_types = cfg.layer_types[:n_layers]
    return decoder


def _trainable(decoder, how: str) -> list[nn.Parameter]:
    embed_w = decoder.get_input_embeddings().weight
    head = decoder.get_output_embeddings()
    frozen = {id(embed_w)} | ({id(head.weight)} if head is not None else set())
    params = []
    for p in decoder.parameters():
        train = how == "all" or (how == "blocks" and id(p) not in frozen)
        p.requires_grad_(train)
        if train:
            params.append(p)
    return params


def run(model, train_items: list[Item], eval_items: list[Item], cfg: DecoderConfig, generator: torch.Generator,
        progress=lambda f, m="": None) -> dict:
    """Train encoder + decoder copy on `train_items`; evaluate C on `eval_items`.

    Returns ``eval`` and ``control`` (lists of Example), ``trained`` (per eval example), ``untrained`` and
    ``shuffled`` (per control example) losses,
    ``train_loss`` (per step) and ``seconds``.
    """
    t0 = time.perf_counter()
    arch = model.arch
    decoder = decoder_copy(model, cfg.decoder_layers)
    embed = decoder.get_input_embeddings()
    with torch.no_grad():
        scale = float(embed(torch.arange(min(1000, arch.vocab_size), device=model.device))
                      .float().pow(2).mean().sqrt())
    enc = Encoder(arch.n_layers, arch.d_model, cfg.hidden or arch.d_model, scale).to(model.device)
    params = _trainable(decoder, cfg.train_decoder)
    groups = [{"params": list(enc.parameters()), "lr": cfg.lr}]
    if params and cfg.lr_decoder > 0:
        groups.append({"params": params, "lr": cfg.lr_decoder})
    opt = torch.optim.AdamW(groups, weight_decay=0.0)

    eval_states = _token_states(model, eval_items)
    eval_ex = [x for it in eval_items for x in examples(it, cfg.max_prefix)]
    n_ctrl = cfg.control_texts or len(eval_items)
    ctrl_samples = {it.sample for it in eval_items[:n_ctrl]}
    ctrl_ex = [x for x in eval_ex if x.sample in ctrl_samples]
    untrained = _evaluate(decoder, embed, enc, eval_states, ctrl_ex, cfg, shift=None)
    progress(0.1, "prefix reconstruction: untrained loss")

    rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
    losses = []
    for step in range(cfg.steps):
        pick = rng.choice(len(train_items), size=min(cfg.texts_per_step, len(train_items)), replace=False)
        chosen = [train_items[int(i)] for i in pick]
        st = _token_states(model, chosen)
        exs = []
        for it in chosen:
            usable = [int(p) for p in np.flatnonzero(it.usable)]
            pos = rng.choice(usable, size=min(cfg.positions_per_text, len(usable)), replace=False).tolist()
            exs += examples(it, cfg.max_prefix, sorted(pos))
        if not exs:
            continue
        states = torch.stack([st[x.sample][x.position] for x in exs]).to(model.device)  # (n, L+1, d)
        loss = _decoder_loss(decoder, embed, enc(states), exs).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        progress(0.1 + 0.7 * (step + 1) / cfg.steps, f"prefix reconstruction: training (loss {losses[-1]:.2f})")

    trained = _evaluate(decoder, embed, enc, eval_states, eval_ex, cfg, shift=None)
    progress(0.9, "prefix reconstruction: shuffled control")
    shuffled = _evaluate(decoder, embed, enc, eval_states, ctrl_ex, cfg, shift=eval_items)
    del decoder, opt
    return {"eval": eval_ex, "control": ctrl_ex, "trained": trained, "untrained": untrained, "shuffled": shuffled,
            "train_loss": np.array(losses), "pool": torch.softmax(enc.pool.detach(), 0).cpu().numpy(),
            "seconds": time.perf_counter() - t0}


@torch.no_grad()
def _evaluate(decoder, embed, enc, states: dict[int, torch.Tensor], exs: list[Example], cfg: DecoderConfig,
              shift: list[Item] | None) -> np.ndarray:
    """Per-example loss; with `shift`, each example gets the embedding of the same position (or the nearest
    one) in the next text of the evaluation set — a text whose prefix it does not encode."""
    samples = sorted(states)
    nxt = {s: samples[(k + 1) % len(samples)] for k, s in enumerate(samples)}
    out = []
    for i in range(0, len(exs), cfg.eval_batch):
        chunk = exs[i : i + cfg.eval_batch]
        rows = []
        for x in chunk:
            if shift is None:
                rows.append(states[x.sample][x.position])
            else:
                other = states[nxt[x.sample]]
                rows.append(other[min(x.position, other.shape[0] - 1)])
        e = enc(torch.stack(rows).to(next(enc.parameters()).device))
        out.append(_decoder_loss(decoder, embed, e, chunk).cpu())
    return torch.cat(out).numpy() if out else np.zeros(0)
