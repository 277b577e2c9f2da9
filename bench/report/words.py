"""Decision rules in words, for the report's claim sections."""

from __future__ import annotations

from typing import Any, Mapping

REDUCE = {
    "mean": "the mean over {unit}s of",
    "max_group_mean": "the best {by} (mean over {unit}s) of",
    "max": "the largest value of",
    "min": "the smallest value of",
}


def _sel(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in where.items())


def _reduced(p: Mapping[str, Any], metric: str) -> str:
    by = " × ".join(p.get("by", [])) or "group"
    phrase = REDUCE.get(p.get("reduce", "mean"), "{unit}").format(unit=p.get("unit", "sample"), by=by)
    return f"{phrase} {metric}"


def describe(rule: str, params: Mapping[str, Any]) -> str:
    """One sentence per rule; an unknown rule is described by its name and parameters."""
    p = dict(params)
    alpha = p.get("alpha", 0.05)
    if rule == "threshold":
        where = f" where {_sel(p['where'])}" if p.get("where") else ""
        bound = f"≥ {p['min']:g}" if p.get("min") is not None else f"≤ {p['max']:g}"
        exact = p.get("reduce") in ("max", "min")
        test = "exactly (no sampling)" if exact else (
            f"with a one-sided test at α = {alpha:g} (one-sample t-test)" if p.get("reduce", "mean") == "mean"
            else f"with a one-sided bootstrap test at α = {alpha:g}")
        return f"{_reduced(p, '`' + p['metric'] + '`')}{where} is {bound}, {test}"
    if rule == "paired_difference":
        test = ("one-sided Wilcoxon signed-rank test" if p.get("reduce", "mean") == "mean"
                else "one-sided bootstrap test")
        return (f"{_reduced(p, '[' + _sel(p['a']) + ']')} minus the same for [{_sel(p['b'])}], paired by "
                f"{p.get('unit', 'sample')}, is ≥ {p.get('min', 0.0):g} ({test}, α = {alpha:g})")
    if rule == "exceeds_baseline":
        return (f"the observed [{_sel(p['observed'])}] exceeds the {p.get('quantile', 0.99):g} quantile of the "
                f"baseline [{_sel(p['baseline'])}] (Monte Carlo rank p < {alpha:g})")
    if rule == "all":
        parts = [describe(sub["rule"], {k: v for k, v in sub.items() if k != "rule"}) for sub in p.get("of", [])]
        return "all of: " + "; ".join(f"({i + 1}) {s}" for i, s in enumerate(parts))
    args = ", ".join(f"{k} = {v}" for k, v in p.items())
    try:
        from bench.core import registry

        doc = registry.rule(rule).doc.rstrip(".")
    except KeyError:
        doc = f"rule `{rule}`"
    return f"{doc} ({args})"
