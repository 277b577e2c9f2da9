"""The local executor over worker processes (``--jobs``): the same record as one process, a killed worker costs
one retry and then an ERROR cell, work is split by model and family, and ``auto`` picks processes from the
threads, the work and the memory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from bench.ground import spec
from bench.spine import run
from bench.spine.executors import pool
from tests.core.test_executors import CIRCUITS, _frames, _record  # also puts the checkout on sys.path, so
                                                                   # spawned workers import the fault probe


def _setup():
    from tests.core import executor_faults

    return (("worker_setup", executor_faults.register),)


def test_two_workers_give_the_record_of_one_process(tmp_path, tiny_model_dir, specs_dir, monkeypatch, one_thread):
    """Circuits and ecm on a tiny model: two units, two workers of one thread each, against this process at one
    thread: the same cells in plan order, the same verdicts, byte-identical frames, all measured."""
    specs = [spec.load_spec(specs_dir / "circuits" / n) for n in CIRCUITS]
    specs.append(spec.load_spec(specs_dir / "ecm" / "icl-improves-with-demonstrations.toml"))
    results = {}
    for jobs in (1, 2):
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / f"cache-{jobs}"))  # both compute every frame
        opts = run.Options(models=(str(tiny_model_dir),), runs_dir=tmp_path / f"runs-{jobs}", jobs=jobs)
        results[jobs] = run.execute(specs, opts)
    one, two = (_record(results[k]) for k in (1, 2))
    assert one["executor"] == {"name": "local"}
    assert two["executor"] == {"name": "local", "jobs": 2, "threads_per_job": 1}
    assert [c["spec"]["id"] for c in two["cells"]] == [c["spec"]["id"] for c in one["cells"]]
    assert [c["verdict"] for c in two["cells"]] == [c["verdict"] for c in one["cells"]]
    assert all(not c["cache_hit"] for c in two["cells"])
    assert {c["timings"].get("threads") for c in two["cells"] if c.get("frame")} == {1}
    assert _frames(results[2]) == _frames(results[1])


def _fault_specs(tmp_path, deaths: dict[str, int]) -> list:
    """One spec per family (a family per cell makes one work unit per cell, so both workers are busy)."""
    from tests.core import executor_faults

    executor_faults.register()
    out = []
    for name, n in deaths.items():
        d = tmp_path / "specs" / name
        d.mkdir(parents=True)
        text = executor_faults.SPEC.format(name=name, tally=tmp_path / "tally" / name, deaths=n)
        (d / "claim.toml").write_text(text.replace(f'id = "faults.{name}"', f'id = "{name}.claim"'))
        out += spec.load_specs([d])
    return out


def test_a_killed_worker_is_retried_once_then_error_and_the_rest_finishes(tmp_path):
    specs = _fault_specs(tmp_path, {"healthy": 0, "diesonce": 1, "alwaysdies": 9})
    opts = run.Options(runs_dir=tmp_path / "runs", jobs=2, executor_options=_setup())
    res = run.execute(specs, opts)
    rec = _record(res)
    assert rec["status"] == "complete" and len(rec["cells"]) == 3
    by_id = {c["spec"]["id"]: c for c in rec["cells"]}
    assert by_id["healthy.claim"]["verdict"]["outcome"] == "SUPPORTED", by_id["healthy.claim"]["verdict"]
    assert by_id["diesonce.claim"]["verdict"]["outcome"] == "SUPPORTED"  # retried on a fresh worker
    assert len(list((tmp_path / "tally" / "diesonce").iterdir())) == 2
    bad = by_id["alwaysdies.claim"]["verdict"]
    assert bad["outcome"] == "ERROR" and "worker process died after 2 attempts (signal 9" in bad["reason"]
    assert len(list((tmp_path / "tally" / "alwaysdies").iterdir())) == 2  # bounded: one retry
    frame = pd.read_parquet(res.run_dir / by_id["diesonce.claim"]["frame"])
    assert frame["value"].tolist() == pytest.approx([0.9 + 0.02 * ((i % 3) - 1) for i in range(8)])


def test_a_death_is_counted_even_when_the_cells_start_never_arrived(tmp_path):
    """Workers whose "start" events are withheld (lost with a killed worker's queue thread): the driver counts
    each death itself, so the cell still gets one retry and then an ERROR, never a third attempt."""
    from tests.core import executor_faults

    specs = _fault_specs(tmp_path, {"healthy": 0, "alwaysdies": 9})
    opts = run.Options(runs_dir=tmp_path / "runs", jobs=2,
                       executor_options=(("worker_setup", executor_faults.register_without_starts),))
    rec = _record(run.execute(specs, opts))
    by_id = {c["spec"]["id"]: c for c in rec["cells"]}
    assert by_id["healthy.claim"]["verdict"]["outcome"] == "SUPPORTED"
    bad = by_id["alwaysdies.claim"]["verdict"]
    assert bad["outcome"] == "ERROR" and "worker process died after 2 attempts (signal 9" in bad["reason"]
    assert len(list((tmp_path / "tally" / "alwaysdies").iterdir())) == 2


# ── units and the choice of processes ───────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class _Spec:
    id: str


@dataclass(frozen=True)
class _Cell:
    spec: _Spec
    model: str
    seed: int = 0

    @property
    def key(self) -> str:
        return f"{self.spec.id}|{self.model}"


@dataclass(frozen=True)
class _Row:
    claim: str
    model: str
    seed: int
    predicted_s: float
    peak_host_bytes: int


def _cells(*pairs) -> list[_Cell]:
    return [_Cell(_Spec(claim), model) for claim, model in pairs]


def test_units_are_a_model_and_a_family_with_the_families_that_share_work_together():
    cells = _cells(("knowledge.a", "m"), ("notes.b", "m"), ("circuits.c", "m"), ("knowledge.a", "n"),
                   ("langneurons.d", "m"), ("plnd.e", "m"))
    got = pool.units(cells)
    assert sorted(sorted(c.key for c in u) for u in got) == sorted([
        ["knowledge.a|m", "notes.b|m"], ["circuits.c|m"], ["knowledge.a|n"], ["langneurons.d|m", "plnd.e|m"]])


def test_units_start_with_the_longest_predicted_work():
    cells = _cells(("a.x", "m"), ("b.x", "m"), ("b.y", "m"), ("c.x", "m"))
    by_count = pool.units(cells)
    assert [u[0].spec.id for u in by_count] == ["b.x", "a.x", "c.x"]  # two cells first, ties in plan order
    timed = pool.units(cells, {"a.x|m": 10.0, "b.x|m": 1.0, "b.y|m": 1.0, "c.x|m": 30.0})
    assert [u[0].spec.id for u in timed] == ["c.x", "a.x", "b.x"]


def test_auto_picks_one_process_per_thread_within_the_work_and_memory(monkeypatch):
    import torch

    from bench.ground import costs

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(costs, "host_memory", lambda: 24 << 30)
    cells = _cells(("a.x", "m"), ("b.x", "m"), ("c.x", "m"))
    rows = [_Row(c.spec.id, c.model, 0, 600.0, 3 << 30) for c in cells]
    assert pool.choose("auto", "cpu", cells, rows) == (2, 1)
    assert pool.choose("auto", "cuda:0", cells, rows) == (1, 2)  # one accelerator: one process
    assert pool.choose("auto", "cpu", cells, rows[:1]) == (1, 2)  # one unit measures: nothing to share
    short = [_Row(r.claim, r.model, 0, 10.0, r.peak_host_bytes) for r in rows]
    assert pool.choose("auto", "cpu", cells, short) == (1, 2)  # 30 s of work: not worth two processes
    big = [_Row(r.claim, r.model, 0, 600.0, 15 << 30) for r in rows]
    assert pool.choose("auto", "cpu", cells, big) == (1, 2)  # two 15 GiB peaks do not fit 0.8 × 24 GiB
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    assert pool.choose("auto", "cpu", cells, rows) == (3, 2)  # three units: three processes, 8 // 3 threads
    assert pool.choose(5, "cpu", cells, rows) == (3, 2)  # never more processes than units
    assert pool.choose(1, "cpu", cells, rows) == (1, 8)


def test_jobs_on_the_command_line_must_be_auto_or_a_positive_number():
    from bench.cli import main

    for bad in ("0", "-1", "two"):
        out = CliRunner().invoke(main, ["verify", "--jobs", bad, "specs/circuits"])
        assert out.exit_code == 2 and "neither 'auto' nor a whole number" in out.output, out.output


def test_a_rerun_splits_the_machine_as_the_run_did():
    from bench.spine.rerun import jobs_of

    assert jobs_of({"executor": {"name": "local", "jobs": 2, "threads_per_job": 1}}) == 2
    assert jobs_of({"executor": {"name": "local"}}) == 1
    assert jobs_of({"executor": {"name": "ray", "jobs": 4}}) == 1
    assert jobs_of({}) == 1


_ORPHANING_DRIVER = """
import multiprocessing as mp, os, signal, sys
sys.path.insert(0, {root!r})
from bench.spine.executors import pool

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    worker = pool._Handle(ctx, 0, events, None, 1, (None, []))
    print(worker.proc.pid, flush=True)
    sys.stdin.readline()  # the worker is up and waiting for work
    os.kill(os.getpid(), signal.SIGKILL)  # killed outright: no chance to stop its workers
"""


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie nobody has reaped yet is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_worker_ends_when_its_driver_is_killed_outright(tmp_path):
    """Known answer: the driver of a pool is killed with SIGKILL while its worker waits for work; the worker ends
    within seconds (it used to wait for ever, holding its memory; a killed run's workers held 4.5 GB until they
    were killed by hand)."""
    import subprocess
    import sys
    import time

    driver = tmp_path / "driver.py"
    driver.write_text(_ORPHANING_DRIVER.format(root=str(Path(__file__).resolve().parents[2])))
    proc = subprocess.Popen([sys.executable, str(driver)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())
    try:
        time.sleep(3)  # the worker's watch has started
        assert _running(worker)
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(worker)
    finally:
        if _running(worker):
            os.kill(worker, 9)
