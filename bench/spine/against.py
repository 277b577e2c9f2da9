"""After every cell has run: the verdict of each claim decided against its untrained control.

A cell's own verdict comes from its frame alone (:mod:`bench.spine.cells`), and the control model runs in
another cell, perhaps in another process.  So the decision that needs both frames is made here, by the run,
once all cells are done and before the family's correction; a replay stores the record this writes, so a warm
run shows the same verdicts as the cold one.  The trained cell's record names the control it was decided
against (``against_control``)."""

from __future__ import annotations

import traceback
from dataclasses import replace
from typing import Any

from bench import stats
from bench.spine import plan
from bench.models import controls


def decide(cells: list[plan.Cell], done: dict[str, Any]) -> None:
    """Replace, in `done` (cell key → executors.CellResult), the verdict of every cell whose spec says
    ``[control] decide`` and whose model is not itself a control."""
    from bench.stats import control

    keys = {(c.spec.id, c.model, c.seed): c.key for c in cells}
    for cell in cells:
        res = done.get(cell.key)
        if not cell.spec.control_decide or controls.base_of(cell.model) or res is None:
            continue
        name = controls.name_of(cell.model, controls.KINDS[0])
        other = done.get(keys.get((cell.spec.id, name, cell.seed), ""))
        try:
            rule, params = cell.spec.control_rule()
            verdict = control.against(res.frame, other.frame if other else None, rule, params, res.verdict,
                                      other.verdict if other else None, other.record["model"] if other else name)
        except Exception as exc:  # noqa: BLE001 - a rule bug must not sink the run
            verdict = stats.errored(f"decision against the control failed: {type(exc).__name__}: {exc}")
            res.record["traceback"] = traceback.format_exc()
        res.record["against_control"] = other.record["model"] if other else name
        res.record["verdict"] = verdict.to_json()
        done[cell.key] = replace(res, verdict=verdict)


def p_values(spec) -> int:
    """How many p-values a spec adds to its family's correction: one per part of a combined rule, and one more
    for the difference from its control."""
    return _tests(spec.rule, spec.verdict) + (1 if spec.control_decide else 0)


def _tests(rule: str, params) -> int:
    """The p-values a rule's verdict carries: an `all` one per part (recursively), a `gated` its claim's (the
    last part; its gates are preconditions, not tests), any other one."""
    of = list(params.get("of", ()))
    if rule == "all":
        return sum(_tests(sub["rule"], sub) for sub in of)
    if rule == "gated" and of:
        return _tests(of[-1]["rule"], of[-1])
    return 1
