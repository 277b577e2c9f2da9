"""Decision rules in words, for the report's claim sections and the claim catalogue.

A rule says itself in words where it is declared: ``rule_def(..., sentence=fn)``, with ``fn(params) -> str``.
The helpers here write parameters as prose (``method = lape``, lists joined with commas, bounds as ``≥ 0.4``),
never as Python reprs.  A rule without a sentence is its docstring's first sentence and its parameters in the
same prose form.
"""

from __future__ import annotations

from typing import Any, Mapping

from bench.ground import registry

REDUCE = {
    "mean": "the mean over {unit}s of",
    "max_group_mean": "the best {by} (mean over {unit}s) of",
    "max": "the largest value of",
    "min": "the smallest value of",
}


def value(v: Any) -> str:
    """A parameter value as prose: numbers with %g, lists joined, tables as `k = v` pairs."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return f"{v:g}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k} = {value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(f"({value(x)})" if isinstance(x, (list, tuple, Mapping)) else value(x) for x in v)
    return str(v)


def sel(where: Mapping[str, Any]) -> str:
    return value(where)


def where_clause(p: Mapping[str, Any]) -> str:
    return f" where {sel(p['where'])}" if p.get("where") else ""


def bound(p: Mapping[str, Any], lo: str = "min", hi: str = "max") -> str:
    parts = []
    if p.get(lo) is not None:
        parts.append(f"≥ {p[lo]:g}")
    if p.get(hi) is not None:
        parts.append(f"≤ {p[hi]:g}")
    return " and ".join(parts) or "—"


def alpha_text(p: Mapping[str, Any]) -> str:
    return f"α = {p.get('alpha', 0.05):g}"


def reduced(p: Mapping[str, Any], metric: str) -> str:
    by = " × ".join(p.get("by", [])) or "group"
    phrase = REDUCE.get(p.get("reduce", "mean"), "{unit}").format(unit=p.get("unit", "sample"), by=by)
    return f"{phrase} {metric}"


def skipped(p) -> str:
    skip = []
    if p.get("skip_first"):
        skip.append(f"the first {p['skip_first']}")
    if p.get("skip_last"):
        skip.append(f"the last {p['skip_last']}")
    return f", leaving out {' and '.join(skip)} {p.get('over', 'layer')}s," if skip else ""


def subrules(p) -> list[str]:
    return [describe(sub["rule"], {k: v for k, v in sub.items() if k != "rule"}) for sub in p.get("of", [])]


def describe(rule: str, params: Mapping[str, Any]) -> str:
    """One sentence per rule, then what a REFUTED needs (its declared preconditions and smallest effect); a rule
    without a sentence is its docstring's first sentence and its parameters."""
    p = dict(params)
    needs = [f"{r.get('why', r.get('metric'))} ({r.get('metric')}{where_clause(r)} {bound(r)})"
             for r in p.pop("requires", []) if isinstance(r, Mapping)]
    smallest = p.pop("smallest_effect", None)
    source = p.pop("smallest_effect_source", "")
    runs = p.pop("training_runs", None)
    tail = (f"; REFUTED only if {'; and '.join(needs)}" if needs else "") + (
        f"; refutable at the smallest effect {smallest:g}" + (f" ({source})" if source else "")
        if isinstance(smallest, (int, float)) else "")
    if isinstance(runs, str):
        tail += (f"; decided on every training run (`{runs}`): SUPPORTED only if each run supports it, REFUTED only "
                 f"if each refutes it")
    return _sentence(rule, p) + tail


def _sentence(rule: str, p: dict[str, Any]) -> str:
    info = registry.RULES.find(rule)
    if info is not None and info.sentence is not None:
        try:
            return info.sentence(p)
        except (KeyError, TypeError, ValueError, IndexError):
            pass  # parameters the sentence does not expect: the plain form below still reads as prose
    args = "; ".join(f"{k} = {value(v)}" for k, v in p.items())
    doc = " ".join(info.doc.split()).split(". ")[0].rstrip(".") if info is not None else f"rule `{rule}`"
    return f"{doc} ({args})" if args else doc
