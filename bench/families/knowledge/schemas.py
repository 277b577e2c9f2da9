"""Frame schema of the knowledge probe."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy

CONDITIONS = ("uk_only", "uk_hk", "uk_paraphrase", "full_ft")


class KnowledgeFrame(Tidy):
    """Per-fact indicators (``sample`` = the fact's index in the pool) and per-step training losses.

    condition: the training mix (``uk_only`` LoRA on Unknown facts, ``uk_hk`` plus HighlyKnown facts,
    ``uk_paraphrase`` plus one paraphrase per fact, ``full_ft`` full fine-tuning on the Unknown facts), or null
    for rows about the base model.  n_train: the number of Unknown facts trained on.  step: the optimizer step
    of a ``train_loss`` row.
    """

    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    condition: Series[str] = pa.Field(nullable=True, isin=list(CONDITIONS))
    seed: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    n_train: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    step: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
