"""Frame schema of the language-neuron probes (families langneurons and plnd)."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from bench.ground.schemas import Tidy


class LangNeurons(Tidy):
    """Language-specific neurons (families langneurons, plnd): `method` selects neuron sets, `set_lang` is the
    language whose set is edited (or, for similarities, the first language of a pair), `language` the language
    evaluated, prompted or compared with."""

    method: Series[str] = pa.Field(nullable=True)
    set_lang: Series[str] = pa.Field(nullable=True)
    language: Series[str] = pa.Field(nullable=True)
    layer: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    neuron: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
