"""Charts of the generalization probe: held-out accuracy per stage and split, and the training curves."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.report.charts import HEIGHT, WIDTH, chart_def

ORDER = ["initial", "sft", "rl", "sft_rl"]


@chart_def("sft_vs_rl")
def sft_vs_rl_chart(frame: pd.DataFrame):
    acc = frame[frame["metric"] == "correct"].groupby(["stage", "split"])["value"].mean().reset_index()
    if acc.empty:
        return None
    acc["split"] = acc["split"].map({"id": "in distribution (J/Q/K = 10)", "ood": "out of distribution (11/12/13)"})
    bars = alt.Chart(acc, title="held-out accuracy before and after training").mark_bar().encode(
        x=alt.X("stage:N", sort=ORDER, title=None),
        y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("stage:N", sort=ORDER, legend=None),
        column=alt.Column("split:N", title=None),
    ).properties(width=150, height=HEIGHT)
    curves = frame[frame["metric"].isin(["train_loss", "train_reward"])].copy()
    if curves.empty:
        return bars
    curves["curve"] = curves["stage"] + " " + curves["metric"].str.replace("train_", "")
    line = alt.Chart(curves, title="training curves (SFT loss, RL mean reward)").mark_line(point=True).encode(
        x=alt.X("step:Q", title="optimizer step"), y=alt.Y("value:Q", title=None),
        color=alt.Color("curve:N", title=None),
    ).properties(width=min(WIDTH, 320), height=HEIGHT)
    return alt.hconcat(bars, line)
