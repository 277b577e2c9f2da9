"""Charts of the language-neuron probes: selected-neuron counts, layer histograms, ΔBPB heat maps, steering
shares and the cross-lingual similarity profile."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.report.charts import FONT, HEIGHT, WIDTH, chart_def


def _style(chart: alt.Chart) -> alt.Chart:
    return chart.configure(font=FONT).configure_view(stroke=None)


@chart_def("activation_stats")
def selected_counts(frame: pd.DataFrame):
    rows = frame[frame["metric"] == "n_selected"]
    if rows.empty:
        return None
    bars = alt.Chart(rows).mark_bar().encode(
        x=alt.X("set_lang:N", title="language"), xOffset="method:N",
        y=alt.Y("value:Q", title="neurons selected"), color=alt.Color("method:N", title="method"))
    return _style(bars.properties(width=WIDTH, height=HEIGHT, title="Language-specific neurons per language"))


@chart_def("layer_distribution")
def layer_histogram(frame: pd.DataFrame):
    rows = frame[(frame["metric"] == "layer_count") & frame["set_lang"].notna()]
    if rows.empty:
        return None
    bars = alt.Chart(rows).mark_bar().encode(
        x=alt.X("layer:O", title="layer"), y=alt.Y("sum(value):Q", title="selected neurons"),
        color=alt.Color("set_lang:N", title="language"), column=alt.Column("method:N", title=None))
    n = max(1, rows["method"].nunique())
    return _style(bars.properties(width=WIDTH // n, height=HEIGHT, title="Where the language neurons lie"))


@chart_def("deactivation")
def delta_bpb_heatmap(frame: pd.DataFrame):
    rows = frame[frame["metric"] == "delta_bpb"].copy()
    if rows.empty:
        return None
    rows["cell"] = rows["value"].map(lambda v: f"{v:+.3f}")
    base = alt.Chart(rows).encode(
        x=alt.X("language:N", title="evaluated language"), y=alt.Y("set_lang:N", title="neurons zeroed (language)"))
    heat = base.mark_rect().encode(color=alt.Color("value:Q", title="ΔBPB", scale=alt.Scale(scheme="orangered")))
    text = base.mark_text(fontSize=9).encode(text="cell:N")
    n = max(1, rows["method"].nunique())
    layer = alt.layer(heat, text, data=rows).properties(width=WIDTH // n, height=HEIGHT)
    return _style(layer.facet(column=alt.Column("method:N", title=None)).properties(
        title="Bits per byte added by zeroing each language's neurons"))


@chart_def("steering")
def steering_shares(frame: pd.DataFrame):
    rows = frame[frame["metric"].isin(["target_share_steered", "target_share_plain"])]
    if rows.empty:
        return None
    rows = rows.assign(run=rows["metric"].map({"target_share_steered": "steered", "target_share_plain": "plain"}))
    bars = alt.Chart(rows).mark_bar().encode(
        x=alt.X("set_lang:N", title="target language"), xOffset="run:N",
        y=alt.Y("mean(value):Q", title="share of output in target", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("run:N", title=None))
    return _style(bars.properties(width=WIDTH, height=HEIGHT, title="Output language with and without steering"))


@chart_def("crosslingual_similarity")
def similarity_profile(frame: pd.DataFrame):
    rows = frame[frame["metric"] == "mean_cosine"]
    if rows.empty:
        return None
    line = alt.Chart(rows).mark_line(point=True).encode(
        x=alt.X("layer:O", title="layer"), y=alt.Y("mean(value):Q", title="cosine of parallel sentences",
                                                      scale=alt.Scale(zero=False)))
    band = alt.Chart(rows).mark_errorband(extent="ci").encode(x="layer:O", y="value:Q")
    return _style(alt.layer(band, line).properties(width=WIDTH, height=HEIGHT,
                                                   title="Cross-lingual similarity by layer"))
