"""Induction heads on repeated random token sequences (Elhage et al. 2021; Olsson et al. 2022).

Per head: the induction score (mean attention from each second-copy position to the token after that token's
previous occurrence) and the previous-token score.  Per sequence: mean next-token loss on the first and on the
second copy.  Scores follow the TransformerLens convention, without a BOS token.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd

from bench.core.registry import probe_def
from bench.families.circuits.lm import repeat_scores_memo
from bench.families.circuits.schemas import HeadScores

METRICS = ("induction_score", "prev_token_score", "loss_first", "loss_second")


@probe_def("induction", version=1, schema=HeadScores, metrics=METRICS)
def induction(ctx, *, corpus: Literal["synthetic:repeated-random"] = "synthetic:repeated-random",
              seq_len: int = 50, batch: int = 16) -> pd.DataFrame:
    """Induction and previous-token scores per head; first- vs second-copy loss per sequence."""
    if seq_len < 4 or batch < 1:
        raise ValueError("seq_len must be ≥ 4 and batch ≥ 1")
    return repeat_scores_memo(ctx, seq_len=seq_len, n_seq=batch)
