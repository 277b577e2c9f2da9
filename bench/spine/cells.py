"""One model's cells: the cache lookup under a per-cell compute lock, the model loaded at most once and only on
a cache miss, the probe, the frame's schema, and the cell's own verdict.  Every executor runs cells through
:class:`ModelCells`, so the local and the Ray executor produce the same record entries."""

from __future__ import annotations

import gc
import time
import traceback
from pathlib import Path
from typing import Any

import pandas as pd

from bench import models, stats
from bench.spine import plan
from bench.ground.errors import BenchError, ModelError
from bench.ground.store import Cache, key_of
from bench.stats import Verdict

ModelRef = models.ModelRef


def _device_type(device: str) -> str:
    return device.partition(":")[0]


class ModelCells:
    """Runs the cells of one model, loading it at most once and only on a cache miss."""

    def __init__(self, name: str, refs: dict[str, Any], device: str, dtype: str, *, cache: Cache, ui: Any,
                 allow_pickle: bool = False, revision: str | None = None, shown: str | None = None,
                 offload_folder: str | None = None):
        self.name, self.device, self.dtype, self.cache, self.ui = name, device, dtype, cache, ui
        self.allow_pickle = allow_pickle
        self.offload_folder = offload_folder
        self.shown = shown or name  # the short name records and reports use
        self.loaded: models.LoadedModel | None = None
        self.companion_models: dict[str, models.LoadedModel] = {}
        self.ref: ModelRef | None = None
        self.fingerprint: str | None = None
        self.unavailable: str | None = None
        try:
            found = refs.get(name) or models.resolve(name, revision)
            if isinstance(found, ModelError):
                raise found
            self.ref = found
            self.fingerprint = self.ref.fingerprint()
        except ModelError as exc:
            self.unavailable = str(exc)

    def run(self, cell: plan.Cell) -> tuple[dict[str, Any], pd.DataFrame | None, Verdict]:
        self.ui.cell_start(cell)
        t0, began = time.perf_counter(), time.time()
        rec: dict[str, Any] = {"spec": portable_spec(cell.spec.describe()), "model": self.shown,
                               "seed": cell.seed, "probe": {"name": cell.probe.name, "version": cell.probe.version},
                               "model_ref": self.ref.__dict__ if self.ref else None,
                               "fingerprint": self.fingerprint, "timings": {"started_at": round(began, 3)}}
        frame, verdict, cached = None, None, False
        waited = self.cache.waited_s
        if self.unavailable and cell.probe.uses_model:
            verdict = stats.skipped(self.unavailable)
        else:
            parts = plan.cache_parts(cell, self.fingerprint, _device_type(self.device), self.dtype,
                                     {n: self._companion_fingerprint(n) for n in plan.companions(cell)})
            key = key_of(parts)
            rec["cache_key"] = key
            from bench.ground import schemas

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
        if self.cache.waited_s - waited >= 0.1:  # blocked while another process computed what this cell needs
            rec["timings"]["wait_s"] = round(self.cache.waited_s - waited, 3)
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

        from bench.ground import schemas
        from bench.ground.context import ProbeContext

        try:
            if cell.probe.uses_model and self.loaded is None:
                t = time.perf_counter()
                self.ui.progress(0.0, f"loading {self.shown}")
                self.loaded = models.load(self.ref, self.device, dtype=self.dtype, allow_pickle=self.allow_pickle,
                                          progress=self.ui.note, offload_folder=self._offload(self.name))
                rec["timings"]["load_s"] = round(time.perf_counter() - t, 3)
            ctx = ProbeContext(model=self.loaded if cell.probe.uses_model else None, seed=cell.seed,
                               device=torch.device(self.device), dtype=self.dtype, cache=self.cache,
                               progress=self.ui.progress,
                               companions=lambda name: self._load_companion(name, plan.companions(cell)))
            t = time.perf_counter()
            frame = cell.probe.call(ctx, **cell.spec.probe_params())
            rec["timings"]["measure_s"] = round(time.perf_counter() - t, 3)
            rec["timings"]["threads"] = torch.get_num_threads()  # float rounding on the CPU depends on it
            return validate(frame), None
        except ModelError as exc:
            if self.loaded is None:
                self.unavailable = str(exc)
            return None, stats.errored(str(exc))
        except (schemas.FrameError, *pandera_errors()) as exc:
            rec["failure_cases"] = schemas.failure_table(exc)
            return None, stats.errored(f"frame failed its schema: {str(exc).splitlines()[0][:200]}")
        except BenchError as exc:
            return None, stats.errored(str(exc))
        except Exception as exc:  # noqa: BLE001 - a crashing probe becomes an ERROR cell, not a crashed run
            rec["traceback"] = traceback.format_exc()
            return None, stats.errored(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    def _companion_fingerprint(self, name: str) -> str:
        try:
            return models.resolve(name).fingerprint()
        except ModelError as exc:  # part of the key, so that the cell is measured again once the model is there
            return f"unavailable: {exc}"

    def _load_companion(self, name: str, declared: list[str]):
        """A companion model, loaded as this model is; one at a time is kept, for the cells that follow.  Only
        declared ones: an undeclared model would be missing from the cache key."""
        if name not in declared:
            raise BenchError(f"probe asked for model '{name}', which its companions() do not declare "
                             f"(declared: {', '.join(declared) or 'none'})")
        if name not in self.companion_models:
            self.companion_models.clear()
            self.ui.progress(0.0, f"loading {name}")
            self.companion_models[name] = models.load(models.resolve(name), self.device, dtype=self.dtype,
                                                      allow_pickle=self.allow_pickle, progress=self.ui.note,
                                                      offload_folder=self._offload(name))
        return self.companion_models[name]

    def _offload(self, model: str) -> str | None:
        """A model's own subfolder of the offload folder: two models' offloaded weights never share files."""
        from bench.ground.store import slug

        return str(Path(self.offload_folder) / slug(model)) if self.offload_folder else None

    def release(self) -> None:
        self.loaded = None
        self.companion_models.clear()
        gc.collect()


def portable_spec(described: dict[str, Any]) -> dict[str, Any]:
    """A spec description whose file path is relative to its specs root: records name no machine folders."""
    from bench.ground.resources import relative_spec_path

    return {**described, "path": relative_spec_path(described["path"])}


def pandera_errors():
    import pandera.errors as pe

    return (pe.SchemaError, pe.SchemaErrors)
