"""Frame schemas of the circuits probes."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy


class HeadScores(Tidy):
    """Per-head and per-sample numbers of one or more subjects (the model itself, or toy models)."""

    subject: Series[str] = pa.Field(nullable=True)
    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    layer: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    head: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)


class ToyHeadScores(HeadScores):
    """Head scores of the model and of toys trained from scratch; `train_seed` names the toy's training run
    (null on the model's own rows, which belong to every run)."""

    train_seed: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)


class Composition(Tidy):
    """Composition scores between an earlier (source) head and a later (target) head, and their baseline."""

    kind: Series[str] = pa.Field(isin=["observed", "baseline", "candidate", "head"])
    layer: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    head: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    src_layer: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    src_head: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)


class DirectPath(Tidy):
    """Per first token (the unit, ``sample``): its Spearman ρ and count; per (first, next) pair, by the next
    token's frequency rank: direct-path and empirical log-probabilities."""

    sample: Series[pd.Int64Dtype] = pa.Field(ge=0)
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    token: Series[str] = pa.Field(nullable=True)
