"""Run record (+ its frames) → the report's template context → self-contained HTML."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2

from bench.ground.resources import relative_spec_path, templates_dir
from bench.ground.store import load_cell_frame
from bench.models.controls import control_outcomes, flag
from bench.ground import charts
from bench.report.charts import to_svg
from bench.report.forest import across_models
from bench.report.references import nearest, placement_chart
from bench.ground.prose import describe

METHOD_NAMES = {"pm": "Paule–Mandel", "dl": "DerSimonian–Laird"}
OUTCOMES = ("SUPPORTED", "REFUTED", "INCONCLUSIVE", "ERROR", "SKIPPED")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = fmt_number
    env.filters["paragraphs"] = lambda text: [" ".join(p.split()) for p in str(text).split("\n\n") if p.strip()]
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    return env


def fmt_number(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int) or float(x).is_integer() and abs(x) < 1e6:
        return f"{int(x)}" if abs(x) >= 1 or x == 0 else f"{x:.{digits}g}"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def chart_svg(run_dir: Path, cell: dict[str, Any]) -> tuple[str | None, str | None]:
    """(svg, None) for the cell's chart; (None, reason) when there is none."""
    fn = charts.chart_for(cell["probe"]["name"])
    if fn is None:
        return None, "no chart for this probe"
    try:
        frame = load_cell_frame(run_dir, cell)
        if frame is None:
            return None, None
        chart = fn(frame)
        if chart is None:
            return None, "nothing to draw"
        prefix = "c" + (cell.get("cache_key") or f"{cell['spec']['id']}-{cell['model']}")[:10]
        return to_svg(chart, prefix), None
    except Exception as exc:  # noqa: BLE001 - a chart problem must not lose the report
        return None, f"chart failed: {type(exc).__name__}: {str(exc)[:160]}"


def placement_svg(spec: dict[str, Any], cells: dict[str, dict[str, Any]]) -> str | None:
    """The measured-among-published chart of one claim, or None (no shared metric, or it failed to draw)."""
    try:
        chart = placement_chart(spec, cells)
        return None if chart is None else to_svg(chart, "p" + spec["hash"][:10])
    except Exception:  # noqa: BLE001 - a chart problem must not lose the report
        return None


def _cell_view(run_dir: Path, cell: dict[str, Any], with_chart: bool,
               control: dict[tuple[str, str], str]) -> dict[str, Any]:
    v = cell.get("verdict") or {}
    ref = nearest(cell["spec"].get("references", []), v.get("metric"), v.get("estimate"))
    svg, chart_note = chart_svg(run_dir, cell) if with_chart and cell.get("frame") else (None, None)
    timings = cell.get("timings") or {}  # seconds under *_s keys, the CPU thread count, when the cell began
    return {
        "model": cell["model"], "outcome": v.get("outcome", "ERROR"), "reason": v.get("reason", ""),
        "sensitivity": v.get("sensitivity"),
        "estimate": v.get("estimate"), "ci_low": v.get("ci_low"), "ci_high": v.get("ci_high"),
        "p": v.get("p_value"), "p_adj": v.get("p_adjusted"), "n": v.get("n"), "effect": v.get("effect"),
        "effect_name": v.get("effect_name"), "threshold": v.get("threshold"), "metric": v.get("metric"),
        "parts": v.get("parts", []), "reference": ref, "svg": svg, "chart_note": chart_note,
        "notes": cell.get("notes", []), "failure_cases": cell.get("failure_cases", []),
        "timings": {k: s for k, s in timings.items() if k.endswith("_s")}, "threads": timings.get("threads"),
        "cache_key": cell.get("cache_key"), "cache_hit": cell.get("cache_hit"),
        "fingerprint": cell.get("fingerprint"), "model_ref": cell.get("model_ref"),
        "control_outcome": control.get((cell["spec"]["id"], cell["model"])),
        "flag": flag(cell["spec"], cell["model"], control),
        "against_control": cell.get("against_control"), "side_by_side": [],
    }


def side_by_side(view: dict[str, Any], control: dict[str, Any] | None) -> list[dict[str, Any]]:
    """For a claim decided against its control: the trained model's own condition, the control's own verdict and
    their difference, each with estimate, interval and outcome (the control's row is empty when it did not run)."""
    parts = view["parts"]
    own, diff = (parts[0], parts[1]) if len(parts) == 2 else ({}, {})
    keys = ("outcome", "estimate", "ci_low", "ci_high", "threshold", "n")
    ctl = {**{k: control.get(k) for k in keys}, "p_adjusted": control.get("p_adj")} if control else {}
    return [{"label": label, "model": model, **{k: v.get(k) for k in (*keys, "p_adjusted")}}
            for label, model, v in (("trained", view["model"], own),
                                    ("untrained control", view["against_control"], ctl),
                                    ("trained − control", "", diff))]


def context(record: dict[str, Any], run_dir: Path, *, with_charts: bool = True) -> dict[str, Any]:
    cells = record["cells"]
    control = control_outcomes(cells)
    models = list(dict.fromkeys(c["model"] for c in cells))
    claims: dict[str, dict[str, Any]] = {}
    for cell in cells:
        spec = {**cell["spec"], "path": relative_spec_path(cell["spec"].get("path", ""))}  # older records: absolute
        claim = claims.setdefault(spec["id"], {
            "spec": spec, "rule_words": describe(spec["rule"], spec["verdict"]), "cells": {}, "placement_svg": None})
        claim["cells"][cell["model"]] = _cell_view(run_dir, cell, with_charts, control)
    for claim in claims.values():
        for view in claim["cells"].values():
            if view["against_control"]:
                view["side_by_side"] = side_by_side(view, claim["cells"].get(view["against_control"]))
    if with_charts:
        for claim in claims.values():
            claim["placement_svg"] = placement_svg(claim["spec"], claim["cells"])
    families: dict[str, list[dict[str, Any]]] = {}
    for claim in claims.values():
        families.setdefault(claim["spec"]["family"], []).append(claim)
    counts = {o: sum(1 for c in cells if (c.get("verdict") or {}).get("outcome") == o) for o in OUTCOMES}
    fingerprints = {c["model"]: (c.get("fingerprint"), c.get("model_ref")) for c in cells}
    return {
        "run": {k: v for k, v in record.items() if k != "cells"}, "models": models, "families": families,
        "claims": list(claims.values()), "counts": counts,
        "across": across_models(record, with_charts=with_charts), "meta_method": METHOD_NAMES["pm"],
        "n_cells": len(cells), "fingerprints": fingerprints,
        "rendered_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "css": (templates_dir() / "report.css").read_text(encoding="utf-8"),
    }


def render_html(record: dict[str, Any], run_dir: Path) -> str:
    return environment().get_template("report.html.j2").render(**context(record, run_dir))


def render_diff_html(rows: list[dict[str, Any]], a: dict[str, Any], b: dict[str, Any]) -> str:
    return environment().get_template("diff.html.j2").render(
        rows=rows, a=a, b=b, css=(templates_dir() / "report.css").read_text(encoding="utf-8"),
        rendered_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def render_compare_html(rows, model_a: str, model_b: str, a: dict[str, Any], b: dict[str, Any]) -> str:
    return environment().get_template("compare.html.j2").render(
        rows=rows, model_a=model_a, model_b=model_b, a=a, b=b,
        css=(templates_dir() / "report.css").read_text(encoding="utf-8"),
        rendered_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def render_meta_html(records: list[dict[str, Any]], method: str = "pm") -> str:
    return environment().get_template("meta.html.j2").render(
        across=across_models(records, method=method), meta_method=METHOD_NAMES[method],
        runs=[r["run_id"] for r in records],
        css=(templates_dir() / "report.css").read_text(encoding="utf-8"),
        rendered_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
