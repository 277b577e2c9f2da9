"""Charts for reports: one function per probe, registered by the probe's name, frame in, altair chart out.

A chart function receives the cell's tidy frame (as validated by the probe's schema) and returns an
``altair`` chart, or None when the frame holds nothing worth drawing.  Charts are rendered to SVG by the report
(no JavaScript), so keep them static: no selections or tooltips that only work interactively.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

FONT = "Noto Sans"  # the report's CSS uses the same family, so SVG labels measure the same
WIDTH = 520
HEIGHT = 220

_CHARTS: dict[str, Callable[[pd.DataFrame], object]] = {}


def chart_def(probe: str):
    """Register the chart of probe `probe`."""

    def wrap(fn):
        if probe in _CHARTS:
            raise ValueError(f"chart for probe '{probe}' is registered twice")
        _CHARTS[probe] = fn
        return fn

    return wrap


def chart_for(probe: str) -> Callable[[pd.DataFrame], object] | None:
    from bench.registry import import_submodules

    import_submodules(__name__)
    return _CHARTS.get(probe)
