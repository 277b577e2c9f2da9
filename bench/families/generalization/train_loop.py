"""The two arms' training runs on the engine: supervised fine-tuning through :func:`bench.models.train.fit` and
verifier-reward policy gradient through :func:`bench.models.policy.fit_policy`, with LoRA (default) or all weights.

API: :class:`TrainConfig` is an arm's engine :class:`~bench.models.train.Recipe` plus how RL samples;
:func:`adapted` puts the recipe's adapters on a loaded HF model (and takes them off again); :func:`train` runs
either arm for the recipe's steps over a list of prompts and records the curve.  :func:`step_tokens` /
:func:`flops_of` estimate a run's FLOPs before it runs and :func:`steps_for_flops` gives the SFT arm the steps that
reach the RL arm's FLOPs (equal compute, the paper's x-axis); :func:`converged` says whether a curve has flattened.
The optimizer, the losses, the policy-gradient update and the cache of trained weights are the engine's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

import torch

from bench.ground.resume import Resume
from bench.models import policy
from bench.models import train as engine


@dataclass(frozen=True)
class TrainConfig:
    """An arm's training: the engine's recipe (steps, prompts a step, learning rate, adapter, LoRA rank and
    alpha, the LoRA seed) and, for RL, how completions are sampled."""

    method: Literal["sft", "rl"]
    recipe: engine.Recipe
    sampling: policy.Sampling = policy.Sampling()

    @property
    def steps(self) -> int:
        return self.recipe.steps

    @property
    def adapter(self) -> str:
        return self.recipe.method

    def with_steps(self, steps: int) -> "TrainConfig":
        return replace(self, recipe=replace(self.recipe, steps=steps))

    def describe(self) -> dict:
        return {"method": self.method, **self.recipe.params(), **self.sampling.__dict__}


def config(method: Literal["sft", "rl"], *, steps: int = 16, batch: int = 4, group: int = 4, lr: float = 1e-4,
           adapter: Literal["lora", "full"] = "lora", lora_rank: int = 8, lora_alpha: float = 16,
           max_new_tokens: int = 10, temperature: float = 1.0, seed: int = 0) -> TrainConfig:
    """The family's recipe: constant learning rate, no weight decay, no dropout, plain LoRA scaling (alpha / r)
    on every attention and FFN projection, the prompts in the given order (cycling), `seed` drawing the LoRA
    matrices."""
    recipe = engine.Recipe(method=adapter, steps=steps, batch=batch, lr=lr, schedule="constant", seed=seed,
                           r=lora_rank, alpha=lora_alpha, rslora=False, dropout=0.0, targets="all", order="cycle")
    return TrainConfig(method, recipe, policy.Sampling(group, max_new_tokens, temperature))


@contextlib.contextmanager
def adapted(hf, cfg: TrainConfig) -> Iterator[torch.nn.Module]:
    """The model to train, from the engine: `hf` with the recipe's LoRA adapters (removed again on exit, leaving
    `hf` as it was; the matrices drawn from the recipe's seed), or a deep copy of `hf` with every weight
    trainable (``adapter = "full"``)."""
    if cfg.adapter == "full":
        yield engine.full_copy(hf)
        return
    with engine.recipe_adapters(hf, cfg.recipe) as wrapper:
        yield wrapper.get_base_model()


@dataclass(frozen=True)
class Curve:
    step: tuple[int, ...]
    value: tuple[float, ...]  # SFT: training loss; RL: mean reward of the step's samples
    tokens: int               # tokens passed through the model in training passes (prompt + completion)
    gen_tokens: int           # tokens passed through while sampling (prompt once + each new token)


def curve_of(tok, cfg: TrainConfig, prompts: list[str], targets: list[str] | None, values) -> Curve:
    """The curve of a finished run of `cfg` over `prompts` with its per-step `values` (and its token counts)."""
    counts = step_tokens(tok, cfg, prompts, targets)[: len(values)]
    return Curve(tuple(range(len(values))), tuple(float(v) for v in values), sum(c[0] for c in counts),
                 sum(c[1] for c in counts))


def step_tokens(tok, cfg: TrainConfig, prompts: list[str], targets: list[str] | None = None) -> list[tuple[int, int]]:
    """(training-pass tokens, sampling tokens) of every step of :func:`train`, known before training: an RL
    sample is counted at its full ``max_new_tokens`` (the budget, not what the sampler happened to write)."""
    p_len = [len(tok(p)["input_ids"]) for p in prompts]
    t_len = [len(tok(x, add_special_tokens=False)["input_ids"]) for x in targets] if targets else None
    g, new = cfg.sampling.group, cfg.sampling.max_new_tokens
    out = []
    for idx in engine.batch_order(len(prompts), cfg.recipe):
        p = sum(p_len[i] for i in idx)
        if cfg.method == "sft":
            out.append((p + sum(t_len[i] for i in idx), 0))
        else:
            n = g * (p + new * len(idx))
            out.append((n, n))
    return out


def flops_of(n_params: int, cfg: TrainConfig, tokens: int, gen_tokens: int) -> float:
    """Estimated FLOPs: 2N per token forward, backward 4N (all weights) or 2N (LoRA: activation gradients only,
    the adapters' own gradients are negligible); sampling adds 2N per token it processes."""
    back = 4 if cfg.adapter == "full" else 2
    return float(n_params) * ((2 + back) * tokens + 2 * gen_tokens)


def steps_for_flops(tok, n_params: int, cfg: TrainConfig, prompts: list[str], targets: list[str] | None,
                    budget: float, max_steps: int = 100_000) -> int:
    """The fewest steps of `cfg`'s method over `prompts` whose estimated FLOPs reach `budget` (equal compute)."""
    per_cycle = step_tokens(tok, cfg.with_steps(max(len(prompts), 1)), prompts, targets)
    total, s = 0.0, 0
    while total < budget and s < max_steps:
        tokens, gen = per_cycle[s % len(per_cycle)]
        total += flops_of(n_params, cfg, tokens, gen)
        s += 1
    return max(s, 1)


def train(model, tok, cfg: TrainConfig, prompts: list[str], *, targets: list[str] | None = None,
          reward: Callable[[int, str], float] | None = None, generator: torch.Generator,
          progress: Callable[[float, str], None] = lambda f, m="": None,
          checkpoints: Callable[[int], None] | None = None, every: int = 0, micro_batch: int | None = None,
          resume: Resume | None = None) -> Curve:
    """`cfg.steps` engine steps over `prompts` in order (cycling), ``cfg.recipe.batch`` prompts a step.

    SFT needs `targets` (verified solutions, one per prompt) and trains on the engine's answer loss; RL needs
    `reward(prompt index, text)` and samples with `generator`; its update passes `micro_batch` completions at a
    time (None: a step's all).  With `every`, `checkpoints(step)` is called after every `every`-th step (not
    after the last).  With `resume`, the run's state is saved there now and then and a killed run picks it up.
    """
    def after(step: int) -> None:
        if checkpoints is not None and every and step % every == 0:
            checkpoints(step)

    if cfg.method == "sft":
        examples = [engine.Example(p, t) for p, t in zip(prompts, targets)]
        values = engine.fit(model, tok, examples, cfg.recipe, progress=progress, after_step=after, resume=resume)
    else:
        values = policy.fit_policy(model, tok, prompts, reward, cfg.recipe, cfg.sampling, generator=generator,
                                   progress=progress, after_step=after, micro_batch=micro_batch, resume=resume)
    return curve_of(tok, cfg, prompts, targets, values)


def train_flops(n_params: int, cfg: TrainConfig, curve: Curve) -> float:
    """Estimated training FLOPs of a finished run (:func:`flops_of` its token counts)."""
    return flops_of(n_params, cfg, curve.tokens, curve.gen_tokens)


def converged(values: tuple[float, ...] | list[float], tail: float = 0.2, tol: float = 0.05) -> bool:
    """Whether a training curve has flattened: the mean of its last `tail` share of steps differs from the mean
    of the `tail` share before it by less than `tol` of the curve's range over the run (a share of the range,
    not of the value, so that a reward curve near 0 is not judged on a ratio of small numbers)."""
    v = [float(x) for x in values]
    k = max(1, int(round(tail * len(v))))
    if len(v) < 2 * k:
        return False
    span = max(v) - min(v)
    last, before = sum(v[-k:]) / k, sum(v[-2 * k: -k]) / k
    return span == 0 or abs(last - before) < tol * span
