"""One pandera DataFrameModel per kind of frame a probe returns.

Frames are long and tidy: one measured number per row in ``value``, named by ``metric``, located by index
columns (``sample``, ``layer``, ``head`` …).  Index columns that do not apply to a row are null.  Schemas are
strict (no undeclared columns) and coerce dtypes, so a frame read back from parquet validates the same way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series


class Tidy(pa.DataFrameModel):
    """The columns every frame has."""

    metric: Series[str] = pa.Field(str_length={"min_value": 1})
    value: Series[float] = pa.Field(nullable=False)

    @pa.check("value", name="finite")
    def _finite(cls, s: Series[float]) -> Series[bool]:
        return pd.Series(np.isfinite(s.to_numpy(float)), index=s.index)

    class Config:
        strict = True
        coerce = True


class SampleMetrics(Tidy):
    """Per-sample numbers (e.g. one row per text and metric)."""

    sample: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)


def validate(frame: pd.DataFrame, schema: type[pa.DataFrameModel], metrics: tuple[str, ...] = ()) -> pd.DataFrame:
    """Validate lazily (all failures at once); also check that every metric is one the probe declares."""
    attrs = dict(frame.attrs)
    out = schema.validate(frame, lazy=True)
    if metrics:
        unknown = sorted(set(out["metric"]) - set(metrics))
        if unknown:
            cases = pd.DataFrame({"column": "metric", "check": "declared metric", "failure_case": unknown})
            raise FrameError(f"undeclared metrics {unknown}", cases)
    out.attrs.update(attrs)
    return out


class FrameError(ValueError):
    """A frame that breaks its schema; `cases` is a table of the failing values."""

    def __init__(self, message: str, cases: pd.DataFrame):
        super().__init__(message)
        self.cases = cases


def failure_table(exc: Exception, limit: int = 20) -> list[dict]:
    """The failure cases of a pandera or frame error as JSON-ready rows (for run records and reports)."""
    cases = getattr(exc, "failure_cases", None)
    if cases is None:
        cases = getattr(exc, "cases", None)
    if cases is None:
        return []
    cases = pd.DataFrame(cases).head(limit)
    return [{k: (None if pd.isna(v) else str(v)) for k, v in row.items()} for row in cases.to_dict("records")]
