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
