"""The weights' dtype by name: what "auto" means on each device, decided in one place (no torch import)."""

from __future__ import annotations

from bench.ground.errors import ModelError, did_you_mean

DTYPES = ("auto", "float32", "bfloat16", "float16")


def dtype_name(dtype: str | None, device_type: str) -> str:
    """The dtype a run uses, by name: "auto" (or None) is float32 on the CPU and bfloat16 on an accelerator."""
    if dtype in (None, "auto"):
        return "float32" if device_type == "cpu" else "bfloat16"
    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype '{dtype}'{did_you_mean(dtype, DTYPES)} (use {', '.join(DTYPES)})")
    return dtype


def torch_dtype(dtype: str | None, device_type: str):
    import torch

    return getattr(torch, dtype_name(dtype, device_type))
