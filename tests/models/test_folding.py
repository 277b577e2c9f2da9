"""Norm folding: exact on tiny random Llama, Gemma 3 and GPT-2 (LayerNorm with biases); a broken fold is caught."""

from __future__ import annotations

import pytest
import torch

from bench.models import arch, folding
from tests.conftest import build_tiny


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2", "phi", "gptj", "falcon", "falcon_new", "phi3", "bloom"])
def test_folded_model_computes_the_same_logits(family):
    model = build_tiny(family)
    ids = torch.randint(0, model.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        folded, report = folding.folded_copy(model)
        out = folded(input_ids=ids).logits
    assert report.folded, "nothing was folded"
    assert (out - ref).abs().max().item() <= 1e-5 * ref.abs().max().item()
    a = arch.inspect(folded)
    for norm_path, _ in a.norm_consumers:  # the folded norms are now plain normalisations
        aff = folding.measure(arch.get(folded, norm_path), a.d_model)
        assert torch.allclose(aff.gamma, torch.ones_like(aff.gamma), atol=1e-5)
        assert torch.allclose(aff.beta, torch.zeros_like(aff.beta), atol=1e-6)
    orig = folding.measure(arch.get(model, a.norm_consumers[0][0]), a.d_model)
    assert not torch.allclose(orig.gamma, torch.ones_like(orig.gamma), atol=1e-2), "test model has trivial norms"


def test_gemma_post_norms_are_left_and_reported():
    _, report = folding.folded_copy(build_tiny("gemma3"))
    assert any("post_attention_layernorm" in n for n in report.left)
    assert any("post_feedforward_layernorm" in n for n in report.left)


def test_bloom_embedding_norm_is_left_and_reported():
    """Its consumer is the residual stream itself, not a linear: folding it would change what the blocks read."""
    model = build_tiny("bloom")
    folded, report = folding.folded_copy(model)
    assert "transformer.word_embeddings_layernorm" in report.left
    assert "transformer.word_embeddings_layernorm" not in report.folded
    assert torch.equal(folded.transformer.word_embeddings_layernorm.weight,
                       model.transformer.word_embeddings_layernorm.weight)


def test_measured_gamma_follows_each_family_convention():
    llama, gemma = build_tiny("llama"), build_tiny("gemma3")
    ln = arch.get(llama, "model.layers.0.input_layernorm")
    gn = arch.get(gemma, "model.layers.0.input_layernorm")
    assert torch.allclose(folding.measure(ln, 32).gamma, ln.weight, atol=1e-5)  # γ = w
    assert torch.allclose(folding.measure(gn, 32).gamma, 1 + gn.weight, atol=1e-5)  # γ = 1 + w
    gpt = build_tiny("gpt2")
    n = arch.get(gpt, "transformer.h.0.ln_1")
    aff = folding.measure(n, 32)
    assert torch.allclose(aff.gamma, n.weight, atol=1e-4) and torch.allclose(aff.beta, n.bias, atol=1e-6)


def test_tied_embeddings_are_untied_not_overwritten():
    model = build_tiny("llama")
    emb_before = model.get_input_embeddings().weight.detach().clone()
    folded, _ = folding.folded_copy(model)
    assert torch.equal(folded.get_input_embeddings().weight, emb_before)
    assert folded.get_output_embeddings().weight.data_ptr() != folded.get_input_embeddings().weight.data_ptr()


def test_a_wrong_fold_is_detected():
    """Folding γ but forgetting to reset the norm scales twice: the logits must then differ."""
    model = build_tiny("llama")
    ids = torch.randint(0, model.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1))
    a = arch.inspect(model)
    broken = folding.folded_copy(model)[0]
    with torch.no_grad():
        norm_path, consumers = a.norm_consumers[0]
        aff = folding.measure(arch.get(model, norm_path), a.d_model)
        arch.get(broken, norm_path).weight.copy_(arch.get(model, norm_path).weight)  # undo the reset only
        diff = (broken(input_ids=ids).logits - model(input_ids=ids).logits).abs().max().item()
    assert diff > 1e-3 and not torch.allclose(aff.gamma, torch.ones_like(aff.gamma))


def test_a_bfloat16_norm_is_measured_like_its_float32_copy():
    """In bfloat16 the probe's rounding hid that Gemma 3's scale (1 + w) is affine in w: the norm was refused and
    norm-folding cells ended ERROR under --dtype bfloat16.  The measurement runs on a float32 copy."""
    import torch
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    from bench.models.folding import measure

    torch.manual_seed(0)
    n32 = Gemma3RMSNorm(64)
    with torch.no_grad():
        n32.weight.copy_(torch.randn(64) * 0.3)
    n16 = Gemma3RMSNorm(64).to(torch.bfloat16)
    with torch.no_grad():
        n16.weight.copy_(n32.weight.to(torch.bfloat16))
    before = n16.weight.detach().clone()
    a32, a16 = measure(n32, 64), measure(n16, 64)
    assert torch.allclose(a16.gamma, a32.gamma, atol=2e-2)
    assert torch.equal(n16.weight, before)  # the live module is untouched
