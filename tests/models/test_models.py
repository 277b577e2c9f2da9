"""Model names resolve without loading; bad names fail with one clear line; fingerprints follow the weights."""

from __future__ import annotations

import shutil

import pytest
import torch

from bench import models
from bench.ground.errors import ModelError


def test_unknown_name_says_what_was_tried():
    with pytest.raises(ModelError) as info:
        models.resolve("smollm2-135")
    msg = str(info.value)
    assert "model 'smollm2-135' is not available" in msg and "did you mean 'smollm2-135m'" in msg and "\n" not in msg


def test_hub_id_offline_is_a_clear_error():
    with pytest.raises(ModelError, match="not available.*HF_HUB_OFFLINE is set"):
        models.resolve("no/such-model")


def test_path_that_is_not_a_model(tmp_path):
    with pytest.raises(ModelError, match="neither a checkpoint folder"):
        models.resolve(str(tmp_path))


def test_local_folder_resolves_loads_and_fingerprints(tiny_model_dir, tmp_path):
    ref = models.resolve(str(tiny_model_dir))
    assert ref.kind == "path"
    fp = ref.fingerprint()
    assert fp == models.resolve(str(tiny_model_dir)).fingerprint()  # stable
    m = models.load(ref, "cpu")
    assert m.fingerprint == fp and m.dtype == torch.float32 and m.arch.n_layers == 2
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    assert models.resolve(str(copy)).fingerprint() == fp  # same content, same fingerprint
    from safetensors.torch import load_file, save_file

    weights = load_file(copy / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + 1.0
    save_file(weights, copy / "model.safetensors", metadata={"format": "pt"})
    assert models.resolve(str(copy)).fingerprint() != fp  # different weights, different fingerprint


def test_pickled_weights_refused_without_allow_pickle(tiny_model_dir, tmp_path):
    d = tmp_path / "pickled"
    shutil.copytree(tiny_model_dir, d)
    m = models.load(models.resolve(str(d)), "cpu")
    torch.save(m.hf.state_dict(), d / "pytorch_model.bin")  # a pickled checkpoint, as older tools wrote them
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="cannot load model"):
        models.load(models.resolve(str(d)), "cpu")
    assert models.load(models.resolve(str(d)), "cpu", allow_pickle=True).arch.n_layers == 2


def test_aliases_are_listed():
    assert set(models.ALIASES) == {"smollm2-135m", "gemma3-270m"}
    for alias in models.ALIASES:
        assert models.cache_state(alias) in ("ready", "not converted", "not installed")


def test_an_architecture_without_sdpa_loads_with_eager_attention(tiny_model_dir, tiny_tokenizer, tmp_path):
    """Bloom has no sdpa path: asking for sdpa made loading fail; the default picks eager for it, sdpa elsewhere."""
    from tests.conftest import build_tiny

    d = tmp_path / "tiny-bloom"
    build_tiny("bloom", vocab=len(tiny_tokenizer)).save_pretrained(d)
    tiny_tokenizer.save_pretrained(d)
    assert models.load(models.resolve(str(d))).hf.config._attn_implementation == "eager"
    assert models.load(models.resolve(str(tiny_model_dir))).hf.config._attn_implementation == "sdpa"
