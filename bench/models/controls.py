"""Negative controls: the same architecture, config and tokenizer as a model, with seeded random weights.

A claim that also holds on a model that learned nothing is not evidence about learned internals.  A control is
named ``NAME+random-init``: it resolves like NAME (same config, same tokenizer) and loads as a freshly
initialised model of that config, with the initialiser of the architecture and a fixed seed, so the control is
the same on every run and machine.
"""

from __future__ import annotations

from typing import Any

KINDS = ("random-init",)
SEED = 0  # fixed: a control is one model, not one per run


def name_of(model: str, kind: str = "random-init") -> str:
    return f"{model}+{kind}"


def split(name: str) -> tuple[str, str | None]:
    """(base model name, control kind) — kind is None for an ordinary model name."""
    for kind in KINDS:
        suffix = f"+{kind}"
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], kind
    return name, None


def base_of(name: str) -> str | None:
    """The model a control name is the control of; None for an ordinary name."""
    base, kind = split(name)
    return base if kind else None


def fingerprint(base_fingerprint: str, kind: str) -> str:
    return f"{base_fingerprint}+{kind}@seed{SEED}"


def build(folder: str, kind: str, kwargs: dict[str, Any]):
    """A model of `folder`'s config with weights drawn by the architecture's own initialiser, seeded."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if kind != "random-init":  # pragma: no cover - KINDS guards this
        raise ValueError(f"unknown control '{kind}'")
    config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return AutoModelForCausalLM.from_config(config, dtype=kwargs.get("dtype"), trust_remote_code=False)


def control_outcomes(cells: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(claim id, model) → the outcome of that claim on the model's control, for cells that have one."""
    outcomes = {(c["spec"]["id"], c["model"]): (c.get("verdict") or {}).get("outcome") for c in cells}
    out = {}
    for (claim, model), outcome in outcomes.items():
        base = base_of(model)
        if base is not None and (claim, base) in outcomes and outcome:
            out[(claim, base)] = outcome
    return out


FLAG = "holds on an untrained model"
MISSED = "fails on its untrained control, which it should pass"


def flag(spec: dict[str, Any], model: str, control: dict[tuple[str, str], str]) -> str | None:
    """The warning for a claim SUPPORTED on the control of `model` (a claim that passes on noise).  A spec whose
    ``[control] holds`` says why the claim is true of any weights (an exact identity, say) is warned about the
    other way round: when its control does not pass.  A spec decided against its control (``[control] decide``)
    is not warned about: its verdict already asks for more than the control shows."""
    outcome = control.get((spec["id"], model))
    if spec.get("control_decide"):  # already decided against its control: a SUPPORTED exceeded it
        return None
    if spec.get("control_holds"):
        return MISSED if outcome is not None and outcome != "SUPPORTED" else None
    return FLAG if outcome == "SUPPORTED" else None
