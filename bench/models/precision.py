"""Training a model whose weights are stored in a low-precision float: float32 master weights for the optimizer."""

from __future__ import annotations

import torch

LOW_PRECISION = (torch.bfloat16, torch.float16)


class MasterAdamW(torch.optim.AdamW):
    """AdamW on float32 master copies of low-precision (bfloat16, float16) parameters, as mixed-precision
    training keeps them: the model computes in its own dtype, each step's gradients are moved onto the masters,
    the update is applied there and the result rounded back into the model.  Without the masters a bfloat16
    weight near 0.03 (spacing 1.2e-4) ignores an AdamW update of lr = 1e-5 altogether: full fine-tuning would
    leave the model as it was.  float16 gradients are not loss-scaled here."""

    def __init__(self, params, **kw):
        self.live = list(params)
        super().__init__([p.detach().float().clone().requires_grad_(True) for p in self.live], **kw)

    def masters(self) -> list[torch.Tensor]:
        return [m for g in self.param_groups for m in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        for p in self.live:
            p.grad = None

    @torch.no_grad()
    def step(self, closure=None):
        for p, m in zip(self.live, self.masters()):
            m.grad = None if p.grad is None else p.grad.float()
        out = super().step(closure)
        self.push()
        return out

    @torch.no_grad()
    def push(self) -> None:
        for p, m in zip(self.live, self.masters()):
            p.copy_(m)

    def state_dict(self):
        return {**super().state_dict(), "masters": [m.detach().clone() for m in self.masters()]}

    def load_state_dict(self, state_dict) -> None:
        state_dict = dict(state_dict)
        masters = state_dict.pop("masters", None)
        super().load_state_dict(state_dict)
        if masters is not None:
            with torch.no_grad():
                for m, saved in zip(self.masters(), masters):
                    m.copy_(saved)
            self.push()
