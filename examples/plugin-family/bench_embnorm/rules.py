"""``majority_above``: more than half of the units have a value above a bound, by an exact binomial test.

Each unit (a text) counts once: 1 when its value of `metric` exceeds `min_value`, else 0.  The share is tested
against one half with the one-sided exact binomial test and given a Clopper–Pearson interval; a REFUTED needs
the power that :func:`bench.stats.sensitivity.judge` computes for exact tests.
"""

from __future__ import annotations

import pandas as pd

from bench.ground.registry import rule_def
from bench.ground.verdicts import Outcome, Verdict
from bench.stats import exact, sensitivity


def _say(p) -> str:
    return (f"more than half of the texts have `{p['metric']}` above {p.get('min_value', 1.0):g} (one-sided exact "
            f"binomial test against one half, α = {p.get('alpha', 0.05):g}; Clopper–Pearson interval)")


@rule_def("majority_above", sentence=_say)
def majority_above(frame: pd.DataFrame, *, metric: str, min_value: float = 1.0, alpha: float = 0.05) -> Verdict:
    """More than half of the units have `metric` above `min_value` (exact binomial test)."""
    rows = frame[frame["metric"] == metric]
    if rows.empty:
        return Verdict(Outcome.INCONCLUSIVE, f"the frame has no rows for metric '{metric}'", "majority_above", metric)
    above = (rows.groupby("sample")["value"].mean() > min_value).astype(int)
    k, n = int(above.sum()), int(above.size)
    p, lo, hi = exact.one_sample(k, n, 0.5, +1, 1 - alpha)
    share = k / n
    if share > 0.5 and p < alpha:
        outcome = Outcome.SUPPORTED
    elif hi < 0.5:
        outcome = Outcome.REFUTED
    else:
        outcome = Outcome.INCONCLUSIVE
    reason = f"{k} of {n} texts above {min_value:g}: share {share:.3g}, CI [{lo:.3g}, {hi:.3g}], p = {p:.3g}"
    v = Verdict(outcome, reason, "majority_above", metric, share, lo, hi, p, None, n, share - 0.5,
                "share − 1/2", "> 0.5", alpha)
    return sensitivity.judge(v, 0.5, +1, binary=True)
