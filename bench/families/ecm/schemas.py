"""Frame schema of the ecm probes: one row per item and prompt condition, ``value`` 1 when correct."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy


class ItemScores(Tidy):
    """Exact-match correctness of one generated answer; the generated text is kept as evidence."""

    item: Series[pd.Int64Dtype] = pa.Field(ge=0)       # the resampling unit
    task: Series[str]
    condition: Series[str]                             # "k=4", "cot", "direct"
    n_demos: Series[pd.Int64Dtype] = pa.Field(ge=0)
    steps: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    answer: Series[str]
    output: Series[str]

    @pa.check("value", name="zero_or_one")
    def _binary(cls, s: Series[float]) -> Series[bool]:
        return s.isin([0.0, 1.0])
