"""``exceeds_baselines``: an observed value against several baseline distributions at once.

A claim such as "K-composition exceeds chance" has more than one fair notion of chance (random matrices of
the same shapes; the model's own matrices with their alignment broken).  The claim is SUPPORTED when it beats
every baseline, REFUTED when one baseline refutes it (:func:`bench.stats.conjunction`, the policy of every
multi-part rule), INCONCLUSIVE otherwise; each baseline gets its
own Monte Carlo rank p-value (``exceeds_baseline``), and the claim's p is their maximum (intersection–union).
A frame row ``flag`` (e.g. ``qk_norm`` = 1) marks the measurement approximate: it may then be SUPPORTED or
INCONCLUSIVE, never REFUTED.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from bench.ground.prose import alpha_text, sel
from bench.ground.registry import rule_def
from bench.stats import Outcome, Verdict, _select, conjunction, evaluate


def _say_exceeds_baselines(p):
    names = ", ".join(f"[{sel(b)}]" for b in p["baselines"])
    return (f"[{sel(p['observed'])}] exceeds the {p.get('quantile', 0.99):g} quantile of every baseline ({names}); "
            f"the claim holds only when it beats each one (intersection–union test, p = the largest p, {alpha_text(p)})")


@rule_def("exceeds_baselines", sentence=_say_exceeds_baselines)
def exceeds_baselines(frame: pd.DataFrame, *, observed: dict[str, Any], baselines: list[dict[str, Any]],
                      quantile: float = 0.99, flag: dict[str, Any] = {},  # noqa: B006
                      flag_text: str = "approximate", alpha: float = 0.05) -> Verdict:
    """The observed value exceeds the `quantile` of every baseline (each a row selector)."""
    if not baselines:
        raise ValueError("exceeds_baselines needs at least one baseline")
    parts = [evaluate(frame, "exceeds_baseline", {"observed": observed, "baseline": b, "quantile": quantile,
                                                   "alpha": alpha}) for b in baselines]
    parts = [replace(p, metric=f"vs {b.get('metric', b)}") for p, b in zip(parts, baselines)]
    outcome = conjunction([p.outcome for p in parts])
    reason = "; ".join(f"{p.metric}: {p.outcome.value} — {p.reason}" for p in parts)
    flagged = _select(frame, flag) if flag else frame.iloc[0:0]
    sens = ("; ".join(p.sensitivity for p in parts if p.outcome is Outcome.REFUTED and p.sensitivity)
            if outcome is Outcome.REFUTED else None)
    if len(flagged) and float(flagged["value"].max()) > 0:
        reason += f" [{flag_text}]"
        if outcome is Outcome.REFUTED:  # an approximate measurement may support a claim, never refute it
            outcome, sens = Outcome.INCONCLUSIVE, None
            reason = f"could not have shown the effect: the measurement is {flag_text} ({reason})"
    ps = [p.p_value for p in parts if p.p_value is not None]
    # intersection–union test: "beats every baseline" holds at level α when each test does, so p = max p
    return replace(parts[0], outcome=outcome, reason=reason, rule="exceeds_baselines", alpha=alpha, sensitivity=sens,
                   p_value=max(ps) if len(ps) == len(parts) else None, metric=str(observed.get("metric", "observed")))
