"""The family's rules as arms of a decision against the untrained control (:mod:`bench.stats.control`).

``binomial_share``: the full selection's edge share, spread by split-half replicates (replicate r of the trained
and of the control model splits the same selection documents, so replicates pair).  ``baseline_ratio``: the
margin the rule itself decides on, numerator − bound × denominator mean ΔBPB, on the evaluation texts both models
read.  Not the ratio: on an untrained model the denominator (the ΔBPB of zeroing its LAPE neurons) sits near 0, so
the ratio and its bootstrap are unbounded (a control's ratio of 52.8 gave an interval that missed its estimate);
the margin is in bits per byte on both models and stays defined.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.families.langneurons.rules import _Cells, _none, replicate_table
from bench.stats import _missing
from bench.stats.control import Arm, arm_def


@arm_def("binomial_share")
def share_arm(frame: pd.DataFrame, *, method: str = "lape", min_replicates: int = 10, **_: Any):
    found = replicate_table(frame, method)
    if found is None:
        return _missing(frame, "binomial_share", "edge_share", {"method": method})
    k, n, _uniform, table = found
    if n == 0 or len(table) == 0:
        return _none(frame, "binomial_share", "edge_share", f"{n} selected neurons, {len(table)} replicates")
    shares = (table["edge_count"] / table["total_count"]).to_frame("share")
    return Arm(shares, side=+1, unit="split-half replicate", name="edge_share", full=k / n, shrink=1 / np.sqrt(2),
               min_n=min_replicates)


@arm_def("baseline_ratio")
def ratio_arm(frame: pd.DataFrame, *, numerator: dict[str, Any], denominator: dict[str, Any],
              min: float | None = None, max: float | None = None, **_: Any):
    if (min is None) == (max is None):
        raise ValueError("baseline_ratio needs exactly one of 'min' and 'max'")
    bound, side = (float(min), +1) if min is not None else (float(max), -1)
    c = _Cells(frame)
    sel = []
    for name, s in (("numerator", numerator), ("denominator", denominator)):
        cells = c.pick(s.get("method", ""), s.get("entries", "diagonal"), s.get("languages", ()), s.get("exclude", ()))
        if not cells:
            return _none(frame, "baseline_ratio", "ratio", f"no ΔBPB cells for the {name} {dict(s)}")
        sel.append((s["method"], cells))

    def margin(m):
        return c.mean_of(m, *sel[0]) - bound * c.mean_of(m, *sel[1])

    return Arm(pd.DataFrame(c.mat, index=c.units), side=side, unit="sample",
               name=f"{sel[0][0]} − {bound:g}·{sel[1][0]} ΔBPB", stat=margin)
