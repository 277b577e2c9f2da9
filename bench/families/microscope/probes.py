"""LLM-Microscope probes that read hidden states of every layer (Razzhigaev et al., NAACL Findings 2025).

* ``nonlinearity`` — per pair of consecutive layers (the last pair included) the least-squares linearity score
  (in-sample, adjusted, held-out on odd texts), per-text cross-fitted residual and total sums (the estimator the
  claim is decided on), the token count N and hidden size d, and the per-token error E_i^l with its mean E_i;
* ``centrality`` — per token and layer, the mean cosine similarity of its state to every other token's;
* ``intrinsic_dimension`` — TwoNN per layer (also divided by the hidden size) by the paper's formula and by the
  authors' code's fit, and anisotropy;
* ``logit_lens`` — the next-token loss read out of every layer through the final norm and the head (the paper's
  formula), and beside it the authors' code's score (the top-1 token's −log probability, head without the norm).

The first three share one memoised pass (:func:`bench.families.microscope.layerpass.layer_pass_memo`): give them the same
``corpus``, ``n_texts`` and ``max_tokens`` and the model runs once.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.ground.registry import probe_def
from bench.families.microscope.intrinsic import twonn_both
from bench.families.microscope.layerpass import Sample, collect_states, finish, layer_pass_memo, prepare_items
from bench.families.microscope.lens import lens_frame
from bench.families.microscope.schemas import TokenLayerMetrics

NONLINEARITY = ("linearity", "linearity_heldout", "linearity_adjusted", "linearity_cv_resid", "linearity_cv_total",
                "n_tokens", "hidden_size", "token_error", "token_error_mean")
CENTRALITY = ("centrality",)
INTRINSIC = ("intrinsic_dim", "id_ratio", "intrinsic_dim_code", "id_ratio_code", "id_points", "anisotropy")
LENS = ("lens_loss", "lens_top1", "lens_loss_code", "model_loss", "lens_final_gap")


@dataclass(frozen=True)
class IntrinsicParams:
    sample: Sample = Sample()
    id_points: int = 2000
    discard: float = 0.1


def _shared(ctx, s: Sample):
    s.checked()
    return layer_pass_memo(ctx, corpus=s.corpus, n_texts=s.n_texts, max_tokens=s.max_tokens, micro=s.micro_batch)


@probe_def("nonlinearity", version=2, schema=TokenLayerMetrics, metrics=NONLINEARITY)
def nonlinearity(ctx, p: Sample) -> pd.DataFrame:
    """Layer linearity score per layer pair and per-token non-linearity E_i^l (streamed Gram matrices)."""
    frame = _shared(ctx, p)
    return finish(frame[frame["metric"].isin(NONLINEARITY)], frame.attrs.get("notes", []))


@probe_def("centrality", version=1, schema=TokenLayerMetrics, metrics=CENTRALITY)
def centrality(ctx, p: Sample) -> pd.DataFrame:
    """Mean cosine similarity of each token's state to all other tokens' states, per layer."""
    frame = _shared(ctx, p)
    return finish(frame[frame["metric"].isin(CENTRALITY)], frame.attrs.get("notes", []))


@probe_def("intrinsic_dimension", version=2, schema=TokenLayerMetrics, metrics=INTRINSIC)
def intrinsic_dimension(ctx, p: IntrinsicParams) -> pd.DataFrame:
    """TwoNN intrinsic dimension of each layer's token states (≤ `id_points` tokens), by the paper's formula
    and by the authors' code's fit, and anisotropy (all tokens)."""
    m, s, discard = ctx.model, p.sample, p.discard
    shared = _shared(ctx, s)
    items = prepare_items(m.tokenizer, s.corpus, s.n_texts, s.max_tokens)
    states, _ = collect_states(m, items, p.id_points, s.micro_batch)  # (L+1, n, d)
    d = m.arch.d_model
    rows = []
    for l in range(states.shape[0]):
        dim, code, used = twonn_both(states[l], discard=discard)
        rows += [(l, "intrinsic_dim", dim), (l, "id_ratio", dim / d), (l, "intrinsic_dim_code", code),
                 (l, "id_ratio_code", code / d), (l, "id_points", float(used))]
        ctx.progress((l + 1) / states.shape[0], "TwoNN per layer")
    frame = pd.DataFrame(rows, columns=["layer", "metric", "value"])
    frame = pd.concat([frame, shared[shared["metric"] == "anisotropy"]], ignore_index=True)
    notes = [f"TwoNN on {states.shape[1]} tokens per layer (exact duplicates removed, for both fits); paper's "
             f"formula (intrinsic_dim, id_ratio): top {discard:.0%} of μ discarded; authors' code "
             f"(intrinsic_dim_code, id_ratio_code): the smallest fifth of μ, μ ≤ 1 + 1e-8 set aside but counted "
             f"in the CDF; hidden size d = {d}; anisotropy over all tokens of the shared pass"]
    return finish(frame, notes)


@probe_def("logit_lens", version=2, schema=TokenLayerMetrics, metrics=LENS)
def logit_lens(ctx, p: Sample = Sample(n_texts=24, micro_batch=8)) -> pd.DataFrame:
    """Next-token loss of every layer read through the final norm and the head; the model's own loss; the
    authors' code's top-1 confidence (no final norm) beside it."""
    m, s = ctx.model, p.checked()
    ctx.progress(0.0, "tagging and tokenising text")
    items = prepare_items(m.tokenizer, s.corpus, s.n_texts, s.max_tokens)
    frame = lens_frame(m, items, s.micro_batch, ctx.progress)
    notes = [f"{len(items)} texts, {int((frame['metric'] == 'model_loss').sum())} predicted tokens",
             "lens_loss (paper's formula): −log p(next token), read through the final norm and the head; "
             "lens_loss_code (authors' code, llm-microscope 0.0.7): −log p(the lens's own top-1 token), the head "
             "applied to the raw states (the last layer's already normed, as transformers returns it)"]
    return finish(frame, notes)
