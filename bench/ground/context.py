"""What a probe receives besides its parameters: the model, the seed, the device and dtype the run resolved
(once, for every cell: ``bench.spine.run.settings``), the cache, a progress callback, and the other models it
declared."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from bench.ground.resume import Resume
from bench.ground.store import Cache, key_of


@dataclass
class ProbeContext:
    model: Any  # bench.models.LoadedModel, or None for probes that bring their own models
    seed: int
    # The run's device and weights' dtype, resolved once (bench.spine.run.settings); the run loads `model` and
    # the companions there, so a model-bound probe follows its model's tensors, and a probe that builds its own
    # models (the circuits toys) reads `device` from here.  Toys train in float32 whatever `dtype` says.
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: str = "float32"
    cache: Cache | None = None
    progress: Callable[[float, str], None] = lambda fraction, message="": None
    companions: Callable[[str], Any] | None = None  # name → loaded model, for the models the probe declares

    def companion(self, name: str) -> Any:
        """Another model this probe reads (declared with ``probe_def(companions=…)``), loaded by the run the way
        the cell's own model is (device, dtype, pickle policy).  Raises ModelError when it cannot be loaded."""
        if self.companions is None:
            from bench.ground.errors import ModelError

            raise ModelError(f"no companion models are available to this probe (asked for '{name}')")
        return self.companions(name)

    def generator(self, stream: int = 0) -> torch.Generator:
        """A CPU generator seeded from the run seed; `stream` separates independent draws of one probe."""
        return torch.Generator().manual_seed(self.seed * 1_000_003 + stream)

    def rng(self, stream: int = 0) -> np.random.Generator:
        return np.random.default_rng([self.seed, stream])

    def memo(self, parts: dict[str, Any], compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """A sub-result cached by `parts` (which must name everything else it depends on).  The run's device
        type and the model's dtype are added to the key here, so a sub-result computed in float32 on the CPU is
        never replayed into a bfloat16 or a CUDA run (a record must describe the run that happened); so are the torch and
        transformers versions, as in a cell's own key."""
        if self.cache is None:
            return compute()
        return self.cache.memo({**parts, "where": self.where(), "libraries": libraries()}, compute)

    def resume(self, parts: dict[str, Any], label: str = "") -> Resume | None:
        """Where a long training loop of this probe saves its state, so that a killed run picks it up again
        (:mod:`bench.ground.resume`): keyed like :meth:`memo` by `parts` with the device, dtype and library
        versions added; `label` says which run it is (`bench cache` shows it); None without a cache.  The probe
        clears it once the result it feeds is stored."""
        if self.cache is None:
            return None
        key = key_of({"resume": {**parts, "where": self.where(), "libraries": libraries()}})
        return Resume(self.cache.root / "partial" / key[:2] / f"{key}.pt", warn=self.cache.warn, label=label)

    def where(self) -> dict[str, str]:
        """The device type and dtype this context's numbers are computed in: the model's own tensors when there
        is a model, else the run's settings."""
        m = self.model
        if m is not None and getattr(m, "dtype", None) is not None:
            return placement(m.device, m.dtype)
        return placement(self.device, self.dtype)


def placement(device: Any, dtype: Any) -> dict[str, str]:
    """Where numbers are computed, as cache keys hold it: the device type ("cpu", "cuda") and the dtype's name
    ("float32"), from torch objects or names."""
    return {"device": torch.device(device).type, "dtype": str(dtype).removeprefix("torch.")}


def libraries() -> dict[str, str]:
    """The major.minor versions of torch and transformers: a cached result computed under others is not reused
    (their kernels and defaults change numbers), the same rule as a cell's cache key."""
    import transformers

    return {"torch": ".".join(torch.__version__.split(".")[:2]),
            "transformers": ".".join(transformers.__version__.split(".")[:2])}


def part(progress: Callable, i: int, n: int, name: str = "") -> Callable:
    """The progress callback of part `i` of `n` of a stage reported through `progress(f, msg)`: the part's own
    share f becomes (i + f) / n of the stage, so the stage runs once from 0 to 1; a `name` is added to its messages
    with the part's place ("activation statistics: de (2 of 8)")."""
    return lambda f, msg="": progress((i + f) / n, f"{msg}: {name} ({i + 1} of {n})" if name else msg)
