"""Claims decided against their untrained control: the trained model's estimate minus its control's, paired by unit.

Some statistics come out near the claim's bar on any weights (the layer spread of a neuron selection is partly a
property of the architecture at initialisation).  A spec with ``[control] decide = "difference"`` is then decided
on two conditions, both reported:

1. the rule's own decision on the trained model (the absolute threshold, unchanged);
2. the rule's estimate on the trained model minus the same estimate on its seeded random-init control
   (:mod:`bench.models.controls`), on the claimed side of 0, with an interval and a p-value that resample the
   units both frames share, jointly (the same texts, prompts or split-half replicates in both arms).

SUPPORTED needs both; REFUTED comes from either (a REFUTED difference needs its interval wholly on the other side
of 0: the trained model shows *less* than the untrained one); anything else is INCONCLUSIVE.

A rule takes part by registering an *arm* with :func:`arm_def`: its estimate as a function of one row per unit
(an :class:`Arm`).  Two kinds:

* resampled (``stat`` given): the units × columns table of each arm, joined on the shared units; the difference
  is ``stat(trained columns) − stat(control columns)``, bootstrapped over units with the corrected percentile
  interval and p of :func:`bench.stats._bootstrap` / :func:`bench.stats._boot_p`;
* replicated (``full`` given): the rule's own estimate comes from all the data and its units are replicates of it
  (split halves); the difference of the full estimates is spread by the per-replicate differences, centred and
  scaled by ``shrink`` as the rule scales its own replicates, and p = (1 + #{values on the wrong side of 0}) /
  (1 + R);
* exact (``exact`` set): one value per unit and no sampling behind it (a count per language), so nothing to
  resample; the per-unit differences are decided by the exact sign test, the estimate is their median and the
  interval the order statistics that cover the median with at least the confidence (binomial, distribution-free).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from bench.stats import Outcome, Verdict, _boot_p, _bootstrap, _decide, ci_name, combine

RULE = "against_control"
DECIDE = ("difference",)  # the values `[control] decide` takes
POLICY = "decided against the untrained control: the absolute condition and trained − control must both hold"


@dataclass(frozen=True)
class Arm:
    """One model's side: per-unit values (index = unit labels) and how the rule's estimate follows from them."""

    table: pd.DataFrame
    side: int  # +1: the claim is "the estimate is large", −1: "small"
    unit: str
    name: str  # the estimate in words ("edge_share", "ratio", …)
    stat: Callable[[np.ndarray], np.ndarray] | None = None  # resampled: (..., n, G) → (...)
    full: float | None = None  # replicated: the estimate on all the data; `table` has one column per replicate
    shrink: float = 1.0  # replicated: a replicate's spread relative to the full estimate's
    min_n: int = 1  # replicated: fewer shared replicates than this leave the difference undecided
    exact: bool = False  # one exact value per unit: the sign test on the per-unit differences


ArmFn = Callable[..., "Arm | Verdict"]
ARMS: dict[str, ArmFn] = {}


def arm_def(rule: str) -> Callable[[ArmFn], ArmFn]:
    """Register how `rule`'s estimate is computed from per-unit values; it takes the rule's own parameters
    (those it does not use arrive in ``**_``) and returns an :class:`Arm`, or an INCONCLUSIVE :class:`Verdict`
    saying why the frame has none."""
    def register(fn: ArmFn) -> ArmFn:
        ARMS[rule] = fn
        return fn
    return register


def supports(rule: str) -> bool:
    from bench.ground import registry

    registry.rule(rule)  # imports every family's rules (and so their arms)
    return rule in ARMS


def difference(trained: pd.DataFrame, control: pd.DataFrame, rule: str, params: Mapping[str, Any]) -> Verdict:
    """trained − control of `rule`'s estimate, paired on the units both frames share (module docstring)."""
    if not supports(rule):
        raise ValueError(f"rule '{rule}' cannot be decided against a control (no arm registered)")
    params = dict(params)
    alpha = float(params.get("alpha", 0.05))
    confidence = float(params.get("confidence", 0.95))
    n_resamples = int(params.get("n_resamples", 2000))
    arms = []
    for who, frame in (("trained", trained), ("control", control)):
        arm = ARMS[rule](frame, **params)
        if isinstance(arm, Verdict):
            return Verdict(Outcome.INCONCLUSIVE, f"trained − control: no {who} estimate ({arm.reason})", RULE,
                           "trained − control", alpha=alpha)
        arms.append(arm)
    t, c = arms
    common = t.table.index.intersection(c.table.index)
    n = len(common)
    name = f"{t.name}: trained − control"
    label = "> 0" if t.side > 0 else "< 0"
    if n == 0:
        return Verdict(Outcome.INCONCLUSIVE, f"trained − control: no {t.unit} is in both frames", RULE, name,
                       alpha=alpha)
    A, B = t.table.loc[common].to_numpy(float), c.table.loc[common].to_numpy(float)
    if t.exact:
        return _signs(A[:, 0] - B[:, 0], t, name, label, alpha, confidence)
    if t.full is not None and n < t.min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"trained − control {t.full - c.full:.4g} but only {n} shared "
                       f"{t.unit}s (< {t.min_n})", RULE, name, t.full - c.full, n=n, alpha=alpha)
    if t.full is not None:
        est = float(t.full - c.full)
        d = A[:, 0] - B[:, 0]
        values = est + (d - d.mean()) * t.shrink
        q = (1 - confidence) / 2
        lo, hi = float(np.quantile(values, q)), float(np.quantile(values, 1 - q))
        wrong = values <= 0 if t.side > 0 else values >= 0
        p = float((1 + np.sum(wrong)) / (1 + n))
        v = _decide(RULE, name, est, lo, hi, p, n, 0.0, t.side, label, alpha, effect=est, effect_name=name,
                    unit=t.unit, resampled=False, confidence=confidence,
                    detail=f"trained {t.full:.4g} − control {c.full:.4g} = {est:.4g}, "
                           f"{ci_name(confidence)} [{lo:.4g}, {hi:.4g}]")
        return v
    k = A.shape[1]  # each arm's statistic reads its own columns: the trained ones first
    both = np.concatenate([A, B], axis=1)

    def diff(m):
        return t.stat(m[..., :k]) - c.stat(m[..., k:])

    est = float(diff(both))
    lo, hi, boot = _bootstrap(diff, both, confidence, n_resamples, bca=False)
    p = _boot_p(boot, 0.0, t.side, n)
    a, b = float(t.stat(A)), float(c.stat(B))
    return _decide(RULE, name, est, lo, hi, p, n, 0.0, t.side, label, alpha, effect=est, effect_name=name, unit=t.unit,
                   confidence=confidence,
                   detail=f"trained {a:.4g} − control {b:.4g} = {est:.4g}, {ci_name(confidence)} [{lo:.4g}, {hi:.4g}]")


def _signs(d: np.ndarray, t: Arm, name: str, label: str, alpha: float, confidence: float) -> Verdict:
    """Per-unit differences of exact values: the one-sided sign test (ties dropped), the median, and the widest
    pair of order statistics (j-th from each end) whose coverage of the median, 1 − 2·P(Bin(n, ½) < j), is at
    least `confidence`, or the extremes when even they cover less (their coverage is then stated)."""
    n = len(d)
    moved = d[d != 0]
    k = int(np.sum(t.side * moved > 0))
    p = float(stats.binomtest(k, len(moved), 0.5, alternative="greater").pvalue) if len(moved) else 1.0
    s = np.sort(d)
    covers = [1 - 2 * stats.binom.cdf(j - 1, n, 0.5) for j in range(1, n // 2 + 1)] or [0.0]
    j = max([i + 1 for i, c in enumerate(covers) if c >= confidence] or [1])
    lo, hi = float(s[j - 1]), float(s[n - j])
    cover = covers[j - 1]
    est = float(np.median(d))
    shy = "" if cover >= confidence else f"; with {n} {t.unit}s no interval reaches {confidence:.0%}"
    return _decide(RULE, name, est, lo, hi, p, n, 0.0, t.side, label, alpha, effect=est, effect_name=name,
                   unit=t.unit, resampled=False, confidence=confidence,
                   detail=f"{k} of {n} {t.unit}s {'above' if t.side > 0 else 'below'} the control (exact sign test, "
                          f"{n - len(moved)} tied), median difference {est:.4g}, [{lo:.4g}, {hi:.4g}] covers the "
                          f"median with probability {cover:.3f}{shy}")


def against(trained: pd.DataFrame | None, control: pd.DataFrame | None, rule: str, params: Mapping[str, Any],
            own: Verdict, control_verdict: Verdict | None, control_name: str) -> Verdict:
    """The verdict of a claim decided against its control: `own` (the rule on the trained frame) and the
    difference, combined as the module docstring says.  A cell that errored or was skipped stays as it is."""
    if own.outcome in (Outcome.ERROR, Outcome.SKIPPED) or trained is None:
        return own
    alpha = float(dict(params).get("alpha", own.alpha))
    if control is None:
        why = control_verdict.reason if control_verdict is not None else "it did not run"
        diff = Verdict(Outcome.INCONCLUSIVE, f"the control {control_name} gave no frame to compare with: {why}",
                       RULE, "trained − control", alpha=alpha)
    else:
        diff = difference(trained, control, rule, params)
    merged = combine([own, diff], alpha)
    if merged.outcome is Outcome.SUPPORTED:
        beyond = "below" if (diff.threshold or "").startswith("<") else "above"  # the claimed side of 0
        reason = f"{own.reason}; and {beyond} its control {control_name}: {diff.reason} ({POLICY})"
    else:
        failed = [f"{p.metric}: {p.reason}" for p in (own, diff) if p.outcome is not Outcome.SUPPORTED]
        reason = "; ".join(failed) + f" ({POLICY})"
    return replace(merged, rule=RULE, reason=reason)
