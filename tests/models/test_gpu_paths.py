"""The paths a GPU or a big model takes, run on the CPU: a whole run in bfloat16 (what ``--dtype auto`` picks on an
accelerator), and a model that accelerate splits between CPU memory and a disk offload folder (what a model
larger than the machine's memory gets).  Each checks registered probes from two families, end to end."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench import models
from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.models import hooks

# Two cheap probes from two families: attention patterns on repeated random tokens (circuits), and every
# layer read through the final norm and the LM head (microscope).
SPECS = ("circuits/induction-heads-exist.toml", "microscope/logit-lens-converges.toml")

# bfloat16 keeps 8 significant bits: one rounding moves a number by up to 2**-8 ≈ 0.4 % of itself.  The tiny
# model's values pass through two blocks, and the probes gather captured tensors in float32, so a metric
# stays within a few roundings of its float32 value: 2 % (five roundings) of the metric's largest magnitude.
# Measured: at most 0.1 % (prev_token_score); 0.04–0.06 % for the lens losses, 0.005 % for the copy losses.
BF16_REL = 0.02


def _frames(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {p.parent.name: pd.read_parquet(p) for p in sorted(run_dir.glob("*/frames/*/*.parquet"))}


@pytest.fixture
def two_specs(specs_dir, tmp_path) -> Path:
    specs = tmp_path / "specs"
    for name in SPECS:
        (specs / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(specs_dir / name, specs / name)
    return specs


def test_a_bfloat16_run_gives_valid_frames_close_to_float32(cli, two_specs, tiny_model_dir, tmp_path, monkeypatch,
                                                             one_thread):
    specs = two_specs
    loaded_dtypes = []
    real_load = models.load

    def spy(*args, **kwargs):
        loaded = real_load(*args, **kwargs)
        loaded_dtypes.append({p.dtype for p in loaded.hf.parameters()})
        return loaded

    monkeypatch.setattr(models, "load", spy)
    frames = {}
    for dtype in ("float32", "bfloat16"):
        runs = tmp_path / f"runs-{dtype}"
        r = cli("verify", specs, "--models", tiny_model_dir, "--dtype", dtype, "--runs-dir", runs, "--no-report")
        assert r.exit_code == 0, r.output
        frames[dtype] = _frames(runs)
    assert loaded_dtypes == [{torch.float32}, {torch.bfloat16}]  # one load per run, in the run's dtype
    assert set(frames["float32"]) == set(frames["bfloat16"]) == {"circuits.induction-heads-exist",
                                                                 "microscope.logit-lens-converges"}
    for spec_id, f32 in frames["float32"].items():
        bf16 = frames["bfloat16"][spec_id]
        info = registry.probe({"circuits": "induction", "microscope": "logit_lens"}[spec_id.split(".")[0]])
        schemas.validate(bf16.copy(), info.schema, info.metrics)  # the frame as read back passes its schema
        assert bf16["value"].dtype == np.float64
        keys = [c for c in f32.columns if c != "value"]
        pair = f32.merge(bf16, on=keys, suffixes=("_32", "_16"), validate="one_to_one")
        assert len(pair) == len(f32) == len(bf16), spec_id  # the same rows: same layers, heads, tokens
        assert not np.array_equal(pair["value_32"], pair["value_16"]), f"{spec_id}: bfloat16 changed nothing"
        for metric, g in pair.groupby("metric"):
            scale = g["value_32"].abs().max()
            gap = (g["value_16"] - g["value_32"]).abs().max()
            assert gap <= BF16_REL * scale + 1e-6, f"{spec_id} {metric}: |bf16 − f32| {gap:.3g} > 2 % of {scale:.3g}"


def _run(name: str, loaded, **params) -> pd.DataFrame:
    info = registry.probe(name)
    return schemas.validate(info.call(ProbeContext(model=loaded, seed=0), **params), info.schema, info.metrics)


def test_a_model_offloaded_to_cpu_and_disk_gives_the_plain_frames(tiny_model_dir, tmp_path, one_thread):
    ref = models.resolve(str(tiny_model_dir))
    whole = models.load(ref, "cpu")
    weights = sum(p.numel() * p.element_size() for p in whole.hf.parameters())
    # Three quarters of the weights' bytes for the CPU: accelerate keeps what fits there and offloads the rest
    # to disk, loading each offloaded module's weights from the folder only while it runs.
    split = models.load(ref, "cpu", device_map="auto", max_memory={"cpu": int(0.75 * weights)},
                        offload_folder=str(tmp_path / "offload"))
    placed = {str(d) for d in split.hf.hf_device_map.values()}
    assert placed == {"cpu", "disk"}, split.hf.hf_device_map
    assert any(p.device.type == "meta" for p in split.hf.parameters())
    assert hooks.is_split(split.hf) and hooks.home_device(split.hf) == torch.device("cpu")
    for name, params in (("induction", {"seq_len": 8, "batch": 3}),
                         ("logit_lens", {"n_texts": 4, "max_tokens": 16})):
        a, b = _run(name, whole, **params), _run(name, split, **params)
        assert len(a) > 0
        pd.testing.assert_frame_equal(b, a, check_exact=False, rtol=1e-6, atol=1e-7)


def test_a_run_with_an_offload_folder_offloads_and_gives_the_plain_frames(cli, two_specs, tiny_model_dir, tmp_path,
                                                                          monkeypatch, one_thread):
    """`bench verify --offload-folder DIR` reaches the loader (a subfolder per model); the tiny model fits in
    memory, so the test caps host memory at three quarters of its weights to make accelerate offload the rest."""
    placed, real_load = [], models.load

    def capped(ref, device="cpu", **kwargs):
        if kwargs.get("offload_folder"):
            whole = real_load(ref, device)
            weights = sum(p.numel() * p.element_size() for p in whole.hf.parameters())
            kwargs["max_memory"] = {"cpu": int(0.75 * weights)}
        loaded = real_load(ref, device, **kwargs)
        placed.append((kwargs.get("offload_folder"), getattr(loaded.hf, "hf_device_map", None)))
        return loaded

    monkeypatch.setattr(models, "load", capped)
    frames = {}
    for extra in ([], ["--offload-folder", tmp_path / "offload"]):
        runs = tmp_path / f"runs-{len(extra)}"
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / f"cache-{len(extra)}"))  # offloading is result-neutral:
        r = cli("verify", two_specs, "--models", tiny_model_dir, "--runs-dir", runs, "--no-report", *extra)
        assert r.exit_code == 0, r.output
        frames[bool(extra)] = _frames(runs)
    (plain_folder, plain_map), (folder, device_map) = placed  # a cache of its own, or the run would be replayed
    assert plain_folder is None and plain_map is None
    assert Path(folder).parent == tmp_path / "offload" and {str(d) for d in device_map.values()} == {"cpu", "disk"}
    assert set(frames[True]) == set(frames[False]) and len(frames[True]) == 2
    for spec_id, plain in frames[False].items():
        pd.testing.assert_frame_equal(frames[True][spec_id], plain, check_exact=False, rtol=1e-6, atol=1e-7)


def test_home_device_skips_offloaded_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2, device="meta"), torch.nn.Linear(2, 2))
    assert hooks.home_device(model) == torch.device("cpu")
    assert hooks.home_device(torch.nn.Linear(2, 2, device="meta")) == torch.device("cpu")


@pytest.mark.gpu
def test_a_model_split_over_gpu_and_disk_gives_the_cpu_frames(tiny_model_dir, tmp_path):
    """The same split on a GPU (scripts/gpu-check.sh runs it): float32 on both sides, so the frames differ only by
    the GPU's kernels' rounding (rtol 1e-4)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    ref = models.resolve(str(tiny_model_dir))
    whole = models.load(ref, "cpu")
    weights = sum(p.numel() * p.element_size() for p in whole.hf.parameters())
    split = models.load(ref, "cuda", dtype="float32", max_memory={0: int(0.75 * weights), "cpu": int(0.1 * weights)},
                        offload_folder=str(tmp_path / "offload"))
    placed = {str(d) for d in split.hf.hf_device_map.values()}
    assert {"0", "disk"} <= placed, split.hf.hf_device_map
    assert hooks.home_device(split.hf).type == "cuda"
    for name, params in (("induction", {"seq_len": 8, "batch": 3}),
                         ("logit_lens", {"n_texts": 4, "max_tokens": 16})):
        pd.testing.assert_frame_equal(_run(name, split, **params), _run(name, whole, **params), check_exact=False,
                                      rtol=1e-4, atol=1e-5)
