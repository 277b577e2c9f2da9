"""What a decision rule returns: an :class:`Outcome` and the :class:`Verdict` that carries its numbers.

The types live in the ground because run records hold them (the store reads them back) while the rules that make
them live in :mod:`bench.stats`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Mapping


class Outcome(str, Enum):
    SUPPORTED = "SUPPORTED"
    REFUTED = "REFUTED"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str
    rule: str
    metric: str | None = None
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    n: int | None = None
    effect: float | None = None
    effect_name: str | None = None
    threshold: str | None = None  # e.g. "≥ 0.4"
    alpha: float = 0.05
    parts: tuple["Verdict", ...] = ()
    sensitivity: str | None = None  # why a REFUTED measurement could have shown the effect (None otherwise)
    runs: int | None = None  # training runs combined (bench.stats.training_runs): `parts` is then one verdict per run

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        d["parts"] = [p.to_json() for p in self.parts]
        if self.runs is None:
            del d["runs"]  # records of unreplicated rules read as before
        return {k: _clean(v) for k, v in d.items()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Verdict":
        d = dict(d)
        d["outcome"] = Outcome(d["outcome"])
        d["parts"] = tuple(cls.from_json(p) for p in d.get("parts", ()))
        return cls(**d)


def skipped(reason: str) -> Verdict:
    return Verdict(Outcome.SKIPPED, reason, rule="-")


def errored(reason: str) -> Verdict:
    return Verdict(Outcome.ERROR, reason, rule="-")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v
