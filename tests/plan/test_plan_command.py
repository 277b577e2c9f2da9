"""The arithmetic of the cost model on hand-built shapes and work, `bench plan` on a folder with no weights, and
`bench verify` refusing a cell predicted not to fit before any probe runs."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bench.ground import costs as gc

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "circuits" / "induction-heads-exist.toml")
RATES = gc.Rates(forward=1e9, backward=5e8, generate=2.5e8, call_layer_s=1e-3, kernel=1e8, base_bytes=1 << 28,
                 load_bps=1e8, head=2e9, bandwidth=4e9, rng=1e6, tokenize=1e5, word_s=1e-6, load_fixed_s=0.5,
                 init_ps=1e7, attention=2e6, attention_train=5e5, array=4e6, fresh=8e6)


def test_shape_counts_the_parameters_of_a_real_model(tiny_tokenizer):
    from tests.conftest import build_tiny

    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    shape = gc.Shape.from_config(hf.config)
    matrices = sum(p.numel() for n, p in hf.named_parameters() if "norm" not in n)
    assert shape.n_params == matrices  # tied head: counted once, as the model holds it once
    assert (shape.n_layers, shape.d_model, shape.d_ff, shape.n_kv_heads, shape.head_dim) == (2, 32, 64, 2, 8)


def test_seconds_and_bytes_by_hand():
    s = gc.Shape(n_layers=2, d_model=4, d_ff=8, n_heads=2, n_kv_heads=1, head_dim=2, vocab=10)
    # blocks: 2 × (4·4·2 + 2·4·2 + 3·4·8) = 2 × (32 + 16 + 96) = 288; head 40; tied → 328 parameters
    assert (s.block_params, s.head_params, s.n_params) == (288, 40, 328)
    w = gc.Work(forward=10, head=10, backward=5, backward_head=5, generated=4, calls=3, steps=2, trainable=100,
                context=6, flops=1e3, drawn=50, chars=70, words=9, maps=400, maps_trained=300, array=800, fresh=1600,
                streamed=4000)
    attn = 4 * 2 * 2 * 2 * 6  # 4 × layers × heads × head size × context = 192
    per = 2 * 288 + attn
    f = gc.flops(s, w)
    assert f == {"forward": 10 * per, "backward": 3 * 5 * per, "generate": 4 * per, "head": 80 * (10 + 3 * 5 + 4)}
    per_call = 2 * 1e-3 + 328 * 4 / RATES.bandwidth  # overhead per layer, one read of the float32 weights
    expected = (10 * per / 1e9 + 15 * per / 5e8 + 4 * per / 2.5e8 + 80 * 29 / RATES.head + 3 * per_call
                + 1e3 / 1e8 + 28 * 2 * 100 / RATES.bandwidth + 50 / 1e6 + 70 / 1e5 + 9 * 1e-6
                + 400 / 2e6 + 300 / 5e5  # attention probabilities, without and with the backward pass
                + 800 / 4e6  # numpy passes
                + 1600 / 8e6 + 4000 / RATES.bandwidth)  # fresh memory written, bytes streamed
    assert gc.seconds(s, w, RATES) == pytest.approx(expected, rel=1e-12)
    # a load: the fixed part, the tokenizer's timed load, the float32 weights' bytes (or the initialiser's parameters)
    assert gc.load_seconds(s, RATES, tokenizer_s=0.7) == pytest.approx(0.5 + 0.7 + 328 * 4 / 1e8)
    assert gc.load_seconds(s, RATES, initialised=True) == pytest.approx(0.5 + 328 / 1e7)
    m = gc.Work(batch_tokens=3, logit_rows=2, kv_tokens=5, trainable=7, grads=13, extra_bytes=11)
    # weights 328·2, one layer's activations 3·(6·4 + 3·8)·2, logits 2·10·4·3, KV 5·2·2·1·2·2, AdamW 7·16,
    # gradients 13·2 kept without an optimizer (in the weights' dtype), extra
    assert gc.peak_bytes(s, m, 2) == 328 * 2 + 3 * 48 * 2 + 240 + 80 + 112 + 26 + 11
    parts = gc.peak_parts(s, m, 2)  # what holds the peak, the sum above split by holder
    assert {k: v for k, v in parts.items() if v} == {"weights": 656, "activations": 288, "logits": 240,
                                                       "kv_cache": 80, "optimizer": 112, "gradients": 26, "extra": 11}


def test_a_decoding_step_takes_the_longer_of_its_arithmetic_and_its_read_of_the_weights():
    """Decoding steps read the blocks and the head at the few-row streaming rate, and overlap that with their
    arithmetic; other calls add their arithmetic and one read of all weights at the copy bandwidth."""
    from dataclasses import replace

    s = gc.Shape(n_layers=2, d_model=4, d_ff=8, n_heads=2, n_kv_heads=1, head_dim=2, vocab=10)  # blocks 288, head 40
    per = 2 * 288 + 4 * 2 * 2 * 2 * 6  # a position's block FLOPs at context 6
    steps = gc.Work(generated=16, calls=3, decoded_calls=3, context=6)
    arithmetic = 16 * per / RATES.generate + 80 * 16 / RATES.head
    slow, fast = replace(RATES, stream=1e3), replace(RATES, stream=1e12)
    read = 3 * (288 + 40) * 4 / 1e3  # three steps, each reading every float32 weight at 1,000 bytes/s
    assert read > arithmetic
    assert gc.model_seconds(s, steps, slow) == pytest.approx(read)
    assert gc.model_seconds(s, steps, fast) == pytest.approx(arithmetic)
    assert gc.model_seconds(s, steps, slow, dtype_bytes=2) == pytest.approx(read / 2)  # bfloat16 weights
    passes = gc.Work(forward=10, head=10, calls=2, context=6)
    assert gc.model_seconds(s, passes, slow) == pytest.approx(
        10 * per / RATES.forward + 80 * 10 / RATES.head + 2 * 328 * 4 / RATES.bandwidth)
    both = steps + passes  # the two kinds are bounded apart
    assert gc.model_seconds(s, both, slow) == pytest.approx(gc.model_seconds(s, steps, slow)
                                                             + gc.model_seconds(s, passes, slow))


def test_work_adds_time_and_keeps_the_largest_batch():
    a = gc.Work(forward=3, batch_tokens=10, calls=1)
    b = gc.Work(forward=4, batch_tokens=7, calls=2, full_copy=True)
    c = a + b
    assert (c.forward, c.calls, c.batch_tokens, c.full_copy) == (7, 3, 10, True)
    assert a.times(3).forward == 9 and a.times(3).batch_tokens == 10


def test_shared_parts_are_counted_once():
    shared = ("memo", gc.Work(forward=5))
    cost = gc.Cost((shared, (None, gc.Work(forward=1))))
    assert cost.total().forward == 6
    assert cost.total({"memo"}).forward == 1


@pytest.fixture
def config_only(tmp_path, tiny_tokenizer):
    """A checkpoint folder with config.json and the tokenizer, and no weights at all."""
    from tests.conftest import build_tiny

    folder = tmp_path / "no-weights"
    build_tiny("llama", vocab=len(tiny_tokenizer)).config.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def calibrated(monkeypatch):
    """Rates already measured on this machine (the plan reads them; nothing is timed in the test)."""
    from bench.spine import calibrate

    monkeypatch.setattr(calibrate, "rates", lambda device="cpu", refresh=False: RATES)


def test_a_models_first_cell_pays_for_its_load_with_its_tokenizer(config_only, monkeypatch):
    """The first cell of a model counts its load (fixed part, its tokenizer's load as the plan timed it, its
    weights; a random-init control its parameters drawn), the next cell of the same model none."""
    from bench.ground import spec
    from bench.models import shapes
    from bench.spine import costs, run

    read = shapes.read
    monkeypatch.setattr(shapes, "read", lambda ref: (*read(ref)[:3], 1.25))  # the tokenizer took 1.25 s to load
    specs = spec.load_specs([SPEC, SPEC.replace("induction-heads-exist", "k-composition")])
    for name, initialised in ((str(config_only), False), (f"{config_only}+random-init", True)):
        opts = run.Options(models=(name,), profile="smoke", device="cpu", dtype="float32", seed=0)
        first, second = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none")
        shape, work, load, width, _ = first.work
        assert load == (1.25, initialised)
        load_s = gc.load_seconds(shape, RATES, tokenizer_s=1.25, initialised=initialised)
        assert load_s == pytest.approx(0.5 + 1.25 + (shape.n_params / 1e7 if initialised else
                                                      shape.n_params * 4 / 1e8))
        assert first.predicted_s == round(gc.seconds(shape, work, RATES, width) + load_s, 2)
        assert second.work[2] is None


def test_reading_a_config_times_its_tokenizers_load(config_only, monkeypatch):
    """The plan times the tokenizer it loads anyway (a run loads the same one with the model): the seconds that
    AutoTokenizer.from_pretrained took; a folder without a tokenizer, counted with a stand-in's, loads none."""
    import time

    import transformers

    from bench.models import loading, shapes

    real = transformers.AutoTokenizer.from_pretrained

    def slow(*a, **k):
        time.sleep(0.3)
        return real(*a, **k)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", slow)
    config, tok, note, took = shapes.read(loading.resolve(str(config_only)))
    assert note == "" and 0.3 <= took < 30
    bare = config_only.parent / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((config_only / "config.json").read_text())
    *_, note, took = shapes.read(loading.resolve(str(bare)))
    assert "has none" in note and took == 0.0


def test_worker_processes_load_the_model_once_per_work_unit(config_only, monkeypatch):
    """A run of worker processes hands out work units (one model's cells of one family) and each loads its model
    afresh: planned with `workers`, the first cell of every unit pays a load; in one process, the first cell of the
    model only."""
    from bench.ground import spec
    from bench.models import shapes
    from bench.spine import costs, run

    read = shapes.read
    monkeypatch.setattr(shapes, "read", lambda ref: (*read(ref)[:3], 1.25))
    root = Path(SPEC).parents[1]
    specs = spec.load_specs([SPEC, str(root / "circuits" / "k-composition.toml"),
                             str(root / "ecm" / "icl-improves-with-demonstrations.toml")])
    opts = run.Options(models=(str(config_only),), profile="smoke", device="cpu", dtype="float32", seed=0)
    one = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none")
    pool = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none", workers=True)
    assert [r.claim.partition(".")[0] for r in one] == ["circuits", "circuits", "ecm"]
    assert [r.work[2] is not None for r in one] == [True, False, False]
    assert [r.work[2] is not None for r in pool] == [True, False, True]  # ecm is a unit of its own
    assert pool[2].predicted_s - one[2].predicted_s == pytest.approx(
        gc.load_seconds(one[0].work[0], RATES, tokenizer_s=1.25), abs=0.02)


def test_a_finished_runs_order_books_the_shared_work_to_the_cell_that_began_first(config_only):
    """Planned against a finished run (`began`), the cell that started first pays for what the cells share (here
    the model's load), whatever the specs' order; a cell the run does not name keeps its place after them."""
    from bench.ground import spec
    from bench.spine import costs, run

    first_spec, second_spec = SPEC, SPEC.replace("induction-heads-exist", "k-composition")
    specs = spec.load_specs([first_spec, second_spec])
    name = str(config_only)
    opts = run.Options(models=(name,), profile="smoke", device="cpu", dtype="float32", seed=0)
    plain = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none")
    assert [r.claim for r in plain] == ["circuits.induction-heads-exist", "circuits.k-composition"]
    began = {("circuits.k-composition", name): 10.0, ("circuits.induction-heads-exist", name): 20.0}
    swapped = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none",
                            began=began)
    assert [r.claim for r in swapped] == ["circuits.k-composition", "circuits.induction-heads-exist"]
    assert swapped[0].work[2] is not None and swapped[1].work[2] is None  # the load: k-composition's now
    named = {("circuits.k-composition", name): 10.0}
    assert [r.claim for r in costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40,
                                           runs_dir=config_only / "none", began=named)] == [
        "circuits.k-composition", "circuits.induction-heads-exist"]


def test_plan_on_a_folder_without_weights_reads_no_weights(cli, config_only, calibrated, monkeypatch):
    import transformers

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_config", refuse)
    from bench.models import loading

    monkeypatch.setattr(loading, "load", refuse)
    res = cli(*["plan", SPEC, "--models", str(config_only), "--json", "--runs-dir", str(config_only / "none")])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.strip().splitlines()]
    cell, totals = lines[0], lines[-1]["totals"]
    for key in ("claim", "model", "predicted_s", "peak_host_bytes", "peak_device_bytes", "fits", "units",
                "units_for_power"):
        assert key in cell
    assert cell["claim"] == "circuits.induction-heads-exist" and cell["units"] == 16
    assert cell["fits"] is True and cell["predicted_s"] > 0
    assert cell["units_for_power"] is None  # no earlier record: no measured spread
    assert totals["all"]["cells"] == 1
    assert not list(config_only.glob("*.safetensors"))


def test_plan_text_output_and_a_bad_option(cli, config_only, calibrated):
    res = cli(*["plan", SPEC, "--models", str(config_only)])
    assert res.exit_code == 0, res.output
    assert "total run:" in res.output and "fits" in res.output
    bad = cli(*["plan", SPEC, "--models", str(config_only), "--host-memory", "0"])
    assert bad.exit_code == 2


def test_plan_says_a_cell_does_not_fit_in_little_host_memory(cli, config_only, calibrated):
    res = cli(*["plan", SPEC, "--models", str(config_only), "--json", "--host-memory", "0.001"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[0])["fits"] is False


def test_verify_refuses_a_cell_that_does_not_fit_before_any_work(cli, tiny_model_dir, monkeypatch):
    from bench.spine import run

    def never(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(run, "execute", never)
    monkeypatch.setenv("BENCH_HOST_MEMORY", "0.001")
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
    assert res.exit_code == 2, res.output
    assert "predicted not to fit" in res.output
    monkeypatch.setenv("BENCH_HOST_MEMORY", "64")
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
    assert res.exit_code == 4 and "the run started" in res.output  # with room enough it goes on to the run


def test_rates_are_cached_per_machine(tmp_path, monkeypatch):
    from bench.spine import calibrate

    calls = []
    monkeypatch.setattr(calibrate, "measure", lambda device="cpu": calls.append(device) or RATES)
    assert calibrate.rates("cpu") == RATES and calibrate.rates("cpu") == RATES
    assert calls == ["cpu"]  # measured once, then read back
    # the session's calibration folder also holds other files (architectures' call scales, `-calls.json`):
    # read this machine's rates file by its name, not whichever file the folder lists first
    stored = json.loads((tmp_path / "bench-cache" / "calibration" / f"{calibrate.machine_key('cpu')}.json").read_text())
    assert stored == asdict(RATES)


def test_units_for_power_from_an_earlier_record(cli, config_only, calibrated, tmp_path):
    """Known answer: each sub-rule's spread from the earlier verdict's interval, n · ((z₀.₉₅ + z₀.₈) · se / Δ)²
    with Δ the bound against 0; the claim needs the larger of the two."""
    from scipy import stats

    parts = [{"outcome": "SUPPORTED", "reason": "", "rule": "threshold", "n": 16, "ci_low": 0.5, "ci_high": 0.7,
              "alpha": 0.05},
             {"outcome": "SUPPORTED", "reason": "", "rule": "paired_difference", "n": 16, "ci_low": 1.5,
              "ci_high": 2.5, "alpha": 0.05}]
    verdict = {"outcome": "SUPPORTED", "reason": "", "rule": "all", "n": 16, "ci_low": 0.5, "ci_high": 0.7,
               "parts": parts}
    run = tmp_path / "runs" / "20260101-000000-000-aaaa"
    run.mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({"profile": "smoke", "cells": [
        {"spec": {"id": "circuits.induction-heads-exist"}, "model": str(config_only), "verdict": verdict}]}))
    res = cli(*["plan", SPEC, "--models", str(config_only), "--json", "--runs-dir", str(tmp_path / "runs")])
    cell = json.loads(res.output.splitlines()[0])
    z = stats.norm.ppf(0.95) + stats.norm.ppf(0.8)
    t = stats.t.ppf(0.975, 15)
    need = [int(np.ceil(16 * (z * (hi - lo) / 2 / t / bound) ** 2)) for lo, hi, bound in ((0.5, 0.7, 0.4),
                                                                                         (1.5, 2.5, 1.0))]
    assert need == [2, 6]
    assert cell["units_for_power"] == 6 and cell["units"] == 16


def test_plan_warns_when_the_rates_were_measured_on_a_busy_machine(cli, config_only, monkeypatch):
    """Rates taken while other work held the CPUs make every prediction long (a load of 6 on 2 cores gave a
    total 3.4× the measured run): the plan says so, and stays quiet for rates from a quiet machine."""
    from dataclasses import replace

    from bench.spine import calibrate

    for load, warned in ((3.0, True), (0.2, False)):
        monkeypatch.setattr(calibrate, "rates", lambda device="cpu", refresh=False, l=load: replace(RATES, load=l))
        res = cli(*["plan", SPEC, "--models", str(config_only)])
        assert res.exit_code == 0, res.output
        assert ("measured at a load of 3.0 per CPU" in res.output) is warned, res.output


def test_measured_rates_keep_the_load_they_were_taken_at(monkeypatch):
    from bench.spine import calibrate

    monkeypatch.setattr(calibrate.os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    monkeypatch.setattr(calibrate.os, "cpu_count", lambda: 2)
    assert calibrate.busy() == 3.0
    assert calibrate.warning(replace_load(3.0)) is not None and calibrate.warning(replace_load(0.4)) is None


def replace_load(load: float):
    from dataclasses import replace

    return replace(RATES, load=load)


def test_verify_plans_only_the_cells_it_will_measure(cli, tiny_model_dir, calibrated, monkeypatch, tmp_path):
    """A cell whose frame the cache holds is read back, so `bench verify` counts no cost for it: after a run of
    one claim, a run of that claim and another counts the other alone (planning every cell made a nearly
    cached run of every claim spend about 50 s before its first cell)."""
    from bench.ground import costs as gc

    counted = []
    real = gc.cost_of
    monkeypatch.setattr(gc, "cost_of", lambda info, planned, values: counted.append(info.name)
                        or real(info, planned, values))
    other = str(Path(SPEC).with_name("norm-folding-is-exact.toml"))
    runs = ["--models", str(tiny_model_dir), "--no-report", "--runs-dir", str(tmp_path / "runs")]
    assert cli("verify", SPEC, *runs).exit_code == 0
    assert counted == ["induction"]  # cold: the one cell is planned
    counted.clear()
    res = cli("verify", SPEC, other, *runs)
    assert res.exit_code == 0, res.output
    assert counted == ["norm_folding"]  # the induction cell is in the cache: not planned again


CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "configs"


@pytest.mark.embedded
def test_plan_for_a_gpu_on_a_bare_config_folder(cli, tmp_path, calibrated, monkeypatch):
    """A folder with nothing but an 8B config.json (no tokenizer, no weights) is planned for an 80 GiB GPU this
    machine may lack: tokens counted by the embedded stand-in's tokenizer (said in the notes), no weights read,
    and by hand: bfloat16 weights 2 × 8,029,995,008 bytes on the device, the host holding them beside the
    process (the rates' base bytes)."""
    import shutil

    import torch
    import transformers

    folder = tmp_path / "llama3-8b"
    folder.mkdir()
    shutil.copy(CONFIGS / "llama3-8b" / "config.json", folder / "config.json")

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_config", refuse)
    res = cli("plan", SPEC, "--models", str(folder), "--device", "cuda", "--gpu-memory", "80", "--json",
              "--runs-dir", str(tmp_path / "none"))
    assert res.exit_code == 0, res.output
    cell = next(json.loads(x) for x in res.output.splitlines() if x.startswith("{"))
    assert "no cuda device on this machine" in res.output or torch.cuda.is_available()
    weights = 8_029_995_008 * 2
    assert cell["peak_host_bytes"] == RATES.base_bytes + weights
    assert weights < cell["peak_device_bytes"] < 80 * 2**30 and cell["fits"] is True
    assert any("token counts from smollm2-135m's tokenizer" in n for n in cell["notes"])
    assert cell["predicted_s"] is None or torch.cuda.is_available()  # no GPU here: memory only, no time
    bad = cli("plan", SPEC, "--models", str(folder), "--device", "cuda")  # no GPU and no --gpu-memory
    assert bad.exit_code == 2 or torch.cuda.is_available()


def test_a_random_init_control_of_a_config_folder_without_weights(config_only):
    """The control of a config folder (a shape nobody has converted) is fingerprinted by its config and
    tokenizer, loads with that config's shape, and a changed config is another control."""
    import json as js

    from bench import models

    ref = models.resolve(f"{config_only}+random-init")
    first = ref.fingerprint()
    assert first.startswith("config-sha256:") and first.endswith("+random-init@seed0")
    loaded = models.load(ref, "cpu", dtype="float32")
    assert loaded.hf.config.num_hidden_layers == 2 and loaded.tokenizer is not None
    cfg = js.loads((config_only / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (config_only / "config.json").write_text(js.dumps(cfg))
    assert ref.fingerprint() != first


def test_oversubscription_is_named_only_when_the_cpus_are_busy_and_threads_are_several(monkeypatch):
    from bench.spine import calibrate

    monkeypatch.setattr(calibrate.os, "cpu_count", lambda: 2)
    for load, threads, named in ((6.0, 2, True), (6.0, 1, False), (1.5, 2, False), (2.5, 4, True)):
        monkeypatch.setattr(calibrate.os, "getloadavg", lambda l=load: (l, l, l))
        why = calibrate.oversubscribed(threads)
        assert (why is not None) is named, (load, threads, why)
        if named:
            assert f"load {load:.1f} on 2" in why and f"{threads} threads" in why and "OMP_NUM_THREADS=1" in why


def test_verify_says_before_any_work_that_a_busy_cpu_will_slow_its_threads(cli, tiny_model_dir, monkeypatch):
    import torch

    from bench.spine import calibrate, run

    def never(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(run, "execute", never)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    for load, said in ((8.0, True), (0.1, False)):
        monkeypatch.setattr(calibrate, "busy", lambda l=load: l / (calibrate.os.cpu_count() or 1))
        res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
        assert "the run started" in res.output
        assert ("the CPUs are already busy" in res.output) is said, res.output


def test_a_cell_counts_the_units_of_the_metric_its_rule_tests(config_only):
    """One probe, three claims: the reliability claim is tested over the trained facts of each training run, the
    erosion claims over the held-out facts (knowledge's smoke profile: 10 trained, 10 mixed in, of a first chunk
    of 48)."""
    from bench.ground import spec
    from bench.spine import costs, run

    knowledge = Path(SPEC).parents[1] / "knowledge"
    specs = spec.load_specs([knowledge / "lora-learns-unknown-facts.toml", knowledge / "new-facts-erode-known.toml"])
    opts = run.Options(models=(str(config_only),), profile="smoke", device="cpu", dtype="float32", seed=0)
    rows = {r.claim: r for r in costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40,
                                              runs_dir=config_only / "none")}
    learns, erodes = rows["knowledge.lora-learns-unknown-facts"], rows["knowledge.new-facts-erode-known"]
    assert (learns.units, learns.unit) == (10, "trained facts per training run")
    assert (erodes.units, erodes.unit) == (48 - 10 - 10, "held-out facts per training run")


def test_a_finished_runs_order_is_kept_across_models(config_only):
    """Worker processes interleave the models' cells: planned against their start times, the toys (work shared by
    every model) are booked to the cell that began first, even when another model's cells began earlier still —
    not regrouped by model as one process would run them."""
    from bench.ground import spec
    from bench.spine import costs, run

    needs = SPEC.replace("induction-heads-exist", "induction-needs-two-layers")
    specs = spec.load_specs([SPEC, needs])
    a, b = str(config_only), f"{config_only}+random-init"
    opts = run.Options(models=(a, b), profile="smoke", device="cpu", dtype="float32", seed=0)
    began = {("circuits.induction-heads-exist", a): 1.0, ("circuits.induction-needs-two-layers", b): 2.0,
             ("circuits.induction-needs-two-layers", a): 3.0, ("circuits.induction-heads-exist", b): 4.0}
    rows = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none", began=began)
    assert [(r.claim.rpartition(".")[2], r.model == b) for r in rows] == [
        ("induction-heads-exist", False), ("induction-needs-two-layers", True),
        ("induction-needs-two-layers", False), ("induction-heads-exist", True)]
    assert rows[1].work[1].maps_trained > 0 and rows[2].work[1].maps_trained == 0  # the toys: trained once, first
    plain = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none")
    assert [r.model == b for r in plain] == [False, False, True, True]  # one process: grouped by model
    assert plain[1].work[1].maps_trained > 0 and plain[3].work[1].maps_trained == 0


def test_an_exact_selection_counts_its_languages_and_a_replicated_one_its_halves(config_only):
    """plnd.few-neurons decides on one exact row per language (7 of them); dominant-language-fewest on 20
    split-half replicates of the same selection."""
    from bench.ground import spec
    from bench.spine import costs, run

    root = Path(SPEC).parents[1]
    specs = spec.load_specs([root / "plnd" / "few-neurons.toml", root / "langneurons" / "dominant-language-fewest.toml"])
    opts = run.Options(models=(str(config_only),), profile="smoke", device="cpu", dtype="float32", seed=0)
    rows = {r.claim: r for r in costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40,
                                              runs_dir=config_only / "none")}
    exact, halves = rows["plnd.few-neurons"], rows["langneurons.dominant-language-fewest"]
    assert (exact.units, exact.unit) == (7, "languages")
    assert (halves.units, halves.unit) == (20, "split-half replicates")


def test_power_is_planned_on_a_gated_claim_not_on_its_gates(tmp_path):
    """A gate is a precondition (`lens_final_gap ≤ 1e-3` before logit-lens's trend): its bound set against the
    claim's interval gave a nonsense need (50,580 texts); only the claim's bounded rules count. A combined
    verdict whose intervals are in its parts (none at the top) is still an earlier record to plan from."""
    from bench.spine.costs import _bounded, _prior_verdicts, recorded_cells

    gate = {"rule": "threshold", "metric": "gap", "reduce": "max", "max": 1e-3}
    claim = {"rule": "threshold", "metric": "m", "min": 0.4}
    assert _bounded("gated", {"of": [gate, claim]}) == [("threshold", {"metric": "m", "min": 0.4})]
    assert len(_bounded("all", {"of": [gate, claim]})) == 2  # an `all` is every part's claim
    assert _bounded("gated", {"of": [gate, {"rule": "all", "of": [claim, claim]}]}) == [
        ("threshold", {"metric": "m", "min": 0.4})] * 2
    part = {"outcome": "SUPPORTED", "n": 16, "ci_low": 0.5, "ci_high": 0.7}
    run = tmp_path / "runs" / "20260101-000000-000-aaaa"
    run.mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({"profile": "smoke", "cells": [
        {"spec": {"id": "x.combined"}, "model": "m", "verdict": {"n": 16, "ci_low": None, "parts": [part, part]}},
        {"spec": {"id": "x.none"}, "model": "m", "verdict": {"n": 16, "ci_low": None}}]}))
    prior = _prior_verdicts(recorded_cells(tmp_path / "runs"))
    assert list(prior) == [("x.combined", "m")]


def test_a_cell_whose_work_training_decides_is_planned_between_its_bounds(cli, config_only, calibrated):
    """RL from the base model has a floor: the plan predicts the geometric mean of the cell's least and most
    seconds and shows both, in text and JSON; a cell without a floor has no range.  Retimed at other rates, the
    range and the middle are timed again together."""
    from dataclasses import replace

    from bench.ground import spec
    from bench.spine import costs, run

    root = Path(SPEC).parents[1] / "generalization"
    specs = spec.load_specs([root / "rl-generalizes-sft-memorizes.toml", root / "sft-needed-before-rl.toml"])
    opts = run.Options(models=(str(config_only),), profile="smoke", device="cpu", dtype="float32", seed=0)
    plain, bounded = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=config_only / "none")
    assert plain.predicted_range_s is None
    low, high = bounded.predicted_range_s
    assert 0 < low < high and bounded.predicted_s == pytest.approx((low * high) ** 0.5, abs=0.02)
    bounded.retimed(replace(RATES, forward=RATES.forward / 2, backward=RATES.backward / 2))
    assert bounded.predicted_range_s[1] > high and bounded.predicted_s == pytest.approx(
        (bounded.predicted_range_s[0] * bounded.predicted_range_s[1]) ** 0.5, abs=0.02)
    out = cli("plan", str(root / "sft-needed-before-rl.toml"), "--models", str(config_only), "--device", "cpu",
              "--runs-dir", str(config_only / "none"))
    assert out.exit_code == 0 and "training decides:" in out.output
    out = cli("plan", str(root / "sft-needed-before-rl.toml"), "--models", str(config_only), "--device", "cpu",
              "--json", "--runs-dir", str(config_only / "none"))
    row = json.loads(out.output.splitlines()[0])
    assert len(row["predicted_range_s"]) == 2 and row["predicted_range_s"][0] < row["predicted_s"]


def test_the_plan_says_when_the_latest_run_of_a_cell_could_not_decide_it(cli, config_only, calibrated, tmp_path):
    """A cell whose latest record at the same profile was INCONCLUSIVE by a failed precondition is named, with the
    reason's clause; a later record that decided it, or one of another profile, says nothing."""
    def write(run_id: str, profile: str, outcome: str, reason: str) -> None:
        run = tmp_path / "runs" / run_id
        run.mkdir(parents=True)
        verdict = {"outcome": outcome, "reason": reason, "rule": "gated"}
        (run / "record.json").write_text(json.dumps({"profile": profile, "cells": [
            {"spec": {"id": "circuits.induction-heads-exist"}, "model": str(config_only), "verdict": verdict}]}))

    def plan() -> tuple[str, list[str]]:
        res = cli(*["plan", SPEC, "--models", str(config_only), "--runs-dir", str(tmp_path / "runs")])
        row = json.loads(cli(*["plan", SPEC, "--models", str(config_only), "--json", "--runs-dir",
                               str(tmp_path / "runs")]).output.splitlines()[0])
        return res.output, row["notes"]

    write("20260101-000000-000-aaaa", "smoke", "INCONCLUSIVE",
          "undecided in every one of 2 training runs × 40 units: seed 0: INCONCLUSIVE (precondition not met: "
          "format_ok[base,id]: 9/40 = 0.225 vs ceiling < 0.2, binomial p = 0.732); seed 1: INCONCLUSIVE (…)")
    text, notes = plan()
    said = ("the latest run of this cell at this profile could not decide it: precondition not met: "
            "format_ok[base,id]: 9/40 = 0.225 vs ceiling < 0.2, binomial p = 0.732")
    assert said in notes and f"circuits.induction-heads-exist × {config_only}: {said}" in text
    write("20260102-000000-000-aaaa", "full", "SUPPORTED", "")  # another profile: the smoke record still stands
    assert said in plan()[1]
    write("20260103-000000-000-aaaa", "smoke", "SUPPORTED", "ρ = 0.9")  # decided since
    assert not [n for n in plan()[1] if "could not decide" in n]
