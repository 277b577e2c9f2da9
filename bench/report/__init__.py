"""Static, self-contained reports (HTML and PDF) rendered from run records alone; no model is loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.ground.store import atomic_write_bytes, atomic_write_json, cache_root, find_run, key_of, load_record

VOLATILE = ("run_id", "started", "ended", "command", "executor", "record_sha256")  # differs between identical runs
VOLATILE_CELL = ("timings", "cache_hit")


def substance(record: dict[str, Any]) -> str:
    """A hash of what a report shows that a re-run with nothing changed would change (run id, times aside)."""
    body = {k: v for k, v in record.items() if k not in VOLATILE and k != "cells"}
    body["cells"] = [{k: v for k, v in c.items() if k not in VOLATILE_CELL} for c in record["cells"]]
    return key_of(body)


def reused(record: dict[str, Any], out_dir: Path, *, pdf: bool) -> list[Path] | None:
    """Copy the report of an earlier run whose record had the same substance; None when there is none."""
    entry_path = cache_root() / "reports" / f"{substance(record)}.json"
    try:
        entry = json.loads(entry_path.read_text())
    except (OSError, ValueError):
        return None
    src = Path(entry["dir"])
    names = ["index.html", *(["report.pdf"] if pdf else [])]
    if not entry.get("pdf", False) and pdf or not all((src / n).is_file() for n in names):
        return None
    out_dir = Path(out_dir)
    if src.resolve() != out_dir.resolve():
        shutil.copytree(src, out_dir, dirs_exist_ok=True, ignore=None if pdf else shutil.ignore_patterns("report.pdf"))
    return [out_dir / n for n in names]


def _remember(record: dict[str, Any], out_dir: Path, pdf: bool) -> None:
    atomic_write_json(cache_root() / "reports" / f"{substance(record)}.json",
                      {"dir": str(Path(out_dir).resolve()), "pdf": pdf, "run_id": record["run_id"]})


def render(run: str | Path, out_dir: Path, *, pdf: bool = True, reuse: bool = False) -> list[Path]:
    """Write ``index.html`` (and ``report.pdf``) for a run folder into `out_dir`; return the paths written.

    With `reuse`, a run whose record has the substance of an earlier one (a replayed run: nothing changed) gets
    a copy of that run's report, which names the earlier run's id.
    """
    run_dir = find_run(run)
    record = load_record(run_dir, verify=True)
    if reuse and (paths := reused(record, out_dir, pdf=pdf)) is not None:
        return paths
    from bench.report.html import render_html

    html = render_html(record, run_dir)
    out_dir = Path(out_dir)
    written = [out_dir / "index.html"]
    atomic_write_bytes(written[0], html.encode("utf-8"))
    if pdf:
        from bench.report.pdf import write_pdf

        data, _ = write_pdf(html, out_dir)
        written.append(out_dir / "report.pdf")
        atomic_write_bytes(written[1], data)
    _remember(record, out_dir, pdf)
    return written


def render_diff(rows: list[dict[str, Any]], a: dict[str, Any], b: dict[str, Any], path: Path) -> Path:
    from bench.report.html import render_diff_html

    atomic_write_bytes(Path(path), render_diff_html(rows, a, b).encode("utf-8"))
    return Path(path)


def render_compare(rows, model_a: str, model_b: str, a: dict[str, Any], b: dict[str, Any], path: Path) -> Path:
    from bench.report.html import render_compare_html

    atomic_write_bytes(Path(path), render_compare_html(rows, model_a, model_b, a, b).encode("utf-8"))
    return Path(path)


def render_meta(records: list[dict[str, Any]], path: Path, method: str = "pm") -> Path:
    from bench.report.html import render_meta_html

    atomic_write_bytes(Path(path), render_meta_html(records, method).encode("utf-8"))
    return Path(path)
