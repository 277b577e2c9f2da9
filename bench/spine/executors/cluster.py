"""The Ray executor: one actor per model group loads that model once and runs its cells one by one.

The driver keeps one cell in flight per actor, so a worker that dies (killed, out of memory) loses at most that
cell: it is retried on a fresh actor up to `retries` times, then recorded as ERROR with Ray's message, and the
group's other cells go on on a fresh actor.  Actors ask for resources from the model's size (GPUs, memory), so a
cluster packs them.  Frames travel back to the driver, which writes the one record; cache entries are written
by the worker that computes them, atomically, under the ``BENCH_CACHE`` every node is given.
"""

from __future__ import annotations

import math
import os
import queue as queue_mod
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

import ray

from bench.ground.errors import UsageError
from bench.spine.executors import CellResult, Event, Job, lost
from bench.spine.executors.worker import ModelGroup, groups
from bench.ground.store import cache_root

GiB = 1 << 30


class _Worker:
    """A Ray actor around :class:`ModelGroup`; its events go to the driver through a Ray queue."""

    def __init__(self, model: str, job: Job, events, threads: int, setup: Callable[[], None] | None = None):
        import torch

        if setup is not None:
            setup()
        torch.set_num_threads(max(1, threads))
        self.events = events
        self.where = f"{socket.gethostname()}:{os.getpid()}"
        self.group = ModelGroup(model, job, self._emit)

    def _emit(self, ev: Event) -> None:
        try:
            self.events.put_nowait(ev)
        except Exception:  # noqa: BLE001 - progress is best effort; results travel as return values
            pass

    def run(self, cell, attempts: int) -> CellResult:
        self._emit(Event("start", key=cell.key, worker=self.where))
        return self.group.run(cell, attempts)


@dataclass
class RayExecutor:
    """Cells fanned out over a Ray cluster; `address` None starts (or joins) a local one."""

    address: str | None = None
    retries: int = 1  # fresh attempts after a worker died mid-cell
    num_cpus: int | None = None  # for a local cluster started here
    cpus_per_worker: int = 1
    runtime_env: dict[str, Any] | None = None
    worker_setup: Callable[[], None] | None = None  # run in every worker first (e.g. to register extra probes)
    name: str = field(default="ray", init=False)
    _started: bool = field(default=False, init=False)

    def describe(self) -> dict[str, Any]:
        return {"address": self.address or "local", "retries": self.retries, "cpus_per_worker": self.cpus_per_worker}

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False,
                              "logging_level": "ERROR"}
        if self.address:
            kw["address"] = self.address
        elif self.num_cpus:
            kw["num_cpus"] = self.num_cpus
        try:
            ray.init(**kw)
        except Exception as exc:  # noqa: BLE001 - Ray reports start-up failures with many exception types
            where = f"join the Ray cluster at {self.address}" if self.address else "start a local Ray cluster"
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"cannot {where}: {first}") from None
        self._started = True

    def _env(self) -> dict[str, Any]:
        env_vars = {"BENCH_CACHE": str(cache_root()), "TOKENIZERS_PARALLELISM": "false"}
        for var in ("PYTHONPATH", "HF_HOME", "HF_HUB_OFFLINE"):
            if os.environ.get(var):
                env_vars[var] = os.environ[var]
        env = dict(self.runtime_env or {})
        env["env_vars"] = {**env_vars, **env.get("env_vars", {})}
        return env

    def run(self, cells: list, job: Job, emit: Callable[[Event], None]) -> None:
        from ray.util.queue import Queue

        self._connect()
        events = Queue()
        todo = {model: list(group) for model, group in groups(cells)}
        options = {model: _resources(model, job, self.cpus_per_worker) for model in todo}
        actors: dict[str, Any] = {}
        inflight: dict[Any, tuple[str, Any, int]] = {}  # ref → (model, cell, attempt)
        attempts: dict[str, int] = {}
        done, total = 0, len(cells)
        remote = ray.remote(_Worker)

        def submit(model: str) -> None:
            if not todo[model]:
                if model in actors:
                    ray.kill(actors.pop(model))
                return
            if model not in actors:
                actors[model] = remote.options(**options[model], runtime_env=self._env()).remote(
                    model, job, events, self.cpus_per_worker, self.worker_setup)
            cell = todo[model].pop(0)
            attempts[cell.key] = attempts.get(cell.key, 0) + 1
            inflight[actors[model].run.remote(cell, attempts[cell.key])] = (model, cell, attempts[cell.key])

        try:
            for model in todo:
                submit(model)
            while inflight:
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.25)
                _drain(events, emit)
                for ref in ready:
                    model, cell, attempt = inflight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                            ray.exceptions.OutOfMemoryError) as exc:
                        actors.pop(model, None)  # dead: the next cell of this model gets a fresh actor
                        if attempt <= self.retries:
                            emit(Event("note", key=cell.key, message=f"worker for {model} died during "
                                       f"{cell.label}; retrying ({attempt}/{self.retries})"))
                            todo[model].insert(0, cell)
                            submit(model)
                            continue
                        result = _lost(cell, attempt, exc)
                    except ray.exceptions.RayTaskError as exc:  # an error outside the guarded probe call
                        result = _lost(cell, attempt, exc.cause if exc.cause is not None else exc, "failed")
                    done += 1
                    emit(Event("done", key=cell.key, result=result))
                    submit(model)
                running = len(inflight)
                emit(Event("status", counts=(done, running, total - done - running)))
            _drain(events, emit)
        finally:
            for actor in actors.values():
                ray.kill(actor)
            ray.kill(events.actor)
            if self._started:
                ray.shutdown()
                self._started = False


def _drain(events, emit: Callable[[Event], None]) -> None:
    while True:
        try:
            emit(events.get_nowait())
        except (queue_mod.Empty, Exception):  # ray.util.queue.Empty subclasses queue.Empty
            return


def _lost(cell, attempts: int, exc: BaseException, what: str = "died") -> CellResult:
    first = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else type(exc).__name__
    return lost(cell, attempts, f"worker {what} after {attempts} attempt{'s' if attempts != 1 else ''}: "
                                f"{type(exc).__name__}: {first}")


def _resources(model: str, job: Job, cpus: int) -> dict[str, Any]:
    """Ray resource requests for the actor of `model`: GPUs and memory from the size of its weights."""
    from bench import models

    try:
        ref = job.refs.get(model) or models.resolve(model)
        weights = models.weight_bytes(ref)
    except Exception:  # noqa: BLE001 - an unresolvable model is reported by the worker as SKIPPED
        weights = 0
    on_gpu = job.device.partition(":")[0] == "cuda"  # "cuda" or "cuda:N", as the run resolved it
    half = job.dtype in ("bfloat16", "float16")  # the dtype the run resolved, not a guess from the device
    need = weights * (0.5 if half else 1.0) + 0.5 * GiB
    opts: dict[str, Any] = {"num_cpus": cpus, "max_restarts": 0, "max_task_retries": 0}
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if on_gpu:
        gpu_mem = _gpu_memory()
        if gpu_mem:
            share = need * 1.2 / gpu_mem  # activations need room beside the weights
            opts["num_gpus"] = math.ceil(share) if share > 1 else max(0.125, math.ceil(share * 8) / 8)
        else:
            opts["num_gpus"] = 1
    else:
        biggest = max((n.get("Resources", {}).get("memory", 0) for n in nodes), default=0)
        opts["memory"] = int(min(need * 1.5, biggest * 0.9)) if biggest else int(need * 1.5)
    return opts


def _gpu_memory() -> int:
    try:
        import torch

        return torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0
