"""``first_token_norm``: the L2 norm of the input embedding of each text's first token, and that norm divided by
the median L2 norm of all rows of the embedding matrix.

The first token is the text's own first token (special tokens such as BOS are not added: every text would share
it).  One row per text and metric: the text is the unit.
"""

from __future__ import annotations

import pandas as pd
import torch

from bench import corpora
from bench.ground.ranges import Count
from bench.ground.registry import probe_def
from bench.ground.schemas import SampleMetrics

METRICS = ("first_norm", "ratio")


def first_token_norms(embedding: torch.Tensor, first_ids: list[int]) -> pd.DataFrame:
    """The frame for an embedding matrix (vocab × d) and the first token id of each text."""
    norms = embedding.detach().float().norm(dim=-1)
    median = float(norms.median())
    rows = []
    for i, tok in enumerate(first_ids):
        n = float(norms[tok])
        rows += [(i, "first_norm", n), (i, "ratio", n / median)]
    return pd.DataFrame(rows, columns=["sample", "metric", "value"])


@probe_def("first_token_norm", version=1, schema=SampleMetrics, metrics=METRICS)
def first_token_norm(ctx, *, corpus: str = "builtin:english", n_texts: Count = 24) -> pd.DataFrame:
    """The norm of each text's first-token embedding, raw and over the vocabulary's median row norm."""
    texts = [t for t in corpora.load(corpus) if t.strip()][:n_texts]
    tok = ctx.model.tokenizer
    first = [tok(t, add_special_tokens=False)["input_ids"][0] for t in texts]
    return first_token_norms(ctx.model.hf.get_input_embeddings().weight, first)
