"""Repair after killed runs (records, temporary files, conversions) and the `bench cache` commands."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
from filelock import FileLock

from bench.spine import upkeep
from bench.ground.store import Cache, RunWriter


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_dead_runs_are_marked_interrupted_live_ones_are_not(tmp_path):
    runs = tmp_path / "runs"
    dead = RunWriter.create(runs, {"device": {"type": "cpu"}})
    live = RunWriter.create(runs, {"device": {"type": "cpu"}})
    lock = FileLock(str(live.dir / ".alive.lock"))
    lock.acquire()
    try:
        assert upkeep.mark_interrupted(runs) == [dead.record["run_id"]]
    finally:
        lock.release()
    assert json.loads((dead.dir / "record.json").read_text())["status"] == "interrupted"
    assert json.loads((live.dir / "record.json").read_text())["status"] == "running"


def test_sweep_removes_what_dead_processes_left(tmp_path):
    cache = tmp_path / "cache"
    d = cache / "frames" / "ab"
    d.mkdir(parents=True)
    dead, alive = _dead_pid(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        orphan = d / f".abc.parquet.{dead}.xyz.tmp"
        mine = d / f".abc.parquet.{alive.pid}.xyz.tmp"
        half_saved = cache / "partial" / "cd" / f".cd12.pt.{dead}.q1w2.tmp"  # a training state killed mid-save
        half_saved.parent.mkdir(parents=True)
        for p in (orphan, mine, half_saved):
            p.write_bytes(b"half")
        conv = cache / "models" / f".convert-{dead}-q"
        conv.mkdir(parents=True)
        (conv / "model.safetensors").write_bytes(b"half")
        import fcntl

        with open(cache / "models" / ".lock", "a+") as f:  # a conversion in progress: its folders stay
            fcntl.flock(f, fcntl.LOCK_EX)
            upkeep.sweep(None, cache)
            assert conv.exists()
            fcntl.flock(f, fcntl.LOCK_UN)
        assert upkeep.sweep(None, cache) >= 1
        assert not orphan.exists() and mine.exists() and not conv.exists() and not half_saved.exists()
    finally:
        alive.kill()
        alive.wait()


def test_cache_summary_and_prune(cli, tmp_path, monkeypatch):
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("BENCH_CACHE", str(cache_root))
    cache = Cache(cache_root)
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    cache.put("a" * 64, frame, {"probe": "induction"})
    cache.put("b" * 64, frame, {"probe": "induction"})
    cache.memo({"what": "sub"}, lambda: frame)
    runs = tmp_path / "runs"
    w = RunWriter.create(runs, {"device": {"type": "cpu"}})
    w.add({"spec": {"id": "a.b"}, "model": "m", "cache_key": "a" * 64, "verdict": {"outcome": "SUPPORTED"}}, None)
    r = cli("cache")
    assert r.exit_code == 0 and "2 cell frames and 1 sub-results" in r.output and "induction: 2" in r.output
    assert "saved states" not in r.output
    state = cache_root / "partial" / "ef" / ("ef" + "0" * 62 + ".pt")  # a killed training run's
    state.parent.mkdir(parents=True)
    state.write_bytes(b"x" * 2048)
    tuned = cache_root / "trained" / "12" / ("12" + "0" * 62 + ".partial") / "state.pt"  # a killed fine-tune's
    tuned.parent.mkdir(parents=True)
    tuned.write_bytes(b"x" * 1024)
    r = cli("cache")
    assert "saved states of unfinished training runs (the same command resumes them): 2, 3.0 KiB" in r.output
    assert r.output.count("unreadable (") == 2 and "the next run sets it aside" in r.output  # bytes, not a state
    tuned.unlink()
    r = cli("cache", "prune", "--runs-dir", runs)
    assert r.exit_code == 0 and "removed 2 entries" in r.output, r.output
    assert cache.get("a" * 64) is not None and cache.get("b" * 64) is None
    assert state.exists() and "kept 1 saved state of unfinished training runs (2.0 KiB" in r.output
    assert str(cache_root / "partial") in r.output
    r = cli("cache", "prune", "--runs-dir", tmp_path / "nowhere")
    assert r.exit_code == 2 and r.output.count("\n") == 1


def test_cache_lists_how_far_each_saved_run_got(cli, tmp_path, monkeypatch):
    """`bench cache` names each saved state's run, its step of the loop's total and when it was saved, from the
    state itself (a state saved before the label and total were kept shows its step alone)."""
    import time as time_mod

    import torch

    from bench.ground.resume import Resume, describe, maybe_save

    cache_root = tmp_path / "cache"
    monkeypatch.setenv("BENCH_CACHE", str(cache_root))
    monkeypatch.setattr(time_mod, "time", lambda: 1_780_000_000.0)  # 2026-05-28 in UTC
    path = cache_root / "partial" / "ab" / ("ab" + "0" * 62 + ".pt")
    r = Resume(path, every_steps=5, label="generalization: the rl arm's run, seed 1")
    for step in range(1, 13):
        maybe_save(r, step, 200, lambda step=step: {"step": step, "params": {"w": torch.zeros(3)}})
    assert describe(path) == {"step": 10, "total": 200, "label": "generalization: the rl arm's run, seed 1",
                              "saved_at": 1_780_000_000.0}
    old = cache_root / "partial" / "cd" / ("cd" + "0" * 62 + ".pt")
    old.parent.mkdir(parents=True)
    torch.save({"step": 7, "params": {}, "carry": {}}, old)
    out = cli("cache").output
    line = next(ln for ln in out.splitlines() if "ab000" in ln)
    when = time_mod.strftime("%Y-%m-%d %H:%M", time_mod.localtime(1_780_000_000.0))
    assert line.strip().startswith(f"step 10 of 200  ·  generalization: the rl arm's run, seed 1  ·  saved {when}")
    assert next(ln for ln in out.splitlines() if "cd000" in ln).strip().startswith("step 7  ·  ")
