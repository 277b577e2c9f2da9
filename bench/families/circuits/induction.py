"""Induction heads on repeated random token sequences (Elhage et al. 2021; Olsson et al. 2022).

Per head: the induction score (mean attention from each second-copy position to the token after that token's
previous occurrence) and the previous-token score.  Per sequence: mean next-token loss on the first and on the
second copy.  Scores follow the TransformerLens convention, without a BOS token.
"""

from __future__ import annotations

import pandas as pd

from bench.ground.registry import probe_def
from bench.families.circuits.lm import Repeats
from bench.families.circuits.schemas import HeadScores

METRICS = ("induction_score", "prev_token_score", "loss_first", "loss_second")


@probe_def("induction", version=1, schema=HeadScores, metrics=METRICS)
def induction(ctx, p: Repeats) -> pd.DataFrame:
    """Induction and previous-token scores per head; first- vs second-copy loss per sequence."""
    return p.scores(ctx)
