"""Decision rules in words, for the report's claim sections and the claim catalogue.

A rule says itself in words through ``rule_def(..., sentence=fn)``, where it is declared; the rules that came
before that have their sentence in :data:`SENTENCES` here.  Parameters are written as prose (``method = lape``, lists joined with
commas), never as Python reprs.  A rule added later without a sentence falls back to its docstring's first
sentence and its parameters in the same prose form.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

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


def _sel(where: Mapping[str, Any]) -> str:
    return value(where)


def _where(p: Mapping[str, Any]) -> str:
    return f" where {_sel(p['where'])}" if p.get("where") else ""


def _bound(p: Mapping[str, Any], lo: str = "min", hi: str = "max") -> str:
    parts = []
    if p.get(lo) is not None:
        parts.append(f"≥ {p[lo]:g}")
    if p.get(hi) is not None:
        parts.append(f"≤ {p[hi]:g}")
    return " and ".join(parts) or "—"


def _alpha(p: Mapping[str, Any]) -> str:
    return f"α = {p.get('alpha', 0.05):g}"


def _reduced(p: Mapping[str, Any], metric: str) -> str:
    by = " × ".join(p.get("by", [])) or "group"
    phrase = REDUCE.get(p.get("reduce", "mean"), "{unit}").format(unit=p.get("unit", "sample"), by=by)
    return f"{phrase} {metric}"


def _threshold(p):
    exact = p.get("reduce") in ("max", "min")
    test = "exactly (no sampling)" if exact else (
        f"with a one-sided test at {_alpha(p)} (exact binomial test on 0/1 values, else a one-sample t-test)"
        if p.get("reduce", "mean") == "mean" else f"with a one-sided bootstrap test at {_alpha(p)}")
    return f"{_reduced(p, '`' + p['metric'] + '`')}{_where(p)} is {_bound(p)}, {test}"


def _paired_difference(p):
    test = ("one-sided exact McNemar test on 0/1 values, else a Wilcoxon signed-rank test"
            if p.get("reduce", "mean") == "mean" else "one-sided bootstrap test")
    return (f"{_reduced(p, '[' + _sel(p['a']) + ']')} minus the same for [{_sel(p['b'])}], paired by "
            f"{p.get('unit', 'sample')}, is ≥ {p.get('min', 0.0):g} ({test}, {_alpha(p)})")


def _exceeds_baseline(p):
    return (f"the observed [{_sel(p['observed'])}] exceeds the {p.get('quantile', 0.99):g} quantile of the "
            f"baseline [{_sel(p['baseline'])}] (Monte Carlo rank p < {p.get('alpha', 0.05):g})")


def _subrules(p) -> list[str]:
    return [describe(sub["rule"], {k: v for k, v in sub.items() if k != "rule"}) for sub in p.get("of", [])]


def _all(p):
    return "all of: " + "; ".join(f"({i + 1}) {s}" for i, s in enumerate(_subrules(p)))


def _gated(p):
    parts = _subrules(p)
    if not parts:
        return "no rules given"
    pre = "; ".join(f"({i + 1}) {s}" for i, s in enumerate(parts[:-1]))
    decide = parts[-1]
    if not pre:
        return decide
    return (f"provided that {pre} (otherwise INCONCLUSIVE, nothing tested): "
            f"({len(parts)}) {decide}")


def _beside(p):
    parts = _subrules(p)
    labels = list(p.get("labels") or ["decides"] + ["beside"] * (len(parts) - 1))
    if not parts:
        return "no rules given"
    shown = "; ".join(f"{label}: {s}" for label, s in zip(labels[1:], parts[1:]))
    return f"{labels[0]}: {parts[0]} (this decides); shown beside it, deciding nothing — {shown}"


def _group_comparison(p):
    side = "above" if p.get("side", "less") == "greater" else "below"
    delta = p.get("delta", 0.0)
    col = p.get("column", "cls")
    core = (f"`{p['metric']}`{_where(p)} for {col} {value(p['a'])} lies {side} that for {value(p['b'])}: "
            f"Cliff's δ beyond {delta:g}, one-sided Mann–Whitney p < {p.get('alpha', 0.05):g}, bootstrap interval "
            f"of δ over {p.get('unit', 'sample')}s excluding 0")
    if p.get("over"):
        core += f"; compared per {p['over']}, holding in more than half of them"
    return core


def _correlation(p):
    method = "Spearman ρ" if p.get("method") == "spearman" else "Pearson r"
    if p.get("given"):
        method = f"the partial Pearson r given [{_sel(p['given'])}]"
    return (f"{method} between [{_sel(p['x'])}] and [{_sel(p['y'])}] is > {p.get('min', 0.0):g}, its bootstrap "
            f"interval over {p.get('unit', 'sample')}s excluding it ({_alpha(p)})")


def _correlation_difference(p):
    a, b = p.get("subjects", ["base", "instruct"])[:2]
    return (f"the Pearson r of [{_sel(p['x'])}] and [{_sel(p['y'])}] differs between {a} and {b} by at least "
            f"{p.get('min_abs', 0.2):g} in absolute value (bootstrap over {p.get('unit', 'sample')}s)")


def _trend(p):
    return (f"Spearman ρ between {p.get('over', 'layer')} and the mean `{p['metric']}`{_where(p)} per "
            f"{p.get('over', 'layer')} is {_bound(p)} (bootstrap over {p.get('unit', 'sample')}s, {_alpha(p)})")


def _layer_majority(p):
    return (f"in more than half of the {p.get('over', 'layer')}s, the mean `{p['metric']}`{_where(p)} over "
            f"{p.get('unit', 'sample')}s is {_bound(p)} ({_alpha(p)})")


def _skipped(p) -> str:
    skip = []
    if p.get("skip_first"):
        skip.append(f"the first {p['skip_first']}")
    if p.get("skip_last"):
        skip.append(f"the last {p['skip_last']}")
    return f", leaving out {' and '.join(skip)} {p.get('over', 'layer')}s," if skip else ""


def _layer_summary(p):
    dropped = _skipped(p)
    return (f"the {p.get('reduce', 'median')} over {p.get('over', 'layer')}s{dropped} of the per-"
            f"{p.get('over', 'layer')} mean `{p['metric']}`{_where(p)} is {_bound(p)}, exactly (no sampling)")


def _accuracy_drop(p, unit: str = "question"):
    return (f"accuracy under [{_sel(p['a'])}] minus under [{_sel(p['b'])}], paired by {p.get('unit', unit)}, is > "
            f"{p.get('min', 0.0):g} (exact McNemar test, {_alpha(p)}; paired bootstrap interval)")


def _diagonal_dominance(p):
    return (f"for method {p.get('method', 'lape')}, the share of languages whose own-language ΔBPB exceeds every "
            f"other entry of their row is ≥ {p.get('min_share', 0.8):g}, and the diagonal exceeds the row's "
            f"off-diagonal mean (bootstrap interval of the margin excluding 0, {_alpha(p)})")


def _binomial_share(p):
    return (f"for method {p.get('method', 'lape')}, the share of selected neurons in the bottom and top layers is "
            f"≥ {p.get('min_share', 0.6):g} (one-sided exact binomial test, {_alpha(p)}; Clopper–Pearson "
            f"interval; the uniform share is shown beside it)")


def _baseline_ratio(p):
    return (f"mean ΔBPB of [{_sel(p['numerator'])}] is {_bound(p)} times the mean ΔBPB of "
            f"[{_sel(p['denominator'])}] (bootstrap interval of the ratio, {_alpha(p)})")


def _largest_of(p):
    return (f"method {p.get('target', 'lape')}'s mean ΔBPB over the {p.get('entries', 'diagonal')} entries is the "
            f"largest among {value(p.get('methods', []))}, its interval not overlapping the runner-up's")


def _related_exceeds_unrelated(p):
    return (f"for method {p.get('method', 'lape')}, switching off a language's neurons raises ΔBPB on its related "
            f"languages (groups {value(p.get('groups', []))}) more than on unrelated ones (bootstrap interval of the "
            f"mean difference above 0, {_alpha(p)})")


def _arg_extreme(p):
    which = "smallest" if p.get("extreme", "max") == "min" else "largest"
    if p.get("expect"):
        target = f"one of {value(p['expect'])}"
    elif p.get("band"):
        lo, hi = p["band"][:2]
        target = f"within the relative band {lo:g}–{hi:g} of the {p['over']} range"
    else:
        target = "as expected"
    test = (f"the position bootstrapped over {p['unit']}s ({_alpha(p)})" if p.get("unit")
            else "exactly (one row per value)")
    among = f"among rows with {_sel(p['where'])}, " if p.get("where") else ""
    return f"{among}the {p['over']} where `{p['metric']}` is {which} is {target}, {test}"


def _mcnemar_gain(p):
    return _accuracy_drop(p, unit="item")


def _accuracy_floor(p):
    return (f"the share of correct `{p.get('metric', 'correct')}` items{_where(p)} is > {p['min']:g} (one-sided "
            f"exact binomial test, {_alpha(p)}; Clopper–Pearson interval)")


def _accuracy_ceiling(p):
    return (f"the share of `{p.get('metric', 'format_ok')}` items{_where(p)} is < {p['max']:g} (one-sided exact "
            f"binomial test, {_alpha(p)}; Clopper–Pearson interval)")


def _exceeds_baselines(p):
    names = ", ".join(f"[{_sel(b)}]" for b in p["baselines"])
    return (f"[{_sel(p['observed'])}] exceeds the {p.get('quantile', 0.99):g} quantile of every baseline ({names}); "
            f"the claim holds only when it beats each one (intersection–union test, p = the largest p, {_alpha(p)})")


def _crossfit_summary(p):
    over, dropped = p.get("over", "layer"), _skipped(p)
    return (f"the {p.get('reduce', 'median')} over {over}s{dropped} of the held-out score 1 − Σ `{p['resid']}` / "
            f"Σ `{p['total']}` (fitted on other {p.get('unit', 'sample')}s) is {_bound(p)} (bootstrap over "
            f"{p.get('unit', 'sample')}s, {_alpha(p)})")


SENTENCES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "threshold": _threshold, "paired_difference": _paired_difference, "exceeds_baseline": _exceeds_baseline,
    "all": _all, "gated": _gated, "group_comparison": _group_comparison, "correlation": _correlation,
    "correlation_difference": _correlation_difference, "trend": _trend, "layer_majority": _layer_majority,
    "layer_summary": _layer_summary, "accuracy_drop": _accuracy_drop, "diagonal_dominance": _diagonal_dominance,
    "binomial_share": _binomial_share, "baseline_ratio": _baseline_ratio, "largest_of": _largest_of,
    "related_exceeds_unrelated": _related_exceeds_unrelated, "arg_extreme": _arg_extreme,
    "mcnemar_gain": _mcnemar_gain, "accuracy_floor": _accuracy_floor, "exceeds_baselines": _exceeds_baselines,
    "crossfit_summary": _crossfit_summary, "beside": _beside, "accuracy_ceiling": _accuracy_ceiling,
}


def describe(rule: str, params: Mapping[str, Any]) -> str:
    """One sentence per rule, then what a REFUTED needs (its declared preconditions and smallest effect); a rule
    without a sentence is its docstring's first sentence and its parameters."""
    p = dict(params)
    needs = [f"{r.get('why', r.get('metric'))} ({r.get('metric')} {_bound(r)})" for r in p.pop("requires", [])
             if isinstance(r, Mapping)]
    smallest = p.pop("smallest_effect", None)
    source = p.pop("smallest_effect_source", "")
    tail = (f"; REFUTED only if {'; and '.join(needs)}" if needs else "") + (
        f"; refutable at the smallest effect {smallest:g}" + (f" ({source})" if source else "")
        if isinstance(smallest, (int, float)) else "")
    return _sentence(rule, p) + tail


def _sentence(rule: str, p: dict[str, Any]) -> str:
    from bench.ground import registry

    info = registry.RULES.find(rule)
    say = info.sentence if info is not None and info.sentence is not None else SENTENCES.get(rule)
    if say is not None:
        try:
            return say(p)
        except (KeyError, TypeError, ValueError, IndexError):
            pass  # parameters the sentence does not expect: the plain form below still reads as prose
    args = "; ".join(f"{k} = {value(v)}" for k, v in p.items())
    doc = " ".join(info.doc.split()).split(". ")[0].rstrip(".") if info is not None else f"rule `{rule}`"
    return f"{doc} ({args})" if args else doc
