"""Charts for the circuits probes: per-head heat maps, baseline distributions, folding error per text."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.ground.charts import HEIGHT, WIDTH, chart_def


def _head_means(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    rows = frame[(frame["metric"] == metric) & frame["layer"].notna() & frame["head"].notna()]
    keys = [c for c in ("subject", "layer", "head") if c in rows.columns and rows[c].notna().any()]
    out = rows.groupby(keys, dropna=False)["value"].mean().reset_index()
    out["layer"] = out["layer"].astype(int)
    out["head"] = out["head"].astype(int)
    return out


def head_heatmap(data: pd.DataFrame, title: str, scale_max: float = 1.0) -> alt.Chart:
    n_layers = int(data["layer"].max()) + 1
    return alt.Chart(data, title=title).mark_rect().encode(
        x=alt.X("head:O", title="head"),
        y=alt.Y("layer:O", title="layer", sort="descending"),
        color=alt.Color("value:Q", title="score", scale=alt.Scale(domain=[0, scale_max], scheme="viridis")),
    ).properties(width=min(WIDTH, 24 * (int(data["head"].max()) + 1) + 40), height=min(360, 12 * n_layers + 20))


@chart_def("induction")
def induction_chart(frame: pd.DataFrame):
    ind = head_heatmap(_head_means(frame, "induction_score"), "induction score per head")
    prev = head_heatmap(_head_means(frame, "prev_token_score"), "previous-token score per head")
    losses = frame[frame["metric"].isin(["loss_first", "loss_second"])].copy()
    losses["copy"] = losses["metric"].map({"loss_first": "first copy", "loss_second": "second copy"})
    box = alt.Chart(losses, title="next-token loss per sequence (nats)").mark_boxplot(extent="min-max").encode(
        x=alt.X("copy:N", title=None), y=alt.Y("value:Q", title="loss"), color=alt.Color("copy:N", legend=None),
    ).properties(width=160, height=HEIGHT)
    return alt.hconcat(ind, prev, box).resolve_scale(color="independent")


@chart_def("k_composition")
def k_composition_chart(frame: pd.DataFrame):
    base = frame[frame["kind"] == "baseline"]
    real = frame[frame["kind"].isin(["observed", "candidate"]) & (frame["metric"] == "k_composition")].copy()
    if base.empty or real.empty:
        heads = frame[frame["kind"] == "head"]
        if heads.empty:
            return None
        return head_heatmap(_head_means(heads, "induction_score"), "induction score per head")
    real["label"] = real.apply(lambda r: f"L{int(r['src_layer'])}H{int(r['src_head'])}", axis=1)
    real["role"] = real["kind"].map({"observed": "top previous-token head", "candidate": "other earlier head"})
    base_layer = alt.Chart(base).mark_tick(color="#999", thickness=1).encode(
        x=alt.X("value:Q", title="K-composition score into the top induction head"))
    heads = alt.Chart(real).mark_circle(size=70).encode(
        x="value:Q", y=alt.Y("role:N", title=None),
        color=alt.Color("role:N", scale=alt.Scale(range=["#d62728", "#1f77b4"]), legend=None))
    base_row = base_layer.encode(y=alt.value(8))
    return alt.layer(base_row, heads).properties(
        width=WIDTH, height=120, title="real heads (dots) against the random baseline (grey ticks)")


@chart_def("norm_folding")
def norm_folding_chart(frame: pd.DataFrame):
    """One point per text on a log axis.  (Bars would start at 0, which a log scale cannot place: blank.)"""
    rel = frame[frame["metric"] == "rel_logit_diff"].copy()
    if rel.empty:
        return None
    bound = 1e-4
    rel["text"] = rel["sample"].astype(int)
    floor = 1e-12  # an exact fold (difference 0) is drawn at the floor of the axis
    rel["value"] = rel["value"].clip(lower=floor)
    lo = max(floor, min(float(rel["value"].min()), bound) / 10)
    hi = max(float(rel["value"].max()), bound) * 10
    scale = alt.Scale(type="log", domain=[lo, hi])
    points = alt.Chart(rel).mark_point(filled=True, size=60, color="#1f77b4").encode(
        x=alt.X("text:O", title="text"),
        y=alt.Y("value:Q", title="max |Δlogit| / max |logit|", scale=scale),
        tooltip=[alt.Tooltip("text:O"), alt.Tooltip("value:Q", format=".2e")])
    rule = alt.Chart(pd.DataFrame({"y": [bound]})).mark_rule(color="#d62728", strokeDash=[4, 3]).encode(
        y=alt.Y("y:Q", scale=scale))
    return alt.layer(points, rule).properties(width=WIDTH, height=HEIGHT,
                                              title="folded vs original logits, per text (red: 1e-4 bound)")


@chart_def("toy_composition")
def toy_composition_chart(frame: pd.DataFrame):
    means = _head_means(frame, "induction_score")
    toys = means[means["subject"].isin(["toy-1L", "toy-2L"])].copy()
    toys["head id"] = toys.apply(lambda r: f"L{r['layer']}H{r['head']}", axis=1)
    bars = alt.Chart(toys, title="toy models: induction score per head").mark_bar().encode(
        x=alt.X("head id:N", title=None), y=alt.Y("value:Q", title="score", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("subject:N", title=None), column=alt.Column("subject:N", title=None),
    ).properties(width=150, height=HEIGHT)
    model = means[means["subject"] == "model"].groupby("layer")["value"].max().reset_index()
    line = alt.Chart(model, title="model under test: best induction score per layer").mark_line(point=True).encode(
        x=alt.X("layer:O"), y=alt.Y("value:Q", title="max score", scale=alt.Scale(domain=[0, 1])),
    ).properties(width=260, height=HEIGHT)
    rule = alt.Chart(pd.DataFrame({"y": [0.4]})).mark_rule(color="#d62728", strokeDash=[4, 3]).encode(y="y:Q")
    return alt.hconcat(bars, alt.layer(line, rule))


@chart_def("direct_path_bigrams")
def direct_path_chart(frame: pd.DataFrame):
    rho = frame[frame["metric"] == "spearman"]
    if rho.empty:
        return None
    hist = alt.Chart(rho, title="Spearman ρ per first token").mark_bar().encode(
        x=alt.X("value:Q", bin=alt.Bin(extent=[-1, 1], step=0.1), title="ρ(direct path, bigram) over its top next tokens"),
        y=alt.Y("count():Q", title="first tokens"),
    ).properties(width=260, height=HEIGHT)
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#d62728", strokeDash=[4, 3]).encode(x="x:Q")
    pairs = frame[frame["metric"].isin(["direct_logprob", "bigram_logprob"])]
    wide = pairs.pivot_table(index=["sample", "rank"], columns="metric", values="value").reset_index()
    top = wide[wide["sample"] < 12]  # the twelve most frequent first tokens
    top = top.merge(rho[["sample", "token"]], on="sample", how="left")
    dots = alt.Chart(top, title="most frequent first tokens: next-token log-probabilities").mark_circle(size=30).encode(
        x=alt.X("bigram_logprob:Q", title="empirical log P(next | first)"),
        y=alt.Y("direct_logprob:Q", title="direct-path log-prob"),
        color=alt.Color("token:N", title="first token"),
    ).properties(width=WIDTH - 300, height=HEIGHT)
    return alt.hconcat(alt.layer(hist, zero), dots).resolve_scale(color="independent")
