"""Forest plots: one claim's per-model estimates with their intervals, the random-effects mean and the prediction
interval for a new model, and the controls drawn beside (never pooled)."""

from __future__ import annotations

from typing import Any

from bench.spine.synthesis import Synthesis, synthesise, threshold_side

POOLED = "pooled (random effects)"
PREDICTION = "new model (prediction)"
COLOURS = {"model": "#1f5fa8", "model, not pooled": "#7d9cc4", "control, not pooled": "#8a8a8a",
           "pooled": "#b0702c", "prediction": "#d9a66b"}


def forest_rows(s: Synthesis) -> list[dict[str, Any]]:
    """One row per model and control with an estimate, then the pooled mean and the prediction interval."""
    rows = []
    for r in sorted(s.rows, key=lambda r: (r.control, r.model)):
        if r.estimate is None:
            continue
        kind = "control, not pooled" if r.control else "model" if r.pooled else "model, not pooled"
        rows.append({"label": r.model, "kind": kind, "estimate": r.estimate, "low": r.ci_low, "high": r.ci_high})
    p = s.pooled
    if p is not None:
        rows.append({"label": POOLED, "kind": "pooled", "estimate": p.estimate, "low": p.ci_low,
                     "high": p.ci_high})
        if p.pi_low is not None:
            rows.append({"label": PREDICTION, "kind": "prediction", "estimate": p.estimate, "low": p.pi_low,
                         "high": p.pi_high})
    return rows


def forest_chart(s: Synthesis):
    """An altair chart, or None when no row has an estimate."""
    rows = forest_rows(s)
    if not rows:
        return None
    import altair as alt
    import pandas as pd

    from bench.ground.charts import WIDTH

    data = pd.DataFrame(rows)
    order = list(dict.fromkeys(data["label"]))
    kinds = [k for k in COLOURS if k in set(data["kind"])]
    colour = alt.Color("kind:N", title=None, scale=alt.Scale(domain=kinds, range=[COLOURS[k] for k in kinds]),
                       legend=alt.Legend(orient="bottom"))
    y = alt.Y("label:N", title=None, sort=order)
    base = alt.Chart(data)
    bars = base.transform_filter("datum.low != null").mark_rule(strokeWidth=2).encode(
        y=y, x=alt.X("low:Q", title=s.metric or "estimate", scale=alt.Scale(zero=False)), x2="high:Q",
        color=colour)
    points = base.mark_point(filled=True, size=70).encode(
        y=y, x="estimate:Q", color=colour,
        shape=alt.condition("datum.kind == 'pooled' || datum.kind == 'prediction'", alt.value("diamond"),
                            alt.value("circle")))
    layers = [bars, points]
    side = threshold_side(s.threshold)
    if side is not None:
        layers.append(alt.Chart(pd.DataFrame({"bound": [side[0]]})).mark_rule(strokeDash=[4, 3],
                                                                                color="#444").encode(x="bound:Q"))
    return alt.layer(*layers).properties(width=WIDTH, height=max(44, 24 * len(order)))


def across_models(records: dict[str, Any] | list[dict[str, Any]], *, with_charts: bool = True,
                  method: str = "pm") -> list[dict[str, Any]]:
    """The "Across models" section of a report (one record) or of ``bench meta --html`` (several): one entry per
    claim measured on ≥ 2 models, controls aside."""
    from bench.report.charts import to_svg

    out = []
    for i, s in enumerate(synthesise(records if isinstance(records, list) else [records], method=method)):
        if sum(not r.control and r.estimate is not None for r in s.rows) < 2:
            continue
        svg = None
        if with_charts:
            try:
                chart = forest_chart(s)
                svg = to_svg(chart, f"f{i}") if chart is not None else None
            except Exception:  # noqa: BLE001 - a chart problem must not lose the report
                svg = None
        out.append({"s": s, "svg": svg, "rows": forest_rows(s)})
    return out
