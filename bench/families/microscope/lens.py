"""The logit lens, under the paper's formula and under the authors' code.

``lens_loss`` — the paper's formula (LLM-Microscope, the true next-token loss):

    loss_l(i) = −log softmax(LMhead(norm_final(h_i^l)))[w_{i+1}]

for every layer l = 0 … L, read through the model's own final norm, output projection (OPT) and head, with the
model's final logit soft-capping where it has one (Gemma 2).  At l = L this is the model's own loss, which
every text checks (``lens_final_gap``).  ``lens_top1`` says whether the lens's top token is the next token.

``lens_loss_code`` — what the authors' code computes (``logit_lens`` of the ``llm-microscope`` package 0.0.7):
each of transformers' ``hidden_states`` goes straight into the LM head, with no final norm and no soft-capping
(OPT's projection is kept where the head is narrower than the stream: the code itself cannot read those), and the score is the negative log-probability of the lens's own top-1 token (its confidence),
whichever token comes next:

    code_l(i) = −log max_w softmax(LMhead(h_i^l))[w]

transformers' last hidden state already carries the final norm (and OPT's projection), so at l = L the code
reads the model's own distribution, and at every l < L the raw residual stream.  Both metrics are taken at the
same positions (every usable position with a next token).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from bench.families.microscope.layerpass import Item, batches, block_states
from bench.models import arch as arch_mod
from bench.models import logits as logits_mod
from bench.models.decoding import pad_id

CHUNK_FLOATS = 16_000_000  # logits held at once per chunk of tokens


def head_logits(model, *, norm: bool = True, softcap: bool = True):
    """h (n, d) → logits (n, V) float32, through the model's final norm (unless `norm` is False), projection
    (OPT models whose head is narrower than the residual stream; without it the head cannot read the state, and
    the authors' code fails there) and head, soft-capped where the model caps its logits (unless `softcap` is
    False)."""
    a = model.arch
    hf = model.hf
    parts = [arch_mod.get(hf, p) for p in ((a.final_norm,) if norm else ()) + (a.final_proj, a.lm_head) if p]
    cap = logits_mod.logit_cap(hf) if softcap else None
    weight = arch_mod.get(hf, a.lm_head).weight

    def apply(h: torch.Tensor) -> torch.Tensor:
        x = h.to(device=weight.device, dtype=weight.dtype)
        for mod in parts:
            x = mod(x)
        return logits_mod.softcap(x.float(), cap).cpu()

    return apply


def top1_nll(logits: torch.Tensor) -> torch.Tensor:
    """(n, V) logits → (n,) −log of the largest softmax probability (the authors' code's per-token "loss")."""
    return torch.logsumexp(logits, dim=-1) - logits.max(dim=-1).values


@torch.no_grad()
def lens_frame(model, items: list[Item], micro: int, progress=lambda f, m="": None) -> pd.DataFrame:
    """Per token and layer: lens_loss, lens_top1, lens_loss_code; per token: model_loss; per text:
    lens_final_gap."""
    head = head_logits(model)
    code_heads = (head_logits(model, norm=False, softcap=False), head_logits(model, softcap=False))
    L = model.arch.n_layers
    V = model.hf.config.get_text_config().vocab_size
    chunk = max(1, CHUNK_FLOATS // V)
    rows = []
    n_batches = -(-len(items) // micro)
    for k, (group, ids, mask) in enumerate(batches(items, micro, pad_id(model.tokenizer))):
        states, logits = block_states(model, ids, mask, logits=True)  # (L+1, B, T, d), (B, T, V)
        for j, it in enumerate(group):
            pos = [p for p in np.flatnonzero(it.usable) if p + 1 < len(it.ids)]
            if not pos:
                continue
            tgt = torch.tensor([it.ids[p + 1] for p in pos])  # (n,)
            own = -torch.log_softmax(logits[j, pos], dim=-1).gather(1, tgt[:, None])[:, 0]  # (n,)
            lens = torch.empty(L + 1, len(pos))
            top1 = torch.empty(L + 1, len(pos))
            code = torch.empty(L + 1, len(pos))
            for l in range(L + 1):
                for s in range(0, len(pos), chunk):
                    h = states[l, j, pos[s : s + chunk]]
                    lp = torch.log_softmax(head(h), dim=-1)  # (c, V)
                    lens[l, s : s + chunk] = -lp.gather(1, tgt[s : s + chunk, None])[:, 0]
                    top1[l, s : s + chunk] = (lp.argmax(-1) == tgt[s : s + chunk]).float()
                    code[l, s : s + chunk] = top1_nll(code_heads[int(l == L)](h))
            for l in range(L + 1):
                rows += [(it.sample, int(p), l, it.classes[p], "lens_loss", float(v)) for p, v in zip(pos, lens[l])]
                rows += [(it.sample, int(p), l, it.classes[p], "lens_top1", float(v)) for p, v in zip(pos, top1[l])]
                rows += [(it.sample, int(p), l, it.classes[p], "lens_loss_code", float(v))
                         for p, v in zip(pos, code[l])]
            rows += [(it.sample, int(p), None, it.classes[p], "model_loss", float(v)) for p, v in zip(pos, own)]
            gap = float((lens[L] - own).abs().max())
            rows.append((it.sample, None, None, None, "lens_final_gap", gap))
        progress((k + 1) / n_batches, "logit lens")
    frame = pd.DataFrame(rows, columns=["sample", "position", "layer", "cls", "metric", "value"])
    for col in ("sample", "position", "layer"):
        frame[col] = frame[col].astype("Int64")
    return frame
