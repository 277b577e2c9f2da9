"""Runs killed with SIGKILL at several points, and two runs at once on one cache.

Each killed run is followed by the same command: it must exit 0 with the verdicts of an uninterrupted run,
find no corrupt cache entry, mark the killed record "interrupted" and leave no temporary file, lock or half
conversion behind.  The kill comes from inside the child (a patched function sends SIGKILL to its own process),
so it lands at a known point: loading the model, probing, writing a cache entry, writing the record, rendering
the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.ground.store import sha256_bytes

ROOT = Path(__file__).resolve().parents[2]
SPECS = ("induction-heads-exist.toml", "norm-folding-is-exact.toml")

DRIVER = r'''
import os, signal, sys
point, nth = os.environ.get("KILL_AT", ""), int(os.environ.get("KILL_N", "1"))
count = [0]

def maybe_die():
    count[0] += 1
    if count[0] >= nth:
        os.kill(os.getpid(), signal.SIGKILL)

if point == "load":
    import bench.models as m
    real_load = m.load
    def load(*a, **k):
        maybe_die()
        return real_load(*a, **k)
    m.load = load
elif point == "probe":
    import bench.ground.context as r
    real_ctx = r.ProbeContext
    def ctx(*a, **k):
        c = real_ctx(*a, **k)
        maybe_die()
        return c
    r.ProbeContext = ctx
elif point == "cache_write":  # the temp file is written and synced, the rename never happens
    real_replace = os.replace
    def replace(src, dst):
        if "frames" in str(dst) and str(dst).endswith(".parquet") and "runs" not in str(dst):
            maybe_die()
        return real_replace(src, dst)
    os.replace = replace
elif point == "record":
    from bench.ground import store
    real_flush = store.RunWriter.flush
    def flush(self):
        maybe_die()
        return real_flush(self)
    store.RunWriter.flush = flush
elif point == "report":
    import bench.report as rep
    real_render = rep.render
    def render(*a, **k):
        maybe_die()
        return real_render(*a, **k)
    rep.render = render

from bench.cli import main
sys.argv = ["bench", *sys.argv[1:]]
main()
'''


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model_dir):
    d = tmp_path_factory.mktemp("kill")
    specs = d / "specs" / "circuits"
    specs.mkdir(parents=True)
    for name in SPECS:
        shutil.copy(ROOT / "specs" / "circuits" / name, specs / name)
    (d / "driver.py").write_text(DRIVER)
    return d, tiny_model_dir


def _run(work_dir: Path, model: Path, cache: Path, runs: Path, point: str = "", nth: int = 1,
         report: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCH_CACHE": str(cache), "KILL_AT": point, "KILL_N": str(nth), "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    args = [sys.executable, str(work_dir / "driver.py"), "verify", str(work_dir / "specs"), "--models", str(model),
            "--runs-dir", str(runs), "--report-dir", str(runs.parent / "reports"), "--device", "cpu"]
    args += ["--no-pdf"] if report else ["--no-report"]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, cwd=work_dir)


def _verdicts(runs: Path) -> dict:
    latest = sorted(runs.iterdir())[-1]
    rec = json.loads((latest / "record.json").read_text())
    assert rec["status"] == "complete"
    return {(c["spec"]["id"], c["verdict"]["outcome"], c["verdict"].get("estimate")) for c in rec["cells"]}


def _leftovers(cache: Path, runs: Path) -> list[str]:
    bad = [str(p) for root in (cache, runs) for p in root.rglob("*.tmp")]
    bad += [str(p) for p in cache.rglob(".convert-*")]
    bad += [str(p) for p in runs.rglob(".alive.lock")]
    bad += [str(p) for p in (cache / "live").glob("*")] if (cache / "live").is_dir() else []
    bad += [str(p) for p in (cache / "locks").glob("*.holder")] if (cache / "locks").is_dir() else []
    for rec in runs.glob("*/record.json"):
        status = json.loads(rec.read_text())["status"]
        if status not in ("complete", "interrupted"):
            bad.append(f"{rec}: status {status}")
    return bad


def _corrupt(cache: Path) -> list[str]:
    bad = []
    for meta in (cache / "frames").glob("*/*.json"):
        info = json.loads(meta.read_text())
        data = meta.with_suffix(".parquet")
        if not data.is_file() or sha256_bytes(data.read_bytes()) != info["sha256"]:
            bad.append(str(meta))
    return bad


@pytest.fixture(scope="module")
def reference(work, tmp_path_factory):
    """The verdicts of an uninterrupted run."""
    d, model = work
    base = tmp_path_factory.mktemp("reference")
    r = _run(d, model, base / "cache", base / "runs")
    assert r.returncode == 0, r.stderr[-2000:]
    return _verdicts(base / "runs")


# (point, nth call): the 2nd probe is killed with the first cell done and cached; the 3rd record flush falls
# after the first cell; the report is killed after a complete record
POINTS = [("load", 1), ("probe", 2), ("cache_write", 1), ("record", 3), ("report", 1)]


@pytest.mark.parametrize("point,nth", POINTS, ids=[f"{p}-{n}" for p, n in POINTS])
def test_killed_run_then_rerun(work, reference, tmp_path, point, nth):
    d, model = work
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    (cache / "models").mkdir(parents=True)
    stale = cache / "models" / f".convert-{_dead_pid()}-abcd"  # a conversion whose process is gone
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "model.safetensors").write_bytes(b"half")
    killed = _run(d, model, cache, runs, point, nth, report=point == "report")
    assert killed.returncode == -9, f"{point}: not killed ({killed.returncode}): {killed.stderr[-1500:]}"
    again = _run(d, model, cache, runs, report=point == "report")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Traceback" not in again.stderr
    assert _verdicts(runs) == reference
    assert not _corrupt(cache)
    assert not _leftovers(cache, runs), _leftovers(cache, runs)
    statuses = sorted(json.loads(p.read_text())["status"] for p in runs.glob("*/record.json"))
    assert statuses == (["complete", "complete"] if point == "report" else ["complete", "interrupted"])


def test_two_runs_at_once_compute_each_cell_once(work, tmp_path):
    d, model = work
    cache = tmp_path / "cache"
    env = {**os.environ, "BENCH_CACHE": str(cache), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    args = [sys.executable, str(d / "driver.py"), "verify", str(d / "specs"), "--models", str(model),
            "--no-report", "--device", "cpu"]
    procs = [subprocess.Popen(args + ["--runs-dir", str(tmp_path / f"runs{i}")], env=env, cwd=d,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1500:] for o in outs]
    computed: dict[str, int] = {}
    for i in range(2):
        rec = json.loads(next((tmp_path / f"runs{i}").glob("*/record.json")).read_text())
        for c in rec["cells"]:
            computed[c["spec"]["id"]] = computed.get(c["spec"]["id"], 0) + (not c["cache_hit"])
    assert computed == {k: 1 for k in computed}, computed
    assert not _corrupt(cache)


def test_lock_timeout_names_the_holder(tmp_path):
    from bench.ground.errors import StoreError
    from bench.ground.store import Cache

    cache = Cache(tmp_path)
    code = ("import sys, time; sys.path.insert(0, %r); from bench.ground.store import Cache; "
            "c = Cache(%r); cm = c.computing('k' * 64); cm.__enter__(); print('held', flush=True); time.sleep(60)"
            % (str(ROOT), str(tmp_path)))
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t = time.perf_counter()
        with pytest.raises(StoreError, match=f"process {holder.pid}"):
            with cache.computing("k" * 64, timeout=0.5):
                pass
        assert time.perf_counter() - t < 5
    finally:
        holder.kill()
        holder.wait()
    with cache.computing("k" * 64, timeout=5):  # the holder's death released it
        pass


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid
