"""Commands that run claims: verify, audit, rerun."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bench.cli.base import EXIT_HELP, OUTCOMES, _guard, _verbosity_options, main, verbosity


def _run_options(fn):
    for opt in reversed([
        click.option("--profile", type=click.Choice(["smoke", "full"]), default=None,
                     help="smoke (quick, CPU) or full (paper scale). Default: smoke on CPU, full on GPU."),
        click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N|mps",
                     help="Where to run; auto picks CUDA, then MPS, then the CPU."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto",
                     show_default=True, help="Weights' dtype; auto is float32 on the CPU, bfloat16 on a GPU."),
        click.option("--revision", default=None, metavar="REV",
                     help="Hub revision (branch, tag or commit) for hub ids given without NAME@REV."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print the flat results (a JSON list, one object per cell) on stdout instead of the table."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True),
        click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports"), show_default=True),
        click.option("--no-pdf", is_flag=True, help="Write the HTML report only."),
        click.option("--no-report", is_flag=True, help="Write no report (the run record only)."),
        click.option("--fail-on", type=click.Choice(OUTCOMES), multiple=True,
                     help="Exit 1 if any cell has this outcome (repeatable)."),
        click.option("--allow-pickle", is_flag=True, help="Allow pickled (.bin) weights; default safetensors only."),
        click.option("--offload-folder", type=click.Path(path_type=Path), default=None, metavar="DIR",
                     help="Where accelerate offloads the weights that the device and host memory cannot hold "
                          "(a model larger than the machine's memory); one subfolder per model."),
        click.option("--control", type=click.Choice(["random-init"]), default=None,
                     help="Also run every claim on a negative control of each model: the same config and "
                          "tokenizer with seeded random weights (NAME+random-init)."),
        click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="local: this process; ray: cells fanned out over a Ray cluster (pip install 'bench[ray]')."),
        click.option("--jobs", default="auto", show_default=True, metavar="N|auto", callback=_jobs,
                     help="Worker processes of the local executor. auto: on the CPU one per thread torch may use "
                          "(OMP_NUM_THREADS lowers it), each with one thread, fewer when memory or the work is "
                          "short; one on a GPU. 1: everything in this process."),
        click.option("--ray-address", default=None, metavar="ADDRESS",
                     help="Join this Ray cluster (e.g. ray://head:10001 or auto); default: start a local one."),
    ]):
        fn = opt(fn)
    return fn


def _jobs(ctx, param, value):
    if value is None or value == "auto":
        return "auto"
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise click.BadParameter(f"'{value}' is neither 'auto' nor a whole number of at least 1")
    return n


@main.command(help=f"Run claims (spec files or folders; default specs/) on their models.\n\n{EXIT_HELP}")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--models", "models_", multiple=True, default=("default",), show_default=True,
              help="'default', 'paper', or model names (aliases, local paths, hub ids); repeatable.")
@_run_options
@_verbosity_options
@_guard
def verify(paths, models_, **kw):
    names = tuple(m for item in models_ for m in item.split(",") if m)
    if len(names) > 1 and set(names) & {"default", "paper"}:
        raise click.UsageError("--models default/paper cannot be mixed with model names")
    _verify(_spec_paths(paths), names or ("default",), audit=None, **kw)


@main.command(help=f"Run every claim (default specs/) against MODEL.\n\n{EXIT_HELP}")
@click.argument("model")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_run_options
@_verbosity_options
@_guard
def audit(model, paths, **kw):
    _verify(_spec_paths(paths), (model,), audit=model, **kw)


def _spec_paths(paths) -> tuple[Path, ...]:
    """The paths given, else ./specs when there is one, else the specs installed with bench."""
    from bench.ground.resources import default_spec_paths

    return tuple(paths) or default_spec_paths()


# Options of `verify` and `audit` that only shape what the command prints or writes after the run; every other
# option goes into run.Options unchanged (and from there into the run's settings, see run.settings).
OUTPUT_OPTIONS = ("as_json", "report_dir", "no_pdf", "no_report", "fail_on")


def _verify(paths, names, *, audit, as_json, report_dir, no_pdf, no_report, fail_on, **run_options):
    refs = _resolve_first(names, run_options.get("revision"))
    from bench.spine import results, run
    from bench.ground import spec
    from bench.cli.ui import RichUI, print_summary

    specs = spec.load_specs(paths)
    opts = run.Options(models=names, audit=audit, refs=refs, command=" ".join(["bench", *sys.argv[1:]]),
                       **run_options)
    opts.plan = tuple(_check_plan(specs, opts))
    result = run.execute(specs, opts, RichUI(quiet=verbosity() < 0 or as_json))
    if as_json:
        click.echo(results.to_json(results.rows(result.record)), nl=False)
    else:
        print_summary(result.record, result.run_dir, quiet=verbosity() < 0)
    if not no_report:
        _render(result.run_dir, report_dir, pdf=not no_pdf, err=as_json)
    sys.exit(run.exit_code(result.verdicts, fail_on))


def _said_undecided(rows, opts) -> None:
    """Before a run of an hour or more: name each cell whose latest run at this profile could not decide it."""
    from bench.spine import costs, run
    from bench.spine import plan as planning

    profile = opts.profile or planning.default_profile(run.resolve_device(opts.device).partition(":")[0])
    blocked = costs.undecided(costs.recorded_cells(opts.runs_dir))
    for r in rows:
        why = blocked.get((r.claim, r.model, profile))
        if why:
            click.echo(f"note: {r.claim} × {r.model}: {costs.NOT_DECIDED}: {why}", err=True)


def _check_plan(specs, opts) -> list:
    """Before any work: refuse (exit 2) a cell predicted not to fit in memory, and say the predicted total of a
    run predicted to take longer than three minutes (``bench plan`` shows every cell).  Returns the plan's rows
    of the cells the run will measure ([] when there is no plan), which size and order the local workers."""
    from bench.ground.errors import UsageError
    from bench.spine import costs, replay, run

    try:
        fast = replay.cheap_device(opts.device) if replay.enabled() else None
        k = replay.key(specs, run.settings(opts, fast)) if fast is not None else None
        if k and replay.load(k) is not None:
            return []  # the run will be read back whole: nothing to plan
        rows, total = costs.before_run(specs, opts)
    except Exception as exc:  # noqa: BLE001 - a plan that cannot be made never stops a run; the run says why
        if verbosity() > 0:
            click.echo(f"note: no plan for this run ({type(exc).__name__}: {exc})", err=True)
        return []
    for r in rows:
        if not r.fits:
            raise UsageError(f"{r.claim} × {r.model} is predicted not to fit in memory: peak host "
                             f"{r.peak_host_bytes / 2**30:.2f} GiB, device {r.peak_device_bytes / 2**30:.2f} GiB "
                             f"(bench plan shows every cell and the memory it plans against)")
    if total is not None and total > costs.ANNOUNCE_S and verbosity() >= 0:
        shared = "" if opts.jobs == 1 else "; worker processes share it out"
        hours = total >= 2 * 3600

        def size(s: float) -> str:
            return f"{s / 3600:.1f} h" if hours else f"{s / 60:.1f} min"

        spans = [r.predicted_range_s or [r.predicted_s or 0.0] * 2 for r in rows]
        span = (f", {size(sum(a for a, _ in spans))} to {size(sum(b for _, b in spans))} as training decides"
                if any(r.predicted_range_s for r in rows) else "")
        click.echo(f"plan: about {size(total)} of work predicted for {len(rows)} cells at one process's rates"
                   f"{span}{shared} (bench plan for each cell)", err=True)
        if total >= 3600:
            click.echo("note: stopped or killed, the same command resumes this run: finished cells from the cache, "
                       "long training from its last saved state (every BENCH_SAVE_EVERY s, default 600)", err=True)
            _said_undecided(rows, opts)
    if rows and verbosity() >= 0 and run.resolve_device(opts.device) == "cpu":
        import torch

        from bench.spine import calibrate

        why = calibrate.oversubscribed(torch.get_num_threads())
        if why:
            click.echo(f"note: {why}", err=True)
    return rows


def _resolve_first(names, revision) -> dict:
    """Model names typed on the command line, resolved before the heavy imports: a typo fails in a second."""
    if names in (("default",), ("paper",)):
        return {}
    from bench import models

    return {name: models.resolve(name, revision) for name in names}


def _render(run_dir: Path, report_dir: Path, pdf: bool, err: bool = False) -> None:
    try:
        from bench.report import render
    except ImportError:  # reports are optional at this stage of the tool
        return
    paths = render(run_dir, report_dir / run_dir.name, pdf=pdf, reuse=True)
    for p in paths:
        click.echo(f"report: {p}", err=err)


@main.command(help="Execute again exactly what a run record says (its specs, models and settings, each checked "
                   "against the record), cold, and compare both runs as diff --exact does. Exit 0 when every cell "
                   "and frame agrees, 1 when one differs, 2 when a spec or model no longer matches the record.")
@click.argument("run_", metavar="RUN")
@click.option("--specs", "specs_root", type=click.Path(path_type=Path), default=None,
              help="The specs folder the run used (default: ./specs, else the specs installed with bench).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports"), show_default=True)
@click.option("--no-pdf", is_flag=True, help="Write the HTML report only.")
@click.option("--no-report", is_flag=True, help="Write no report (the run record only).")
@_verbosity_options
@_guard
def rerun(run_, specs_root, runs_dir, report_dir, no_pdf, no_report):
    from bench.spine import rerun as again
    from bench.spine import run
    from bench.spine.diff import diff_runs
    from bench.ground.store import find_run, load_record
    from bench.cli.ui import RichUI, print_diff, print_summary

    old_dir = find_run(run_, runs_dir)
    old = load_record(old_dir, verify=True)  # a record or frame edited after its run is refused
    specs, s = again.plan(old, specs_root or _spec_paths(())[0])
    again.check_models(old, s.get("revision"))
    for line in again.package_drift(old, run.package_versions()):
        click.echo(f"note: package version differs from the record: {line}", err=True)
    names = tuple(s["models"])  # the one list among the settings; every other setting is a scalar
    opts = run.Options(**{k: v for k, v in s.items() if k != "models"}, models=names, runs_dir=runs_dir, refs=_resolve_first(names, s.get("revision")),
                       command=" ".join(["bench", *sys.argv[1:]]), jobs=again.jobs_of(old))
    with again.cold_cache():
        result = run.execute(specs, opts, RichUI(quiet=verbosity() < 0))
    print_summary(result.record, result.run_dir, quiet=verbosity() < 0)
    if not no_report:
        _render(result.run_dir, report_dir, pdf=not no_pdf)
    rows = diff_runs(old, result.record, exact_dirs=(old_dir, result.run_dir))
    print_diff(rows, old["run_id"], result.record["run_id"])
    sys.exit(1 if rows else 0)
