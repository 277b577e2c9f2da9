"""Executors: the plan yields cells, an executor runs them and reports events; the driver matches results to
cells by key.

An executor never decides a verdict over the whole run nor writes the record: it measures cells (cache lookup,
model loading, probe, per-cell rule) and emits :class:`Event` values — ``start``, ``progress``, ``note``,
``status`` (cells done / running / queued) and ``done`` (the cell's record entry, frame and raw verdict).  The
driver (:func:`bench.spine.run.execute`) turns them into UI calls, writes the record in plan order and applies
the Benjamini–Hochberg adjustment over the whole run, so every executor yields the same record for one seed.

``local`` runs in this process, or with ``jobs`` > 1 in that many worker processes of this machine
(:mod:`bench.spine.executors.pool`, no extra dependency); ``ray`` fans model groups out over a Ray cluster and is
imported only when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from bench.ground.errors import UsageError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """What a worker needs besides the cells: resolved refs, device and dtype, loading policy."""

    refs: dict[str, Any]  # model name → ModelRef or ModelError (names typed on the command line)
    device: str
    dtype: str
    allow_pickle: bool = False
    revision: str | None = None  # hub revision for hub ids given without "@revision"
    shown: dict[str, str] = field(default_factory=dict)  # model name → the short name records use
    offload_folder: str | None = None  # accelerate's disk offload for models larger than memory


@dataclass(frozen=True)
class Event:
    kind: str  # "start" | "progress" | "note" | "status" | "done"
    key: str | None = None
    fraction: float = 0.0
    message: str = ""
    counts: tuple[int, int, int] = (0, 0, 0)  # done, running, queued
    result: Any = None  # for "done": a CellResult
    worker: str = ""  # where the cell runs (host:pid), for "start"


@dataclass(frozen=True)
class CellResult:
    key: str
    record: dict[str, Any]
    frame: Any  # pandas DataFrame or None
    verdict: Any  # bench.stats.Verdict, before the run-wide adjustment
    seconds: float
    cached: bool
    attempts: int = 1


class Executor(Protocol):
    name: str

    def run(self, cells: list, job: Job, emit: Callable[[Event], None]) -> None: ...


@dataclass
class LocalExecutor:
    """Today's behaviour: one process, cells grouped by model, each model loaded at most once."""

    name: str = field(default="local", init=False)

    def run(self, cells: list, job: Job, emit: Callable[[Event], None]) -> None:
        from bench.spine.executors.worker import ModelGroup, groups

        done, total = 0, len(cells)
        for model, group in groups(cells):
            runner = ModelGroup(model, job, emit)
            try:
                for cell in group:
                    emit(Event("status", counts=(done, 1, total - done - 1)))
                    emit(Event("start", key=cell.key))
                    emit(Event("done", key=cell.key, result=runner.run(cell)))
                    done += 1
            finally:
                runner.release()
        emit(Event("status", counts=(done, 0, 0)))


def lost(cell, attempts: int, message: str) -> CellResult:
    """The result of a cell whose worker never returned one: an ERROR verdict with `message`."""
    from bench import stats

    verdict = stats.errored(message)
    rec = {"spec": cell.spec.describe(), "model": cell.model, "seed": cell.seed,
           "probe": {"name": cell.probe.name, "version": cell.probe.version}, "model_ref": None,
           "fingerprint": None, "timings": {}, "cache_hit": False, "attempts": attempts,
           "verdict": verdict.to_json()}
    return CellResult(cell.key, rec, None, verdict, 0.0, False, attempts)


def make(name: str, *, address: str | None = None, jobs: int | str = 1, plan=(), device: str = "cpu",
         cells: list | None = None, **options: Any) -> Executor:
    """The executor called `name`; ``ray`` imports ray here, and only here.  ``local``: in this process, or
    with ``--jobs`` `jobs` over worker processes (sized by :func:`bench.spine.executors.pool.sizing` from the
    `device`, the `cells` and the `plan`'s rows)."""
    if name == "local":
        if address:
            raise UsageError("--ray-address needs --executor ray")
        from bench.spine.executors import pool

        sized = pool.sizing(jobs, plan, device, cells or [])
        return pool.PoolExecutor(**sized, **options) if sized else LocalExecutor()
    if name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install 'bench[ray]'") from None
        from bench.spine.executors.cluster import RayExecutor

        return RayExecutor(address=address, **options)
    raise UsageError(f"unknown executor '{name}' (known: {', '.join(EXECUTORS)})")
