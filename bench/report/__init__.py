"""Static, self-contained reports (HTML and PDF) rendered from run records alone; no model is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.store import atomic_write_bytes, find_run, load_record


def render(run: str | Path, out_dir: Path, *, pdf: bool = True) -> list[Path]:
    """Write ``index.html`` (and ``report.pdf``) for a run folder into `out_dir`; return the paths written."""
    from bench.report.html import render_html

    run_dir = find_run(run)
    record = load_record(run_dir)
    html = render_html(record, run_dir)
    out_dir = Path(out_dir)
    written = [out_dir / "index.html"]
    atomic_write_bytes(written[0], html.encode("utf-8"))
    if pdf:
        from bench.report.pdf import write_pdf

        data, _ = write_pdf(html, out_dir)
        written.append(out_dir / "report.pdf")
        atomic_write_bytes(written[1], data)
    return written


def render_diff(rows: list[dict[str, Any]], a: dict[str, Any], b: dict[str, Any], path: Path) -> Path:
    from bench.report.html import render_diff_html

    atomic_write_bytes(Path(path), render_diff_html(rows, a, b).encode("utf-8"))
    return Path(path)


def render_compare(rows, model_a: str, model_b: str, a: dict[str, Any], b: dict[str, Any], path: Path) -> Path:
    from bench.report.html import render_compare_html

    atomic_write_bytes(Path(path), render_compare_html(rows, model_a, model_b, a, b).encode("utf-8"))
    return Path(path)
