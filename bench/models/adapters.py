"""Where LoRA adapters go and how they are put on and taken off: the targets read from the module tree, the
peft adapters for a ``with`` block (seeded, leaving the base model untouched), and the full-copy alternative.
:mod:`bench.models.train` trains through these; a probe that only needs the targets imports them from here."""

from __future__ import annotations

import contextlib
import copy
from typing import Iterator, Literal, Sequence

import torch
from torch import nn

from bench.ground.errors import BenchError

Targets = Literal["ffn", "attention", "all"]


class TrainError(BenchError):
    """Training cannot run as asked (no examples, no target modules, an answer that tokenizes to nothing)."""


def lora_targets(a, targets: Targets = "ffn", n_blocks: int = 0) -> list[str]:
    """Full module paths of the linears to adapt in the first `n_blocks` blocks (0: all) of an inspected
    architecture `a` (:func:`bench.models.arch.inspect`): read from the module tree, never from names or sizes."""
    out: list[str] = []
    for b in a.blocks[: n_blocks or len(a.blocks)]:
        if targets in ("ffn", "all"):
            out += [*b.ffn_in, b.ffn_out]
        if targets in ("attention", "all"):
            out += [p for p in (b.q, b.k, b.v, b.qkv, b.o) if p]
    return out


def target_modules(model: nn.Module, targets: Targets = "ffn") -> list[str]:
    """:func:`lora_targets` of `model`'s whole module tree; an error when it has none of that kind."""
    from bench.models import arch

    out = lora_targets(arch.inspect(model), targets)
    if not out:
        raise TrainError(f"no '{targets}' linears found in {type(model).__name__}")
    return out


@contextlib.contextmanager
def lora_adapters(base: nn.Module, targets: Sequence[str], *, r: int, alpha: float, seed: int,
                  dropout: float = 0.0, rslora: bool = False) -> Iterator[nn.Module]:
    """`base` with LoRA adapters on the modules `targets` for the ``with`` block (the peft wrapper is yielded;
    only the adapters require grad).  The A matrices are drawn from `seed`, whatever the process drew before,
    and the global generator is left as it was.  On exit the adapters are removed and every parameter of
    `base` requires grad as it did before: `base` is the untouched model again."""
    from peft import LoraConfig, get_peft_model

    flags = {n: p.requires_grad for n, p in base.named_parameters()}
    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, use_rslora=rslora, target_modules=list(targets),
                     bias="none")
    for p in base.parameters():
        p.requires_grad_(False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        wrapper = get_peft_model(base, cfg)
    try:
        yield wrapper
    finally:
        wrapper.unload()
        for n, p in base.named_parameters():
            p.requires_grad_(flags.get(n, False))


def recipe_adapters(base: nn.Module, recipe):
    """:func:`lora_adapters` on `base` as a LoRA `recipe` asks (its targets, rank, alpha, seed, dropout, rsLoRA)."""
    return lora_adapters(base, target_modules(base, recipe.targets), r=recipe.r, alpha=recipe.alpha,
                         seed=recipe.seed, dropout=recipe.dropout, rslora=recipe.rslora)


def full_copy(base: nn.Module) -> nn.Module:
    """A deep copy of `base` with every parameter trainable (full fine-tuning never touches `base`)."""
    model = copy.deepcopy(base)
    for p in model.parameters():
        p.requires_grad_(True)
    return model
