"""One flat row per cell, for machines: ``runs/<id>/results.csv`` and ``results.json``.

The nested run record stays the source of truth; these files are derived from it (and rewritten from it by
:func:`write`), so a script can read a run without knowing the record's layout.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from bench.ground.store import atomic_write_bytes

COLUMNS = (
    "run_id", "claim", "family", "model", "outcome", "metric", "estimate", "ci_low", "ci_high", "p_value",
    "p_adjusted", "n", "effect", "effect_name", "threshold", "published", "published_model", "published_where",
    "reason", "sensitivity", "load_s", "measure_s", "verdict_s", "total_s", "cache_hit", "seed", "profile", "device", "dtype",
    "fingerprint", "spec_hash", "spec_path",
)


def published(cell: dict[str, Any]) -> dict[str, Any] | None:
    """The spec's published figure for this cell's metric (the cell's own model first), or None."""
    v = cell.get("verdict") or {}
    refs = list(cell["spec"].get("references") or [])
    if not refs:
        return None
    same_model = [r for r in refs if r.get("model") == cell.get("model")]
    same_metric = [r for r in refs if v.get("metric") and r.get("metric") == v.get("metric")]
    return (same_model or same_metric or [None])[0]


def row(record: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    v = cell.get("verdict") or {}
    t = cell.get("timings") or {}
    ref = published(cell)
    return {
        "run_id": record.get("run_id"), "claim": cell["spec"]["id"], "family": cell["spec"].get("family"),
        "model": cell.get("model"), "outcome": v.get("outcome"), "metric": v.get("metric"),
        "estimate": v.get("estimate"), "ci_low": v.get("ci_low"), "ci_high": v.get("ci_high"),
        "p_value": v.get("p_value"), "p_adjusted": v.get("p_adjusted"), "n": v.get("n"),
        "effect": v.get("effect"), "effect_name": v.get("effect_name"), "threshold": v.get("threshold"),
        "published": ref["value"] if ref else None, "published_model": ref["model"] if ref else None,
        "published_where": ref["where"] if ref else None, "reason": v.get("reason"),
        "sensitivity": v.get("sensitivity"),
        "load_s": t.get("load_s"), "measure_s": t.get("measure_s"), "verdict_s": t.get("verdict_s"),
        "total_s": t.get("total_s"), "cache_hit": cell.get("cache_hit"), "seed": cell.get("seed"),
        "profile": record.get("profile"), "device": (record.get("device") or {}).get("type"),
        "dtype": record.get("dtype"), "fingerprint": cell.get("fingerprint"), "spec_hash": cell["spec"].get("hash"),
        "spec_path": cell["spec"].get("path"),
    }


def rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [row(record, c) for c in record["cells"]]


def to_csv(table: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in table:
        w.writerow({k: "" if r.get(k) is None else r[k] for k in COLUMNS})
    return buf.getvalue()


def to_json(table: list[dict[str, Any]]) -> str:
    return json.dumps(table, indent=1, ensure_ascii=False, default=str) + "\n"


def write(run_dir: Path, record: dict[str, Any]) -> tuple[Path, Path]:
    """Write results.csv and results.json (atomically) next to the record."""
    table = rows(record)
    paths = Path(run_dir) / "results.csv", Path(run_dir) / "results.json"
    atomic_write_bytes(paths[0], to_csv(table).encode("utf-8"))
    atomic_write_bytes(paths[1], to_json(table).encode("utf-8"))
    return paths
