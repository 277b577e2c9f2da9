"""Allowed ranges of numeric probe and rule parameters: from ``Annotated[…, Range(…)]``, else from the name.

A name listed in :data:`RANGES` means the same thing in every probe and rule that takes it (the tests check
this over the registry).  :func:`range_problem` is what spec validation asks.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Mapping

@dataclass(frozen=True)
class Range:
    """Allowed interval of a number; None leaves that side unbounded; `open_*` excludes the end point."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def problem(self, x: float) -> str | None:
        lo_bad = self.low is not None and (x <= self.low if self.open_low else x < self.low)
        hi_bad = self.high is not None and (x >= self.high if self.open_high else x > self.high)
        return f"must be in {self}, got {x!r:.40}" if lo_bad or hi_bad else None

    def __str__(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.open_low or self.low is None else '['}{lo}, {hi}{')' if self.open_high or self.high is None else ']'}"


MAX_COUNT = 10**9  # no count a probe or rule takes comes near this; beyond it a run would never end
PROBABILITY = Range(0, 1, open_low=True, open_high=True)
FRACTION = Range(0, 1)
COUNT = Range(1, MAX_COUNT)
NON_NEGATIVE = Range(0, MAX_COUNT)
POSITIVE = Range(0, None, open_low=True)

Probability = Annotated[float, PROBABILITY]  # a level, a quantile, a rate: strictly between 0 and 1
Fraction = Annotated[float, FRACTION]  # a share: 0 to 1 inclusive
Count = Annotated[int, COUNT]  # a number of things: at least 1
NonNegative = Annotated[int, NON_NEGATIVE]  # a number of things that may be none (0 often means "off")
Positive = Annotated[float, POSITIVE]  # a step size or tolerance

# Parameters whose plain `int`/`float` annotation carries no Range get one from their name.  A name listed here
# means the same thing in every probe and rule that takes it (checked over the registry by the tests).
RANGES: Mapping[str, Range] = types.MappingProxyType({
    **{n: PROBABILITY for n in ("alpha", "confidence", "quantile", "bar_quantile", "lap_threshold", "top_rate",
                                "plnd_top", "edge_fraction")},
    **{n: FRACTION for n in ("min_share",)},
    "discard": Range(0, 1, open_high=True),
    **{n: COUNT for n in ("batch", "micro_batch", "micro_tokens", "seq_len", "max_tokens", "max_new_tokens",
                          "doc_tokens", "eval_texts", "id_points", "pv_tokens", "selection_tokens", "steps",
                          "texts_per_step", "positions_per_text", "control_texts", "max_prefix", "prompt_words",
                          "min_n", "max_new", "max_new_tokens_cot", "max_new_tokens_direct", "top_k", "shots", "epochs",
                          "eval_batch", "sft_batch", "group", "lora_rank", "prefix")},
    **{n: NON_NEGATIVE for n in ("skip_first", "skip_last", "hidden", "decoder_layers", "init_steps",
                                 "curve_points", "max_pool", "split_halves")},
    **{n: POSITIVE for n in ("lr", "toy_lr", "eps", "full_lr", "lr_lora", "lora_alpha", "temperature")},
    **{n: FRACTION for n in ("warmup",)},  # a share of the steps
    "dropout": Range(0, 1, open_high=True),
    "weight_decay": Range(0, None),
    "lr_decoder": Range(0, None),
    "n_resamples": Range(200, MAX_COUNT),  # fewer bootstrap replicates cannot resolve a 95% interval's ends
    "min_abs": Range(0, None),
})
INT_BOUND = Range(-(2**63), 2**63 - 1)  # TOML integers are 64-bit


def args_of(ann: Any) -> tuple:
    return typing.get_args(ann)


def range_of(name: str, ann: Any) -> Range | None:
    """The Range a parameter's values must lie in, or None when only finiteness applies."""
    if typing.get_origin(ann) is Annotated:
        found = [a for a in args_of(ann)[1:] if isinstance(a, Range)]
        if found:
            return found[0]
    if name in RANGES:
        return RANGES[name]
    if (name.startswith(("n_", "toy_"))) and _base(ann) is int:
        return COUNT
    return None


def _base(ann: Any) -> Any:
    return args_of(ann)[0] if typing.get_origin(ann) is Annotated else ann


def range_problem(name: str, value: Any, ann: Any) -> str | None:
    """None when every number in `value` (a number or a list of them) is finite and in its parameter's range."""
    rng = range_of(name, ann)
    for x in (value if isinstance(value, (list, tuple)) else [value]):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            continue
        if isinstance(x, float) and not math.isfinite(x):
            return f"must be a finite number, got {x!r}"
        bad = (rng.problem(x) if rng else None) or (INT_BOUND.problem(x) if isinstance(x, int) else None)
        if bad:
            return bad
    return None
