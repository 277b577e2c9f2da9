"""Frame schema of the generalization probe."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy

STAGES = ["base", "initial", "sft", "rl", "base_rl"]
SPLITS = ["id", "ood"]


class StageScores(Tidy):
    """Per-item correctness per training stage, split and training seed; training curves per step; one FLOPs
    row per trained run; accuracy at checkpoints against FLOPs.

    ``correct`` / ``format_ok``: 1/0 per held-out item (``sample``), the same items at every stage and seed
    (paired); ``seed`` is the training run (null for the untrained ``base`` and the shared ``initial``
    checkpoint, which every seed starts from); ``rl_gain``: per (seed, item), correctness after RL minus before
    it (``stage`` = the RL run: ``rl`` from the SFT-initialised checkpoint, ``base_rl`` from the base model);
    ``train_loss`` / ``train_reward`` per ``step``; ``train_flops`` and ``converged`` (1/0) per run;
    ``ckpt_accuracy`` (per split) and ``ckpt_flops`` per checkpoint ``step`` of a run.
    """

    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    stage: Series[str] = pa.Field(isin=STAGES)
    split: Series[str] = pa.Field(nullable=True, isin=SPLITS)
    step: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    seed: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
