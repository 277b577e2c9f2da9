"""Charts for the ecm probes: accuracy against the number of demonstrations per task, and the paired
chain-of-thought comparison by number of steps."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.ground.charts import HEIGHT, WIDTH, chart_def


@chart_def("icl_demonstrations")
def icl_chart(frame: pd.DataFrame):
    rows = frame[frame["metric"] == "correct"]
    if rows.empty:
        return None
    per = rows.groupby(["task", "n_demos"])["value"].mean().reset_index()
    per["n_demos"] = per["n_demos"].astype(int)
    pooled = rows.groupby("n_demos")["value"].mean().reset_index().assign(task="all tasks")
    pooled["n_demos"] = pooled["n_demos"].astype(int)
    data = pd.concat([per, pooled], ignore_index=True)
    return alt.Chart(data, title="accuracy by number of demonstrations").mark_line(point=True).encode(
        x=alt.X("n_demos:O", title="demonstrations"),
        y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("task:N", title=None),
        strokeDash=alt.condition(alt.datum.task == "all tasks", alt.value([1, 0]), alt.value([4, 3])),
    ).properties(width=WIDTH, height=HEIGHT)


@chart_def("cot_multistep")
def cot_chart(frame: pd.DataFrame):
    rows = frame[frame["metric"] == "correct"]
    if rows.empty:
        return None
    acc = rows.groupby(["steps", "condition"])["value"].mean().reset_index()
    acc["steps"] = acc["steps"].astype(int).astype(str) + " steps"
    return alt.Chart(acc, title="accuracy with worked (cot) vs direct-answer demonstrations").mark_bar().encode(
        x=alt.X("condition:N", title=None), y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("condition:N", legend=None), column=alt.Column("steps:N", title=None),
    ).properties(width=120, height=HEIGHT)
