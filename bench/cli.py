"""The ``bench`` command line.  Thin: parse, call, print.  Exit codes: see ``bench --help``."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click

from bench.core.errors import BenchError

EXIT_HELP = """Exit codes: 0 the run completed (whatever the verdicts), 1 an outcome named by --fail-on occurred,
2 bad input (spec, command line, model name), 3 the measurement crashed for every cell."""

OUTCOMES = ("supported", "refuted", "inconclusive", "error", "skipped")


def _guard(fn):
    """Turn BenchErrors into a one-line message and their exit code; no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted: finished cells are cached; run the same command again to resume", err=True)
            sys.exit(130)

    return wrapper


@click.group(help=f"Verify published claims about language-model internals.\n\n{EXIT_HELP}")
@click.version_option(package_name="bench")
def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # bench draws its own progress; keep library chatter out (set here, read when transformers is imported,
    # which a run replayed from the cache never does)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:  # pragma: no cover - imported by an embedding program
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def _run_options(fn):
    for opt in reversed([
        click.option("--profile", type=click.Choice(["smoke", "full"]), default=None,
                     help="smoke (quick, CPU) or full (paper scale). Default: smoke on CPU, full on GPU."),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True),
        click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports"), show_default=True),
        click.option("--no-pdf", is_flag=True, help="Write the HTML report only."),
        click.option("--no-report", is_flag=True, help="Write no report (the run record only)."),
        click.option("--fail-on", type=click.Choice(OUTCOMES), multiple=True,
                     help="Exit 1 if any cell has this outcome (repeatable)."),
        click.option("--allow-pickle", is_flag=True, help="Allow pickled (.bin) weights; default safetensors only."),
        click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="local: this process; ray: cells fanned out over a Ray cluster (pip install 'bench[ray]')."),
        click.option("--ray-address", default=None, metavar="ADDRESS",
                     help="Join this Ray cluster (e.g. ray://head:10001 or auto); default: start a local one."),
    ]):
        fn = opt(fn)
    return fn


@main.command(help=f"Run claims (spec files or folders; default specs/) on their models.\n\n{EXIT_HELP}")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--models", "models_", multiple=True, default=("default",), show_default=True,
              help="'default', 'paper', or model names (aliases, local paths, hub ids); repeatable.")
@_run_options
@_guard
def verify(paths, models_, **kw):
    names = tuple(m for item in models_ for m in item.split(",") if m)
    if len(names) > 1 and set(names) & {"default", "paper"}:
        raise click.UsageError("--models default/paper cannot be mixed with model names")
    _verify(paths or (Path("specs"),), names or ("default",), audit=None, **kw)


@main.command(help=f"Run every claim (default specs/) against MODEL.\n\n{EXIT_HELP}")
@click.argument("model")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_run_options
@_guard
def audit(model, paths, **kw):
    _verify(paths or (Path("specs"),), (model,), audit=model, **kw)


def _verify(paths, names, *, audit, profile, device, seed, runs_dir, report_dir, no_pdf, no_report, fail_on,
            allow_pickle, executor, ray_address):
    from bench.core import run, spec
    from bench.ui import RichUI, print_summary

    specs = spec.load_specs(paths)
    opts = run.Options(models=names, profile=profile, device=device, seed=seed, runs_dir=runs_dir,
                       allow_pickle=allow_pickle, command=" ".join(["bench", *sys.argv[1:]]), audit=audit,
                       executor=executor, ray_address=ray_address)
    result = run.execute(specs, opts, RichUI())
    print_summary(result.record, result.run_dir)
    if not no_report:
        _render(result.run_dir, report_dir, pdf=not no_pdf)
    sys.exit(run.exit_code(result.verdicts, fail_on))


def _render(run_dir: Path, report_dir: Path, pdf: bool) -> None:
    try:
        from bench.report import render
    except ImportError:  # reports are optional at this stage of the tool
        return
    paths = render(run_dir, report_dir / run_dir.name, pdf=pdf, reuse=True)
    for p in paths:
        click.echo(f"report: {p}")


@main.command(help="Re-render the report of a finished run (a run folder or id) without loading any model.")
@click.argument("run_", metavar="RUN")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output folder (default reports/<run-id>).")
@click.option("--pdf/--no-pdf", default=True, show_default=True)
@_guard
def report(run_, runs_dir, out, pdf):
    from bench.core.store import find_run, load_record
    from bench.ui import print_summary

    run_dir = find_run(run_, runs_dir)
    record = load_record(run_dir)
    print_summary(record, run_dir)
    try:
        from bench.report import render
    except ImportError:
        return
    for p in render(run_dir, out or Path("reports") / run_dir.name, pdf=pdf):
        click.echo(f"report: {p}")


@main.command(help="Check spec files (default specs/) without running anything. Exit 2 on the first problem.")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_guard
def validate(paths):
    from bench.core import spec

    specs = spec.load_specs(paths or (Path("specs"),))
    for s in specs:
        spec.check_spec(s)
    click.echo(f"{len(specs)} spec{'s' if len(specs) != 1 else ''} OK")


@main.command("list", help="List the claims in spec files (default specs/).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_guard
def list_(paths):
    from bench.core import spec
    from bench.ui import print_specs

    print_specs(spec.load_specs(paths or (Path("specs"),)))


@main.command(help="List the embedded models and their cache state; --prepare converts them now.")
@click.option("--prepare", is_flag=True, help="Convert every installed embedded model to its safetensors cache.")
@_guard
def models(prepare):
    from bench import models as m
    from bench.ui import print_models

    if prepare:
        for alias in m.ALIASES:
            state = m.cache_state(alias)
            if state == "not installed":
                click.echo(f"{alias}: not installed (pip install {m.ALIASES[alias].pip})", err=True)
                continue
            m.prepare(m.resolve(alias), lambda msg: click.echo(msg, err=True))
    print_models()


@main.command(help="Cells whose outcome or estimate changed between two runs.")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None, help="Also write an HTML table.")
@_guard
def diff(run_a, run_b, runs_dir, html_out):
    from bench.core.diff import diff_runs
    from bench.core.store import find_run, load_record
    from bench.ui import print_diff

    a, b = (load_record(find_run(r, runs_dir)) for r in (run_a, run_b))
    rows = diff_runs(a, b)
    print_diff(rows, a["run_id"], b["run_id"])
    if html_out:
        from bench.report import render_diff

        render_diff(rows, a, b, html_out)
        click.echo(f"diff: {html_out}")


if __name__ == "__main__":  # pragma: no cover
    main()
