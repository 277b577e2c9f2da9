"""K-composition between the top previous-token head and the top induction head (Elhage et al. 2021).

Score(L, R) = ‖L·R‖_F / (‖L‖_F ‖R‖_F) with L = W_OV of the earlier head and R = W_QKᵀ of the later head, in the
row-vector convention (x ↦ x·W).  Norm scales that sit between the two heads are folded in: the later block's
input norm into W_Q and W_K, per-head q/k norms into W_Q / W_K, and a norm on the attention output (Gemma) into
W_O.  Query heads map to their key/value head under grouped-query attention.

Two baselines.  The Gaussian one draws factors of the same shapes (d × d_head products), so it has the same low
rank as the real matrices but none of their spectra.  The within-model one keeps the real matrices and permutes
the residual-stream coordinates between the earlier head's W_O and the later head's W_K (L·P·R for a random
permutation P): each side keeps its own singular values, only their alignment — the composition — is broken.
The scores of every other earlier head are in the frame too (``candidate``), for the rank of the observed one.

Under per-head q/k norms (Gemma 3) the query and key are RMS-normalised *after* the projection, so W_QK is no
longer a fixed bilinear form: folding their scales is exact only up to that per-token normalisation, and the
frame marks the score approximate (``qk_norm`` = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bench.ground.registry import probe_def
from bench.families.circuits.lm import Repeats, mean_head_matrix
from bench.families.circuits.schemas import Composition
from bench.models import arch as arch_mod
from bench.models import folding
from bench.models.heads import head_weights

METRICS = ("k_composition", "k_composition_random", "k_composition_permuted", "qk_norm", "induction_score",
           "prev_token_score")


def lowrank_fro(A: torch.Tensor, M: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """‖A · M · Cᵀ‖_F for tall A (d, r), C (d, s) and small M (r, s), without forming the d × d product."""
    GA = A.T @ A  # (r, r)
    GC = C.T @ C  # (s, s)
    return torch.sqrt(torch.clamp(torch.trace(M.T @ GA @ M @ GC), min=0.0))


def k_composition_score(W_V: torch.Tensor, W_O: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor) -> float:
    """Score between an earlier head (W_V (d, dh), W_O (dh, d)) and a later head (W_Q, W_K (d, dh)).

    L = W_V W_O and R = (W_Q W_Kᵀ)ᵀ = W_K W_Qᵀ, so L·R = W_V (W_O W_K) W_Qᵀ.
    """
    W_V, W_O, W_Q, W_K = (t.double() for t in (W_V, W_O, W_Q, W_K))
    num = lowrank_fro(W_V, W_O @ W_K, W_Q)
    norm_l = lowrank_fro(W_V, torch.eye(W_V.shape[1], dtype=W_V.dtype), W_O.T)
    norm_r = lowrank_fro(W_K, torch.eye(W_K.shape[1], dtype=W_K.dtype), W_Q)
    return float(num / (norm_l * norm_r))


def random_baseline(d: int, d_head: int, n: int, generator: torch.Generator) -> np.ndarray:
    """Scores of `n` draws of Gaussian factor matrices with the shapes of real heads."""
    out = np.empty(n)
    for i in range(n):
        W_V, W_Q, W_K = (torch.randn(d, d_head, generator=generator, dtype=torch.float64) for _ in range(3))
        W_O = torch.randn(d_head, d, generator=generator, dtype=torch.float64)
        out[i] = k_composition_score(W_V, W_O, W_Q, W_K)
    return out


def permuted_baseline(W_V: torch.Tensor, W_O: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, n: int,
                      generator: torch.Generator) -> np.ndarray:
    """Scores with the residual coordinates between W_O (dh, d) and W_K (d, dh) randomly permuted, `n` draws."""
    W_V, W_O, W_Q, W_K = (t.double() for t in (W_V, W_O, W_Q, W_K))
    norm_l = lowrank_fro(W_V, torch.eye(W_V.shape[1], dtype=W_V.dtype), W_O.T)
    norm_r = lowrank_fro(W_K, torch.eye(W_K.shape[1], dtype=W_K.dtype), W_Q)
    out = np.empty(n)
    for i in range(n):
        perm = torch.randperm(W_O.shape[1], generator=generator)
        out[i] = float(lowrank_fro(W_V, W_O[:, perm] @ W_K, W_Q) / (norm_l * norm_r))
    return out


def _scale_rows(W: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    return W * gamma.to(W.dtype)[:, None]


def folded_head_weights(model, arch, layer: int):
    """HeadWeights of `layer` with the norm scales around the attention folded in (float32)."""
    hw = head_weights(model, arch, layer)
    b = arch.blocks[layer]
    W_Q, W_K, W_O = hw.W_Q, hw.W_K, hw.W_O
    if b.attn_in_norm:
        g = folding.measure(arch_mod.get(model, b.attn_in_norm), arch.d_model).gamma
        W_Q = torch.stack([_scale_rows(w, g) for w in W_Q])
        W_K = torch.stack([_scale_rows(w, g) for w in W_K])
        W_V = torch.stack([_scale_rows(w, g) for w in hw.W_V])
    else:
        W_V = hw.W_V
    if b.q_norm:
        W_Q = W_Q * folding.measure(arch_mod.get(model, b.q_norm), arch.d_head).gamma[None, None, :]
    if b.k_norm:
        W_K = W_K * folding.measure(arch_mod.get(model, b.k_norm), arch.d_head).gamma[None, None, :]
    if b.attn_out_norm:
        W_O = W_O * folding.measure(arch_mod.get(model, b.attn_out_norm), arch.d_model).gamma[None, None, :]
    return W_Q, W_K, W_V, W_O, hw.kv_head_of


@dataclass(frozen=True)
class CompositionParams:
    repeats: Repeats = Repeats()
    n_baseline: int = 200


@probe_def("k_composition", version=4, schema=Composition, metrics=METRICS)
def k_composition(ctx, p: CompositionParams) -> pd.DataFrame:
    """K-composition of the top previous-token head into the top induction head, beside a random baseline."""
    m, n_baseline = ctx.model, p.n_baseline
    heads = p.repeats.scores(ctx)
    ind = mean_head_matrix(heads, "induction_score")  # (layers, H)
    prev = mean_head_matrix(heads, "prev_token_score")  # (layers, H)
    rows = [("head", l, h, None, None, None, metric, float(mat[l, h]))
            for metric, mat in (("induction_score", ind), ("prev_token_score", prev))
            for l in range(mat.shape[0]) for h in range(mat.shape[1])]
    li, hi = np.unravel_index(np.argmax(ind), ind.shape)
    notes = [f"top induction head L{li}H{hi} (score {ind[li, hi]:.3f})"]
    if li == 0:
        notes.append("the top induction head is in layer 0: no earlier head can compose with it")
        return _frame(rows, notes)
    lp, hp = np.unravel_index(np.argmax(prev[:li]), prev[:li].shape)
    notes.append(f"top previous-token head before it L{lp}H{hp} (score {prev[lp, hp]:.3f})")
    arch = m.arch
    T_Q, T_K, _, _, t_kv = folded_head_weights(m.hf, arch, int(li))
    W_Q_t, W_K_t = T_Q[hi], T_K[t_kv[hi]]
    approx = bool(arch.blocks[int(li)].q_norm or arch.blocks[int(li)].k_norm)
    rows.append(("observed", int(li), int(hi), None, None, None, "qk_norm", float(approx)))
    if approx:
        notes.append("the induction head has per-head q/k norms: the composition score is approximate")
    for l in range(int(li)):  # every earlier head, for the picture; the top previous-token head is the claim
        W_Q, W_K, W_V, W_O, kv_of = folded_head_weights(m.hf, arch, l)
        for h in range(W_O.shape[0]):
            s = k_composition_score(W_V[kv_of[h]], W_O[h], W_Q_t, W_K_t)
            if (l, h) == (lp, hp):
                src = (W_V[kv_of[h]], W_O[h])
            kind = "observed" if (l, h) == (lp, hp) else "candidate"
            rows.append((kind, int(li), int(hi), l, h, None, "k_composition", s))
        ctx.progress(0.5 * (l + 1) / li, "composition scores")
    scores = sorted((r[7] for r in rows if r[6] == "k_composition"), reverse=True)
    observed = next(r[7] for r in rows if r[0] == "observed" and r[6] == "k_composition")
    notes.append(f"its K-composition into the induction head ranks {scores.index(observed) + 1} of {len(scores)} "
                 f"earlier heads")
    base = random_baseline(arch.d_model, arch.d_head, n_baseline, ctx.generator(stream=7))
    rows += [("baseline", None, None, None, None, i, "k_composition_random", float(v)) for i, v in enumerate(base)]
    perm = permuted_baseline(src[0], src[1], W_Q_t, W_K_t, n_baseline, ctx.generator(stream=8))
    rows += [("baseline", None, None, None, None, i, "k_composition_permuted", float(v)) for i, v in enumerate(perm)]
    ctx.progress(1.0, "baseline")
    return _frame(rows, notes)


def _frame(rows, notes) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["kind", "layer", "head", "src_layer", "src_head", "sample", "metric", "value"])
    for col in ("layer", "head", "src_layer", "src_head", "sample"):
        frame[col] = frame[col].astype("Int64")
    frame.attrs["notes"] = notes
    return frame
