"""Executors: the Ray executor gives the record the local one gives; a worker that dies costs a bounded retry,
then an ERROR cell with a message, and every other cell finishes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench.spine import run
from bench.ground import spec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the workers import the fault probe as tests.core.executor_faults
CIRCUITS = ["induction-heads-exist.toml", "k-composition.toml", "norm-folding-is-exact.toml"]


def _record(result) -> dict:
    return json.loads((result.run_dir / "record.json").read_text())


def _frames(result) -> dict[str, bytes]:
    return {c["spec"]["id"]: (result.run_dir / c["frame"]).read_bytes() for c in _record(result)["cells"]
            if c.get("frame")}


def _ray_options(tmp_path) -> tuple:
    from tests.core import executor_faults

    return (("num_cpus", 2), ("runtime_env", {"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}}),
            ("worker_setup", executor_faults.register))


@pytest.fixture(scope="module")
def ray_session():
    """One local two-CPU Ray cluster for the module (starting one costs seconds on a small machine)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_local_executor_name_in_record(tmp_path, tiny_model_dir, specs_dir, one_thread):
    """The record names the executor, and each cell when it began (epoch seconds; the plan's accuracy benchmark
    books shared work by it), within the run's own span."""
    import time

    specs = [spec.load_spec(specs_dir / "circuits" / n) for n in ("norm-folding-is-exact.toml", "k-composition.toml")]
    t0 = time.time()
    res = run.execute(specs, run.Options(models=(str(tiny_model_dir),), runs_dir=tmp_path / "runs"))
    record = _record(res)
    assert record["executor"] == {"name": "local"}
    began = [c["timings"]["started_at"] for c in record["cells"]]
    assert t0 - 0.01 <= began[0] <= began[1] <= time.time()


def test_a_cell_that_waited_for_another_process_says_how_long(tmp_path, tiny_model_dir, specs_dir, one_thread):
    """A cell whose frame another process is computing waits under the cache's lock; its timings say how long
    (`wait_s`), so that the time is not read as the cell's own work.  A cell that did not wait has no wait_s."""
    from bench.ground.store import Cache
    from tests.core.holding import held_elsewhere

    specs = [spec.load_spec(specs_dir / "circuits" / "norm-folding-is-exact.toml")]
    opts = run.Options(models=(str(tiny_model_dir),), runs_dir=tmp_path / "runs")
    cell = _record(run.execute(specs, opts))["cells"][0]
    assert "wait_s" not in cell["timings"]
    key, other = cell["cache_key"], Cache()
    other.drop(key)
    with held_elsewhere(other, key, 1.0):
        again = _record(run.execute(specs, opts))["cells"][0]
    assert not again["cache_hit"] and 0.7 <= again["timings"]["wait_s"] <= again["timings"]["total_s"]


def test_bench_without_ray_never_imports_it(tmp_path, tiny_model_dir, specs_dir):
    code = ("import sys; from pathlib import Path; from bench.spine import run; from bench.ground import spec; "
            f"s = [spec.load_spec(Path({str(specs_dir / 'circuits' / 'norm-folding-is-exact.toml')!r}))]; "
            f"run.execute(s, run.Options(models=({str(tiny_model_dir)!r},), runs_dir=Path({str(tmp_path)!r}))); "
            "assert 'ray' not in sys.modules, 'ray was imported'")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]


def test_unknown_executor_and_address_without_ray_are_usage_errors():
    from bench.spine import executors
    from bench.ground.errors import UsageError

    with pytest.raises(UsageError, match="unknown executor"):
        executors.make("dask")
    with pytest.raises(UsageError, match="needs --executor ray"):
        executors.make("local", address="auto")


def test_ray_gives_the_local_record_on_circuits(tmp_path, tiny_model_dir, specs_dir, monkeypatch, ray_session,
                                                one_thread):
    specs = [spec.load_spec(specs_dir / "circuits" / name) for name in CIRCUITS]
    results = {}
    for name in ("local", "ray"):
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / f"cache-{name}"))  # both compute every frame
        opts = run.Options(models=(str(tiny_model_dir),), runs_dir=tmp_path / name, executor=name,
                           executor_options=_ray_options(tmp_path) if name == "ray" else ())
        results[name] = run.execute(specs, opts)
    local, remote = (_record(results[k]) for k in ("local", "ray"))
    assert remote["executor"]["name"] == "ray" and local["executor"]["name"] == "local"
    assert [c["spec"]["id"] for c in remote["cells"]] == [c["spec"]["id"] for c in local["cells"]]
    assert [c["verdict"] for c in remote["cells"]] == [c["verdict"] for c in local["cells"]]
    assert all(not c["cache_hit"] for c in remote["cells"])
    assert _frames(results["ray"]) == _frames(results["local"])  # byte-identical parquet


def _fault_specs(tmp_path, deaths: dict[str, int]) -> list:
    from tests.core import executor_faults

    executor_faults.register()
    d = tmp_path / "specs" / "faults"
    d.mkdir(parents=True)
    for name, n in deaths.items():
        (d / f"{name}.toml").write_text(executor_faults.SPEC.format(name=name, tally=tmp_path / "tally" / name,
                                                                    deaths=n))
    return spec.load_specs([d])


def test_a_killed_worker_is_retried_then_error_and_the_rest_finishes(tmp_path, ray_session, monkeypatch):
    specs = _fault_specs(tmp_path, {"healthy": 0, "dies-once": 1, "always-dies": 9})
    opts = run.Options(runs_dir=tmp_path / "runs", executor="ray", executor_options=_ray_options(tmp_path))
    res = run.execute(specs, opts)
    rec = _record(res)
    assert rec["status"] == "complete" and len(rec["cells"]) == 3
    by_id = {c["spec"]["id"]: c for c in rec["cells"]}
    assert by_id["faults.healthy"]["verdict"]["outcome"] == "SUPPORTED", by_id["faults.healthy"]["verdict"]
    assert by_id["faults.dies-once"]["verdict"]["outcome"] == "SUPPORTED"  # retried once, then measured
    assert len(list((tmp_path / "tally" / "dies-once").iterdir())) == 2
    bad = by_id["faults.always-dies"]
    assert bad["verdict"]["outcome"] == "ERROR" and "worker died after 2 attempts" in bad["verdict"]["reason"]
    assert len(list((tmp_path / "tally" / "always-dies").iterdir())) == 2  # bounded: one retry
    frame = pd.read_parquet(res.run_dir / by_id["faults.dies-once"]["frame"])
    assert frame["value"].tolist() == pytest.approx([0.9 + 0.02 * ((i % 3) - 1) for i in range(8)])


def test_ray_resources_read_the_device_and_dtype_the_run_resolved(monkeypatch):
    """The cluster's request comes from the job's resolved device (``cuda:N`` is a GPU too) and dtype (half
    precision halves the weights' bytes), with known numbers: 10 GiB of weights on an 80 GiB GPU."""
    pytest.importorskip("ray")
    from bench import models
    from bench.spine.executors import Job, cluster

    gib = cluster.GiB
    monkeypatch.setattr(models, "weight_bytes", lambda ref: 10 * gib)
    monkeypatch.setattr(cluster, "_gpu_memory", lambda: 80 * gib)
    monkeypatch.setattr(cluster.ray, "nodes", lambda: [])
    half = cluster._resources("m", Job({"m": object()}, "cuda:1", "bfloat16"), 2)
    assert half["num_gpus"] == 0.125  # (5 + 0.5) GiB × 1.2 / 80 GiB = 0.0825 → one eighth of a GPU
    full = cluster._resources("m", Job({"m": object()}, "cuda:1", "float32"), 2)
    assert full["num_gpus"] == 0.25  # (10 + 0.5) × 1.2 / 80 = 0.1575 → two eighths
    cpu = cluster._resources("m", Job({"m": object()}, "cpu", "float32"), 2)
    assert "num_gpus" not in cpu and cpu["memory"] == int(10.5 * gib * 1.5)
