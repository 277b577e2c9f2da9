"""The model's head logits with soft-capping, and which way a projection's weight faces: known answers."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.models import linear, logits
from tests.conftest import build_tiny


def test_softcap_on_hand_numbers():
    x = torch.tensor([0.0, 2.0, -100.0, 1e-3])
    got = logits.softcap(x, 2.0)
    want = torch.tensor([0.0, 2 * math.tanh(1.0), -2.0, 2 * math.tanh(5e-4)])
    torch.testing.assert_close(got, want)
    assert logits.softcap(x, None) is x


@pytest.mark.parametrize("cap", [None, 0.1])  # the tiny model's logits reach ~0.37: 0.1 bites
def test_head_logits_are_the_models_own_capped_logits(cap):
    hf = build_tiny("gemma3", final_logit_softcapping=cap)
    assert logits.logit_cap(hf) == cap
    ids = torch.tensor([[5, 9, 17, 33]])
    with torch.no_grad():
        want = hf(input_ids=ids).logits.float()  # transformers applies the cap itself
        hidden = hf.base_model(input_ids=ids).last_hidden_state
        got = logits.head_logits(hf, hidden)
    torch.testing.assert_close(got, want)
    if cap:
        assert float(got.abs().max()) <= cap and float(hf.get_output_embeddings()(hidden).abs().max()) > cap


def test_a_model_without_a_cap_reads_none():
    assert logits.logit_cap(build_tiny("llama")) is None


def test_linear_and_conv1d_weights_face_opposite_ways():
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    lin, conv = nn.Linear(3, 5), Conv1D(5, 3)  # both map 3 inputs to 5 outputs
    assert lin.weight.shape == (5, 3) and conv.weight.shape == (3, 5)
    assert linear.in_axis(lin) == 1 and linear.in_axis(conv) == 0
    assert not linear.is_conv1d(lin) and linear.is_conv1d(conv)
    x = torch.randn(4, 3)
    for mod in (lin, conv):
        w, b = linear.in_out(mod)
        assert w.shape == (3, 5)
        torch.testing.assert_close(x @ w + b, mod(x))
    with pytest.raises(TypeError, match="neither"):
        linear.in_axis(nn.Embedding(3, 5))


def _head_inputs(hf):
    seen = []
    hook = hf.get_output_embeddings().register_forward_pre_hook(lambda m, a: seen.append(a[0].is_contiguous()))
    return seen, hook


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_contiguous_head_feeds_the_head_a_contiguous_slice_with_the_same_logits(family):
    hf = build_tiny(family)
    ids = torch.tensor([[5, 9, 17, 33], [6, 10, 18, 34], [7, 11, 19, 35]])
    with torch.no_grad():
        want = hf(input_ids=ids).logits[:, -2:].float()
        logits.contiguous_head(hf)
        logits.contiguous_head(hf)  # idempotent: one hook
        seen, hook = _head_inputs(hf)  # registered after ours, so it sees what the head is given
        got = hf(input_ids=ids, logits_to_keep=2).logits.float()
        whole = hf(input_ids=ids).logits.float()
    hook.remove()
    assert seen == [True, True]  # without contiguous_head the sliced (3, 2, d) states arrive strided
    assert len(hf.get_output_embeddings()._forward_pre_hooks) == 1
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(whole[:, -2:], want, rtol=0, atol=0)  # full-length input: untouched


def test_without_contiguous_head_the_slice_arrives_strided():
    """The other half of the test above: it is the hook that makes the head's input contiguous."""
    hf = build_tiny("llama")
    seen, hook = _head_inputs(hf)
    with torch.no_grad():
        hf(input_ids=torch.tensor([[5, 9, 17], [6, 10, 18]]), logits_to_keep=1)
    hook.remove()
    assert seen == [False]


def test_loaded_models_get_the_contiguous_head(loaded_tiny):
    seen, hook = _head_inputs(loaded_tiny.hf)
    with torch.no_grad():
        loaded_tiny.hf(input_ids=torch.tensor([[5, 9, 17], [6, 10, 18]], device=loaded_tiny.device), logits_to_keep=1)
    hook.remove()
    assert seen == [True]
