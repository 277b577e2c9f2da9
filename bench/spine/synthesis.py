"""Claims across models: one random-effects synthesis per claim from the cells of one or more run records.

For every claim, each model's verdict gives one effect: its estimate with the standard error implied by its
confidence interval (:func:`bench.stats.meta.se_from_ci`).  Effects are pooled only when they are comparable:
the same spec (same hash: same parameters, profile and rule), the same decision metric and the same threshold,
and an interval to weigh them by.  An exact check (a worst case over rows, no interval), a rule whose threshold
is derived per model (a quantile of each model's own baseline), cells from different versions of a spec, or fewer
than two comparable models are said so, and nothing is pooled.  Controls (``NAME+random-init``) are drawn
beside their models and never pooled: a model that learned nothing is not a sample of the models a claim is
about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bench.models.controls import base_of
from bench.stats.meta import Pooled, pool, se_from_ci

MEASURED = ("SUPPORTED", "REFUTED", "INCONCLUSIVE")
_THRESHOLD = re.compile(r"^\s*(≥|>|≤|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass
class Row:
    model: str
    run_id: str
    outcome: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    control: bool
    pooled: bool
    note: str = ""


@dataclass
class Synthesis:
    claim: str
    title: str
    metric: str | None
    threshold: str | None
    rows: list[Row] = field(default_factory=list)
    pooled: Pooled | None = None
    not_pooled: str = ""  # why nothing was pooled
    basis: str = ""  # what the pooled effect is, when not simply the claim's estimate
    reading: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"claim": self.claim, "title": self.title, "metric": self.metric, "threshold": self.threshold,
                "pooled": self.pooled.to_json() if self.pooled else None, "not_pooled": self.not_pooled or None,
                "basis": self.basis or None,
                "reading": self.reading, "models": [vars(r) for r in self.rows]}


def threshold_side(label: str | None) -> tuple[float, int] | None:
    """(bound, +1 for ≥/>, −1 for ≤/<) from a verdict's threshold label, or None for any other form."""
    m = _THRESHOLD.match(label or "")
    if not m:
        return None
    return float(m.group(2)), (1 if m.group(1) in "≥>" else -1)


def _confidence(spec: dict[str, Any]) -> float:
    verdict = spec.get("verdict") or {}
    level = verdict.get("confidence")
    if level is None:
        level = next((p.get("confidence") for p in verdict.get("of", []) or [] if isinstance(p, dict)
                      and p.get("confidence") is not None), None)
    return float(level) if isinstance(level, (int, float)) else 0.95


def gather(runs: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """claim → [(record, cell)], one cell per model; a model measured in several runs counts once (the last run
    given), so the same measurement is never pooled twice."""
    out: dict[str, dict[str, tuple[dict, dict]]] = {}
    for record in runs:
        for cell in record["cells"]:
            out.setdefault(cell["spec"]["id"], {})[cell["model"]] = (record, cell)
    return {claim: list(by_model.values()) for claim, by_model in out.items()}


def synthesise(runs: list[dict[str, Any]], *, method: str = "pm") -> list[Synthesis]:
    return [synthesise_claim(claim, pairs, method=method) for claim, pairs in gather(runs).items()]


def synthesise_claim(claim: str, pairs: list[tuple[dict, dict]], *, method: str = "pm") -> Synthesis:
    first = pairs[0][1]
    spec = first["spec"]
    v0 = first.get("verdict") or {}
    s = Synthesis(claim, spec.get("title", ""), v0.get("metric"), v0.get("threshold"))
    level = _confidence(spec)
    for record, cell in pairs:
        v = cell.get("verdict") or {}
        lo, hi, est = v.get("ci_low"), v.get("ci_high"), v.get("estimate")
        se = se_from_ci(lo, hi, level) if lo is not None and hi is not None else None
        s.rows.append(Row(cell["model"], record["run_id"], v.get("outcome", "ERROR"), est, lo, hi, se,
                          control=base_of(cell["model"]) is not None, pooled=False))
    models = [r for r in s.rows if not r.control]
    candidates = [r for r in models if r.outcome in MEASURED and r.estimate is not None]
    for r in models:
        if r.outcome not in MEASURED:
            r.note = f"{r.outcome.lower()}: not measured"
        elif r.estimate is None:
            r.note = "no estimate"
    for r in s.rows:
        if r.control:
            r.note = "control: drawn beside its model, never pooled"
    s.not_pooled = _why_not_comparable(pairs, candidates)
    if not s.not_pooled:
        usable = [r for r in candidates if r.se is not None and r.se > 0]
        for r in candidates:
            if r not in usable:
                r.note = "no interval (too few units?): not pooled" if r.se is None else "zero-width interval"
        unique = _counted_once(usable)
        if len(unique) < 2 and len(usable) >= 2:
            s.not_pooled = ("every model gives the same estimate and interval: the measurement does not depend "
                            "on the model (toys trained by the probe, or weights the models share)")
        elif len(unique) < 2:
            s.not_pooled = (f"{len(usable)} model{'s' if len(usable) != 1 else ''} with an interval: "
                            f"pooling needs 2")
        else:
            s.pooled = pool([r.estimate for r in unique], [r.se for r in unique], method=method,
                            confidence=level)
            for r in unique:
                r.pooled = True
            if spec.get("rule") == "all":
                s.basis = "the rule's first condition (the outcome needs every condition)"
    s.reading = _reading(s, models)
    return s


def _counted_once(rows: list[Row]) -> list[Row]:
    """The rows whose effect (estimate and interval) no earlier row has: the same numbers twice are one
    measurement seen twice (a truncated model shares its embeddings, a probe trains its own toys), not two."""
    seen: dict[tuple, str] = {}
    out = []
    for r in rows:
        key = (r.estimate, r.ci_low, r.ci_high)
        if key in seen:
            r.note = f"same estimate and interval as {seen[key]}: counted once"
        else:
            seen[key] = r.model
            out.append(r)
    return out


def _why_not_comparable(pairs: list[tuple[dict, dict]], candidates: list[Row]) -> str:
    """Why the claim's per-model effects cannot be put on one scale, or "" when they can."""
    names = {r.model for r in candidates}
    cells = [c for _, c in pairs if c["model"] in names]
    if not cells:
        return "no model was measured"
    if len({c["spec"].get("hash") for c in cells}) > 1:
        return "the spec differs between the runs (another version or profile): effects not comparable"
    verdicts = [c.get("verdict") or {} for c in cells]
    if len({v.get("metric") for v in verdicts}) > 1:
        return "the models were decided on different metrics: effects not comparable"
    if len({v.get("threshold") for v in verdicts}) > 1:
        return "the threshold is derived per model (e.g. from each model's own baseline): effects not comparable"
    if all(v.get("ci_low") is None for v in verdicts):
        return "no model has an interval (an exact check, or too few units): nothing to weigh them by, not pooled"
    return ""


def _reading(s: Synthesis, models: list[Row]) -> str:
    held = sum(r.outcome == "SUPPORTED" for r in models)
    words = [f"holds on {held} of {len(models)} model{'s' if len(models) != 1 else ''}"]
    if s.basis:
        words.append(f"pooled over {s.basis}")
    side = threshold_side(s.threshold)
    p = s.pooled
    if p is None:
        words.append(s.not_pooled)
    elif side is None:
        words.append(f"pooled {p.estimate:.4g} over {p.k} models; the threshold ({s.threshold}) is not a number "
                     f"to compare the prediction interval with")
    else:
        bound, sign = side

        def claimed(x: float) -> bool:
            return (x - bound) * sign > 0

        if not claimed(p.ci_low) and not claimed(p.ci_high):
            words.append("the pooled interval lies on the wrong side of the threshold")
        elif p.pi_low is None:
            words.append(f"{p.k} models: too few for a prediction interval"
                         + ("; the pooled interval clears the threshold" if claimed(p.ci_low) and claimed(p.ci_high)
                            else "; the pooled interval crosses the threshold"))
        elif claimed(p.pi_low) and claimed(p.pi_high):
            words.append("the prediction interval clears the threshold: expected to hold on a new model")
        else:
            words.append("the prediction interval crosses the threshold: model-specific")
    controls = [r for r in s.rows if r.control]
    if controls:
        c_held = sum(r.outcome == "SUPPORTED" for r in controls)
        words.append(f"{c_held} of {len(controls)} random-init control{'s' if len(controls) != 1 else ''} "
                     f"also hold{'s' if len(controls) == 1 else ''}")
    return "; ".join(words)
