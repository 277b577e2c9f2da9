"""Frame schema of the LLM-Microscope probes."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy


class TokenLayerMetrics(Tidy):
    """Per-token, per-layer and per-text numbers (LLM-Microscope family): `cls` is the token's word class,
    `subject` a model variant (base / instruct) where a probe compares two, `condition` an input edit."""

    subject: Series[str] = pa.Field(nullable=True)
    condition: Series[str] = pa.Field(nullable=True)
    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    position: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    layer: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    cls: Series[str] = pa.Field(nullable=True)


class TrainedTokenMetrics(TokenLayerMetrics):
    """The same, from probes that train something on the states (the prefix decoders): `train_seed` names the
    training run of a row's numbers, null where nothing was trained (E_i)."""

    train_seed: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
