"""Streaming per-neuron statistics of one language's text: memory depends on the model, never on the token count.

For FFN neuron j of layer l the activation is the output of the block's activation module (``arch`` ffn_act:
act(gate_proj x) before the product with up_proj in gated FFNs; the hidden unit itself otherwise).  Per token
that is not padding and not the start token, the pass adds up

* ``n_pos[l, j]``  — how many tokens had activation > 0 (LAPE's p = n_pos / n_tokens),
* ``s_act[l, j]``  — the sum of activations (LAVE, and the mean activation used for steering),
* ``n_top[l, j]``  — in how many documents neuron j was in the layer's top-k by PLND importance, where
  Imp(j | doc) = Σ_t |h_t,j| · ‖W_down[j, :]‖₂ with h the input of the down projection (ΔY of removing j
  is h_j ⊗ W_down[j, :], Zhao et al. 2024).

Only the blocks run (the LM head is skipped).  ``gradient_norms`` (the PV baseline) does run the head, since it
needs the loss.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bench.families.langneurons import text as tx
from bench.models import arch as arch_mod
from bench.models import hooks, linear
from bench.models import logits as logits_mod


@dataclass(frozen=True)
class Stats:
    n_tokens: int
    n_docs: int
    n_pos: np.ndarray   # (L, F) int64
    s_act: np.ndarray   # (L, F) float64
    n_top: np.ndarray   # (L, F) int64

    @property
    def p(self) -> np.ndarray:
        return self.n_pos / max(1, self.n_tokens)

    @property
    def mean(self) -> np.ndarray:
        return self.s_act / max(1, self.n_tokens)


def down_row_norms(model: nn.Module, arch) -> torch.Tensor:
    """‖W_down[j, :]‖₂ for every layer and neuron: (L, F)."""
    out = []
    for b in arch.blocks:
        w_in_out = arch_mod._in_out(arch_mod.get(model, b.ffn_out))[0]  # (F, d)
        out.append(w_in_out.detach().float().norm(dim=1))
    return torch.stack(out)


class _Recorder:
    """Accumulates the statistics inside forward hooks; `valid` and `doc_of` are set before each forward."""

    def __init__(self, arch, top_k: int, w_norm: torch.Tensor, device):
        L, F = arch.n_layers, arch.d_ffn
        self.top_k = top_k
        self.w_norm = w_norm.to(device)  # (L, F)
        self.n_pos = torch.zeros(L, F, dtype=torch.long, device=device)
        self.s_act = torch.zeros(L, F, dtype=torch.float64, device=device)
        self.n_top = torch.zeros(L, F, dtype=torch.long, device=device)
        self.valid: torch.Tensor | None = None  # (B, T) bool

    def _shape(self, t: torch.Tensor) -> torch.Tensor:
        B, T = self.valid.shape
        return t.reshape(B, T, t.shape[-1])  # OPT-style FFNs see (B·T, F)

    def act(self, layer: int):
        def fn(t: torch.Tensor):
            a = self._shape(t).float()  # (B, T, F)
            v = self.valid
            self.n_pos[layer] += ((a > 0) & v[..., None]).sum(dim=(0, 1))
            self.s_act[layer] += (a * v[..., None]).sum(dim=(0, 1)).double()
            return None

        return fn

    def down_in(self, layer: int):
        def fn(t: torch.Tensor):
            h = self._shape(t).float().abs() * self.valid[..., None]  # (B, T, F)
            imp = h.sum(dim=1) * self.w_norm[layer]  # (B, F) importance per document
            top = imp.topk(self.top_k, dim=-1).indices  # (B, k)
            hit = torch.zeros_like(imp, dtype=torch.long).scatter_(1, top, 1)
            self.n_top[layer] += hit.sum(dim=0)
            return None

        return fn


@torch.no_grad()
def record(model, docs: list[list[int]], *, top_frac: float, max_tokens: int = 2048,
           progress=lambda f, m="": None) -> Stats:
    """One pass over `docs` (token id lists, each starting with the start token) through the blocks only."""
    hf, arch = model.hf, model.arch
    top_k = max(1, int(round(top_frac * arch.d_ffn)))
    rec = _Recorder(arch, top_k, down_row_norms(hf, arch), model.device)
    base = hf.base_model
    n_tokens = 0
    done = 0
    with contextlib.ExitStack() as stack:  # the statistics are added up inside the hooks; nothing is kept
        seen = [stack.enter_context(hooks.capture(hf, [b.ffn_act], transform=rec.act(i)))
                for i, b in enumerate(arch.blocks)]
        seen += [stack.enter_context(hooks.capture(hf, [b.ffn_out], inputs=True, transform=rec.down_in(i)))
                 for i, b in enumerate(arch.blocks)]
        for batch in tx.batches(docs, max_tokens=max_tokens, pad=tx.pad_id(model.tokenizer)):
            valid = batch.mask.bool().clone()
            valid[:, 0] = False  # the start token says nothing about the language
            rec.valid = valid.to(model.device)
            base(input_ids=batch.ids.to(model.device), attention_mask=batch.mask.to(model.device), use_cache=False)
            for store in seen:
                for got in store.values():
                    got.clear()
            n_tokens += int(valid.sum())
            done += len(batch.rows)
            progress(done / max(1, len(docs)), "activation statistics")
    return Stats(n_tokens=n_tokens, n_docs=len(docs), n_pos=rec.n_pos.cpu().numpy(),
                 s_act=rec.s_act.cpu().numpy(), n_top=rec.n_top.cpu().numpy())


def _neuron_axis(module: nn.Module, role: str) -> int:
    """Axis of `module.weight` that indexes FFN neurons (role "in": gate/up/fc_in, "out": down)."""
    inputs = linear.in_axis(module)
    return 1 - inputs if role == "in" else inputs  # gate/up: neurons are its outputs; down: its inputs


def gradient_norms(model, seqs: list[list[int]], *, max_tokens: int = 256,
                   progress=lambda f, m="": None) -> np.ndarray:
    """PV: ‖∂L/∂θ_j‖₂ per neuron, θ_j = its rows of the input projections (and biases) and of the output
    projection, L the summed next-token loss over `seqs` — the size of a one-step update on this language.
    `progress(f, msg)`: the share of `seqs` done, after each micro-batch."""
    hf, arch = model.hf, model.arch
    sites = [(arch_mod.get(hf, p), "in", l) for l, b in enumerate(arch.blocks) for p in b.ffn_in]
    sites += [(arch_mod.get(hf, b.ffn_out), "out", l) for l, b in enumerate(arch.blocks)]
    params = [p for mod, _, _ in sites for p in mod.parameters(recurse=False)]
    before = {id(p): p.requires_grad for p in hf.parameters()}
    try:
        for p in hf.parameters():
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
            p.grad = None
        head = hf.get_output_embeddings()
        cap = logits_mod.logit_cap(hf)
        done = 0
        for batch in tx.batches(seqs, max_tokens=max_tokens, pad=tx.pad_id(model.tokenizer)):
            ids, mask = batch.ids.to(model.device), batch.mask.to(model.device)
            hidden = hf.base_model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
            logits = logits_mod.softcap(head(hidden[:, :-1]).float(), cap)  # (B, T-1, V)
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
            (nll * mask[:, 1:]).sum().backward()
            done += len(batch.rows)
            progress(done / max(1, len(seqs)), "PV gradients")
        L, F = arch.n_layers, arch.d_ffn
        sq = torch.zeros(L, F, dtype=torch.float64)
        for mod, role, layer in sites:
            ax = _neuron_axis(mod, role)
            g = mod.weight.grad.detach().double()
            # a fused gated input (Phi-3's [gate | up]) has 2·F outputs: neuron j owns rows j and F + j
            sq[layer] += (g.pow(2).sum(dim=1 - ax)).reshape(-1, F).sum(dim=0).cpu()
            if role == "in" and getattr(mod, "bias", None) is not None and mod.bias.grad is not None:
                sq[layer] += mod.bias.grad.detach().double().pow(2).reshape(-1, F).sum(dim=0).cpu()
        return sq.sqrt().numpy()
    finally:
        for p in hf.parameters():
            p.grad = None
            p.requires_grad_(before[id(p)])
