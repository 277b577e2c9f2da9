"""The norm-folding chart draws one visible mark per text (it used bars on a log scale, which drew nothing)."""

from __future__ import annotations

import re

import pandas as pd


def _svg(chart) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_json())


def test_norm_folding_chart_shows_every_value():
    from bench.families.circuits.charts import norm_folding_chart

    frame = pd.DataFrame({"metric": ["rel_logit_diff"] * 3 + ["argmax_agreement"] * 3,
                          "sample": [0, 1, 2] * 2, "value": [3e-7, 0.0, 2e-6, 1.0, 1.0, 1.0]})
    svg = _svg(norm_folding_chart(frame))
    # vega draws each point as a <path> in a group of role "mark-symbol"; all three texts are drawn, at finite
    # positions (an exact fold, 0, sits at the axis floor rather than vanishing)
    symbols = re.search(r'class="mark-symbol role-mark[^"]*"[^>]*>(.*?)</g>', svg, re.S)
    assert symbols is not None
    ys = [float(y) for y in re.findall(r'transform="translate\([-\d.]+,([-\d.]+)\)"', symbols.group(1))]
    assert len(ys) == 3 and all(0 <= y <= 400 for y in ys)  # inside the plot (height 220 + margins)
    assert len(set(ys)) == 3  # three different values at three different heights
    assert "NaN" not in svg
