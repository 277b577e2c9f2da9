"""`bench plan`: what a run would cost before it runs, from configs and tokenizers only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from bench.cli.base import EXIT_HELP, _guard, _verbosity_options, main

GIB = 1 << 30


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _duration(s: float | None) -> str:
    if s is None:
        return "? s"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


@main.command(help="Predict a run without running it: per cell the seconds, the peak host and device memory, "
                   "whether it fits, and the units measured beside the units the claim's test needs for 80% "
                   "power; totals per model and for the run. Reads configs and tokenizers, never weights.\n\n"
                   f"{EXIT_HELP}")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--models", "models_", multiple=True, default=("default",), show_default=True,
              help="'default', 'paper', or model names (aliases, local paths, hub ids); repeatable.")
@click.option("--profile", type=click.Choice(["smoke", "full"]), default=None,
              help="smoke or full. Default: smoke on CPU, full on GPU.")
@click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N|mps")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto",
              show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--control", type=click.Choice(["random-init"]), default=None)
@click.option("--revision", default=None, metavar="REV")
@click.option("--gpu-memory", type=float, default=None, metavar="GiB",
              help="Device memory to plan against (default: the GPU's).")
@click.option("--host-memory", type=float, default=None, metavar="GiB",
              help="Host memory to plan against (default: the machine's; BENCH_HOST_MEMORY sets it too).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True,
              help="Where earlier run records are: their intervals give the spread per unit for the power.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per cell, one per line, then the totals.")
@_verbosity_options
@_guard
def plan(paths, models_, profile, device, dtype, seed, control, revision, gpu_memory, host_memory, runs_dir,
         as_json):
    from bench.cli.run_commands import _resolve_first, _spec_paths
    from bench.ground import spec
    from bench.spine import costs, run

    names = tuple(m for item in models_ for m in item.split(",") if m) or ("default",)
    if len(names) > 1 and set(names) & {"default", "paper"}:
        raise click.UsageError("--models default/paper cannot be mixed with model names")
    for value, flag in ((gpu_memory, "--gpu-memory"), (host_memory, "--host-memory")):
        if value is not None and not value > 0:
            raise click.UsageError(f"{flag} must be a positive number of GiB")
    specs = spec.load_specs(_spec_paths(paths))
    opts = run.Options(models=names, profile=profile, device=device, dtype=dtype, seed=seed, control=control,
                       revision=revision, refs=_resolve_first(names, revision))
    rows = costs.for_run(specs, opts, host_limit=int(host_memory * GIB) if host_memory else None,
                         device_limit=int(gpu_memory * GIB) if gpu_memory else None, runs_dir=runs_dir)
    totals = costs.totals(rows)
    from bench.spine import calibrate

    device, timed = costs.planned_device(opts.device, gpu_memory)
    why = (calibrate.warning(calibrate.rates(device)) if timed else
           f"no {device} device on this machine: memory is planned against --gpu-memory, time is not")
    if why:
        click.echo(f"note: {why}", err=True)
    if as_json:
        for r in rows:
            click.echo(json.dumps(r.to_json()))
        click.echo(json.dumps({"totals": totals}))
        sys.exit(0)
    for r in [r for r in rows if r.notes and r.notes[0].startswith("no cost counted")]:
        click.echo(f"note: {r.claim} × {r.model}: {r.notes[0]}", err=True)
    for note in dict.fromkeys(n for r in rows for n in r.notes if n.startswith("token counts from")):
        click.echo(f"note: {note}", err=True)
    for r in rows:
        for n in [n for n in r.notes if n.startswith(costs.NOT_DECIDED)]:
            click.echo(f"note: {r.claim} × {r.model}: {n}", err=True)
    for r in rows:
        power = (f"{r.units}/{r.units_for_power}" if r.units_for_power is not None
                 else f"{r.units if r.units is not None else '–'}/?")
        click.echo(f"{r.claim:45.45s} {r.model:24.24s} {_duration(r.predicted_s):>9s}  host "
                   f"{_gib(r.peak_host_bytes):>10s}  device {_gib(r.peak_device_bytes):>10s}  "
                   f"{'fits' if r.fits else 'DOES NOT FIT'}  units {power} {r.unit}"
                   + (f"  (training decides: {_duration(r.predicted_range_s[0])} to "
                      f"{_duration(r.predicted_range_s[1])})" if r.predicted_range_s else ""))
    for name, t in totals.items():
        label = "run" if name == "all" else name
        click.echo(f"total {label}: {_duration(t['predicted_s'])} for {t['cells']} cells, peak host "
                   f"{_gib(t['peak_host_bytes'])}, device {_gib(t['peak_device_bytes'])}"
                   f"{'' if t['fits'] else ', some cells do not fit'}")
    sys.exit(0)
