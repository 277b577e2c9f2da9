"""Specs × models × seeds → cells, and the cache key of each cell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from bench import corpora
from bench.ground import registry
from bench.ground.errors import UsageError
from bench.ground.spec import Spec
from bench.spine.checks import check_spec

PROFILES = ("smoke", "full")
MODEL_SETS = ("default", "paper")


@dataclass(frozen=True)
class Cell:
    spec: Spec  # with its profile applied
    model: str
    seed: int

    @property
    def probe(self) -> registry.ProbeInfo:
        return registry.probe(self.spec.probe)

    @property
    def key(self) -> str:
        """Identity of the cell within a run: executors report results under it, never by position."""
        return f"{self.spec.id}|{self.model}|{self.seed}"

    @property
    def label(self) -> str:
        return f"{self.spec.id} × {self.model}"


def default_profile(device_type: str) -> str:
    """`smoke` on a CPU, paper scale (`full`) on an accelerator."""
    return "smoke" if device_type == "cpu" else "full"


def models_for(spec: Spec, choice: tuple[str, ...]) -> tuple[str, ...]:
    """The models a spec runs on: its `default` or `paper` set, or the names given on the command line."""
    if choice == ("default",):
        return spec.models_default
    if choice == ("paper",):
        return spec.models_paper
    return tuple(choice)


def build(specs: Iterable[Spec], models: tuple[str, ...], profile: str, seeds: tuple[int, ...],
          control: str | None = None) -> list[Cell]:
    """The cells to run; with `control`, each model's cell is followed by one on its control model.  A spec
    decided against its control (``[control] decide``) gets its random-init control cell without `control`
    too: that cell is part of its measurement."""
    from bench.models import controls

    if profile not in PROFILES:
        raise UsageError(f"unknown profile '{profile}' (known: {', '.join(PROFILES)})")
    if control is not None and control not in controls.KINDS:
        raise UsageError(f"unknown control '{control}' (known: {', '.join(controls.KINDS)})")
    cells = []
    for spec in specs:
        check_spec(spec)
        applied = spec.with_profile(profile)
        for model in models_for(spec, models):
            kind = control or (controls.KINDS[0] if spec.control_decide else None)
            names = [model] + ([controls.name_of(model, kind)] if kind and not controls.base_of(model) else [])
            for name in names:
                for seed in seeds:
                    cells.append(Cell(applied, name, seed))
    return cells


def data_fingerprint(params: dict[str, Any]) -> dict[str, str]:
    """Identity of the text each `corpus` parameter names (file contents hashed)."""
    return {k: corpora.fingerprint(v) for k, v in sorted(params.items())
            if k == "corpus" or (k.endswith("_corpus") and isinstance(v, str))}


def companions(cell: Cell) -> list[str]:
    """The other models the cell's probe reads (see ``probe_def(companions=…)``), in a fixed order."""
    info = cell.probe
    return sorted(set(info.companions(cell.spec.probe_params(), cell.model))) if info.companions else []


def cache_parts(cell: Cell, model_fingerprint: str | None, device_type: str, dtype: str,
                companion_fingerprints: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything that determines a cell's frame.  The verdict rule is not part of it: verdicts are recomputed.
    Companion models enter only when there are some, so the keys of every other cell stay as they were."""
    from bench.ground.context import libraries

    info = cell.probe
    params = cell.spec.probe_params()
    extra = {"companions": dict(sorted(companion_fingerprints.items()))} if companion_fingerprints else {}
    return {**extra,
        "probe": info.name,
        "probe_version": info.version,
        "params": params,
        "data": data_fingerprint(params),
        "model": model_fingerprint if info.uses_model else None,
        "seed": cell.seed,
        "device": device_type,
        "dtype": dtype,
        **libraries(),
    }
