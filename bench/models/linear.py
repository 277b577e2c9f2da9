"""Which way a projection's weight faces, in one place: ``nn.Linear`` stores it as (out, in), GPT-2's ``Conv1D``
as (in, out).  Everything that reads or edits a projection's weight by axis asks here."""

from __future__ import annotations

import torch
from torch import nn


def is_conv1d(module: nn.Module) -> bool:
    from transformers.pytorch_utils import Conv1D

    return isinstance(module, Conv1D)


def in_axis(module: nn.Module) -> int:
    """The axis of ``module.weight`` that runs over the projection's inputs (the other runs over its outputs)."""
    if isinstance(module, nn.Linear):
        return 1
    if is_conv1d(module):
        return 0
    raise TypeError(f"{type(module).__name__} is neither nn.Linear nor Conv1D")


def in_out(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight as an (in, out) view (so y = x @ W + b) and the bias."""
    return (module.weight.T if in_axis(module) == 1 else module.weight), module.bias
