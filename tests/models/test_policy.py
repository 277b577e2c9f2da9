"""The engine's policy-gradient update on a tiny hand-built model: the sign (a completion with positive advantage
gains log-probability, one with negative advantage loses it), the group-centred advantages, and no update when
a group carries no signal."""

from __future__ import annotations

import pytest
import torch

from bench.models import decoding, policy
from bench.models import train as engine
from tests.conftest import build_tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def _completions(tok, prompt: str, texts: list[str]) -> decoding.Completions:
    c_ids, c_mask = decoding.encode_completions(tok, texts, "cpu")
    return decoding.Completions(decoding.encode(tok, [prompt] * len(texts), "cpu"), c_ids, c_mask, tuple(texts))


def _seq_logp(model, comp) -> torch.Tensor:
    with torch.no_grad():
        return decoding.token_logprobs(model, comp.prompts, comp.ids, comp.mask).sum(-1)


@pytest.mark.parametrize("method", ["lora", "full"])
def test_positive_advantage_gains_probability_negative_loses(tiny_tokenizer, method):
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    recipe = engine.Recipe(method=method, lr=3e-3 if method == "lora" else 1e-3, schedule="constant", r=8,
                           alpha=16, rslora=False, dropout=0.0, targets="all")
    comp = _completions(tiny_tokenizer, "Cards: 3, K. Target: 13.\nAnswer:", [" 3+10\n", " 9*4\n"])
    rewards = torch.tensor([1.0, 0.0])  # one group of two samples: advantages +0.5 and −0.5
    ctx = engine.recipe_adapters(hf, recipe) if method == "lora" else None
    model = ctx.__enter__().get_base_model() if ctx else engine.full_copy(hf)
    try:
        before = _seq_logp(model, comp)
        opt, _ = engine.optimizer(model, recipe, 3)
        for _ in range(3):
            policy.policy_update(model, opt, comp, rewards, group=2)
        after = _seq_logp(model, comp)
    finally:
        if ctx:
            ctx.__exit__(None, None, None)
    assert after[0] > before[0] + 0.05  # rewarded answer up
    assert after[1] < before[1] - 0.05  # unrewarded answer down


def test_advantages_are_centred_per_group():
    adv = policy.group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]), group=3)
    assert torch.allclose(adv, torch.tensor([2 / 3, -1 / 3, -1 / 3, -2 / 3, 1 / 3, 1 / 3]))


def test_pg_loss_known_answer():
    """Two completions with mean token log-probs −1 (two tokens) and −3 (one token, one pad) and advantages
    +1 / −1: loss = −mean(1·(−1) + (−1)·(−3)) = −1."""
    comp = decoding.Completions(None, torch.zeros(2, 2, dtype=torch.long), torch.tensor([[1, 1], [1, 0]]), ("a", "b"))
    logp = torch.tensor([[-0.5, -1.5], [-3.0, 0.0]])
    assert policy.pg_loss(comp, logp, torch.tensor([1.0, -1.0])).item() == pytest.approx(-1.0)


def test_no_signal_no_change(tiny_tokenizer):
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    recipe = engine.Recipe(lr=1e-2, r=8, alpha=16, targets="all", dropout=0.0)
    comp = _completions(tiny_tokenizer, "Answer:", [" 1\n", " 2\n"])
    with engine.recipe_adapters(hf, recipe) as wrapper:
        model = wrapper.get_base_model()
        before = _seq_logp(model, comp)
        policy.policy_update(model, engine.optimizer(model, recipe, 1)[0], comp, torch.tensor([1.0, 1.0]), 2)
        assert torch.equal(_seq_logp(model, comp), before)


def test_each_sample_is_rewarded_for_its_own_prompt(tiny_tokenizer, monkeypatch):
    """Wiring of fit_policy: with a reward that returns the prompt's index, the `group` samples of each prompt
    (laid out prompt by prompt) carry that prompt's index, in the engine's batch order, and the curve is each
    step's mean reward.  Three steps of two prompts over five prompts (cycling): (0, 1), (2, 3), (4, 0)."""
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    recipe = engine.Recipe(steps=3, batch=2, lr=1e-3, r=4, alpha=8, targets="all", dropout=0.0, order="cycle")
    seen = []
    real = policy.policy_update

    def capture(model, opt, comp, rewards, group, micro_batch=None):
        seen.append((rewards.tolist(), group, len(comp.texts)))
        return real(model, opt, comp, rewards, group, micro_batch)

    monkeypatch.setattr(policy, "policy_update", capture)
    with engine.recipe_adapters(hf, recipe) as wrapper:
        curve = policy.fit_policy(wrapper.get_base_model(), tiny_tokenizer, [f"Q{k}:" for k in range(5)],
                                  lambda i, text: float(i), recipe, policy.Sampling(3, 2, 1.0),
                                  generator=torch.Generator().manual_seed(0))
    assert seen == [([0.0] * 3 + [1.0] * 3, 3, 6), ([2.0] * 3 + [3.0] * 3, 3, 6), ([4.0] * 3 + [0.0] * 3, 3, 6)]
    assert curve == [0.5, 2.5, 2.0]


class _Recorder:
    """An optimizer that keeps the gradients it is asked to step on (and changes nothing)."""

    def __init__(self, model):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.grads = None

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        self.grads = [None if p.grad is None else p.grad.clone() for p in self.params]


@pytest.mark.parametrize("micro_batch", [1, 2, 3, 5])
def test_micro_batched_update_has_the_whole_batchs_gradient_and_loss(tiny_tokenizer, micro_batch):
    """Known answer: the update over parts of `micro_batch` completions (the last part shorter) has the gradient
    and the loss of one pass over all six, each part weighted by its share; unweighted parts would add up to a
    gradient 2-6× too large."""
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    texts = [" 3+10\n", " 9*4\n", " 1\n", " 13-0\n", " 2+2+9\n", " K\n"]
    comp = decoding.Completions(decoding.encode(tiny_tokenizer, ["Cards: 3, K. Target: 13.\nAnswer:"] * 3
                                                + ["Cards: 1, 2. Target: 3.\nAnswer:"] * 3, "cpu"),
                                *decoding.encode_completions(tiny_tokenizer, texts, "cpu"), tuple(texts))
    rewards = torch.tensor([1.0, 0.0, -1.0, 5.0, 1.0, -2.0])
    recipe = engine.Recipe(r=4, alpha=8, rslora=False, dropout=0.0, targets="all")
    with engine.recipe_adapters(hf, recipe) as wrapper:
        model = wrapper.get_base_model()
        whole, parts = _Recorder(model), _Recorder(model)
        loss_whole = policy.policy_update(model, whole, comp, rewards, 3)
        loss_parts = policy.policy_update(model, parts, comp, rewards, 3, micro_batch=micro_batch)
    assert loss_parts == pytest.approx(loss_whole, rel=1e-5)
    assert sum(g is not None for g in whole.grads) > 0
    for a, b in zip(whole.grads, parts.grads):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


class _Killed(Exception):
    pass


def _rl(tiny_tokenizer, hf, resume=None, kill_at=None):
    """Six policy steps of two prompts, three samples each, sampled at temperature 1 and rewarded by length:
    the rewards curve and the trained adapters.  `kill_at`: raise once that many steps are done."""
    recipe = engine.Recipe(steps=6, batch=2, lr=3e-3, r=4, alpha=8, targets="all", dropout=0.1, order="cycle",
                           schedule="linear")

    def progress(fraction, message=""):
        if kill_at is not None and fraction >= kill_at / 6:
            raise _Killed

    with engine.recipe_adapters(hf, recipe) as wrapper:
        model = wrapper.get_base_model()
        curve = policy.fit_policy(model, tiny_tokenizer, [f"Q{k}:" for k in range(5)],
                                  lambda i, text: float(len(text.strip())), recipe, policy.Sampling(3, 4, 1.0),
                                  generator=torch.Generator().manual_seed(0), progress=progress, resume=resume)
        return curve, {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_a_killed_policy_run_resumes_to_the_same_rewards_and_weights(tiny_tokenizer, tmp_path):
    """Known answer: a run killed after 4 of 6 steps (state saved every 2) and run again ends with the rewards
    and adapters of the run that was never stopped, bit for bit — the sampling generator, the optimizer and the
    schedule all resumed; a finished run's saved state hands back its curve without a step more."""
    from bench.ground.resume import Resume

    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    clean_curve, clean = _rl(tiny_tokenizer, hf)
    path = tmp_path / "rl.pt"
    with pytest.raises(_Killed):
        _rl(tiny_tokenizer, hf, Resume(path, every_steps=2, every_s=0), kill_at=5)
    assert torch.load(path, weights_only=False)["step"] == 4
    curve, got = _rl(tiny_tokenizer, hf, Resume(path, every_steps=2, every_s=0))
    assert curve == clean_curve and len(set(curve)) > 1
    assert all(torch.equal(got[n], clean[n]) for n in clean)
    # finished: no step is left to run (one would report progress and be killed), the same curve and weights
    curve, got = _rl(tiny_tokenizer, hf, Resume(path, every_steps=2, every_s=0), kill_at=0)
    assert curve == clean_curve and all(torch.equal(got[n], clean[n]) for n in clean)


def test_a_policy_run_is_the_same_whatever_the_process_drew_before(tiny_tokenizer):
    """Dropout masks come from the recipe's seed, as in the engine's SFT loop: two runs after different draws
    from the global generator give the same weights (they did not before: the masks followed the process)."""
    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    torch.manual_seed(1)
    _, a = _rl(tiny_tokenizer, hf)
    torch.manual_seed(2)
    _, b = _rl(tiny_tokenizer, hf)
    assert all(torch.equal(a[n], b[n]) for n in a)
