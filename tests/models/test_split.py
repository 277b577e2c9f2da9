"""A model split over devices by accelerate (part of it offloaded) gives the activations of the unsplit model;
on a GPU, bfloat16 activations are gathered on one device in float32 and agree with float32 on the CPU."""

from __future__ import annotations

import pytest
import torch

from bench import models
from bench.models import arch, hooks


def _sites(loaded) -> list[str]:
    a = arch.inspect(loaded.hf)
    return [b.path for b in a.blocks] + [b.ffn_act for b in a.blocks if b.ffn_act]


def _activations(loaded, ids) -> dict[str, torch.Tensor]:
    with torch.no_grad(), hooks.capture(loaded.hf, _sites(loaded)) as got:
        loaded.hf(input_ids=ids.to(hooks.home_device(loaded.hf)), use_cache=False)
    return {k: v[0] for k, v in got.items()}


def _split_map(hf) -> dict[str, str]:
    """Every top-level part on the CPU except the last block, which accelerate offloads to disk."""
    a = arch.inspect(hf)
    last = a.blocks[-1].path
    placed = {name: "cpu" for name, _ in hf.named_children() if name != "model"}
    inner = hf.get_submodule("model")
    for name, child in inner.named_children():
        if name == "layers":
            for i, _ in enumerate(child):
                path = f"model.layers.{i}"
                placed[path] = "disk" if path == last else "cpu"
        else:
            placed[f"model.{name}"] = "cpu"
    return placed


def test_split_model_gives_unsplit_activations(tiny_model_dir, tmp_path, one_thread):
    ref = models.resolve(str(tiny_model_dir))
    whole = models.load(ref, "cpu")
    split = models.load(ref, "cpu", device_map=_split_map(whole.hf), offload_folder=str(tmp_path / "offload"))
    assert hooks.is_split(split.hf) and not hooks.is_split(whole.hf)
    assert "disk" in {str(d) for d in split.hf.hf_device_map.values()}
    ids = torch.randint(0, whole.hf.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    a, b = _activations(whole, ids), _activations(split, ids)
    assert set(a) == set(b) and len(a) >= 4
    for site in a:
        assert b[site].device.type == "cpu" and b[site].dtype == torch.float32
        torch.testing.assert_close(b[site], a[site], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(split.hf(input_ids=ids).logits, whole.hf(input_ids=ids).logits,
                                   rtol=1e-5, atol=1e-5)


def test_float32_model_in_one_place_is_captured_as_it_is(tiny_model_dir, one_thread):
    whole = models.load(models.resolve(str(tiny_model_dir)), "cpu")
    assert hooks.gatherer(whole.hf) is None  # nothing moved or cast: CPU frames stay byte-identical


@pytest.mark.gpu
def test_bfloat16_on_cuda_gathers_float32_close_to_cpu(tiny_model_dir):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    ref = models.resolve(str(tiny_model_dir))
    cpu, gpu = models.load(ref, "cpu"), models.load(ref, "cuda")
    assert gpu.dtype == torch.bfloat16 and gpu.hf.config._attn_implementation == "sdpa"
    ids = torch.randint(0, cpu.hf.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    a, b = _activations(cpu, ids), _activations(gpu, ids)
    for site in a:
        assert b[site].dtype == torch.float32 and b[site].device == hooks.home_device(gpu.hf)
        scale = a[site].abs().max().item()
        assert (b[site].cpu() - a[site]).abs().max().item() <= 0.05 * scale + 1e-3, site
