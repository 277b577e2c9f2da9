"""The logit lens with the true next-token loss (LLM-Microscope's formula):

    loss_l(i) = −log softmax(LMhead(norm_final(h_i^l)))[w_{i+1}]

for every layer l = 0 … L, read through the model's own final norm, output projection (OPT) and head, with the
model's final logit soft-capping where it has one (Gemma 2).  At l = L this is the model's own loss, which
every text checks (``lens_final_gap``).  ``lens_top1`` says whether the lens's top token is the next token.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from bench.families.microscope.layerpass import Item, batches, block_states
from bench.models import arch as arch_mod
from bench.models.decoding import pad_id

CHUNK_FLOATS = 16_000_000  # logits held at once per chunk of tokens


def head_logits(model):
    """h (n, d) → logits (n, V) float32, through the model's final norm, projection and head."""
    a = model.arch
    hf = model.hf
    parts = [arch_mod.get(hf, p) for p in (a.final_norm, a.final_proj, a.lm_head) if p]
    cap = getattr(hf.config.get_text_config(), "final_logit_softcapping", None)
    weight = arch_mod.get(hf, a.lm_head).weight

    def apply(h: torch.Tensor) -> torch.Tensor:
        x = h.to(device=weight.device, dtype=weight.dtype)
        for mod in parts:
            x = mod(x)
        x = x.float()
        if cap:
            x = torch.tanh(x / cap) * cap
        return x.cpu()

    return apply


@torch.no_grad()
def lens_frame(model, items: list[Item], micro: int, progress=lambda f, m="": None) -> pd.DataFrame:
    """Per token and layer: lens_loss, lens_top1; per token: model_loss; per text: lens_final_gap."""
    head = head_logits(model)
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
            for l in range(L + 1):
                for s in range(0, len(pos), chunk):
                    lp = torch.log_softmax(head(states[l, j, pos[s : s + chunk]]), dim=-1)  # (c, V)
                    lens[l, s : s + chunk] = -lp.gather(1, tgt[s : s + chunk, None])[:, 0]
                    top1[l, s : s + chunk] = (lp.argmax(-1) == tgt[s : s + chunk]).float()
            for l in range(L + 1):
                rows += [(it.sample, int(p), l, it.classes[p], "lens_loss", float(v)) for p, v in zip(pos, lens[l])]
                rows += [(it.sample, int(p), l, it.classes[p], "lens_top1", float(v)) for p, v in zip(pos, top1[l])]
            rows += [(it.sample, int(p), None, it.classes[p], "model_loss", float(v)) for p, v in zip(pos, own)]
            gap = float((lens[L] - own).abs().max())
            rows.append((it.sample, None, None, None, "lens_final_gap", gap))
        progress((k + 1) / n_batches, "logit lens")
    frame = pd.DataFrame(rows, columns=["sample", "position", "layer", "cls", "metric", "value"])
    for col in ("sample", "position", "layer"):
        frame[col] = frame[col].astype("Int64")
    return frame
