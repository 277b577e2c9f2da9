"""Commands that read finished runs and load no model: report, diff, compare."""

from __future__ import annotations

from pathlib import Path

import click

from bench.cli.base import _guard, _verbosity_options, main, verbosity


@main.command(help="Re-render the report of a finished run (a run folder or id) without loading any model.")
@click.argument("run_", metavar="RUN")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output folder (default reports/<run-id>).")
@click.option("--pdf/--no-pdf", default=True, show_default=True)
@_verbosity_options
@_guard
def report(run_, runs_dir, out, pdf):
    from bench.ground.store import find_run, load_record
    from bench.cli.ui import print_summary

    run_dir = find_run(run_, runs_dir)
    record = load_record(run_dir, verify=True)
    print_summary(record, run_dir, quiet=verbosity() < 0)
    try:
        from bench.report import render
    except ImportError:
        return
    for p in render(run_dir, out or Path("reports") / run_dir.name, pdf=pdf):
        click.echo(f"report: {p}")


@main.command(help="Cells whose outcome or estimate changed between two runs.")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None, help="Also write an HTML table.")
@click.option("--exact", is_flag=True, help="Also report cells whose verdict differs in any field (interval, "
                                            "p-values, reason) or whose measured frames are not equal.")
@_guard
def diff(run_a, run_b, runs_dir, html_out, exact):
    from bench.spine.diff import diff_runs
    from bench.ground.store import find_run, load_record
    from bench.cli.ui import print_diff

    dirs = tuple(find_run(r, runs_dir) for r in (run_a, run_b))
    a, b = (load_record(d) for d in dirs)
    rows = diff_runs(a, b, exact_dirs=dirs if exact else None)
    print_diff(rows, a["run_id"], b["run_id"])
    if html_out:
        from bench.report import render_diff

        render_diff(rows, a, b, html_out)
        click.echo(f"diff: {html_out}")


@main.command(help="Model A against model B on the claims both runs measured: a paired bootstrap of A − B "
                   "over the units the two frames share, with Benjamini–Hochberg over the claims.")
@click.argument("run_a")
@click.argument("run_b", required=False)
@click.option("--a", "model_a", default=None, help="The model of RUN_A to compare (needed when it has several).")
@click.option("--b", "model_b", default=None, help="The model of RUN_B (default: RUN_A) to compare.")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None, help="Also write an HTML page.")
@_guard
def compare(run_a, run_b, model_a, model_b, runs_dir, seed, html_out):
    from bench.spine.compare import compare_runs
    from bench.ground.store import find_run, load_record
    from bench.cli.ui import print_compare

    dir_a = find_run(run_a, runs_dir)
    dir_b = find_run(run_b, runs_dir) if run_b else dir_a
    a, b = load_record(dir_a, verify=True), load_record(dir_b, verify=True)
    ma, mb, rows = compare_runs(a, dir_a, b, dir_b, model_a=model_a, model_b=model_b, seed=seed)
    print_compare(rows, ma, mb)
    if html_out:
        from bench.report import render_compare

        render_compare(rows, ma, mb, a, b, html_out)
        click.echo(f"compare: {html_out}")
