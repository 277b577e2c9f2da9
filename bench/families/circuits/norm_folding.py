"""Norm folding: fold every LayerNorm/RMSNorm scale (and bias) into the linear layers that read it, then
compare the logits of the folded and the original model on the same text.

The claim is algebra (an exact rewrite), so both sides are computed in float32 whatever the run's dtype: in
bfloat16 the folded weights round differently from the product they replace, and the comparison would measure
that rounding (max relative logit difference 0.023 on gemma3-270m) instead of the rewrite."""

from __future__ import annotations

import copy

import pandas as pd
import torch

from bench import corpora
from bench.ground.registry import probe_def
from bench.ground.schemas import SampleMetrics
from bench.models import folding

METRICS = ("rel_logit_diff", "abs_logit_diff", "argmax_agreement", "norms_folded", "norms_left")


@probe_def("norm_folding", version=2, schema=SampleMetrics, metrics=METRICS)
def norm_folding(ctx, *, corpus: str = "builtin:english", n_texts: int = 16, max_tokens: int = 64) -> pd.DataFrame:
    """Per text: max |Δlogit| / max |logit|, max |Δlogit| and the share of positions whose argmax agrees."""
    m = ctx.model
    texts = corpora.load(corpus)[:n_texts]
    if not texts:
        raise ValueError(f"corpus {corpus} holds no text")
    ctx.progress(0.0, "folding norms")
    run_dtype = next(m.hf.parameters()).dtype
    original = m.hf if run_dtype == torch.float32 else copy.deepcopy(m.hf).float()
    folded, report = folding.folded_copy(original)
    rows = []
    with torch.no_grad():
        for i, text in enumerate(texts):
            enc = m.tokenizer(text, return_tensors="pt", truncation=True, max_length=max_tokens)
            ids = enc["input_ids"].to(m.device)
            a = original(input_ids=ids, use_cache=False).logits.float()[0]  # (T, V)
            b = folded(input_ids=ids, use_cache=False).logits.float()[0]  # (T, V)
            diff = (a - b).abs().max().item()
            scale = a.abs().max().item()
            agree = (a.argmax(-1) == b.argmax(-1)).float().mean().item()
            rows += [(i, "rel_logit_diff", diff / scale), (i, "abs_logit_diff", diff),
                     (i, "argmax_agreement", agree)]
            ctx.progress((i + 1) / len(texts), "comparing logits")
    del folded, original
    rows += [(None, "norms_folded", float(len(report.folded))), (None, "norms_left", float(len(report.left)))]
    frame = pd.DataFrame(rows, columns=["sample", "metric", "value"])
    frame["sample"] = frame["sample"].astype("Int64")
    frame.attrs["notes"] = [f"folded {len(report.folded)} norms into their consumers"
                            + (f"; {len(report.left)} norms have no linear consumer and stay as they are"
                               f" (e.g. {report.left[0]})" if report.left else "")
                            + (f"; both sides compared in float32 (the run's weights are {run_dtype}: the "
                               f"rewrite is exact algebra, the dtype's rounding is not the claim)"
                               if run_dtype != torch.float32 else "")]
    return frame
