"""Hooks capture exactly what transformers computes, change outputs only inside their block, and always go away."""

from __future__ import annotations

import pytest
import torch

from bench.models import arch, hooks
from tests.conftest import build_tiny


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2"])
def test_captured_block_outputs_equal_output_hidden_states(family):
    model = build_tiny(family)
    a = arch.inspect(model)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), hooks.capture(model, [b.path for b in a.blocks]) as got:
        out = model(input_ids=ids, output_hidden_states=True)
    hs = out.hidden_states  # embeddings, then each block (the last one after the final norm)
    for i, b in enumerate(a.blocks[:-1]):
        torch.testing.assert_close(got[b.path][0], hs[i + 1], rtol=0, atol=0)
    final = arch.get(model, a.final_norm)(got[a.blocks[-1].path][0])
    torch.testing.assert_close(final, hs[-1], rtol=1e-6, atol=1e-6)


def test_capture_inputs_and_transform():
    model = build_tiny("llama")
    a = arch.inspect(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 8))
    with torch.no_grad(), hooks.capture(model, [a.blocks[0].ffn_out], inputs=True,
                                         transform=lambda t: t.abs().sum(-1)) as got:
        model(input_ids=ids)
    assert got[a.blocks[0].ffn_out][0].shape == (1, 8)


def test_intervention_zeroes_a_neuron_like_a_weight_edit():
    """Zeroing FFN neuron j at the activation equals zeroing column j of the down projection."""
    model = build_tiny("llama")
    a = arch.inspect(model)
    b = a.blocks[1]
    ids = torch.randint(0, model.config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(3))
    j = 5

    def zero(t):
        t = t.clone()
        t[..., j] = 0
        return t

    with torch.no_grad():
        base = model(input_ids=ids).logits
        with hooks.intervene(model, {b.ffn_act: zero}):
            hooked = model(input_ids=ids).logits
        after = model(input_ids=ids).logits
        down = arch.get(model, b.ffn_out)
        saved = down.weight[:, j].clone()
        down.weight[:, j] = 0
        edited = model(input_ids=ids).logits
        down.weight[:, j] = saved
    torch.testing.assert_close(hooked, edited, rtol=1e-5, atol=1e-6)
    assert (hooked - base).abs().max() > 0  # the edit did something
    torch.testing.assert_close(after, base, rtol=0, atol=0)  # and the hook is gone


def test_hooks_are_removed_when_forward_raises():
    model = build_tiny("llama")
    path = arch.inspect(model).blocks[0].path
    with pytest.raises(RuntimeError, match="boom"):
        with hooks.intervene(model, {path: lambda t: (_ for _ in ()).throw(RuntimeError("boom"))}):
            model(input_ids=torch.tensor([[1, 2, 3]]))
    mod = arch.get(model, path)
    assert not mod._forward_hooks and not mod._forward_pre_hooks


def test_unknown_site_is_an_arch_error():
    from bench.ground.errors import ArchError

    with pytest.raises(ArchError, match="no module at 'model.nope'"):
        with hooks.capture(build_tiny("llama"), ["model.nope"]):
            pass


def test_attention_implementation_switch_restores():
    model = build_tiny("llama")
    before = model.config._attn_implementation
    with hooks.attention_implementation(model, "eager"):
        assert model.config._attn_implementation == "eager"
    assert model.config._attn_implementation == before
