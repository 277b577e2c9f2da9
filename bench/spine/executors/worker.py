"""The part of an executor that runs where the model is: one model's cells, the model loaded at most once."""

from __future__ import annotations

import gc
from typing import Callable

from bench.spine import plan
from bench.spine.executors import CellResult, Event, Job


def groups(cells: list[plan.Cell]) -> list[tuple[str, list[plan.Cell]]]:
    """Cells grouped by model, in plan order of first appearance."""
    out: dict[str, list[plan.Cell]] = {}
    for c in cells:
        out.setdefault(c.model, []).append(c)
    return list(out.items())


class _EmitUI:
    """The run UI as seen by a worker: every call becomes an event for the driver."""

    def __init__(self, emit: Callable[[Event], None]):
        self.emit, self.key = emit, None

    def start(self, n_cells: int) -> None: ...
    def stop(self) -> None: ...
    def cell_done(self, cell, verdict, seconds: float, cached: bool) -> None: ...

    def cell_start(self, cell) -> None:
        self.key = cell.key

    def progress(self, fraction: float, message: str = "") -> None:
        self.emit(Event("progress", key=self.key, fraction=fraction, message=message))

    def note(self, message: str) -> None:
        self.emit(Event("note", key=self.key, message=message))


class ModelGroup:
    """Runs cells of one model through the same code path for every executor (cache, load, probe, rule)."""

    def __init__(self, model: str, job: Job, emit: Callable[[Event], None]):
        from bench.spine.cells import ModelCells
        from bench.ground.store import Cache

        self.ui = _EmitUI(emit)
        self.cells = ModelCells(model, job.refs, job.device, job.dtype, cache=Cache(warn=self.ui.note), ui=self.ui,
                                allow_pickle=job.allow_pickle, revision=job.revision,
                                shown=job.shown.get(model, model), offload_folder=job.offload_folder)

    def run(self, cell: plan.Cell, attempts: int = 1) -> CellResult:
        rec, frame, verdict = self.cells.run(cell)
        timings = rec.get("timings") or {}
        return CellResult(cell.key, rec, frame, verdict, float(timings.get("total_s", 0.0)),
                          bool(rec.get("cache_hit")), attempts)

    def release(self) -> None:
        self.cells.release()
        gc.collect()
