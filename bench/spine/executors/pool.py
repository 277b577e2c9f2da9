"""The local executor over several processes of this machine: work units spread over `jobs` worker processes,
each running torch on its share of the CPU threads.

A work unit is one model's cells of one family (families that read each other's cached work, such as the
knowledge LoRA runs that a notes claim reuses, form one unit), so a model is loaded once per unit and work that
cells share through the cache is computed by the first of them, in the same process.  Units are handed out
longest first (by the plan's predicted seconds where the caller gives them, else by the number of cells), one
at a time to whichever worker is free.  Two units that need the same cached piece never compute it twice: the
cache's per-entry lock makes the second wait and read it.

A worker that dies (killed, out of memory) loses the cell it was running: that cell is retried once on a fresh
worker, then recorded as ERROR with the exit status, and the unit's other cells go on.  Workers are spawned
(never forked: torch's thread pools do not survive a fork), so a worker imports bench afresh and finds plugin
families through their entry points; `setup` runs first in every worker (tests register extra probes with it).
"""

from __future__ import annotations

import copyreg
import multiprocessing as mp
import os
import pickle
import queue as queue_mod
import socket
import threading
import time
import types
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from bench.spine.executors import CellResult, Event, Job, lost

# Families whose cells read the same cached sub-results run in one unit (a claim of `notes` reuses the
# knowledge family's LoRA runs; the plnd claims read the language-neuron statistics of `langneurons`).
SHARED = {"notes": "knowledge", "plnd": "langneurons"}
POLL_S = 0.2
MIN_PARALLEL_S = 60.0  # a run predicted shorter than this is not worth starting worker processes for


def _read_only(d: dict) -> types.MappingProxyType:
    return types.MappingProxyType(d)


# Specs hold their tables read-only (MappingProxyType), which plain pickle cannot send to a worker.
copyreg.pickle(types.MappingProxyType, lambda m: (_read_only, (dict(m),)))


def unit_of(cell) -> tuple[str, str]:
    family = cell.spec.id.partition(".")[0]
    return cell.model, SHARED.get(family, family)


def units(cells: list, predicted: dict[str, float] | None = None) -> list[list]:
    """Cells grouped into work units, in plan order inside a unit; units longest first (predicted seconds,
    else the cell count), ties in plan order."""
    out: dict[tuple[str, str], list] = {}
    for c in cells:
        out.setdefault(unit_of(c), []).append(c)
    cost = (lambda u: sum(predicted.get(c.key, 0.0) for c in u)) if predicted else len
    return sorted(out.values(), key=cost, reverse=True)


def choose(asked: int | str, device: str, cells: list, rows=()) -> tuple[int, int]:
    """(worker processes, torch threads each) for ``--jobs`` `asked` (a number, or "auto").

    "auto": one process on an accelerator; on the CPU as many processes as torch has threads (its default is
    the machine's cores; OMP_NUM_THREADS or ``torch.set_num_threads`` lower it), one thread each, at most one
    per work unit that measures something, and no more than host memory holds at the plan's largest peak.  A
    run the plan predicts under a minute stays in this process.  `rows`: the plan's rows of the cells the run
    will measure (``bench.spine.costs.before_run``), or () when there is no plan."""
    import torch

    budget = max(1, torch.get_num_threads())
    if asked != "auto":
        jobs = max(1, min(int(asked), len(units(cells))))
        return jobs, max(1, budget // jobs)
    if device.partition(":")[0] != "cpu":
        return 1, budget
    measured = {(r.claim, r.model, r.seed) for r in rows}
    busy = [u for u in units(cells) if not rows or any((c.spec.id, c.model, c.seed) in measured for c in u)]
    jobs = min(budget, len(busy))
    if rows:
        if sum(r.predicted_s or 0.0 for r in rows) < MIN_PARALLEL_S:
            return 1, budget
        peak = max(r.peak_host_bytes for r in rows)
        if peak > 0:
            from bench.ground.costs import host_memory

            jobs = min(jobs, int(0.8 * host_memory() // peak))
    jobs = max(1, jobs)
    return jobs, max(1, budget // jobs)


def sizing(asked: int | str, rows, device: str, cells: list) -> dict[str, Any]:
    """The local executor's options for ``--jobs`` `asked`: {} for one process, else the processes, threads
    each and the plan's predicted seconds per cell key (so the longest work starts first)."""
    jobs, threads = choose(asked, device, cells, rows)
    if jobs == 1:
        return {}
    seconds = {(r.claim, r.model, r.seed): r.predicted_s or 0.0 for r in rows}
    return {"jobs": jobs, "threads": threads,
            "predicted": {c.key: seconds[c.spec.id, c.model, c.seed] for c in cells
                          if (c.spec.id, c.model, c.seed) in seconds}}


@dataclass
class PoolExecutor:
    """`jobs` spawned worker processes with `threads` torch threads each."""

    jobs: int
    threads: int
    retries: int = 1  # fresh attempts of a cell whose worker died
    predicted: dict[str, float] = field(default_factory=dict)  # cell key → the plan's predicted seconds
    worker_setup: Callable[[], None] | None = None
    name: str = field(default="local", init=False)

    def describe(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "threads_per_job": self.threads}

    def run(self, cells: list, job: Job, emit: Callable[[Event], None]) -> None:
        ctx = mp.get_context("spawn")
        events = ctx.Queue()
        todo = units(cells, self.predicted)
        total, done = len(cells), set()
        # per cell, the workers that died on it, counted here: a worker killed at once may never have sent its
        # "start" (its queue's feeder thread dies with it), and a count of starts then retried it without end
        deaths: dict[str, int] = {}
        workers: list[_Handle] = []

        # the command's warning policy (libraries' notices hidden unless -v); filters of built-in categories only,
        # which any worker can unpickle
        quiet = [f for f in warnings.filters if getattr(f[2], "__module__", "") == "builtins"]

        def hire() -> "_Handle":
            h = _Handle(ctx, len(workers), events, job, self.threads, (self.worker_setup, quiet))
            workers.append(h)
            return h

        def status() -> None:
            running = sum(1 for w in workers if w.current is not None)
            emit(Event("status", counts=(len(done), running, total - len(done) - running)))

        def finish(key: str, result: CellResult) -> None:
            if key not in done:
                done.add(key)
                emit(Event("done", key=key, result=result))

        try:
            pool = [hire() for _ in range(min(self.jobs, len(todo)))]
            while todo or any(w.unit for w in pool):
                for w in pool:
                    if not w.unit and todo:
                        w.give(todo.pop(0))
                status()
                try:
                    ev = events.get(timeout=POLL_S)
                except queue_mod.Empty:
                    ev = None
                if ev is not None:
                    wid, ev = ev[0], pickle.loads(ev[1])
                    w = workers[wid]
                    if ev.kind == "start":
                        w.current = ev.key
                    if ev.kind == "done":
                        w.unit = [c for c in w.unit if c.key != ev.key]
                        w.current = None
                        finish(ev.key, _with_attempts(ev.result, deaths.get(ev.key, 0) + 1))
                    else:
                        emit(ev)
                    continue
                for i, w in enumerate(pool):  # a worker that died: retry or record its cell, re-queue the rest
                    if w.alive():
                        continue
                    code = w.proc.exitcode
                    left = list(w.unit)  # the unit's cells not done, in order: the first is the one it was on
                    w.close()
                    if left:
                        cell = left[0]
                        n = deaths[cell.key] = deaths.get(cell.key, 0) + 1  # attempts made, all of them lost
                        if n <= self.retries:
                            emit(Event("note", key=cell.key, message=f"worker for {cell.model} died during "
                                       f"{cell.label} (exit {code}); retrying ({n}/{self.retries})"))
                        else:
                            finish(cell.key, lost(cell, n, f"worker process died after {n} attempt"
                                                     f"{'s' if n != 1 else ''} ({_exit_text(code)}; out of memory "
                                                     f"is the usual cause)"))
                            left = [c for c in left if c.key != cell.key]
                        if left:
                            todo.insert(0, left)
                    pool[i] = hire()
            status()
        finally:
            for w in workers:
                w.stop()
            events.close()
            events.join_thread()


class _Handle:
    """The driver's side of one worker process: its inbox and the unit and cell it is on."""

    def __init__(self, ctx, wid: int, events, job: Job, threads: int, setup) -> None:
        self.inbox = ctx.Queue()
        self.unit: list = []
        self.current: str | None = None
        self.proc = ctx.Process(target=_serve, args=(wid, self.inbox, events, job, threads, setup), daemon=True,
                                name=f"bench-worker-{wid}")
        self.proc.start()

    def give(self, unit: list) -> None:
        self.unit, self.current = list(unit), None
        self.inbox.put(pickle.dumps(list(unit)))  # pickled here: a failure raises now, not in a feeder thread

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        self.unit, self.current = [], None
        self.inbox.close()
        self.inbox.cancel_join_thread()

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self.inbox.put(None)
            except (ValueError, OSError):  # the inbox was closed after the worker died
                pass
            self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        self.inbox.close()
        self.inbox.cancel_join_thread()


def _serve(wid: int, inbox, events, job: Job, threads: int, start) -> None:
    """A worker's life: units from the inbox until None, each cell's events (tagged with this worker) out.
    `start`: (the caller's set-up or None, the driver's warning filters)."""
    setup, filters = start
    threading.Thread(target=_exit_with_driver, args=(os.getppid(),), daemon=True, name="driver-watch").start()
    warnings.filters[:] = filters
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(max(1, threads))
    if setup is not None:
        setup()
    from bench.spine.executors.worker import ModelGroup

    where = f"{socket.gethostname()}:{os.getpid()}"

    def emit(ev: Event) -> None:  # pickled here, so a result that cannot travel becomes an ERROR, not a hang
        try:
            data = pickle.dumps(ev)
        except Exception as exc:  # noqa: BLE001 - any pickling failure
            if ev.kind != "done":
                return
            data = pickle.dumps(Event("done", key=ev.key, result=lost(
                cell, 1, f"the cell's result could not be sent back from its worker: {exc}")))
        events.put((wid, data))

    cell = None
    while (data := inbox.get()) is not None:
        unit = pickle.loads(data)
        runner = ModelGroup(unit[0].model, job, emit)
        try:
            for cell in unit:
                emit(Event("start", key=cell.key, worker=where))
                emit(Event("done", key=cell.key, result=runner.run(cell)))
        finally:
            runner.release()


def _exit_with_driver(driver: int, every: float = 1.0) -> None:
    """A worker's watch on the process that started it: once that one is gone (killed outright, it could not stop
    its workers), the worker ends too, rather than keep its memory, a cell's lock and hours of computing for no
    one (a killed `bench verify` left its workers waiting, 4.5 GB between them, until they were killed by hand)."""
    while os.getppid() == driver:
        time.sleep(every)
    os._exit(3)


def _with_attempts(result: CellResult, attempts: int) -> CellResult:
    return result if attempts <= 1 else replace(result, attempts=attempts)


def _exit_text(code: int | None) -> str:
    return f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
