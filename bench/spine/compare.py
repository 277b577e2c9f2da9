"""Model A against model B on the same claims: a paired bootstrap of A − B over the units two frames share.

For every claim measured on model A in one run and on model B in another (or the same) run, the rows of the
claim's decision metric are joined on the index columns both frames fill (``sample``, ``layer``, ``head``,
``position``, ``language`` …).  The difference A − B is averaged over the joined rows.  When the rows carry a
``sample`` (a text, a sequence, a fact) and something finer, the bootstrap resamples whole samples, so tokens of
one text are never treated as independent; otherwise each joined row is a unit.  The confidence interval and
the two-sided p-value come from the same bootstrap distribution, and the p-values are adjusted with
Benjamini–Hochberg over the claims compared.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.ground.errors import UsageError
from bench.ground.store import load_cell_frame

VALUE_COLUMNS = ("metric", "value")


@dataclass(frozen=True)
class Comparison:
    claim: str
    metric: str | None
    mean_a: float | None
    mean_b: float | None
    difference: float | None  # mean of A − B over the shared units
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    n_units: int
    unit: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def pick_model(record: dict[str, Any], wanted: str | None, side: str) -> str:
    """The model of a run to compare: the one asked for, or the only one the run has."""
    models = sorted({c["model"] for c in record["cells"]})
    if wanted is not None:
        if wanted not in models:
            raise UsageError(f"run {record['run_id']} has no model '{wanted}' (it has: {', '.join(models)})")
        return wanted
    if len(models) != 1:
        raise UsageError(f"run {record['run_id']} has {len(models)} models ({', '.join(models)}): "
                         f"name one with --{side}")
    return models[0]


def decision_metric(verdict_params: dict[str, Any]) -> str | None:
    """The metric a claim's rule decides on: its own `metric`, else that of its first sub-rule."""
    metric = verdict_params.get("metric")
    if isinstance(metric, str):
        return metric
    for sub in verdict_params.get("of", []) or []:
        if isinstance(sub, dict) and isinstance(sub.get("metric"), str):
            return sub["metric"]
    return None


def paired_difference(a: pd.DataFrame, b: pd.DataFrame, metric: str, *, confidence: float = 0.95,
                      n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Mean of A − B over the units both frames hold for `metric`, with its bootstrap CI and p-value."""
    from scipy import stats

    ra, rb = a[a["metric"] == metric], b[b["metric"] == metric]
    keys = [c for c in ra.columns if c not in VALUE_COLUMNS and c in rb.columns
            and ra[c].notna().any() and rb[c].notna().any()]
    empty = {"mean_a": None, "mean_b": None, "difference": None, "ci_low": None, "ci_high": None,
             "p_value": None, "n_units": 0, "unit": "—"}
    if ra.empty or rb.empty:
        return {**empty, "note": f"metric '{metric}' is missing from " + ("A" if ra.empty else "B")}
    if not keys:  # one number per frame: nothing to pair
        ga = ra.assign(_k=0).groupby("_k")["value"].mean()
        gb = rb.assign(_k=0).groupby("_k")["value"].mean()
    else:
        ga = ra.groupby(keys, dropna=False)["value"].mean()
        gb = rb.groupby(keys, dropna=False)["value"].mean()
    joined = pd.concat([ga.rename("a"), gb.rename("b")], axis=1, join="inner").reset_index()
    if joined.empty:
        return {**empty, "note": f"the frames share no unit on {', '.join(keys)}"}
    diff = (joined["a"] - joined["b"]).to_numpy(float)
    cluster = "sample" in keys and len(keys) > 1
    if cluster:
        groups = joined.assign(_d=diff).groupby("sample")["_d"]
        sums, counts = groups.sum().to_numpy(float), groups.count().to_numpy(float)
        unit = "sample"
    else:
        sums, counts = diff, np.ones_like(diff)
        unit = "+".join(keys) if keys else "frame"
    out = {"mean_a": float(joined["a"].mean()), "mean_b": float(joined["b"].mean()),
           "difference": float(diff.mean()), "n_units": int(len(sums)), "unit": unit, "note": ""}
    if len(sums) < 2:
        return {**out, "ci_low": None, "ci_high": None, "p_value": None,
                "note": f"one shared {unit}: no interval"}
    res = stats.bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis=axis) / c.sum(axis=axis), paired=True,
                          vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", random_state=np.random.default_rng(seed))
    boot = res.bootstrap_distribution
    tail = min((boot <= 0).sum(), (boot >= 0).sum())
    p = min(1.0, 2 * (tail + 1) / (len(boot) + 1))
    return {**out, "ci_low": float(res.confidence_interval.low), "ci_high": float(res.confidence_interval.high),
            "p_value": float(p)}


def compare_runs(a: dict[str, Any], a_dir: Path, b: dict[str, Any], b_dir: Path, *, model_a: str | None = None,
                 model_b: str | None = None, confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> tuple[str, str, list[Comparison]]:
    """One comparison per claim measured on `model_a` in run A and on `model_b` in run B."""
    from scipy import stats

    ma, mb = pick_model(a, model_a, "a"), pick_model(b, model_b, "b")
    cells_a = {c["spec"]["id"]: c for c in a["cells"] if c["model"] == ma}
    cells_b = {c["spec"]["id"]: c for c in b["cells"] if c["model"] == mb}
    shared = sorted(set(cells_a) & set(cells_b))
    if not shared:
        raise UsageError(f"no claim was measured on both {ma} (run {a['run_id']}) and {mb} (run {b['run_id']})")
    rows: list[dict[str, Any]] = []
    for claim in shared:
        ca, cb = cells_a[claim], cells_b[claim]
        metric = decision_metric(ca["spec"].get("verdict", {}))
        fa, fb = load_cell_frame(a_dir, ca), load_cell_frame(b_dir, cb)
        if metric is None or fa is None or fb is None:
            why = "the rule names no single metric" if metric is None else "a cell has no frame (it failed)"
            rows.append({"claim": claim, "metric": metric, "mean_a": None, "mean_b": None, "difference": None,
                         "ci_low": None, "ci_high": None, "p_value": None, "n_units": 0, "unit": "—",
                         "note": why})
            continue
        rows.append({"claim": claim, "metric": metric,
                     **paired_difference(fa, fb, metric, confidence=confidence, n_resamples=n_resamples,
                                         seed=seed)})
    ps = [r["p_value"] for r in rows if r["p_value"] is not None]
    adjusted = iter(stats.false_discovery_control(ps, method="bh") if ps else [])
    out = [Comparison(**r, p_adjusted=float(next(adjusted)) if r["p_value"] is not None else None) for r in rows]
    return ma, mb, out
