"""Charts of the generalization probe: held-out accuracy per stage and split, accuracy against training FLOPs
(the paper's x-axis) for each arm, and the training curves."""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.ground.charts import HEIGHT, WIDTH, chart_def

ORDER = ["base", "initial", "sft", "rl", "base_rl"]
SPLIT_NAMES = {"id": "in distribution (J/Q/K = 10)", "ood": "out of distribution (11/12/13)"}


@chart_def("sft_vs_rl")
def sft_vs_rl_chart(frame: pd.DataFrame):
    acc = frame[frame["metric"] == "correct"].groupby(["stage", "split"])["value"].mean().reset_index()
    if acc.empty:
        return None
    acc["split"] = acc["split"].map(SPLIT_NAMES)
    bars = alt.Chart(acc, title="held-out accuracy (mean over seeds)").mark_bar().encode(
        x=alt.X("stage:N", sort=ORDER, title=None),
        y=alt.Y("value:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("stage:N", sort=ORDER, legend=None),
        column=alt.Column("split:N", title=None),
    ).properties(width=150, height=HEIGHT)
    charts = [bars]
    pts = _flops_points(frame)
    if not pts.empty:
        charts.append(alt.Chart(pts, title="accuracy against training FLOPs").mark_line(point=True).encode(
            x=alt.X("flops:Q", title="training FLOPs (estimate)"),
            y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("run:N", title=None), strokeDash=alt.StrokeDash("split:N", title=None),
            detail="seed:N",
        ).properties(width=min(WIDTH, 320), height=HEIGHT))
    curves = frame[frame["metric"].isin(["train_loss", "train_reward"])].copy()
    if not curves.empty:
        curves["curve"] = curves["stage"] + " " + curves["metric"].str.replace("train_", "")
        curves["seed"] = curves["seed"].astype("string").fillna("-")
        charts.append(alt.Chart(curves, title="training curves (SFT loss, RL mean reward)").mark_line().encode(
            x=alt.X("step:Q", title="optimizer step"), y=alt.Y("value:Q", title=None),
            color=alt.Color("curve:N", title=None), detail="seed:N",
        ).properties(width=min(WIDTH, 320), height=HEIGHT))
    return alt.hconcat(*charts) if len(charts) > 1 else bars


def _flops_points(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, seed, split, checkpoint): accuracy and cumulative FLOPs; each run starts at its start's
    accuracy (the initial checkpoint, or the base model) at 0 FLOPs."""
    acc = frame[frame["metric"] == "ckpt_accuracy"]
    fl = frame[frame["metric"] == "ckpt_flops"][["stage", "seed", "step", "value"]].rename(columns={"value": "flops"})
    if acc.empty or fl.empty:
        return pd.DataFrame()
    pts = acc.merge(fl, on=["stage", "seed", "step"]).rename(columns={"value": "accuracy"})
    start = frame[frame["metric"] == "correct"].groupby(["stage", "split"])["value"].mean()
    zero = [{"stage": st, "seed": sd, "split": sp, "accuracy": start[(src, sp)], "flops": 0.0}
            for st, sd in pts[["stage", "seed"]].drop_duplicates().itertuples(index=False)
            for src in [("base" if st == "base_rl" else "initial")] for sp in ("id", "ood") if (src, sp) in start]
    pts = pd.concat([pd.DataFrame(zero), pts[["stage", "seed", "split", "accuracy", "flops"]]], ignore_index=True)
    pts["run"] = pts["stage"]
    pts["seed"] = pts["seed"].astype("string")
    pts["split"] = pts["split"].map(SPLIT_NAMES)
    return pts.sort_values(["run", "seed", "split", "flops"])
