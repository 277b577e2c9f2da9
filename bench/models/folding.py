"""Fold the affine part of LayerNorm / RMSNorm into the linear layers that read the norm's output.

A norm computes ``f(x) = n(x) ⊙ γ + β`` where ``n`` is the plain normalisation.  How ``γ`` relates to the stored
weight differs by family (Llama multiplies by ``w``, Gemma by ``1 + w``), so it is *measured*, not assumed:
feeding a zero-mean vector of large, known norm gives ``n(x)`` exactly, ``f(0)`` gives ``β``, and two weight
settings give the weight value at which the module acts as the identity scale.  Folding then sets
``W' = W · diag(γ)`` (over the input dimension) and ``b' = b + W β`` for every consumer, and resets the norm to
``γ = 1, β = 0``.  Nothing here depends on a model's name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from bench.ground.errors import ArchError
from bench.models import arch as arch_mod
from bench.models import linear as linear_mod


@dataclass(frozen=True)
class Affine:
    gamma: torch.Tensor  # (d,) effective scale
    beta: torch.Tensor  # (d,) effective shift
    identity_weight: torch.Tensor | None  # (d,) weight value giving γ = 1, or None when the norm has no weight


def _probe_vectors(d: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if d % 2:
        raise ArchError(f"cannot measure a norm of odd width {d}")
    sign = torch.ones(d, dtype=torch.float32)
    sign[1::2] = -1.0  # zero mean, so LayerNorm and RMSNorm normalise it identically
    x = (1000.0 * sign).to(like.device, like.dtype)[None, None, :]  # (1, 1, d)
    normed = sign.to(like.device)[None, None, :]  # n(x): unit RMS
    return x, normed


@torch.no_grad()
def measure(norm: torch.nn.Module, d: int) -> Affine:
    """Effective γ and β of a norm module, and the weight value that makes γ = 1.

    Measured on a float32 copy: in bfloat16 the rounding of the probe's outputs hides that the scale is affine in
    the weight (Gemma 3's norms were refused under --dtype bfloat16), and the live module is never touched."""
    dtype = next((q.dtype for q in norm.parameters()), torch.float32)
    norm = copy.deepcopy(norm).float()
    p = next(norm.parameters(), None)
    like = p if p is not None else torch.zeros(1)
    x, normed = _probe_vectors(d, like)

    def gamma_beta() -> tuple[torch.Tensor, torch.Tensor]:
        beta = norm(torch.zeros_like(x)).float()[0, 0]
        gamma = ((norm(x).float() - beta) / normed.float())[0, 0]
        return gamma, beta

    gamma, beta = gamma_beta()
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, torch.nn.Parameter):
        return Affine(gamma, beta, None)
    saved = weight.detach().clone()
    try:
        weight.fill_(0.0)
        g0, _ = gamma_beta()
        weight.fill_(1.0)
        g1, _ = gamma_beta()
    finally:
        weight.copy_(saved)
    slope = g1 - g0
    if torch.any(slope.abs() < 1e-6) or not torch.allclose(g0 + slope * saved.float(), gamma, rtol=1e-4, atol=1e-4):
        raise ArchError(f"{type(norm).__name__}: its scale is not an affine function of its weight; cannot fold")
    return Affine(gamma, beta, ((1.0 - g0) / slope).to(dtype))


@torch.no_grad()
def fold_into(linear: torch.nn.Module, aff: Affine) -> None:
    """Absorb γ and β into a consumer: nn.Linear (weight out × in) or GPT-2's Conv1D (weight in × out)."""
    w = linear.weight
    gamma, beta = aff.gamma.to(w.dtype), aff.beta.to(w.dtype)
    conv1d = linear_mod.in_axis(linear) == 0  # Conv1D
    shift = (beta @ w) if conv1d else (w @ beta)  # (out,)
    if conv1d:
        w.mul_(gamma[:, None])
    else:
        w.mul_(gamma[None, :])
    if torch.any(beta != 0):
        if linear.bias is None:
            linear.bias = torch.nn.Parameter(shift.clone())
        else:
            linear.bias.add_(shift)


@torch.no_grad()
def reset(norm: torch.nn.Module, aff: Affine) -> None:
    """Make the norm a plain normalisation (γ = 1, β = 0)."""
    if aff.identity_weight is not None:
        norm.weight.copy_(aff.identity_weight)
    bias = getattr(norm, "bias", None)
    if isinstance(bias, torch.nn.Parameter):
        bias.zero_()


@dataclass(frozen=True)
class FoldReport:
    folded: tuple[str, ...]  # norms folded into their consumers
    left: tuple[str, ...]  # norms with no linear consumer (e.g. Gemma's post-norms), left as they are


@torch.no_grad()
def folded_copy(model: torch.nn.Module) -> tuple[torch.nn.Module, FoldReport]:
    """A deep copy of `model` with every foldable norm folded.  Tied output embeddings are untied first."""
    model = copy.deepcopy(model)
    arch = arch_mod.inspect(model)
    head = arch_mod.get(model, arch.lm_head)
    embed = arch_mod.get(model, arch.embed)
    if head.weight is embed.weight or head.weight.data_ptr() == embed.weight.data_ptr():
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
    folded = []
    for norm_path, consumers in arch.norm_consumers:
        norm = arch_mod.get(model, norm_path)
        aff = measure(norm, arch.d_model)
        for c in consumers:
            fold_into(arch_mod.get(model, c), aff)
        reset(norm, aff)
        folded.append(norm_path)
    all_norms = {n for n, m in model.named_modules() if _is_norm(m) and m is not model}
    left = tuple(sorted(all_norms - set(folded)))
    return model, FoldReport(tuple(folded), left)


def _is_norm(m: torch.nn.Module) -> bool:
    return isinstance(m, torch.nn.LayerNorm) or "norm" in type(m).__name__.lower()
