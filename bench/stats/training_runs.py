"""Training runs as units: one verdict decided on each independent run, combined by intersection–union.

A claim that rests on training (a toy trained from scratch, a decoder fitted to hidden states) is as much about
the training run as about the evaluation units: one run's luck is not the method's effect.  A rule given
``training_runs = "<column>"`` (the frame's column that names the run, e.g. ``train_seed``) is decided on each run's
rows separately — rows with no value in that column (a part measured once, such as the model's own heads) belong
to every run — and the runs are combined:

* SUPPORTED only when every run's verdict is SUPPORTED.  This is the intersection–union test: each run's test is
  at level α, so "all runs reject" is a level-α test of "the claim fails in some run" with no correction;
  p is the largest of the runs' p-values.
* REFUTED only when every run's verdict is REFUTED (each with its own sensitivity).
* Otherwise INCONCLUSIVE, naming the runs that disagree.

The estimate is the mean of the runs' estimates, the interval spans all of theirs (seed and evaluation variation
together), and the reason says how many runs and units.  Fewer than two runs cannot show seed variation: the
verdict is then INCONCLUSIVE ("one training run").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np
import pandas as pd

from bench.stats import Outcome, Verdict

MIN_RUNS = 2


def split(frame: pd.DataFrame, column: str) -> list[tuple[object, pd.DataFrame]]:
    """(run, its rows plus the rows shared by every run), in run order."""
    if column not in frame.columns:
        raise ValueError(f"training_runs: the frame has no column '{column}' (columns: {', '.join(frame.columns)})")
    shared = frame[column].isna()
    runs = sorted(frame.loc[~shared, column].unique().tolist())
    return [(r, frame[shared | (frame[column] == r)]) for r in runs]


def decide(frame: pd.DataFrame, column: str, evaluate_one: Callable[[pd.DataFrame], Verdict]) -> Verdict:
    """Evaluate on each run (``evaluate_one``) and combine as the module docstring says."""
    runs = split(frame, column)
    if not runs:
        v = evaluate_one(frame)
        return replace(v, outcome=Outcome.INCONCLUSIVE if v.outcome is not Outcome.ERROR else v.outcome,
                       reason=f"no training run named in '{column}' ({v.reason})", sensitivity=None)
    verdicts = [evaluate_one(rows) for _, rows in runs]
    labels = [f"{column} {r}" for r, _ in runs]
    outcomes = [v.outcome for v in verdicts]
    head = verdicts[0]
    ests = [v.estimate for v in verdicts if v.estimate is not None]
    est = float(np.mean(ests)) if len(ests) == len(verdicts) else head.estimate
    lows = [v.ci_low for v in verdicts]
    highs = [v.ci_high for v in verdicts]
    lo = min(lows) if None not in lows else None
    hi = max(highs) if None not in highs else None
    ps = [v.p_value for v in verdicts]
    p = max(ps) if None not in ps else None
    each = "; ".join(f"{lab}: {v.outcome.value} ({v.reason})" for lab, v in zip(labels, verdicts))
    k = len(verdicts)
    units = f"{k} training runs × {head.n} units" if head.n is not None else f"{k} training runs"
    sens = None
    if Outcome.ERROR in outcomes:
        outcome, why = Outcome.ERROR, f"a training run failed: {each}"
    elif k < MIN_RUNS:
        outcome, why = Outcome.INCONCLUSIVE, (f"one training run cannot show what the run's luck contributes "
                                              f"({MIN_RUNS} needed): {each}")
    elif all(o is Outcome.SUPPORTED for o in outcomes):
        largest = f" (largest p {p:.3g})" if p is not None else ""  # an exact rule (no sampling) has no p
        outcome, why = Outcome.SUPPORTED, f"holds in every one of {units}{largest}: {each}"
    elif all(o is Outcome.REFUTED for o in outcomes):
        outcome, why = Outcome.REFUTED, f"fails in every one of {units}: {each}"
        sens = "; ".join(f"{lab}: {v.sensitivity}" for lab, v in zip(labels, verdicts) if v.sensitivity) or None
    elif all(o is Outcome.INCONCLUSIVE for o in outcomes):
        outcome, why = Outcome.INCONCLUSIVE, f"undecided in every one of {units}: {each}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, f"the {units} disagree: {each}"
    return Verdict(outcome, why, head.rule, head.metric, est, lo, hi, p, None, head.n, head.effect,
                   head.effect_name, head.threshold, head.alpha, parts=tuple(verdicts), sensitivity=sens, runs=k)
