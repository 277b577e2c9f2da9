"""The one place that knows how a model turns final hidden states into logits: its output head, then the logit
soft-capping some configs declare (Gemma 2 and 3: ``final_logit_softcapping``, logits → c·tanh(logits / c))."""

from __future__ import annotations

import torch


def logit_cap(model) -> float | None:
    """The soft-cap `c` of `model`'s logits (read from its text config), or None when it has none."""
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    return getattr(cfg, "final_logit_softcapping", None) or None


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """c·tanh(logits / c), or `logits` unchanged when `cap` is None."""
    return torch.tanh(logits / cap) * cap if cap else logits


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """`model`'s own output head on final hidden states, in float32, soft-capped where the model caps."""
    return softcap(model.get_output_embeddings()(hidden).float(), logit_cap(model))


def _contiguous_input(module, args):
    return (args[0].contiguous(), *args[1:]) if args and not args[0].is_contiguous() else None


def contiguous_head(model) -> None:
    """Hand `model`'s output head contiguous hidden states.  A causal LM's forward with ``logits_to_keep = n``
    passes the head a strided slice (B, n, d) of its (B, T, d) states.  When the head's weight does not require
    grad (frozen, as under LoRA adapters), torch runs a linear layer on such a 3-D input as a batched product with
    the weight copied per row: on the CPU, B times the time of one matrix product (a 262k-word head: 6.3 s
    instead of 0.39 s for 128 rows at one thread, ``benchmarks/head_layout.py``); a weight that requires grad is
    folded into one product either way.  Idempotent; logits change only by float rounding (another kernel), and
    only where the slow path was taken."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and not getattr(head, "_bench_contiguous", False):
        head.register_forward_pre_hook(_contiguous_input)
        head._bench_contiguous = True
