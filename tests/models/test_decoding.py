"""The shared-prefix layout of batched decoding and of completion log-probabilities, on tiny hand-built models: it
must compute what whole left-padded prompts compute — log-probabilities, their gradients, greedy answers."""

from __future__ import annotations

import pytest
import torch

from bench.models import arch as arch_mod
from bench.models import decoding, train
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")

STATEMENT = ("Card game: add the card values to reach the target. A counts as 1; J, Q and K all count as 10.\n\n"
             "Cards: 3, J. Target: 13.\nAnswer: 3+10\n\nCards: 8, 4. Target: 12.\nAnswer: 8+4\n\n")
HANDS = ["2, K", "J, 7", "5, 5", "Q, A", "9, 3", "K, K"]


def _prompts(n: int = 5) -> list[str]:
    return [f"{STATEMENT}Cards: {h}. Target: {10 + i}.\nAnswer:" for i, h in enumerate(HANDS[:n])]


def test_shared_length_keeps_one_token_of_every_row():
    assert decoding.shared_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert decoding.shared_length([[1, 2, 3], [1, 2, 3]]) == 2  # identical rows: the last token stays out
    assert decoding.shared_length([[1], [1, 2]]) == 0
    assert decoding.shared_length([[7, 1], [8, 1]]) == 0


def test_prefix_and_rest_are_each_prompts_own_tokens(tiny_tokenizer):
    prompts = _prompts()
    enc = decoding.encode(tiny_tokenizer, prompts, "cpu")
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
    c_ids, c_mask = decoding.encode_completions(tiny_tokenizer, [" 3+10\n", " 12\n", " 2+10\n", " 7+7+7\n"], "cpu")
    grads = []
    with train.lora_adapters(hf, train.lora_targets(arch_mod.inspect(hf), "all"), r=4, alpha=8, seed=0) as model:
        for share in (True, False):
            model.zero_grad(set_to_none=True)
            enc = decoding.encode(tiny_tokenizer, prompts, "cpu", share=share)
            assert (enc.n_prefix > 0) == share
            logp = decoding.token_logprobs(model, enc, c_ids, c_mask)
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
    shared = decoding.decode(hf, tiny_tokenizer, prompts, 6, micro_batch=4)
    whole = decoding.decode(hf, tiny_tokenizer, prompts, 6, micro_batch=4, share=False)
    assert shared.texts == whole.texts
    assert torch.equal(shared.ids, whole.ids) and torch.equal(shared.mask, whole.mask)
    a = decoding.decode(hf, tiny_tokenizer, prompts, 6, generator=torch.Generator().manual_seed(1))
    b = decoding.decode(hf, tiny_tokenizer, prompts, 6, generator=torch.Generator().manual_seed(1), share=False)
    assert a.texts == b.texts


def test_prompts_longer_than_a_sliding_window_give_what_they_give_alone(tiny_tokenizer):
    """Padding between a shared prefix and a shorter prompt's rest would take window slots once the sequence
    outgrows a sliding window (64 here): decoding must then fall back to whole left-padded prompts."""
    hf = build_tiny("gemma3", vocab=len(tiny_tokenizer))
    assert decoding.window(hf) == 64
    head = "Question: a long shared preamble that fills most of the attention window, " * 3
    prompts = [head + "then a short one?", head + "then a much longer question with many more words in it?"]
    enc = decoding.encode(tiny_tokenizer, prompts, "cpu")
    assert enc.n_prefix + enc.ids.shape[1] > 64 and enc.mask[0, 0] == 0  # the first prompt is padded mid-way
    fitted = decoding.fitting(hf, enc, 6)
    assert fitted.n_prefix == 0 and torch.equal(fitted.whole()[0], decoding.encode_prompts(tiny_tokenizer, prompts, "cpu")[0])
    got = decoding.decode(hf, tiny_tokenizer, prompts, 6).texts
    alone = tuple(decoding.decode(hf, tiny_tokenizer, [p], 6).texts[0] for p in prompts)
    assert got == alone


def test_finished_rows_leave_a_greedy_batch_without_changing_the_others(tiny_tokenizer):
    hf = build_tiny("gemma3", seed=1, vocab=len(tiny_tokenizer))  # a seed whose answers end at different steps
    prompts = _prompts(6)
    batch = decoding.decode(hf, tiny_tokenizer, prompts, 8)
    assert len(set(batch.mask.sum(1).tolist())) > 2  # rows did leave the batch before the others finished
    alone = [decoding.decode(hf, tiny_tokenizer, [p], 8) for p in prompts]
    assert batch.texts == tuple(a.texts[0] for a in alone)
    for i, a in enumerate(alone):  # the kept tokens, whatever the batch's width
        assert batch.ids[i][batch.mask[i].bool()].tolist() == a.ids[0][a.mask[0].bool()].tolist()
