"""An architecture's model-call overhead per layer beside a Llama layer's (bench.spine.call_scale): the small
model it times is of the config's own class, the ratio's numerator is that model, the result is cached per
architecture and depth, and the plan scales every call of the model by it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bench.ground import costs as gc
from bench.spine import call_scale as cs
from tests.conftest import build_tiny

@pytest.fixture(autouse=True)
def own_calibration(tmp_path):
    """A calibration folder of this test's own: the session's shared one must not keep a faked scale."""
    folder = tmp_path / "bench-cache" / "calibration"
    folder.unlink()
    folder.mkdir()


FAMILIES = ("llama", "gemma3", "gpt2", "phi", "gptj", "falcon", "falcon_new", "phi3", "bloom")


@pytest.mark.parametrize("family", FAMILIES)
def test_the_small_model_is_of_the_configs_class_at_the_tiny_width(family):
    import transformers as tf

    config = build_tiny(family).config
    small = tf.AutoModelForCausalLM.from_config(cs.small_config(config, 5))
    assert type(small).__name__ == type(build_tiny(family)).__name__
    shape = gc.Shape.from_config(small.config)
    assert (shape.n_layers, shape.d_model, shape.head_dim) == (5, 64, 16)
    assert sum(p.numel() for p in small.parameters()) < 500_000
    assert gc.Shape.from_config(config).n_layers == 2  # the config itself is left as it was


def test_a_per_layer_pattern_of_attention_kinds_keeps_its_period():
    import transformers as tf

    config = tf.Gemma3TextConfig(num_hidden_layers=18, sliding_window=512)  # five sliding layers, then a full one
    kinds = cs.small_config(config, 8).layer_types
    assert kinds == config.layer_types[:6] + config.layer_types[:2]
    assert kinds.count("full_attention") == 1 and kinds[5] == "full_attention"
    assert len(config.layer_types) == 18


def test_the_ratio_is_the_configs_call_time_over_the_llamas(monkeypatch):
    """A fake clock that a Gemma 3 call moves by 3 and a Llama call by 2: the measured scale is exactly 1.5 (it
    is 0.67 with the ratio upside down, and 1 when both are Llamas)."""
    import transformers as tf

    clock = [0.0]
    monkeypatch.setattr(cs.time, "perf_counter", lambda: clock[0])
    build = tf.AutoModelForCausalLM.from_config

    def built(cfg, **kw):
        model = build(cfg, **kw)
        step = 3.0 if type(model).__name__.startswith("Gemma3") else 2.0 if type(model).__name__.startswith("Llama") else 0
        model.register_forward_pre_hook(lambda *a: clock.__setitem__(0, clock[0] + step))
        return model

    monkeypatch.setattr(tf.AutoModelForCausalLM, "from_config", built)
    assert cs.measure(build_tiny("gemma3").config) == pytest.approx(1.5)


def test_a_llama_is_the_reference_and_is_not_timed(monkeypatch):
    monkeypatch.setattr(cs, "measure", lambda *a, **k: pytest.fail("timed a Llama"))
    assert cs.call_scale(build_tiny("llama").config) == 1.0


def test_the_scale_is_measured_once_per_architecture_and_depth_and_cached(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(cs, "measure", lambda config, device="cpu": calls.append(config.model_type) or 1.734)
    gemma = build_tiny("gemma3").config
    assert cs.call_scale(gemma) == 1.734 and cs.call_scale(gemma) == 1.734
    assert cs.call_scale(build_tiny("gemma3", num_hidden_layers=3).config) == 1.734
    assert calls == ["gemma3_text", "gemma3_text"]  # depth 2, then depth 3; the second depth-2 read the cache
    stored = json.loads(next((tmp_path / "bench-cache" / "calibration").glob("*-calls.json")).read_text())
    assert stored == {"gemma3_text|2": 1.734, "gemma3_text|3": 1.734}
    monkeypatch.setenv("BENCH_RECALIBRATE", "1")  # measured again, as the rates are
    assert cs.call_scale(gemma) == 1.734 and calls == ["gemma3_text"] * 3


def test_a_class_that_cannot_be_built_small_is_planned_at_a_llamas(monkeypatch):
    def fails(*a, **k):
        raise ValueError("no such architecture")

    monkeypatch.setattr(cs, "measure", fails)
    assert cs.call_scale(build_tiny("phi").config) == 1.0


def test_seconds_scale_only_the_calls_overhead():
    from tests.plan.test_plan_command import RATES

    s = gc.Shape(n_layers=2, d_model=4, d_ff=8, n_heads=2, n_kv_heads=1, head_dim=2, vocab=10)
    w = gc.Work(forward=10, calls=3, generated=4, context=6)
    extra = gc.seconds(replace(s, call_scale=2.5), w, RATES) - gc.seconds(s, w, RATES)
    assert extra == pytest.approx(3 * 2 * RATES.call_layer_s * 1.5)


def test_the_plan_scales_a_models_calls_by_its_architecture(tmp_path, tiny_tokenizer, monkeypatch):
    from bench.ground import spec
    from bench.spine import costs, run
    from tests.plan.test_plan_command import RATES, SPEC

    folders = {}
    for family in ("llama", "gemma3"):
        folders[family] = tmp_path / family
        build_tiny(family, vocab=len(tiny_tokenizer)).config.save_pretrained(folders[family])
        tiny_tokenizer.save_pretrained(folders[family])
    monkeypatch.setattr(cs, "measure", lambda config, device="cpu": 2.0)
    specs = spec.load_specs([SPEC])
    for family, scale in (("llama", 1.0), ("gemma3", 2.0)):
        opts = run.Options(models=(str(folders[family]),), profile="smoke", device="cpu", dtype="float32", seed=0)
        (row,) = costs.for_run(specs, opts, rates=RATES, host_limit=1 << 40, runs_dir=tmp_path / "none")
        shape, work, load, width, _ = row.work
        assert shape.call_scale == scale and work.calls > 0
        assert row.predicted_s == round(gc.seconds(shape, work, RATES, width) + costs._load_s(shape, load, RATES), 2)


def test_the_calibrated_call_overhead_is_floored_by_a_narrow_models_call():
    """A call less its weights' read is a difference of near numbers: with the weights in cache the read can run
    faster than the copy's bandwidth, and the difference came out 0 once.  The narrow model's call bounds it."""
    from bench.spine import calibrate

    assert calibrate.call_overhead(t_call=8e-3, t_read=5e-3, t_narrow=1e-3, layers=4) == pytest.approx(0.75e-3)
    assert calibrate.call_overhead(t_call=4e-3, t_read=5e-3, t_narrow=1e-3, layers=4) == pytest.approx(0.25e-3)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"gemma3_text|2": "fast"}'])
def test_an_unreadable_scale_cache_is_measured_again_and_rewritten(monkeypatch, tmp_path, content):
    from bench.spine.calibrate import machine_key

    path = tmp_path / "bench-cache" / "calibration" / f"{machine_key('cpu')}-calls.json"
    path.write_text(content)
    monkeypatch.setattr(cs, "measure", lambda config, device="cpu": 1.25)
    assert cs.call_scale(build_tiny("gemma3").config) == 1.25
    assert json.loads(path.read_text())["gemma3_text|2"] == 1.25
