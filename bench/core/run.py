"""Carry out a plan: cache lookups, model loading (once per model), probes, verdicts, the run record."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from bench import models, stats
from bench.core import plan
from bench.core.errors import BenchError, ModelError, UsageError
from bench.core.spec import Spec
from bench.core.store import Cache, RunWriter, key_of
from bench.stats import Outcome, Verdict

PACKAGES = ("bench", "torch", "transformers", "pandas", "pandera", "scipy", "numpy", "accelerate", "gguf")


@dataclass
class Options:
    models: tuple[str, ...] = ("default",)
    profile: str | None = None
    device: str = "auto"
    seed: int = 0
    runs_dir: Path = Path("runs")
    allow_pickle: bool = False
    command: str = ""
    audit: str | None = None  # the model an audit is about
    executor: str = "local"  # "local" (this process) or "ray" (a Ray cluster)
    ray_address: str | None = None  # an existing Ray cluster; None starts a local one
    executor_options: tuple[tuple[str, Any], ...] = ()  # extra keyword options for the executor


class UI:
    """Callbacks through which a run reports progress; the CLI draws them, tests may ignore them."""

    def start(self, n_cells: int) -> None: ...
    def cell_start(self, cell: plan.Cell) -> None: ...
    def progress(self, fraction: float, message: str = "") -> None: ...
    def cell_done(self, cell: plan.Cell, verdict: Verdict, seconds: float, cached: bool) -> None: ...
    def status(self, done: int, running: int, queued: int) -> None: ...
    def note(self, message: str) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Result:
    run_dir: Path
    record: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but torch sees no CUDA device")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"unknown device '{device}' (use auto, cpu or cuda)")
    return device


def execute(specs: list[Spec], opts: Options, ui: UI | None = None) -> Result:
    from bench.core import executors, replay

    ui = ui or UI()
    replay_key = None
    if replay.enabled() and (fast := replay.cheap_device(opts.device)) is not None:
        replay_key = replay.key(specs, opts, opts.profile or plan.default_profile(fast), fast)
        entry = replay.load(replay_key) if replay_key else None
        if entry is not None:
            return _replayed(entry, opts, ui)
    device = resolve_device(opts.device)
    profile = opts.profile or plan.default_profile(device)
    cells = plan.build(specs, opts.models, profile, (opts.seed,))
    if not cells:
        raise UsageError("nothing to run: no spec lists a model for this choice of --models")
    refs: dict[str, ModelRef | ModelError] = {}
    if opts.models not in (("default",), ("paper",)):
        for name in opts.models:  # names typed on the command line must exist: exit 2 before any work
            refs[name] = models.resolve(name)
    executor = executors.make(opts.executor, address=opts.ray_address, **dict(opts.executor_options))
    dtype = "bfloat16" if device == "cuda" else "float32"
    writer = RunWriter.create(opts.runs_dir, {**_header(opts, device, dtype, profile),
                                              "executor": _executor_info(executor, opts)})
    by_key = {c.key: c for c in cells}
    results: dict[str, executors.CellResult] = {}

    def on_event(ev: executors.Event) -> None:  # results are matched to cells by key, never by position
        if ev.kind == "start" and ev.key in by_key:
            ui.cell_start(by_key[ev.key])
        elif ev.kind == "progress":
            ui.progress(ev.fraction, ev.message)
        elif ev.kind == "note":
            ui.note(ev.message)
        elif ev.kind == "status":
            getattr(ui, "status", lambda *a: None)(*ev.counts)
        elif ev.kind == "done" and ev.key in by_key and ev.key not in results:
            res = ev.result
            results[ev.key] = res
            writer.add(res.record, res.frame)
            ui.cell_done(by_key[ev.key], res.verdict, res.seconds, res.cached)

    ui.start(len(cells))
    try:
        executor.run(cells, executors.Job(refs, device, dtype, opts.allow_pickle), on_event)
    except KeyboardInterrupt:
        writer.finish("interrupted", [results[k].verdict.to_json() for k in _in_plan_order(writer, cells)])
        ui.stop()
        raise
    missing = [c for c in cells if c.key not in results]
    for c in missing:  # an executor that lost a cell without reporting it: the record stays complete
        verdict = stats.errored("the executor returned no result for this cell")
        on_event(executors.Event("done", key=c.key, result=executors.CellResult(
            c.key, _lost_record(c), None, verdict, 0.0, False)))
    order = _in_plan_order(writer, cells)
    final = stats.adjust([results[k].verdict for k in order])
    writer.finish("complete", [v.to_json() for v in final])
    if replay_key:
        replay.store(replay_key, writer.record)
    ui.stop()
    return Result(writer.dir, writer.record, final)


def _replayed(entry: dict[str, Any], opts: Options, ui: UI) -> Result:
    """A run with nothing changed: the stored cells and verdicts, frames copied from the cache (see replay)."""
    from bench.core.store import atomic_write_bytes

    header = {"command": opts.command or " ".join(sys.argv), "git_revision": _git_revision(),
              "packages": {p: _version(p) for p in PACKAGES}, **entry["header"], "seed": opts.seed,
              "models_choice": list(opts.models), "audit": opts.audit,
              "executor": {"name": "replay", "of_run": entry["run_id"]}}
    writer = RunWriter.create(opts.runs_dir, header)
    ui.start(len(entry["cells"]))
    verdicts = []
    for cell in entry["cells"]:
        cell = {**cell, "cache_hit": True, "timings": {"total_s": 0.0}}
        if cell.get("frame"):
            atomic_write_bytes(writer.dir / cell["frame"], entry["frame_bytes"][cell["frame"]])
        writer.record["cells"].append(cell)
        verdicts.append(Verdict.from_json(cell["verdict"]))
        ui.cell_done(_Shown(cell), verdicts[-1], 0.0, True)
    writer.finish("complete")
    ui.stop()
    return Result(writer.dir, writer.record, verdicts)


@dataclass(frozen=True)
class _ShownSpec:
    id: str


class _Shown:
    """What a UI reads of a cell (its spec id and model), for a cell that comes from a stored record."""

    def __init__(self, cell: dict[str, Any]):
        self.spec, self.model, self.seed = _ShownSpec(cell["spec"]["id"]), cell["model"], cell["seed"]
        self.key = f"{cell['spec']['id']}|{cell['model']}|{cell['seed']}"


def _in_plan_order(writer: RunWriter, cells: list[plan.Cell]) -> list[str]:
    """Put the record's cells in plan order (executors may finish them in any order); return their keys."""
    rank = {c.key: i for i, c in enumerate(cells)}
    key = lambda rec: f"{rec['spec']['id']}|{rec['model']}|{rec['seed']}"  # noqa: E731 - as plan.Cell.key
    writer.record["cells"].sort(key=lambda rec: rank.get(key(rec), len(rank)))
    return [key(rec) for rec in writer.record["cells"]]


def _lost_record(cell: plan.Cell) -> dict[str, Any]:
    return {"spec": cell.spec.describe(), "model": cell.model, "seed": cell.seed,
            "probe": {"name": cell.probe.name, "version": cell.probe.version}, "model_ref": None,
            "fingerprint": None, "timings": {}, "cache_hit": False}


def _executor_info(executor, opts: Options) -> dict[str, Any]:
    info = {"name": executor.name}
    describe = getattr(executor, "describe", None)
    if describe is not None:
        info.update(describe())
    return info


ModelRef = models.ModelRef


class _ModelCells:
    """Runs the cells of one model, loading it at most once and only on a cache miss."""

    def __init__(self, name, refs, device, dtype, opts: Options, cache: Cache, ui: UI):
        self.name, self.device, self.dtype, self.opts, self.cache, self.ui = name, device, dtype, opts, cache, ui
        self.loaded: models.LoadedModel | None = None
        self.ref: ModelRef | None = None
        self.fingerprint: str | None = None
        self.unavailable: str | None = None
        try:
            self.ref = refs.get(name) or models.resolve(name)
            self.fingerprint = self.ref.fingerprint()
        except ModelError as exc:
            self.unavailable = str(exc)

    def run(self, cell: plan.Cell) -> tuple[dict[str, Any], pd.DataFrame | None, Verdict]:
        self.ui.cell_start(cell)
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"spec": cell.spec.describe(), "model": cell.model, "seed": cell.seed,
                               "probe": {"name": cell.probe.name, "version": cell.probe.version},
                               "model_ref": self.ref.__dict__ if self.ref else None,
                               "fingerprint": self.fingerprint, "timings": {}}
        frame, verdict, cached = None, None, False
        if self.unavailable and cell.probe.uses_model:
            verdict = stats.skipped(self.unavailable)
        else:
            parts = plan.cache_parts(cell, self.fingerprint, self.device, self.dtype)
            key = key_of(parts)
            rec["cache_key"] = key
            from bench.core import schemas

            validate = lambda f: schemas.validate(f, cell.probe.schema, cell.probe.metrics)  # noqa: E731
            frame = self.cache.get(key, validate)
            cached = frame is not None
            if frame is None:
                frame, verdict = self._measure(cell, rec, validate)
                if frame is not None:
                    self.cache.put(key, frame, parts)
        rec["cache_hit"] = cached
        if frame is not None:
            rec["notes"] = list(frame.attrs.get("notes", []))
            t1 = time.perf_counter()
            try:
                verdict = stats.evaluate(frame, cell.spec.rule, cell.spec.rule_params())
            except Exception as exc:  # noqa: BLE001 - a rule bug must not sink the run
                verdict = stats.errored(f"verdict rule failed: {type(exc).__name__}: {exc}")
                rec["traceback"] = traceback.format_exc()
            rec["timings"]["verdict_s"] = round(time.perf_counter() - t1, 3)
        seconds = time.perf_counter() - t0
        rec["timings"]["total_s"] = round(seconds, 3)
        rec["verdict"] = verdict.to_json()
        self.ui.cell_done(cell, verdict, seconds, cached)
        return rec, frame, verdict

    def _measure(self, cell: plan.Cell, rec: dict, validate) -> tuple[pd.DataFrame | None, Verdict | None]:
        import torch

        from bench.core import schemas
        from bench.core.context import ProbeContext

        try:
            if cell.probe.uses_model and self.loaded is None:
                t = time.perf_counter()
                self.ui.progress(0.0, f"loading {self.name}")
                self.loaded = models.load(self.ref, self.device, allow_pickle=self.opts.allow_pickle,
                                          progress=self.ui.note)
                rec["timings"]["load_s"] = round(time.perf_counter() - t, 3)
            ctx = ProbeContext(model=self.loaded if cell.probe.uses_model else None, seed=cell.seed,
                               device=torch.device(self.device), cache=self.cache, progress=self.ui.progress)
            t = time.perf_counter()
            frame = cell.probe.fn(ctx, **cell.spec.probe_params())
            rec["timings"]["measure_s"] = round(time.perf_counter() - t, 3)
            return validate(frame), None
        except ModelError as exc:
            if self.loaded is None:
                self.unavailable = str(exc)
            return None, stats.errored(str(exc))
        except (schemas.FrameError, *_pandera_errors()) as exc:
            rec["failure_cases"] = schemas.failure_table(exc)
            return None, stats.errored(f"frame failed its schema: {str(exc).splitlines()[0][:200]}")
        except BenchError as exc:
            return None, stats.errored(str(exc))
        except Exception as exc:  # noqa: BLE001 - a crashing probe becomes an ERROR cell, not a crashed run
            rec["traceback"] = traceback.format_exc()
            return None, stats.errored(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    def release(self) -> None:
        self.loaded = None
        gc.collect()


def _pandera_errors():
    import pandera.errors as pe

    return (pe.SchemaError, pe.SchemaErrors)


def _header(opts: Options, device: str, dtype: str, profile: str) -> dict[str, Any]:
    import torch

    dev_name = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or platform.machine()
    return {
        "command": opts.command or " ".join(sys.argv),
        "git_revision": _git_revision(),
        "packages": {p: _version(p) for p in PACKAGES},
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": {"type": device, "name": dev_name, "threads": torch.get_num_threads()},
        "dtype": dtype,
        "seed": opts.seed,
        "profile": profile,
        "models_choice": list(opts.models),
        "audit": opts.audit,
    }


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _git_revision() -> str | None:
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip() if out.returncode == 0 else None
    return f"{rev}+dirty" if rev and dirty.stdout.strip() else rev


def exit_code(verdict_list: list[Verdict], fail_on: tuple[str, ...]) -> int:
    """0 completed; 1 a --fail-on outcome occurred; 3 every cell errored."""
    if verdict_list and all(v.outcome is Outcome.ERROR for v in verdict_list):
        return 3
    wanted = {f.upper() for f in fail_on}
    if any(v.outcome.value in wanted for v in verdict_list):
        return 1
    return 0
