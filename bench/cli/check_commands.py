"""The commands that read finished runs for CI and for synthesis: ``baseline``, ``check`` and ``meta``.

Registered on the ``bench`` group when :mod:`bench.cli` imports it; each loads run records with their hashes verified (a
record or frame edited after its run is refused with exit 2, the file named).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from bench.cli.base import _guard, _verbosity_options, main, verbosity

CHECK_EXIT = """Exit codes: 0 every baseline cell still holds, 1 a cell stopped matching the baseline (an outcome
flipped, an estimate moved, a spec, profile or seed changed, a cell is missing), 2 bad input or a run record,
frame or baseline frame edited after it was written, 4 an internal error."""


def _load(run: str, runs_dir: Path):
    from bench.ground.store import find_run, load_record

    run_dir = find_run(run, runs_dir)
    return load_record(run_dir, verify=True), run_dir


@main.command(help="Write a run's outcomes, estimates, intervals, spec digests and model fingerprints to a "
                   "baseline file for `bench check` (its frames are copied to a folder beside it).")
@click.argument("run_", metavar="RUN")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The baseline file (.toml).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--no-frames", is_flag=True, help="Copy no frames: checks then compare estimates with the "
                                                "baseline's intervals only, unpaired.")
@_verbosity_options
@_guard
def baseline(run_, output, runs_dir, no_frames):
    from bench.spine import baseline as bl

    record, run_dir = _load(run_, runs_dir)
    if record.get("status") != "complete":
        from bench.ground.errors import UsageError

        raise UsageError(f"run {record['run_id']} is {record.get('status')}: a baseline needs a complete run")
    n = bl.write(record, run_dir, output, frames=not no_frames)
    extra = "" if no_frames else f" and {bl.frames_dir(output)}/"
    click.echo(f"baseline: {output}{extra} ({n} cells from run {record['run_id']})")


@main.command(help=f"Check a run against a baseline written by `bench baseline`.\n\n{CHECK_EXIT}")
@click.argument("run_", metavar="RUN")
@click.option("--baseline", "baseline_path", type=click.Path(path_type=Path, dir_okay=False), required=True)
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Level of the paired test of an estimate's move (BH over the cells).")
@click.option("--margin", type=click.FloatRange(0), default=0.5, show_default=True,
              help="A significant move fails only when larger than this many half-widths of the baseline's "
                   "interval (0: any significant move fails).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the paired bootstrap.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per cell on stdout instead of the table.")
@_verbosity_options
@_guard
def check(run_, baseline_path, runs_dir, alpha, margin, seed, as_json):
    from bench.spine import baseline as bl

    base = bl.read(baseline_path)
    record, run_dir = _load(run_, runs_dir)
    rows = bl.check(baseline_path, base, record, run_dir, alpha=alpha, margin=margin, seed=seed)
    failed = [r for r in rows if r.fails]
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False))
    else:
        _print_check(rows, base, record, baseline_path, quiet=verbosity() < 0)
    sys.exit(1 if failed else 0)


def _print_check(rows, base, record, path, quiet: bool) -> None:
    from rich.table import Table

    from bench.spine import baseline as bl
    from bench.cli.ui import OUT

    failed = [r for r in rows if r.fails]
    shown = rows if verbosity() > 0 else [r for r in rows if r.status != "holds"]
    if shown and not quiet:
        t = Table(title=f"run {record['run_id']} against {path} (run {base.get('run_id')})")
        for col in ("claim", "model", "status", "baseline", "this run", "why"):
            t.add_column(col, no_wrap=col == "claim")
        for r in shown:
            style = "bold red" if r.fails else "yellow" if r.status != "holds" else ""
            t.add_row(r.claim, r.model, f"[{style}]{r.status}[/]" if style else r.status, r.baseline, r.run, r.why)
        OUT.print(t)
    changes = bl.library_changes(base, record)
    if changes and not quiet:
        OUT.print("packages changed since the baseline: " + ", ".join(changes))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: kv[0] != "holds"))
    verdict = f"FAILED: {len(failed)} cell{'s' if len(failed) != 1 else ''} stopped matching" if failed else "OK"
    OUT.print(f"{len(rows)} cells: {summary}   {verdict}")


@main.command(help="Pool each claim's per-model effects across runs: a random-effects estimate with its CI, τ², "
                   "I² and the prediction interval for a new model. Controls (+random-init) are listed beside "
                   "their models and never pooled.")
@click.argument("runs", nargs=-1, required=True)
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--method", type=click.Choice(["pm", "dl"]), default="pm", show_default=True,
              help="τ² estimator: pm (Paule–Mandel) or dl (DerSimonian–Laird).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per claim on stdout instead of the tables.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None,
              help="Also write an HTML page with a forest plot per claim.")
@_verbosity_options
@_guard
def meta(runs, runs_dir, method, as_json, html_out):
    from bench.spine.synthesis import synthesise

    records = [_load(r, runs_dir)[0] for r in runs]
    found = synthesise(records, method=method)
    if as_json:
        click.echo(json.dumps([s.to_json() for s in found], indent=1, ensure_ascii=False, default=str))
    else:
        _print_meta(found, quiet=verbosity() < 0)
    if html_out:
        from bench.report import render_meta

        render_meta(records, html_out, method=method)
        click.echo(f"meta: {html_out}", err=as_json)


def _print_meta(found, quiet: bool) -> None:
    from rich.table import Table

    from bench.cli.ui import OUT, fmt

    if not quiet:
        t = Table(title="claims across models (random effects)")
        for col in ("claim", "k", "pooled [95% CI]", "τ²", "I²", "prediction interval"):
            t.add_column(col, no_wrap=col == "claim", justify="left" if col == "claim" else "right")
        for s in found:
            p = s.pooled
            if p is None:
                t.add_row(s.claim, "—", "not pooled", "—", "—", "—")
                continue
            pi = f"[{fmt(p.pi_low)}, {fmt(p.pi_high)}]" if p.pi_low is not None else "— (k < 3)"
            t.add_row(s.claim, str(p.k), f"{fmt(p.estimate)} [{fmt(p.ci_low)}, {fmt(p.ci_high)}]", fmt(p.tau2),
                      f"{100 * p.i2:.0f}%", pi)
        OUT.print(t)
    for s in found:
        OUT.print(f"[bold]{s.claim}[/] ({s.metric or '—'} {s.threshold or ''}): {s.reading}")
        if quiet:
            continue
        for r in s.rows:
            ci = f" [{fmt(r.ci_low)}, {fmt(r.ci_high)}]" if r.ci_low is not None else ""
            tag = "pooled" if r.pooled else r.note or "not pooled"
            OUT.print(f"  [dim]{r.model:<32} {r.outcome:<12} {fmt(r.estimate)}{ci}  {tag}[/]")
