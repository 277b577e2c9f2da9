"""The microscope family's one rule of its own: a claim decided under one convention, the other shown beside it.

Where the paper's formula and the authors' code compute an estimand differently (the logit lens, TwoNN), the
probe measures both and the spec names the one that decides.  ``beside`` evaluates its first sub-rule — that
decision, unchanged — and every further sub-rule on the same frame, and writes their estimates, intervals and
what they would conclude into the reason.  The shown rules never change the outcome and enter no test: their
p-values are dropped, so the Benjamini–Hochberg family is the same as without them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from bench.ground.prose import subrules
from bench.ground.registry import rule_def
from bench.stats import Verdict, evaluate_parts


def _num(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def shown(v: Verdict, label: str) -> str:
    """One shown rule in words: its label, metric, estimate [interval] and what it would conclude alone."""
    ci = f" [{_num(v.ci_low)}, {_num(v.ci_high)}]" if v.ci_low is not None else ""
    alone = f"alone it would be {v.outcome.value}" + (f" (p = {_num(v.p_value)}, unadjusted)"
                                                        if v.p_value is not None else "")
    return f"{label} — {v.metric}: {_num(v.estimate)}{ci} vs {v.threshold or '—'}, {alone}"


def _say_beside(p):
    parts = subrules(p)
    labels = list(p.get("labels") or ["decides"] + ["beside"] * (len(parts) - 1))
    if not parts:
        return "no rules given"
    shown = "; ".join(f"{label}: {s}" for label, s in zip(labels[1:], parts[1:]))
    return f"{labels[0]}: {parts[0]} (this decides); shown beside it, deciding nothing — {shown}"


@rule_def("beside", nested="of", sentence=_say_beside)
def beside(frame: pd.DataFrame, *, of: list[dict[str, Any]], labels: list[str] = [],  # noqa: B006
           alpha: float = 0.05) -> Verdict:
    """The first rule of `of` decides the claim; each further rule is evaluated on the same frame and shown
    beside it in the reason (estimate, interval, what it would conclude alone), never changing the outcome.
    `labels` name the rules of `of` in order (default "decides" and "beside")."""
    if len(of) < 2:
        raise ValueError("beside needs the deciding rule and at least one rule to show beside it in 'of'")
    if labels and len(labels) != len(of):
        raise ValueError(f"beside: {len(labels)} labels for {len(of)} rules")
    names = list(labels) or ["decides"] + ["beside"] * (len(of) - 1)
    decide, *others = evaluate_parts(frame, of, alpha)
    if decide.parts:
        raise ValueError("beside: the deciding rule must be a single rule (its parts would be re-combined and "
                         "the shown rules' text lost); put a precondition in a 'gated' rule around 'beside'")
    text = "; ".join(shown(v, name) for v, name in zip(others, names[1:]))
    return replace(decide, reason=f"{names[0]}: {decide.reason}; {text}")
