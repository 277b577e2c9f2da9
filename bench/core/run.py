"""Carry out a plan: cache lookups, model loading (once per model), probes, verdicts, the run record."""

from __future__ import annotations

import contextlib
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
from bench.core import plan, results, schemas, upkeep
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
    control: str | None = None  # "random-init": every model also runs as its seeded random-weight control
    dtype: str = "auto"  # "auto" = float32 on the CPU, bfloat16 on an accelerator
    revision: str | None = None  # hub revision for hub ids given without "@revision"
    refs: dict[str, Any] = field(default_factory=dict)  # names already resolved by the caller (ModelRef each)


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
    """"auto", "cpu", "cuda", "cuda:N" or "mps" → a device string torch accepts, checked against the machine."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps and mps.is_available())
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if device == "cpu":
        return device
    if device == "mps":
        if not has_mps:
            raise UsageError("--device mps was asked for, but torch sees no MPS device")
        return device
    kind, _, index = device.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise UsageError(f"unknown device '{device}' (use auto, cpu, cuda, cuda:N or mps)")
    if not torch.cuda.is_available():
        raise UsageError(f"--device {device} was asked for, but torch sees no CUDA device")
    if index and int(index) >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                         f"numbered from 0")
    return device


def _device_type(device: str) -> str:
    return device.partition(":")[0]


def display_names(refs: dict[str, Any]) -> dict[str, str]:
    """Short names (alias, repo id, file stem) per given name; the given name where two short names collide."""
    short = {name: (ref.display if isinstance(ref, models.ModelRef) else name) for name, ref in refs.items()}
    counts: dict[str, int] = {}
    for d in short.values():
        counts[d] = counts.get(d, 0) + 1
    return {name: d if counts[d] == 1 else name for name, d in short.items()}


def execute(specs: list[Spec], opts: Options, ui: UI | None = None) -> Result:
    ui = ui or UI()
    device = resolve_device(opts.device)
    profile = opts.profile or plan.default_profile(_device_type(device))
    refs: dict[str, ModelRef | ModelError] = {}
    if opts.models not in (("default",), ("paper",)):
        for name in opts.models:  # names typed on the command line must exist: exit 2 before any work
            refs[name] = opts.refs.get(name) or models.resolve(name, opts.revision)
    cells = plan.build(specs, opts.models, profile, (opts.seed,), opts.control)
    if not cells:
        raise UsageError("nothing to run: no spec lists a model for this choice of --models")
    if not refs:
        refs = _resolve_quietly({c.model for c in cells}, opts.revision)
    shown = display_names(refs)
    dtype = str(models.torch_dtype(opts.dtype, _device_type(device))).removeprefix("torch.")
    writer = RunWriter.create(opts.runs_dir, _header(opts, device, dtype, profile))
    cache = Cache(warn=ui.note)
    alive = _tidy_up(writer, cache, opts.runs_dir, ui)
    raw: list[Verdict] = []
    ui.start(len(cells))
    try:
        for name, group in _by_model(cells):
            runner = _ModelCells(name, refs, device, dtype, opts, cache, ui, shown.get(name, name))
            for cell in group:
                cell_rec, frame, verdict = runner.run(cell)
                raw.append(verdict)
                writer.add(cell_rec, frame)
            runner.release()
    except BaseException:  # Ctrl-C, or an error that ends the run: the record says it did not complete
        writer.finish("interrupted", [v.to_json() for v in raw])
        results.write(writer.dir, writer.record)
        ui.stop()
        alive.close()
        raise
    final = stats.adjust(raw)
    writer.finish("complete", [v.to_json() for v in final])
    results.write(writer.dir, writer.record)
    alive.close()
    ui.stop()
    return Result(writer.dir, writer.record, final)


def _tidy_up(writer: RunWriter, cache: Cache, runs_dir: Path, ui: UI) -> contextlib.ExitStack:
    """Mark this run alive (locks released on exit, or by the system if it is killed), then repair what dead
    runs left: their records become "interrupted", their temporary files and half conversions go."""
    alive = contextlib.ExitStack()
    alive.enter_context(upkeep.alive(writer.dir, writer.record["run_id"], cache.root))
    upkeep.mark_interrupted(runs_dir, ui.note)
    upkeep.sweep(runs_dir, cache.root, ui.note)
    return alive
def _resolve_quietly(names: set[str], revision: str | None) -> dict[str, "ModelRef | ModelError"]:
    """Spec-listed models: resolved once here; one that does not resolve is SKIPPED later, with its reason."""
    out: dict[str, ModelRef | ModelError] = {}
    for name in sorted(names):
        try:
            out[name] = models.resolve(name, revision)
        except ModelError as exc:
            out[name] = exc
    return out


def _by_model(cells: list[plan.Cell]) -> list[tuple[str, list[plan.Cell]]]:
    groups: dict[str, list[plan.Cell]] = {}
    for c in cells:
        groups.setdefault(c.model, []).append(c)
    return list(groups.items())


ModelRef = models.ModelRef


class _ModelCells:
    """Runs the cells of one model, loading it at most once and only on a cache miss."""

    def __init__(self, name, refs, device, dtype, opts: Options, cache: Cache, ui: UI, shown: str | None = None):
        self.name, self.device, self.dtype, self.opts, self.cache, self.ui = name, device, dtype, opts, cache, ui
        self.shown = shown or name  # the short name records and reports use
        self.loaded: models.LoadedModel | None = None
        self.ref: ModelRef | None = None
        self.fingerprint: str | None = None
        self.unavailable: str | None = None
        try:
            found = refs.get(name) or models.resolve(name, opts.revision)
            if isinstance(found, ModelError):
                raise found
            self.ref = found
            self.fingerprint = self.ref.fingerprint()
        except ModelError as exc:
            self.unavailable = str(exc)

    def run(self, cell: plan.Cell) -> tuple[dict[str, Any], pd.DataFrame | None, Verdict]:
        self.ui.cell_start(cell)
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"spec": _portable_spec(cell.spec.describe()), "model": self.shown,
                               "seed": cell.seed, "probe": {"name": cell.probe.name, "version": cell.probe.version},
                               "model_ref": self.ref.__dict__ if self.ref else None,
                               "fingerprint": self.fingerprint, "timings": {}}
        frame, verdict, cached = None, None, False
        if self.unavailable and cell.probe.uses_model:
            verdict = stats.skipped(self.unavailable)
        else:
            parts = plan.cache_parts(cell, self.fingerprint, _device_type(self.device), self.dtype)
            key = key_of(parts)
            rec["cache_key"] = key
            validate = lambda f: schemas.validate(f, cell.probe.schema, cell.probe.metrics)  # noqa: E731
            frame, verdict, cached = self._cached_or_measured(cell, rec, key, parts, validate)
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

    def _cached_or_measured(self, cell, rec, key, parts, validate):
        """The cell's frame from the cache, or measured under the cell's compute lock (so that a second run on
        this cache waits and then reads the entry instead of computing it again)."""
        frame = self.cache.get(key, validate)
        if frame is not None:
            return frame, None, True
        with self.cache.computing(key):
            frame = self.cache.get(key, validate)
            if frame is not None:
                return frame, None, True
            frame, verdict = self._measure(cell, rec, validate)
            if frame is not None:
                self.cache.put(key, frame, parts)
        return frame, verdict, False

    def _measure(self, cell: plan.Cell, rec: dict, validate) -> tuple[pd.DataFrame | None, Verdict | None]:
        import torch

        try:
            if cell.probe.uses_model and self.loaded is None:
                t = time.perf_counter()
                self.ui.progress(0.0, f"loading {self.shown}")
                self.loaded = models.load(self.ref, self.device, dtype=self.opts.dtype,
                                          allow_pickle=self.opts.allow_pickle, progress=self.ui.note)
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


def _portable_command(command: str) -> str:
    """The command line with the working folder and the home folder left out of its paths."""
    cwd, home = str(Path.cwd()), str(Path.home())
    words = []
    for w in command.split(" "):
        if w.startswith(cwd + "/"):
            w = w[len(cwd) + 1:]
        elif home not in ("/", "") and w.startswith(home + "/"):
            w = "~" + w[len(home):]
        words.append(w)
    return " ".join(words)


def _portable_spec(described: dict[str, Any]) -> dict[str, Any]:
    """A spec description whose file path is relative to its specs root: records name no machine folders."""
    from bench.resources import relative_spec_path

    return {**described, "path": relative_spec_path(described["path"])}


def _pandera_errors():
    import pandera.errors as pe

    return (pe.SchemaError, pe.SchemaErrors)


def _header(opts: Options, device: str, dtype: str, profile: str) -> dict[str, Any]:
    import torch

    if _device_type(device) == "cuda":
        dev_name = torch.cuda.get_device_name(torch.device(device).index or 0)
    else:
        dev_name = platform.processor() or platform.machine()
    return {
        "command": _portable_command(opts.command or " ".join(sys.argv)),
        "git_revision": _git_revision(),
        "packages": {p: _version(p) for p in PACKAGES},
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": {"type": _device_type(device), "index": torch.device(device).index, "name": dev_name,
                   "threads": torch.get_num_threads()},
        "dtype": dtype,
        "seed": opts.seed,
        "profile": profile,
        "models_choice": list(opts.models),
        "audit": opts.audit,
        "control": opts.control,
        "revision": opts.revision,
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
