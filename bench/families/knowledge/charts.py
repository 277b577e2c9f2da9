"""Charts of the knowledge probe: training loss per step, and the shares of facts that shifted."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.ground.charts import HEIGHT, WIDTH, chart_def

_SHIFTS = ("negative_shift", "positive_shift", "reliability", "known_after")


@chart_def("knowledge_shift")
def knowledge_chart(frame: pd.DataFrame):
    charts = []
    loss = frame[frame["metric"] == "train_loss"].copy()
    if not loss.empty:
        loss["run"] = loss["condition"].astype(str) + " seed " + loss["seed"].astype(str)
        charts.append(alt.Chart(loss, title="training loss").mark_line().encode(
            x=alt.X("step:Q", title="optimizer step"), y=alt.Y("value:Q", title="loss (nats)"),
            color=alt.Color("run:N", title=None)).properties(width=WIDTH // 2, height=HEIGHT))
    shares = frame[frame["metric"].isin(_SHIFTS)]
    if not shares.empty:
        agg = shares.groupby(["condition", "metric"])["value"].agg(["mean", "count"]).reset_index()
        agg["label"] = agg["metric"].str.replace("_", " ")
        charts.append(alt.Chart(agg, title="share of facts (n per bar in the frame)").mark_bar().encode(
            x=alt.X("condition:N", title=None), y=alt.Y("mean:Q", title="share", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("condition:N", legend=None), column=alt.Column("label:N", title=None),
        ).properties(width=90, height=HEIGHT))
    if not charts:
        return None
    return alt.hconcat(*charts) if len(charts) > 1 else charts[0]
