"""Charts of the language-neuron probes: selected-neuron counts, layer histograms, ΔBPB heat maps, steering
shares and the cross-lingual similarity profile."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.ground.charts import FONT, HEIGHT, WIDTH, chart_def


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
    """Heat maps of the full ΔBPB matrices, and every method's diagonal (own-language effect) as bars."""
    rows = frame[frame["metric"] == "delta_bpb"].copy()
    if rows.empty:
        return None
    rows["cell"] = rows["value"].map(lambda v: f"{v:+.2f}")
    per_method = rows.groupby("method")["set_lang"].count()
    n_lang = max(1, rows["language"].nunique())
    full = [m for m, n in per_method.items() if n > n_lang]
    charts = []
    for meth in full:
        sub = rows[rows["method"] == meth]
        base = alt.Chart(sub).encode(x=alt.X("language:N", title="evaluated language"),
                                     y=alt.Y("set_lang:N", title="neurons zeroed"))
        heat = base.mark_rect().encode(color=alt.Color("value:Q", title="ΔBPB", scale=alt.Scale(scheme="orangered")))
        text = base.mark_text(fontSize=8).encode(text="cell:N")
        charts.append(alt.layer(heat, text).properties(width=min(WIDTH, 40 * n_lang), height=min(HEIGHT, 28 * n_lang),
                                                       title=f"{meth}: ΔBPB, every set × every language"))
    diag = rows[rows["set_lang"] == rows["language"]]
    if not diag.empty:
        charts.append(alt.Chart(diag).mark_bar().encode(
            x=alt.X("language:N", title="language (its own neurons zeroed)"), xOffset="method:N",
            y=alt.Y("value:Q", title="ΔBPB"), color=alt.Color("method:N", title="method"))
            .properties(width=WIDTH, height=HEIGHT, title="Own-language effect per method"))
    chart = alt.hconcat(*charts[:-1]) & charts[-1] if len(charts) > 1 else charts[0]
    return _style(chart.properties(title="Bits per byte added by zeroing each language's neurons"))


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
    band = alt.Chart(rows).mark_errorband(extent="ci").encode(
        x="layer:O", y=alt.Y("value:Q", title="cosine of parallel sentences"))
    return _style(alt.layer(band, line).properties(width=WIDTH, height=HEIGHT,
                                                   title="Cross-lingual similarity by layer"))
