"""The ``bench`` command line.  Thin: parse, call, print.  Exit codes: see ``bench --help``."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path

import click

from bench import __version__
from bench.core.errors import BenchError

EXIT_HELP = """Exit codes: 0 the run completed (whatever the verdicts), 1 an outcome named by --fail-on occurred,
2 bad input (spec, command line, model name), 3 the measurement crashed for every cell, 4 an internal error
(a bug in bench: please report it; -v shows the traceback)."""
EXIT_INTERNAL = 4
VERBOSITY = "bench.verbosity"  # key in click's per-invocation ctx.meta: -1 quiet, 0 normal, 1 verbose

OUTCOMES = ("supported", "refuted", "inconclusive", "error", "skipped")


def verbosity() -> int:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(VERBOSITY, 0) if ctx else 0


def _guard(fn):
    """Turn BenchErrors into a one-line message and their exit code; any other exception is a bug: exit 4."""

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
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: one line, its own exit code, the traceback on -v
            if verbosity() > 0:
                traceback.print_exc()
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            click.echo(f"internal error: {type(exc).__name__}{': ' + first if first else ''} "
                       f"(a bug in bench; {'see the traceback above' if verbosity() > 0 else 'rerun with -v for the traceback'})",
                       err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


def _set_verbosity(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        ctx.meta[VERBOSITY] = -1 if param.name == "quiet" else 1


def _verbosity_options(fn):
    """-q / -v, accepted before or after the command name."""
    fn = click.option("-v", "--verbose", count=True, expose_value=False, callback=_set_verbosity, is_eager=True,
                      help="More output: library warnings, tracebacks of internal errors.")(fn)
    return click.option("-q", "--quiet", count=True, expose_value=False, callback=_set_verbosity, is_eager=True,
                        help="Less output: no progress, no tables; errors and the final lines only.")(fn)


@click.group(help=f"Verify published claims about language-model internals.\n\n{EXIT_HELP}")
@click.version_option(version=__version__, prog_name="bench")
@_verbosity_options
def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet_libraries(verbosity() <= 0)


def _quiet_libraries(quiet: bool) -> None:
    """bench draws its own progress; keep the libraries' chatter and progress bars out unless -v.  Set through the
    environment, read when transformers is first imported (a run replayed from the cache never imports it)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if quiet:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import warnings  # deprecation notices that libraries raise about each other's APIs are not the user's

        warnings.filterwarnings("ignore", module=r"(transformers|peft|trl|accelerate|torch|huggingface_hub)(\.|$)")
    if "transformers" in sys.modules:  # pragma: no cover - imported by an embedding program
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if quiet:
            hf_logging.set_verbosity_error()


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
        click.option("--control", type=click.Choice(["random-init"]), default=None,
                     help="Also run every claim on a negative control of each model: the same config and "
                          "tokenizer with seeded random weights (NAME+random-init)."),
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
    from bench.core.resources import default_spec_paths

    return tuple(paths) or default_spec_paths()


def _verify(paths, names, *, audit, profile, device, dtype, revision, as_json, seed, runs_dir, report_dir, no_pdf,
            no_report, fail_on, allow_pickle, control, executor, ray_address):
    refs = _resolve_first(names, revision)
    from bench.core import results, run, spec
    from bench.core.ui import RichUI, print_summary

    specs = spec.load_specs(paths)
    opts = run.Options(models=names, profile=profile, device=device, seed=seed, runs_dir=runs_dir,
                       allow_pickle=allow_pickle, command=" ".join(["bench", *sys.argv[1:]]), audit=audit,
                       dtype=dtype, revision=revision, refs=refs, control=control, executor=executor,
                       ray_address=ray_address)
    result = run.execute(specs, opts, RichUI(quiet=verbosity() < 0 or as_json))
    if as_json:
        click.echo(results.to_json(results.rows(result.record)), nl=False)
    else:
        print_summary(result.record, result.run_dir, quiet=verbosity() < 0)
    if not no_report:
        _render(result.run_dir, report_dir, pdf=not no_pdf, err=as_json)
    sys.exit(run.exit_code(result.verdicts, fail_on))


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


@main.command(help="Re-render the report of a finished run (a run folder or id) without loading any model.")
@click.argument("run_", metavar="RUN")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output folder (default reports/<run-id>).")
@click.option("--pdf/--no-pdf", default=True, show_default=True)
@_verbosity_options
@_guard
def report(run_, runs_dir, out, pdf):
    from bench.core.store import find_run, load_record
    from bench.core.ui import print_summary

    run_dir = find_run(run_, runs_dir)
    record = load_record(run_dir, verify=True)
    print_summary(record, run_dir, quiet=verbosity() < 0)
    try:
        from bench.report import render
    except ImportError:
        return
    for p in render(run_dir, out or Path("reports") / run_dir.name, pdf=pdf):
        click.echo(f"report: {p}")


@main.command(help="Check spec files (default specs/) without running anything. Exit 2 on the first problem.")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_verbosity_options
@_guard
def validate(paths):
    from bench.core import spec

    specs = spec.load_specs(_spec_paths(paths))
    for s in specs:
        spec.check_spec(s)
    click.echo(f"{len(specs)} spec{'s' if len(specs) != 1 else ''} OK")


@main.command("list", help="List the claims in spec files (default specs/, else the installed specs).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per claim on stdout.")
@click.option("--markdown", is_flag=True, help="The claim catalogue as Markdown (what docs/CLAIMS.md holds).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the --json/--markdown text to this file instead of stdout.")
@_verbosity_options
@_guard
def list_(paths, as_json, markdown, output):
    from bench.core import spec
    from bench.core.ui import print_specs
    from bench.report import catalogue

    specs = spec.load_specs(_spec_paths(paths))
    if not (as_json or markdown):
        print_specs(specs)
        return
    text = catalogue.markdown(specs) if markdown else catalogue.to_json(specs)
    if output is None:
        click.echo(text, nl=False)
        return
    from bench.core.store import atomic_write_bytes

    atomic_write_bytes(output, text.encode("utf-8"))
    click.echo(f"wrote {output} ({len(specs)} claims)", err=True)


@main.command(help="Where the specs that commands use by default are (./specs, else the installed ones).")
@click.option("--path", "path_only", is_flag=True, help="Print the folder only.")
@_guard
def specs(path_only):
    from bench.core.resources import default_spec_paths

    (where,) = default_spec_paths()
    if path_only:
        click.echo(str(where.resolve()))
        return
    kind = "working folder" if where == Path("specs") else "installed with bench"
    n = sum(1 for _ in where.rglob("*.toml"))
    click.echo(f"{where.resolve()}  ({kind}; {n} spec files)")


@main.command(help="List the embedded models and their cache state; --prepare converts them now.")
@click.option("--prepare", is_flag=True, help="Convert every installed embedded model to its safetensors cache.")
@_guard
def models(prepare):
    from bench import models as m
    from bench.core.ui import print_models

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
@click.option("--exact", is_flag=True, help="Also report cells whose verdict differs in any field (interval, "
                                            "p-values, reason) or whose measured frames are not equal.")
@_guard
def diff(run_a, run_b, runs_dir, html_out, exact):
    from bench.core.diff import diff_runs
    from bench.core.store import find_run, load_record
    from bench.core.ui import print_diff

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
    from bench.core.compare import compare_runs
    from bench.core.store import find_run, load_record
    from bench.core.ui import print_compare

    dir_a = find_run(run_a, runs_dir)
    dir_b = find_run(run_b, runs_dir) if run_b else dir_a
    a, b = load_record(dir_a, verify=True), load_record(dir_b, verify=True)
    ma, mb, rows = compare_runs(a, dir_a, b, dir_b, model_a=model_a, model_b=model_b, seed=seed)
    print_compare(rows, ma, mb)
    if html_out:
        from bench.report import render_compare

        render_compare(rows, ma, mb, a, b, html_out)
        click.echo(f"compare: {html_out}")


@main.group("cache", invoke_without_command=True,
            help="The frame cache ($BENCH_CACHE): its size and entries; `prune` removes what no run record uses.")
@click.pass_context
@_guard
def cache_(ctx):
    if ctx.invoked_subcommand is not None:
        return
    from bench.core import upkeep

    s = upkeep.summary()
    click.echo(f"cache: {s['root']}")
    click.echo(f"{s['frames']} cell frames and {s['memos']} sub-results: {_size(s['entries_bytes'])}")
    click.echo(f"converted models: {_size(s['models_bytes'])}   total: {_size(s['total_bytes'])}")
    by_probe: dict[str, int] = {}
    for e in upkeep.entries():
        if e.kind == "frame":
            by_probe[e.probe or "?"] = by_probe.get(e.probe or "?", 0) + 1
    for probe_name, n in sorted(by_probe.items()):
        click.echo(f"  {probe_name}: {n}")


@cache_.command("prune", help="Delete cache entries that no run record under --runs-dir references "
                              "(sub-results included: they are recomputed when next needed).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@_guard
def cache_prune(runs_dir):
    from bench.core import upkeep
    from bench.core.errors import UsageError

    if not runs_dir.is_dir():
        raise UsageError(f"no runs dir '{runs_dir}': prune would remove every entry; give --runs-dir")
    swept = upkeep.sweep(runs_dir)
    n, freed = upkeep.prune(runs_dir)
    click.echo(f"removed {n} entr{'y' if n == 1 else 'ies'} ({_size(freed)}) and {swept} temporary files; "
               f"kept {len(upkeep.referenced_keys(runs_dir))} referenced by runs in {runs_dir}")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _add_run_readers() -> None:
    from bench import cli_checks  # noqa: F401 - adds `baseline`, `check` and `meta` to `main`


_add_run_readers()


if __name__ == "__main__":  # pragma: no cover
    main()
