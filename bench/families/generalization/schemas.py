"""Frame schema of the generalization probe."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.core.schemas import Tidy

STAGES = ["initial", "sft", "rl", "sft_rl"]
SPLITS = ["id", "ood"]


class StageScores(Tidy):
    """Per-item correctness per training stage and split; training curves per step; one FLOPs row per stage.

    ``correct``: 1/0 per held-out item (``sample``), the same items at every stage (paired);
    ``rl_gain``: per item, correctness after RL minus before it (``stage`` = the RL run: ``rl`` from the
    initial model, ``sft_rl`` from the SFT model); ``train_loss`` / ``train_reward`` per ``step``;
    ``train_flops`` per stage.
    """

    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    stage: Series[str] = pa.Field(isin=STAGES)
    split: Series[str] = pa.Field(nullable=True, isin=SPLITS)
    step: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
