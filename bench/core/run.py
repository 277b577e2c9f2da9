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
from bench.core import plan, schemas
from bench.core.context import ProbeContext
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


class UI:
    """Callbacks through which a run reports progress; the CLI draws them, tests may ignore them."""

    def start(self, n_cells: int) -> None: ...
    def cell_start(self, cell: plan.Cell) -> None: ...
    def progress(self, fraction: float, message: str = "") -> None: ...
    def cell_done(self, cell: plan.Cell, verdict: Verdict, seconds: float, cached: bool) -> None: ...
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
    ui = ui or UI()
    device = resolve_device(opts.device)
    profile = opts.profile or plan.default_profile(device)
    cells = plan.build(specs, opts.models, profile, (opts.seed,))
    if not cells:
        raise UsageError("nothing to run: no spec lists a model for this choice of --models")
    refs: dict[str, ModelRef | ModelError] = {}
    if opts.models not in (("default",), ("paper",)):
        for name in opts.models:  # names typed on the command line must exist: exit 2 before any work
            refs[name] = models.resolve(name)
    dtype = "bfloat16" if device == "cuda" else "float32"
    writer = RunWriter.create(opts.runs_dir, _header(opts, device, dtype, profile))
    cache = Cache(warn=ui.note)
    raw: list[Verdict] = []
    ui.start(len(cells))
    try:
        for name, group in _by_model(cells):
            runner = _ModelCells(name, refs, device, dtype, opts, cache, ui)
            for cell in group:
                cell_rec, frame, verdict = runner.run(cell)
                raw.append(verdict)
                writer.add(cell_rec, frame)
            runner.release()
    except KeyboardInterrupt:
        writer.finish("interrupted", [v.to_json() for v in raw])
        ui.stop()
        raise
    ordered = [c for _, group in _by_model(cells) for c in group]  # the order in which `raw` was filled
    final, families = adjust_by_family(ordered, raw, opts.models)
    writer.record["bh_families"] = families
    writer.finish("complete", [v.to_json() for v in final])
    ui.stop()
    return Result(writer.dir, writer.record, final)


def adjust_by_family(cells: list[plan.Cell], raw: list[Verdict],
                     models_choice: tuple[str, ...]) -> tuple[list[Verdict], list[dict[str, Any]]]:
    """BH within each fixed family: the claims of one spec set (the specs of one family id in the spec's folder,
    whether or not this run names them) × one model.  Members that did not run count as p = 1 (see
    :func:`bench.stats.adjust`).  Returns the adjusted verdicts in cell order and the families for the record."""
    from bench.core.spec import load_specs

    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault((str(Path(c.spec.path).parent), c.spec.family, c.model), []).append(i)
    final: list[Verdict | None] = [None] * len(cells)
    families = []
    declared_cache: dict[str, list[Spec]] = {}
    for (folder, family, model), idx in groups.items():
        if folder not in declared_cache:
            try:
                declared_cache[folder] = load_specs([folder])
            except BenchError:
                declared_cache[folder] = []
        ran = {cells[i].spec.id for i in idx}
        members = [s for s in declared_cache[folder] if s.family == family]
        missing = [s for s in members if s.id not in ran and model in plan.models_for(s, models_choice)]
        unseen = sum(len(s.verdict.get("of", ())) if s.rule == "all" else 1 for s in missing)
        for i, v in zip(idx, stats.adjust([raw[i] for i in idx], unseen=unseen)):
            final[i] = v
        families.append({"family": family, "folder": folder, "model": model,
                         "members": sorted({s.id for s in members} | ran), "ran": sorted(ran),
                         "not_run": sorted(s.id for s in missing), "unseen_p_values": unseen})
    return [v for v in final if v is not None], families  # every index belongs to one group


def _by_model(cells: list[plan.Cell]) -> list[tuple[str, list[plan.Cell]]]:
    groups: dict[str, list[plan.Cell]] = {}
    for c in cells:
        groups.setdefault(c.model, []).append(c)
    return list(groups.items())


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
