"""Commands about the specs, the embedded models and the cache: validate, list, specs, models, cache."""

from __future__ import annotations

from pathlib import Path

import click

from bench.cli.base import _guard, _verbosity_options, main

from bench.cli.run_commands import _spec_paths


@main.command(help="Check spec files (default specs/) without running anything. Exit 2 on the first problem.")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_verbosity_options
@_guard
def validate(paths):
    from bench.ground import spec
    from bench.spine import checks

    specs = spec.load_specs(_spec_paths(paths))
    for s in specs:
        checks.check_spec(s)
    click.echo(f"{len(specs)} spec{'s' if len(specs) != 1 else ''} OK")


def _output_options(json_help: str, markdown_help: str):
    """--json, --markdown and -o FILE, for the commands that print a document (see :func:`_emit`)."""
    def wrap(fn):
        fn = click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
                          help="Write the --json/--markdown text to this file instead of stdout.")(fn)
        fn = click.option("--markdown", is_flag=True, help=markdown_help)(fn)
        return click.option("--json", "as_json", is_flag=True, help=json_help)(fn)
    return wrap


@main.command("list", help="List the claims in spec files (default specs/, else the installed specs).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_output_options("One JSON object per claim on stdout.", "The claim catalogue as Markdown (docs/CLAIMS.md).")
@_verbosity_options
@_guard
def list_(paths, as_json, markdown, output):
    from bench.ground import spec
    from bench.spine import checks
    from bench.cli.ui import print_specs
    from bench.report import catalogue

    specs = spec.load_specs(_spec_paths(paths))
    if not (as_json or markdown):
        print_specs(specs)
        return
    _emit(catalogue.markdown(specs) if markdown else catalogue.to_json(specs), output, f"{len(specs)} claims")


@main.command(help="The probes and rules a spec may name (all, or those given), with each parameter's type, "
                   "range and default.")
@click.argument("names", nargs=-1)
@_output_options("A JSON list, one object per probe or rule.", "As Markdown (docs/PARAMETERS.md).")
@_verbosity_options
@_guard
def describe(names, as_json, markdown, output):
    from bench.ground.errors import UsageError
    from bench.report import vocabulary

    try:
        items = vocabulary.entries(names)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    _emit((vocabulary.to_json if as_json else vocabulary.markdown if markdown else vocabulary.text)(items), output,
          f"{len(items)} probes and rules")


def _emit(text: str, output: Path | None, what: str) -> None:
    """`text` on stdout, or written whole to `output` (atomically) with a line on stderr saying so."""
    if output is None:
        click.echo(text, nl=False)
        return
    from bench.ground.store import atomic_write_bytes

    atomic_write_bytes(output, text.encode("utf-8"))
    click.echo(f"wrote {output} ({what})", err=True)


@main.command(help="Where the specs that commands use by default are (./specs, else the installed ones).")
@click.option("--path", "path_only", is_flag=True, help="Print the folder only.")
@_guard
def specs(path_only):
    from bench.ground.resources import default_spec_paths

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
    from bench.cli.ui import print_models

    if prepare:
        for alias in m.ALIASES:
            state = m.cache_state(alias)
            if state == "not installed":
                click.echo(f"{alias}: not installed (pip install {m.ALIASES[alias].pip})", err=True)
                continue
            m.prepare(m.resolve(alias), lambda msg: click.echo(msg, err=True))
    print_models()


@main.group("cache", invoke_without_command=True,
            help="The frame cache ($BENCH_CACHE): its size and entries; `prune` removes what no run record uses.")
@click.pass_context
@_guard
def cache_(ctx):
    if ctx.invoked_subcommand is not None:
        return
    from bench.spine import upkeep

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
    if s["saved_states"]:
        click.echo(f"saved states of unfinished training runs (the same command resumes them): {s['saved_states']}, "
                   f"{_size(s['saved_states_bytes'])}")
        for path in s["saved_state_paths"]:
            click.echo(f"  {_saved_state(path)}")


@cache_.command("prune", help="Delete cache entries that no run record under --runs-dir references "
                              "(sub-results included: they are recomputed when next needed).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@_guard
def cache_prune(runs_dir):
    from bench.spine import upkeep
    from bench.ground.errors import UsageError

    if not runs_dir.is_dir():
        raise UsageError(f"no runs dir '{runs_dir}': prune would remove every entry; give --runs-dir")
    swept = upkeep.sweep(runs_dir)
    n, freed = upkeep.prune(runs_dir)
    click.echo(f"removed {n} entr{'y' if n == 1 else 'ies'} ({_size(freed)}) and {swept} temporary files; "
               f"kept {len(upkeep.referenced_keys(runs_dir))} referenced by runs in {runs_dir}")
    states = upkeep.saved_states()
    if states:
        click.echo(f"kept {len(states)} saved state{'s' if len(states) != 1 else ''} of unfinished training runs "
                   f"({_size(sum(p.stat().st_size for p in states))}, which the same command resumes); to drop "
                   f"them, delete {upkeep.cache_root() / 'partial'} and the *.partial folders under "
                   f"{upkeep.cache_root() / 'trained'}")


def _saved_state(path: Path) -> str:
    """One saved training state as `bench cache` lists it: how far its run got, what it is, when it was saved."""
    import time

    from bench.ground.resume import describe

    d = describe(path)
    where = f"{_size(path.stat().st_size)}  {path}"
    if "error" in d:
        return f"unreadable ({d['error']}; the next run sets it aside)  {where}"
    step = f"step {d['step']}" + (f" of {d['total']}" if d["total"] else "")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(d["saved_at"])) if d["saved_at"] else None
    return "  ·  ".join(x for x in (step, d["label"], f"saved {when}" if when else None, where) if x)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
