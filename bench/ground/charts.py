"""The chart registry: one chart function per probe, registered by the probe's name (a family's ``charts.py``),
frame in, altair chart out, and the sizes every chart shares.

A chart function receives the cell's tidy frame (as validated by the probe's schema) and returns an ``altair``
chart, or None when the frame holds nothing worth drawing.  The report renders them to SVG
(:mod:`bench.report.charts`, no JavaScript), so keep them static: no selections or tooltips that only work
interactively.
"""

from __future__ import annotations

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
