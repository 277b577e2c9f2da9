"""The shared-prefix layout of the generalization family's decoding and training passes, on tiny hand-built models:
it must compute what whole left-padded prompts compute — log-probabilities, their gradients, greedy answers."""

from __future__ import annotations

import pytest
import torch

from bench.families.generalization import sampling, tasks, train_loop
from bench.families.generalization.train_loop import TrainConfig
from bench.models import arch as arch_mod
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")

TASK = tasks.TaskConfig(2, None, "+", 100)


def _prompts(n: int = 5) -> list[str]:
    demos = tasks.demo_items(TASK, "id", 2, 0, faces=True)
    return [tasks.prompt(it, demos) for it in tasks.generate(TASK, "id", n, 0, stream=2, need_face=True)]


def test_shared_length_keeps_one_token_of_every_row():
    assert sampling.shared_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert sampling.shared_length([[1, 2, 3], [1, 2, 3]]) == 2  # identical rows: the last token stays out
    assert sampling.shared_length([[1], [1, 2]]) == 0
    assert sampling.shared_length([[7, 1], [8, 1]]) == 0


def test_prefix_and_rest_are_each_prompts_own_tokens(tiny_tokenizer):
    prompts = _prompts()
    enc = sampling.encode(tiny_tokenizer, prompts, "cpu")
    assert enc.n_prefix > 20  # the task statement and the demonstrations
    ids, mask = enc.whole()
    for p, row, m in zip(prompts, ids, mask):
        assert row[m.bool()].tolist() == tiny_tokenizer(p)["input_ids"]


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_logprobs_and_gradients_equal_whole_prompts(tiny_tokenizer, family):
    """The prefix runs once with gradients and is expanded along the batch: the loss and the gradient of every
    LoRA matrix are those of the whole prompts."""
    hf = build_tiny(family, vocab=len(tiny_tokenizer))
    prompts = _prompts(4)
    c_ids, c_mask = sampling.encode_completions(tiny_tokenizer, [" 3+10\n", " 12\n", " 2+10\n", " 7+7+7\n"], "cpu")
    cfg = TrainConfig(method="sft", lora_rank=4)
    grads = []
    with train_loop.adapted(hf, arch_mod.inspect(hf), cfg) as model:
        for share in (True, False):
            model.zero_grad(set_to_none=True)
            enc = sampling.encode(tiny_tokenizer, prompts, "cpu", share=share)
            assert (enc.n_prefix > 0) == share
            logp = sampling.token_logprobs(model, enc, c_ids, c_mask)
            (-logp.sum()).backward()
            grads.append((logp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}))
    (a, ga), (b, gb) = grads
    assert torch.allclose(a, b, atol=1e-5)
    assert (a != 0).sum() == c_mask.sum()
    assert ga.keys() == gb.keys() and len(ga) > 0
    for n in ga:
        assert torch.allclose(ga[n], gb[n], atol=1e-5, rtol=1e-4), n
    assert any(float(g.abs().max()) > 0 for g in ga.values())


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_greedy_and_seeded_decoding_equal_whole_prompts(tiny_tokenizer, family):
    hf = build_tiny(family, vocab=len(tiny_tokenizer))
    prompts = _prompts(6)
    shared = sampling.decode(hf, tiny_tokenizer, prompts, 6, micro_batch=4)
    whole = sampling.decode(hf, tiny_tokenizer, prompts, 6, micro_batch=4, share=False)
    assert shared.texts == whole.texts
    assert torch.equal(shared.ids, whole.ids) and torch.equal(shared.mask, whole.mask)
    a = sampling.decode(hf, tiny_tokenizer, prompts, 6, generator=torch.Generator().manual_seed(1))
    b = sampling.decode(hf, tiny_tokenizer, prompts, 6, generator=torch.Generator().manual_seed(1), share=False)
    assert a.texts == b.texts
