"""Every microscope probe has a chart, and it renders to SVG from a frame of the probe's shape."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import vl_convert

from bench.ground.charts import chart_for


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    classes = ["determiner", "noun", "punctuation", "verb"]
    for s in range(4):
        for p in range(1, 6):
            cls = classes[p % 4]
            for l in range(4):
                rows += [(None, None, s, p, l, cls, m, float(rng.random()))
                         for m in ("token_error", "centrality", "lens_loss", "lens_top1", "lens_loss_code")]
            rows += [(None, None, s, p, None, cls, m, float(rng.random()))
                     for m in ("context_loss", "token_error_mean", "model_loss")]
            rows += [("base", None, s, p, None, cls, m, float(rng.random())) for m in ("context_loss", "token_error_mean")]
        for l in range(4):
            rows += [(None, None, s, None, l, None, m, float(rng.random()))
                     for m in ("frac_shifted_mean", "frac_shifted_last")]
        rows += [(None, c, s, None, None, None, "correct", float(rng.random() > 0.5))
                 for c in ("original", "no_stopwords", "no_punctuation", "no_articles")]
    for l in range(4):
        rows += [(None, None, None, None, l, None, m, float(rng.random()))
                 for m in ("linearity", "linearity_heldout", "id_ratio", "id_ratio_code", "anisotropy")]
    return pd.DataFrame(rows, columns=["subject", "condition", "sample", "position", "layer", "cls", "metric",
                                       "value"])


@pytest.mark.parametrize("probe", ["nonlinearity", "logit_lens", "intrinsic_dimension", "centrality",
                                   "contextualization", "context_pair", "question_shift", "token_removal"])
def test_chart_renders(probe):
    fn = chart_for(probe)
    assert fn is not None
    chart = fn(_frame())
    assert chart is not None
    svg = vl_convert.vegalite_to_svg(chart.to_json())
    assert svg.startswith("<svg") and "Noto Sans" in svg


def test_empty_frames_give_no_chart():
    empty = _frame().iloc[0:0]
    for probe in ("nonlinearity", "context_pair", "token_removal"):
        assert chart_for(probe)(empty) is None


@pytest.mark.parametrize(("probe", "paper", "code"), [("logit_lens", "lens_loss", "lens_loss_code"),
                                                      ("intrinsic_dimension", "id_ratio", "id_ratio_code")])
def test_both_conventions_are_drawn_and_labelled(probe, paper, code):
    """Each convention is its own curve, labelled "paper's formula" / "authors' code", drawn from its own metric."""
    frame = _frame()
    spec = chart_for(probe)(frame).to_dict()
    rows = pd.DataFrame(next(iter(spec["datasets"].values())))
    for metric, label in ((paper, "paper's formula"), (code, "authors' code")):
        curve = rows[rows["metric"] == metric]
        assert len(curve) == 4 and curve["series"].str.contains(label).all()
        want = frame[frame["metric"] == metric].groupby("layer")["value"].mean().to_numpy()
        assert np.allclose(curve.sort_values("layer")["value"].to_numpy(), want)
