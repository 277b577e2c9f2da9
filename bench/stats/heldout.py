"""``crossfit_summary``: a per-layer score 1 − Σ resid / Σ total from per-unit sums, reduced over layers.

The linearity claims are decided on a cross-fitted score: each text's residual and total sums of squares come
from maps fitted on *other* texts, so the score is not inflated by fitting d² coefficients to N tokens.  The
interval and the p-value come from one bootstrap over units (texts): a resample reweights each text's sums.
The in-sample and adjusted scores of the frame are named in the reason beside it, and the rule is INCONCLUSIVE
when the frame holds fewer than `min_tokens_per_dim` tokens per hidden dimension (the fit is then too loose).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from bench.ground.registry import rule_def
from bench.stats import Outcome, Verdict, _boot_p, _bootstrap, _bound, _decide, _missing, _select
from bench.stats.comparisons import check_skips
from bench.stats import words

REDUCERS = {"median": np.median, "min": np.min, "max": np.max, "mean": np.mean}


@rule_def("crossfit_summary", sentence=words.crossfit_summary)
def crossfit_summary(
    frame: pd.DataFrame, *, resid: str, total: str, reduce: Literal["median", "min", "max", "mean"] = "median",
    min: float | None = None, max: float | None = None, over: str = "layer", skip_first: int = 0,
    skip_last: int = 0, unit: str = "sample", report: list[str] = [],  # noqa: B006
    min_tokens_per_dim: float = 20.0, min_n: int = 10, where: dict[str, Any] = {},  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """`reduce` over layers (after skipping) of 1 − Σ_u resid / Σ_u total lies above `min` / below `max`."""
    bound, side = _bound(min, max)
    name = f"{reduce} cross-fitted score"
    rr, rt = _select(frame, {"metric": resid, **where}), _select(frame, {"metric": total, **where})
    if rr.empty or rt.empty:
        return _missing(frame, "crossfit_summary", name, {"metric": resid if rr.empty else total})
    R = rr.pivot_table(index=unit, columns=over, values="value", aggfunc="sum")
    T = rt.pivot_table(index=unit, columns=over, values="value", aggfunc="sum")
    cols = sorted(set(R.columns) & set(T.columns))
    check_skips(skip_first, skip_last, len(cols), over)
    cols = cols[skip_first: len(cols) - skip_last]
    units = R.index.intersection(T.index)
    R, T = R.loc[units, cols], T.loc[units, cols]
    keep = ~(R.isna().any(axis=1) | T.isna().any(axis=1))
    R, T = R[keep].to_numpy(float), T[keep].to_numpy(float)
    n, G = R.shape
    label = f"{reduce} {'≥' if side > 0 else '≤'} {bound:g}"
    fn = REDUCERS[reduce]

    def stat(m):  # (..., n, 2G) resampled units → (...)
        m = np.asarray(m, float)
        score = 1 - m[..., :G].sum(axis=-2) / m[..., G:].sum(axis=-2)  # (..., G)
        return fn(score, axis=-1)

    mat = np.concatenate([R, T], axis=1)
    est = float(stat(mat)) if n and G else float("nan")
    beside = []
    for metric in report:
        rows = _select(frame, {"metric": metric, **where})
        per = rows.groupby(over)["value"].mean().sort_index()
        per = per.iloc[skip_first: len(per) - skip_last]
        if not per.empty:
            beside.append(f"{metric} {reduce} {float(fn(per.to_numpy(float))):.4g}")
    toks, dims = _select(frame, {"metric": "n_tokens"}), _select(frame, {"metric": "hidden_size"})
    n_tok = float(toks["value"].iloc[0]) if len(toks) else float("nan")
    d = float(dims["value"].iloc[0]) if len(dims) else float("nan")
    size = f"N = {n_tok:.0f} tokens = {n_tok / d:.1f} per hidden dimension" if np.isfinite(n_tok / d) else ""
    extra = "; ".join(x for x in [", ".join(beside), size] if x)
    if G == 0 or n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} {unit}s (< {min_n}) and {G} {over}s", "crossfit_summary",
                       name, est, n=n, threshold=label, alpha=alpha)
    if np.isfinite(n_tok / d) and n_tok < min_tokens_per_dim * d:
        return Verdict(Outcome.INCONCLUSIVE, f"{size} (< {min_tokens_per_dim:g}): too few tokens for a d × d map; "
                       f"cross-fitted {est:.4g}; {extra}", "crossfit_summary", name, est, n=n, threshold=label,
                       alpha=alpha)
    lo, hi, boot = _bootstrap(stat, mat, confidence, n_resamples, bca=False)
    p = _boot_p(boot, bound, side, n)
    v = _decide("crossfit_summary", name, est, lo, hi, p, n, bound, side, label, alpha, effect=est - bound,
                effect_name="margin", unit=unit, confidence=confidence)
    return Verdict(**{**v.__dict__, "reason": v.reason + f"; over {G} {over}s; {extra}"})
