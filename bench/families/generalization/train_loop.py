"""Supervised fine-tuning and verifier-reward policy gradient on one model, with LoRA (default) or all weights.

API: :func:`adapted` wraps a loaded HF model for training (and restores it afterwards); :func:`sft_step` and
:func:`rl_step` are one optimizer step each; :func:`train` runs either for a number of steps over a list of
prompts and records the curve.  :func:`step_tokens` / :func:`flops_of` estimate a run's FLOPs before it runs and
:func:`steps_for_flops` gives the SFT arm the steps that reach the RL arm's FLOPs (equal compute, the paper's
x-axis); :func:`converged` says whether a curve has flattened.

The RL step is GRPO-shaped: `group` completions are sampled per prompt from the current policy, each is scored
by the verifier's reward (the paper's shaped reward or 0/1, :mod:`.tasks`), the advantage is the reward minus its group's mean (no division by the group's
standard deviation, which inflates near-unanimous groups), and the loss is −Σ advantage · mean token log-prob.
It is on-policy with one update per sample, so the PPO ratio is 1 and needs no clipping; no KL penalty.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import torch

from bench.models import decoding
from bench.models import train as engine


@dataclass(frozen=True)
class TrainConfig:
    method: Literal["sft", "rl"]
    steps: int = 16
    batch: int = 4            # prompts per optimizer step
    group: int = 4            # RL: completions sampled per prompt
    lr: float = 1e-4
    adapter: Literal["lora", "full"] = "lora"
    lora_rank: int = 8
    lora_alpha: int = 16
    max_new_tokens: int = 10
    temperature: float = 1.0

    def describe(self) -> dict:
        return dict(self.__dict__)


@contextlib.contextmanager
def adapted(hf, arch, cfg: TrainConfig, seed: int = 0) -> Iterator[torch.nn.Module]:
    """The model to train, from the training engine: `hf` with LoRA adapters on every attention and FFN
    projection (removed again on exit, leaving `hf` as it was; the matrices drawn from `seed`), or a deep copy
    of `hf` with every weight trainable (`adapter = "full"`)."""
    if cfg.adapter == "full":
        model = engine.full_copy(hf)
        try:
            yield model
        finally:
            del model
        return
    with engine.lora_adapters(hf, engine.lora_targets(arch, "all"), r=cfg.lora_rank, alpha=cfg.lora_alpha,
                             seed=seed) as model:
        yield model


def trainable_state(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable(model, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    missing = set(state) - set(params)
    if missing:
        raise ValueError(f"{len(missing)} saved tensors have no parameter here, e.g. {min(missing)}")
    with torch.no_grad():
        for n, t in state.items():
            params[n].copy_(t.to(params[n].device, params[n].dtype))


def optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)


def sft_loss(model, tok, prompts: list[str], targets: list[str]) -> torch.Tensor:
    """Mean token negative log-likelihood of `targets` after `prompts`."""
    device = next(model.parameters()).device
    c_ids, c_mask = decoding.encode_completions(tok, targets, device)
    logp = decoding.token_logprobs(model, decoding.encode(tok, prompts, device), c_ids, c_mask)  # (B, C)
    return -logp.sum() / c_mask.sum().clamp(min=1)


def sft_step(model, tok, opt, prompts: list[str], targets: list[str]) -> float:
    opt.zero_grad(set_to_none=True)
    loss = sft_loss(model, tok, prompts, targets)
    loss.backward()
    opt.step()
    return float(loss.detach())


def group_advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """(B·G,) rewards → (B·G,) advantages: each reward minus the mean of its group of `group` samples."""
    r = rewards.view(-1, group)  # (B, G)
    return (r - r.mean(dim=1, keepdim=True)).reshape(-1)


def pg_loss(comp: decoding.Completions, logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """Policy-gradient loss −mean_i A_i · (mean token log-prob of completion i); its gradient raises the
    probability of completions with positive advantage."""
    seq = logp.sum(-1) / comp.mask.sum(-1).clamp(min=1)  # (N,)
    return -(advantages.to(seq.dtype) * seq).mean()


def policy_update(model, opt, comp: decoding.Completions, rewards: torch.Tensor, group: int) -> float:
    """One optimizer step on the policy-gradient loss of completions `comp` (groups of `group` consecutive
    samples of one prompt) with their (N,) `rewards`; returns the loss."""
    adv = group_advantages(rewards, group)
    opt.zero_grad(set_to_none=True)
    if not bool((adv != 0).any()):  # every group scored alike: no signal, no pass (the step still counts)
        opt.step()
        return 0.0
    logp = decoding.token_logprobs(model, comp.prompts, comp.ids, comp.mask)  # (N, C)
    loss = pg_loss(comp, logp, adv.to(logp.device))
    loss.backward()
    opt.step()
    return float(loss.detach())


@dataclass(frozen=True)
class RLStats:
    reward: float
    gen_seconds: float
    update_seconds: float
    loss: float


def rl_step(model, tok, opt, prompts: list[str], reward: Callable[[int, str], float], cfg: TrainConfig,
            generator: torch.Generator) -> RLStats:
    """Sample `cfg.group` completions per prompt, score them with `reward(prompt_index, text)`, update once."""
    import time

    t0 = time.perf_counter()
    expanded = [p for p in prompts for _ in range(cfg.group)]
    comp = decoding.decode(model, tok, expanded, cfg.max_new_tokens, generator=generator,
                           temperature=cfg.temperature, micro_batch=len(expanded))
    rewards = torch.tensor([reward(i // cfg.group, t) for i, t in enumerate(comp.texts)], dtype=torch.float32)
    t1 = time.perf_counter()
    loss = policy_update(model, opt, comp, rewards, cfg.group)
    return RLStats(float(rewards.mean()), t1 - t0, time.perf_counter() - t1, loss)


@dataclass(frozen=True)
class Curve:
    step: tuple[int, ...]
    value: tuple[float, ...]  # SFT: training loss; RL: mean reward of the step's samples
    gen_seconds: float
    update_seconds: float
    tokens: int               # tokens passed through the model in training passes (prompt + completion)
    gen_tokens: int           # tokens passed through while sampling (prompt once + each new token)


def step_batches(n: int, cfg: TrainConfig) -> list[list[int]]:
    """Prompt indices of every step: `cfg.batch` a step, in order, cycling over the `n` prompts."""
    return [[(s * cfg.batch + j) % n for j in range(cfg.batch)] for s in range(cfg.steps)]


def step_tokens(tok, cfg: TrainConfig, prompts: list[str], targets: list[str] | None = None) -> list[tuple[int, int]]:
    """(training-pass tokens, sampling tokens) of every step of :func:`train`, known before training: an RL
    sample is counted at its full ``max_new_tokens`` (the budget, not what the sampler happened to write)."""
    p_len = [len(tok(p)["input_ids"]) for p in prompts]
    t_len = [len(tok(x, add_special_tokens=False)["input_ids"]) for x in targets] if targets else None
    out = []
    for idx in step_batches(len(prompts), cfg):
        p = sum(p_len[i] for i in idx)
        if cfg.method == "sft":
            out.append((p + sum(t_len[i] for i in idx), 0))
        else:
            n = cfg.group * (p + cfg.max_new_tokens * len(idx))
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
    probe = TrainConfig(**{**cfg.describe(), "steps": max(len(prompts), 1)})
    per_cycle = step_tokens(tok, probe, prompts, targets)
    total, s = 0.0, 0
    while total < budget and s < max_steps:
        tokens, gen = per_cycle[s % len(per_cycle)]
        total += flops_of(n_params, cfg, tokens, gen)
        s += 1
    return max(s, 1)


def train(model, tok, cfg: TrainConfig, prompts: list[str], *, targets: list[str] | None = None,
          reward: Callable[[int, str], float] | None = None, generator: torch.Generator,
          progress: Callable[[float, str], None] = lambda f, m="": None,
          checkpoints: Callable[[int], None] | None = None, every: int = 0) -> Curve:
    """`cfg.steps` optimizer steps over `prompts` in order (cycling), `cfg.batch` prompts a step.

    SFT needs `targets` (verified solutions, one per prompt); RL needs `reward(prompt index, text)`.  With
    `every`, `checkpoints(step)` is called after every `every`-th step (not after the last).
    """
    import time

    opt = optimizer(model, cfg)
    steps, values = [], []
    gen_s = upd_s = 0.0
    tokens = gen_tokens = 0
    counts = step_tokens(tok, cfg, prompts, targets)
    for s, idx in enumerate(step_batches(len(prompts), cfg)):
        batch = [prompts[i] for i in idx]
        if cfg.method == "sft":
            t = time.perf_counter()
            values.append(sft_step(model, tok, opt, batch, [targets[i] for i in idx]))
            upd_s += time.perf_counter() - t
        else:
            st = rl_step(model, tok, opt, batch, lambda k, text, idx=idx: reward(idx[k], text), cfg, generator)
            values.append(st.reward)
            gen_s += st.gen_seconds
            upd_s += st.update_seconds
        tokens += counts[s][0]
        gen_tokens += counts[s][1]
        steps.append(s)
        progress((s + 1) / cfg.steps, f"{cfg.method} step {s + 1}/{cfg.steps}")
        if checkpoints is not None and every and (s + 1) % every == 0 and s + 1 < cfg.steps:
            checkpoints(s + 1)
    return Curve(tuple(steps), tuple(values), gen_s, upd_s, tokens, gen_tokens)


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
