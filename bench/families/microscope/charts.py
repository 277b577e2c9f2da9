"""Charts of the LLM-Microscope family: per-layer profiles and per-class comparisons (static SVG)."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from bench.ground.charts import FONT, HEIGHT, WIDTH, chart_def

# The two conventions of an estimand, as every chart labels them: the paper's formula and the authors' code.
CONVENTIONS = {
    "logit_lens": {"lens_loss": "paper's formula", "lens_loss_code": "authors' code"},
    "intrinsic_dimension": {"id_ratio": "TwoNN / d, paper's formula", "id_ratio_code": "TwoNN / d, authors' code"},
}

CLASS_ORDER = ["determiner", "preposition", "punctuation", "pronoun", "number", "other", "adverb", "adjective",
               "verb", "noun"]


def _style(chart: alt.Chart, title: str) -> alt.Chart:
    return (chart.properties(width=WIDTH, height=HEIGHT, title=title)
            .configure(font=FONT).configure_title(font=FONT, fontSize=13, anchor="start")
            .configure_axis(labelFont=FONT, titleFont=FONT).configure_legend(labelFont=FONT, titleFont=FONT))


def _rows(frame: pd.DataFrame, metrics) -> pd.DataFrame:
    rows = frame[frame["metric"].isin(list(metrics))].copy()
    rows["value"] = rows["value"].astype(float)
    return rows


def _per_layer(frame: pd.DataFrame, metrics, names: dict[str, str] | None = None) -> pd.DataFrame:
    rows = _rows(frame, metrics).dropna(subset=["layer"])
    if rows.empty:
        return rows
    out = rows.groupby(["metric", "layer"])["value"].mean().reset_index()
    out["layer"] = out["layer"].astype(int)
    out["series"] = out["metric"].map(names or {}).fillna(out["metric"])
    return out


def _lines(data: pd.DataFrame, y_title: str, title: str, rule: float | None = None, x_title: str = "layer"):
    base = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("layer:Q", title=x_title), y=alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False)),
        color=alt.Color("series:N", title=None))
    if rule is not None:
        base = base + alt.Chart(pd.DataFrame({"y": [rule]})).mark_rule(strokeDash=[4, 3], color="#888").encode(
            y="y:Q")
    return _style(base, title)


@chart_def("nonlinearity")
def nonlinearity_chart(frame: pd.DataFrame):
    data = _per_layer(frame, ("linearity", "linearity_heldout"),
                      {"linearity": "in-sample (paper)", "linearity_heldout": "held-out texts"})
    if data.empty:
        return None
    return _lines(data, "linearity score", "Linearity of each layer pair (l → l+1); dashed: 0.9", 0.9,
                  "layer pair l → l+1")


@chart_def("logit_lens")
def logit_lens_chart(frame: pd.DataFrame):
    data = _per_layer(frame, ("lens_loss", "lens_loss_code"), CONVENTIONS["logit_lens"])
    if data.empty:
        return None
    own = _rows(frame, ("model_loss",))["value"].mean()
    return _lines(data, "nats", f"Logit lens per layer: −log p(next token) through the final norm (paper's formula), "
                  f"−log p(top-1) without it (authors' code); dashed: model's own loss ({own:.2f})",
                  float(own) if np.isfinite(own) else None)


@chart_def("intrinsic_dimension")
def intrinsic_dimension_chart(frame: pd.DataFrame):
    data = _per_layer(frame, ("id_ratio", "id_ratio_code", "anisotropy"),
                      {**CONVENTIONS["intrinsic_dimension"], "anisotropy": "anisotropy λmax/Σλ"})
    if data.empty:
        return None
    return _lines(data, "fraction", "Intrinsic dimension (TwoNN, ÷ hidden size) and anisotropy; dashed: 0.1", 0.1)


@chart_def("centrality")
def centrality_chart(frame: pd.DataFrame):
    rows = _rows(frame, ("centrality",)).dropna(subset=["layer", "cls"])
    rows = rows[rows["cls"].isin(["punctuation", "determiner", "preposition", "noun", "verb", "adjective"])]
    if rows.empty:
        return None
    data = rows.groupby(["cls", "layer"])["value"].mean().reset_index()
    data["layer"] = data["layer"].astype(int)
    data = data.rename(columns={"cls": "series"})
    return _lines(data, "mean cosine to all other tokens", "Centrality per layer and word class")


def _class_bars(frame: pd.DataFrame, metric: str, title: str, y_title: str):
    layers = _class_layers(frame, metric, y_title)
    return None if layers is None else _style(layers, title)


def _class_layers(frame: pd.DataFrame, metric: str, y_title: str):
    rows = _rows(frame, (metric,)).dropna(subset=["cls"])
    rows = rows[rows["cls"] != "special"]
    if rows.empty:
        return None
    g = rows.groupby("cls")["value"]
    data = pd.DataFrame({"mean": g.mean(), "sem": g.std(ddof=1) / np.sqrt(g.count()), "n": g.count()}).reset_index()
    data["lo"], data["hi"] = data["mean"] - 1.96 * data["sem"], data["mean"] + 1.96 * data["sem"]
    data["group"] = np.where(data["cls"].isin(["determiner", "preposition", "punctuation"]), "function",
                             np.where(data["cls"].isin(["noun", "verb", "adjective"]), "content", "other"))
    order = [c for c in CLASS_ORDER if c in set(data["cls"])]
    x = alt.X("cls:N", sort=order, title=None)
    bars = alt.Chart(data).mark_bar().encode(x=x, y=alt.Y("mean:Q", title=y_title, scale=alt.Scale(zero=False)),
                                             color=alt.Color("group:N", title=None))
    err = alt.Chart(data).mark_rule(color="#333").encode(x=x, y="lo:Q", y2="hi:Q")
    return bars + err


DECODERS = {"states": "reads the states", "blind": "state-blind", "layer0": "layer 0 only",
            "shuffled": "another token's states"}


def _training_curves(frame: pd.DataFrame):
    """Training loss per step of each decoder, with its held-out loss as a dashed line of the same colour."""
    rows = _rows(frame, ("train_loss",)).dropna(subset=["sample", "condition"])
    if rows.empty:
        return None
    data = pd.DataFrame({"step": rows["sample"].astype(int).to_numpy(), "value": rows["value"].to_numpy(),
                         "series": rows["condition"].map(DECODERS).fillna(rows["condition"]).to_numpy()})
    held = {DECODERS["states"]: "context_loss", DECODERS["blind"]: "context_loss_blind",
            DECODERS["layer0"]: "context_loss_layer0", DECODERS["shuffled"]: "context_loss_shuffled"}
    means = pd.DataFrame([{"series": k, "value": float(_rows(frame, (m,))["value"].mean())} for k, m in held.items()])
    means = means[np.isfinite(means["value"])]
    color = alt.Color("series:N", title=None, sort=list(held))
    lines = alt.Chart(data).mark_line(opacity=0.8).encode(
        x=alt.X("step:Q", title="optimiser step (dashed: held-out loss)"),
        y=alt.Y("value:Q", title="loss (nats per prefix token)", scale=alt.Scale(zero=False)), color=color)
    return lines + alt.Chart(means).mark_rule(strokeDash=[4, 3]).encode(y="value:Q", color=color)


@chart_def("contextualization")
def contextualization_chart(frame: pd.DataFrame):
    """Raw C per word class (the paper's Fig. 4 quantity), what the contextual states add beyond layer 0 per
    class (the class claim's estimand), and the decoders' training curves with their held-out losses."""
    panels = [(_class_layers(frame, "context_loss", "C (nats per prefix token)"), "C per word class (mean ± 95%)"),
              (_class_layers(frame, "context_added_pos_centred", "C_layer0 − C, centred per position"),
               "Context added beyond layer 0 (decided)"),
              (_training_curves(frame), "Decoder training and the controls")]
    panels = [(c, t) for c, t in panels if c is not None]
    if not panels:
        return None
    if len(panels) == 1:
        return _style(panels[0][0], "Prefix reconstruction")
    width = WIDTH // len(panels) + 20
    row = alt.hconcat(*[c.properties(width=width, height=HEIGHT, title=t) for c, t in panels])
    return (row.resolve_scale(color="independent")
            .configure(font=FONT).configure_title(font=FONT, fontSize=13, anchor="start")
            .configure_axis(labelFont=FONT, titleFont=FONT).configure_legend(labelFont=FONT, titleFont=FONT))


@chart_def("context_pair")
def context_pair_chart(frame: pd.DataFrame):
    if "subject" not in frame.columns or frame["subject"].dropna().empty:
        return None
    rows = []
    for subject, part in frame.groupby("subject"):
        c = part[part["metric"] == "context_loss"].set_index(["sample", "position"])["value"]
        e = part[part["metric"] == "token_error_mean"].set_index(["sample", "position"])["value"]
        both = pd.concat([c.rename("c"), e.rename("e")], axis=1).dropna()
        if len(both) > 2:
            rows.append({"subject": subject, "r": float(np.corrcoef(both["c"], both["e"])[0, 1])})
    if not rows:
        return None
    chart = alt.Chart(pd.DataFrame(rows)).mark_bar().encode(x=alt.X("subject:N", title=None),
                                                            y=alt.Y("r:Q", title="Pearson r(C, E)"))
    return _style(chart, "Context–linearity correlation: base vs instruction-tuned")


@chart_def("question_shift")
def question_shift_chart(frame: pd.DataFrame):
    data = _per_layer(frame, ("frac_shifted_mean", "frac_shifted_last"),
                      {"frac_shifted_mean": "mean state (unit norm)", "frac_shifted_last": "last token (unit norm)"})
    if data.empty:
        return None
    return _lines(data, "share of dims with |Δ| > ε", "Dimensions moved by an extra '?'; dashed: 0.2", 0.2)


@chart_def("token_removal")
def token_removal_chart(frame: pd.DataFrame):
    rows = _rows(frame, ("correct",)).dropna(subset=["condition"])
    if rows.empty:
        return None
    g = rows.groupby("condition")["value"]
    data = pd.DataFrame({"accuracy": g.mean(), "n": g.count()}).reset_index()
    order = ["original", "no_stopwords", "no_punctuation", "no_articles"]
    chart = alt.Chart(data).mark_bar().encode(x=alt.X("condition:N", sort=order, title=None),
                                              y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1])))
    return _style(chart, "QA accuracy with and without function tokens")
