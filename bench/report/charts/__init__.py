"""Charts for reports: one function per probe, registered by the probe's name, frame in, altair chart out.

A chart function receives the cell's tidy frame (as validated by the probe's schema) and returns an
``altair`` chart, or None when the frame holds nothing worth drawing.  Charts are rendered to SVG by the report
(no JavaScript), so keep them static: no selections or tooltips that only work interactively.
"""

from __future__ import annotations

import re
from typing import Callable

import pandas as pd

from bench.ground.registry import Registry

FONT = "Noto Sans"  # the report's CSS uses the same family, so SVG labels measure the same
WIDTH = 520
HEIGHT = 220

def _discover() -> None:
    from bench.ground.registry import import_families

    import_families("charts")


CHARTS: Registry[Callable[[pd.DataFrame], object]] = Registry("chart", _discover)


def chart_def(probe: str):
    """Register the chart of probe `probe` (in a family's ``charts.py``)."""

    def wrap(fn):
        return CHARTS.add(probe, fn)

    return wrap


def chart_for(probe: str) -> Callable[[pd.DataFrame], object] | None:
    return CHARTS.find(probe)


def to_svg(chart, prefix: str) -> str:
    """An altair chart as static SVG (vl-convert), its ids scoped to `prefix`."""
    import vl_convert as vlc

    spec = chart.configure(font=FONT).configure_view(stroke=None).to_json()
    return scope_ids(vlc.vegalite_to_svg(spec), prefix)


def scope_ids(svg: str, prefix: str) -> str:
    """Rename the SVG's ids (gradients, clip paths) to `prefix`-n in order of appearance.

    The renderer numbers ids with a process-wide counter: renaming makes the output independent of what was
    rendered before, and keeps the ids of several inline SVGs in one page apart.
    """
    ids = list(dict.fromkeys(re.findall(r'\bid="([^"]+)"', svg)))
    mapping = {old: f"{prefix}-{i}" for i, old in enumerate(ids)}
    if not mapping:
        return svg
    pattern = re.compile(r'(\bid="|url\(#|href="#)(' + "|".join(re.escape(k) for k in mapping) + r')(?=[")])')
    return pattern.sub(lambda m: m.group(1) + mapping[m.group(2)], svg)
