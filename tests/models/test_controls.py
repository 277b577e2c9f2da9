"""Negative controls: NAME+random-init is the same config and tokenizer with seeded random weights."""

from __future__ import annotations

import pytest
import torch

from bench import models
from bench.models import controls


def test_names_split_and_join():
    assert controls.split("gemma3-270m+random-init") == ("gemma3-270m", "random-init")
    assert controls.split("plain") == ("plain", None)
    assert controls.split("+random-init") == ("+random-init", None)
    assert controls.base_of(controls.name_of("x")) == "x"


def test_control_has_the_config_and_tokenizer_but_not_the_weights(tmp_path, tiny_tokenizer):
    from conftest import build_tiny

    build_tiny("llama", seed=7, vocab=len(tiny_tokenizer)).save_pretrained(tmp_path)  # not the control's seed
    tiny_tokenizer.save_pretrained(tmp_path)
    base_ref = models.resolve(str(tmp_path))
    ref = models.resolve(controls.name_of(str(tmp_path)))
    assert ref.control == "random-init" and ref.location == base_ref.location
    assert ref.fingerprint() != base_ref.fingerprint() and ref.fingerprint().startswith(base_ref.fingerprint())
    base, ctl, again = models.load(base_ref), models.load(ref), models.load(ref)
    assert ctl.hf.config.to_dict()["hidden_size"] == base.hf.config.hidden_size
    assert ctl.tokenizer.get_vocab() == base.tokenizer.get_vocab()
    pb = dict(base.hf.named_parameters())
    pc = dict(ctl.hf.named_parameters())
    assert pb.keys() == pc.keys()
    weights = [k for k in pb if k.endswith("weight") and pb[k].ndim == 2]
    assert weights and all(not torch.equal(pb[k], pc[k]) for k in weights)
    for k, v in again.hf.named_parameters():  # seeded: the same control every time
        assert torch.equal(v, pc[k])


def test_plan_adds_one_control_cell_per_model(specs_dir):
    from bench.spine import plan
    from bench.ground import spec

    s = spec.load_spec(specs_dir / "circuits" / "induction-heads-exist.toml")
    cells = plan.build([s], ("a", "b"), "smoke", (0,), control="random-init")
    assert [c.model for c in cells] == ["a", "a+random-init", "b", "b+random-init"]


def test_flag_only_when_the_control_supports_the_claim():
    cells = [{"spec": {"id": "c1"}, "model": "m", "verdict": {"outcome": "SUPPORTED"}},
             {"spec": {"id": "c1"}, "model": "m+random-init", "verdict": {"outcome": "SUPPORTED"}},
             {"spec": {"id": "c2"}, "model": "m", "verdict": {"outcome": "SUPPORTED"}},
             {"spec": {"id": "c2"}, "model": "m+random-init", "verdict": {"outcome": "REFUTED"}}]
    control = controls.control_outcomes(cells)
    assert controls.flag({"id": "c1"}, "m", control) == controls.FLAG
    assert controls.flag({"id": "c2"}, "m", control) is None
    assert control[("c2", "m")] == "REFUTED"
    # a claim true of any weights by construction says so: its passing control is expected, a failing one is not
    exact = "an exact identity"
    assert controls.flag({"id": "c1", "control_holds": exact}, "m", control) is None
    assert controls.flag({"id": "c2", "control_holds": exact}, "m", control) == controls.MISSED
    assert controls.flag({"id": "c3", "control_holds": exact}, "m", control) is None  # no control ran


def test_control_holds_is_read_from_the_spec(tmp_path, specs_dir):
    from bench.ground.errors import SpecError
    from bench.ground.spec import load_spec

    text = (specs_dir / "circuits" / "norm-folding-is-exact.toml").read_text()
    assert load_spec(specs_dir / "circuits" / "norm-folding-is-exact.toml").describe()["control_holds"]
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True)
    bad = d / "norm-folding-is-exact.toml"
    bad.write_text(text.replace('holds = "Folding', 'hold = "Folding'))
    with pytest.raises(SpecError, match="hold"):
        load_spec(bad)


def test_control_of_an_embedded_alias_hashes_the_alias_own_file(tmp_path, monkeypatch):
    """`smollm2-135m+random-init` is found by its base alias (the control's name is no alias itself)."""
    from bench.models import loading

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF weights")

    class Fake:
        def gguf_path(self):
            return gguf

    monkeypatch.setitem(loading.ALIASES, "fake-alias", Fake())
    base = loading.ModelRef("fake-alias", "alias", "fake-alias")
    ctl = loading.ModelRef("fake-alias+random-init", "alias", "fake-alias", control="random-init")
    assert ctl.base == base and ctl._gguf() == gguf and ctl.display == "fake-alias+random-init"
    assert ctl.fingerprint() != base.fingerprint() and base.fingerprint() in ctl.fingerprint()
