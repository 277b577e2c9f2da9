"""Published figures beside measured ones: the nearest reference for a cell, and a chart placing the measured
estimates among the published values of the same metric."""

from __future__ import annotations

from typing import Any


def same_metric(references: list[dict[str, Any]], metric: str | None) -> list[dict[str, Any]]:
    """The references that report the cell's metric: the same name, or a name that the verdict's metric label
    contains (``induction_score`` in ``max induction_score``); failing both, when every reference of the claim
    reports one and the same metric, those (the spec lists them as the published figures of this measurement)."""
    if metric is None:
        return []
    named = [r for r in references if r.get("metric") == metric or (r.get("metric") and r["metric"] in metric)]
    if named:
        return named
    kinds = {r.get("metric") for r in references}
    return list(references) if len(kinds) == 1 else []


def nearest(references: list[dict[str, Any]], metric: str | None, estimate: float | None) -> dict[str, Any] | None:
    """The published figure for the cell's metric that lies closest to its estimate (the first one when the
    estimate is missing); None when no reference reports that metric."""
    refs = same_metric(references, metric)
    if not refs:
        return None
    if estimate is None:
        return refs[0]
    return min(refs, key=lambda r: abs(float(r["value"]) - float(estimate)))


def placement_rows(spec: dict[str, Any], cells: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured estimate and per published value of a metric that both have."""
    rows = []
    for model, cell in cells.items():
        refs = same_metric(spec.get("references", []), cell.get("metric"))
        if cell.get("estimate") is None or not refs:
            continue
        metric = refs[0]["metric"]
        rows.append({"who": model, "kind": "measured here", "metric": metric, "value": cell["estimate"],
                     "low": cell.get("ci_low"), "high": cell.get("ci_high")})
        for ref in refs:
            if ref["metric"] == metric:
                rows.append({"who": ref["model"], "kind": "published", "metric": metric,
                             "value": float(ref["value"]), "low": None, "high": None})
    return [dict(t) for t in dict.fromkeys(tuple(r.items()) for r in rows)]


def placement_chart(spec: dict[str, Any], cells: dict[str, dict[str, Any]]):
    """An altair chart of measured estimates (with their intervals) among the published values, or None."""
    rows = placement_rows(spec, cells)
    if not any(r["kind"] == "published" for r in rows):
        return None
    import altair as alt
    import pandas as pd

    from bench.ground.charts import WIDTH

    data = pd.DataFrame(rows)
    colour = alt.Color("kind:N", title=None, scale=alt.Scale(domain=["measured here", "published"],
                                                             range=["#1f5fa8", "#b0702c"]))
    base = alt.Chart(data).encode(y=alt.Y("who:N", title=None, sort=None))
    points = base.mark_point(filled=True, size=70).encode(x=alt.X("value:Q", title=None,
                                                                  scale=alt.Scale(zero=False)), color=colour)
    bars = base.transform_filter("datum.low != null").mark_rule(strokeWidth=2).encode(
        x="low:Q", x2="high:Q", color=colour)
    return (bars + points).properties(width=WIDTH, height=max(40, 22 * data["who"].nunique())).facet(
        row=alt.Row("metric:N", title=None))
