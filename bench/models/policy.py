"""Policy-gradient training on sampled completions, the reinforcement-learning half of the training engine.

A caller brings prompts and a reward (``reward(prompt index, text) → float``, the task's verifier); this module
samples, turns rewards into advantages and updates the model, with the engine's optimizer
(:func:`bench.models.train.optimizer`) and its step order (:func:`bench.models.train.batch_order`).

The update is GRPO-shaped: `group` completions are sampled per prompt from the current policy, the advantage of
each is its reward minus its group's mean (no division by the group's standard deviation, which inflates
near-unanimous groups), and the loss is −mean advantage · mean token log-prob.  It is on-policy with one update
per sample, so the PPO ratio is 1 and needs no clipping; there is no KL penalty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.models import decoding
from bench.models import train as engine
from bench.ground.resume import Resume, maybe_save, restore, snapshot


@dataclass(frozen=True)
class Sampling:
    """How completions are drawn for an update: `group` per prompt, up to `max_new_tokens`, at `temperature`."""

    group: int = 4
    max_new_tokens: int = 10
    temperature: float = 1.0


def group_advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """(B·G,) rewards → (B·G,) advantages: each reward minus the mean of its group of `group` samples."""
    r = rewards.view(-1, group)  # (B, G)
    return (r - r.mean(dim=1, keepdim=True)).reshape(-1)


def pg_loss(comp: decoding.Completions, logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """Policy-gradient loss −mean_i A_i · (mean token log-prob of completion i); its gradient raises the
    probability of completions with positive advantage."""
    seq = logp.sum(-1) / comp.mask.sum(-1).clamp(min=1)  # (N,)
    return -(advantages.to(seq.dtype) * seq).mean()


def policy_update(model, opt, comp: decoding.Completions, rewards: torch.Tensor, group: int,
                  micro_batch: int | None = None) -> float:
    """One optimizer step on the policy-gradient loss of completions `comp` (groups of `group` consecutive
    samples of one prompt) with their (N,) `rewards`; returns the loss.  With `micro_batch` < N the forward and
    backward passes take that many completions at a time, each part's loss weighted by its share of N, so the
    gradients add up to the whole batch's while only one part's activations are kept."""
    adv = group_advantages(rewards, group)
    opt.zero_grad(set_to_none=True)
    if not bool((adv != 0).any()):  # every group scored alike: no signal, no pass (the step still counts)
        opt.step()
        return 0.0
    n = len(adv)
    size = n if micro_batch is None else max(1, min(int(micro_batch), n))
    total = 0.0
    for i in range(0, n, size):
        part = comp if size == n else decoding.Completions(comp.prompts.rows(slice(i, i + size)), comp.ids[i: i + size],
                                                          comp.mask[i: i + size], comp.texts[i: i + size])
        logp = decoding.token_logprobs(model, part.prompts, part.ids, part.mask)  # (part, C)
        loss = pg_loss(part, logp, adv[i: i + size].to(logp.device))
        if size < n:
            loss = loss * (len(part.ids) / n)
        loss.backward()
        total += float(loss.detach())
    opt.step()
    return total


def policy_step(model, tok, opt, prompts: list[str], reward: Callable[[int, str], float], sampling: Sampling,
                generator: torch.Generator, micro_batch: int | None = None) -> float:
    """Sample `sampling.group` completions per prompt, score each with `reward(prompt index, text)`, update
    once (the update's passes `micro_batch` completions at a time); returns the mean reward of the samples."""
    g = sampling.group
    expanded = [p for p in prompts for _ in range(g)]
    comp = decoding.decode(model, tok, expanded, sampling.max_new_tokens, generator=generator,
                           temperature=sampling.temperature, micro_batch=len(expanded))
    rewards = torch.tensor([reward(i // g, t) for i, t in enumerate(comp.texts)], dtype=torch.float32)
    policy_update(model, opt, comp, rewards, g, micro_batch)
    return float(rewards.mean())


def fit_policy(model, tok, prompts: list[str], reward: Callable[[int, str], float], recipe: engine.Recipe,
               sampling: Sampling, *, generator: torch.Generator,
               progress: Callable[[float, str], None] = lambda f, m="": None,
               after_step: Callable[[int], None] | None = None, micro_batch: int | None = None,
               resume: Resume | None = None) -> list[float]:
    """Train `model` in place for ``recipe.n_steps`` policy-gradient steps over `prompts` (``recipe.batch`` a
    step, in the engine's batch order) and return each step's mean reward.  `after_step(step)` is called after
    every step but the last; `micro_batch` bounds the completions an update passes at once (None: all).  Dropout
    masks are drawn from the recipe's seed (the same run gives the same weights whatever ran before it).  With
    `resume`, the loop's state (the sampling `generator`'s included) is saved there now and then and picked up
    again."""
    order = engine.batch_order(len(prompts), recipe)
    opt, sched = engine.optimizer(model, recipe, len(order))
    params = engine._trainable(model)  # the optimizer's own parameters, in its order
    torch.manual_seed(recipe.seed + 1)  # dropout masks, as the engine's loop draws them
    saved = restore(resume, params, opt, sched=sched, generators=[generator])
    out: list[float] = list(saved["values"]) if saved else []
    for s in range(saved["step"] if saved else 0, len(order)):
        idx = order[s]
        out.append(policy_step(model, tok, opt, [prompts[i] for i in idx],
                               lambda k, text, idx=idx: reward(idx[k], text), sampling, generator, micro_batch))
        sched.step()
        progress((s + 1) / len(order), f"policy step {s + 1}/{len(order)} reward {out[-1]:.3f}")
        if after_step is not None and s + 1 < len(order):
            after_step(s + 1)
        maybe_save(resume, s + 1, len(order), lambda: snapshot(params, opt, sched=sched, generators=[generator],
                                                               step=s + 1, values=list(out)))
    return out
