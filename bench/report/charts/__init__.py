"""Charts rendered for reports: an altair chart (registered per probe in :mod:`bench.ground.charts`) as static
SVG with ids scoped to its place in the page."""

from __future__ import annotations

import re

from bench.ground.charts import FONT


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
