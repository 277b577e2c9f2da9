"""The generic decision rules in words: each function is the ``sentence`` its rule declares on ``rule_def``."""

from __future__ import annotations

from bench.ground.prose import alpha_text, bound, reduced, sel, skipped, subrules, value, where_clause


def threshold(p):
    exact = p.get("reduce") in ("max", "min")
    test = "exactly (no sampling)" if exact else (
        f"with a one-sided test at {alpha_text(p)} (exact binomial test on 0/1 values, else a one-sample t-test, no surer than n of n 0/1 values when all lie in [0, 1])"
        if p.get("reduce", "mean") == "mean" else f"with a one-sided bootstrap test at {alpha_text(p)}")
    return f"{reduced(p, '`' + p['metric'] + '`')}{where_clause(p)} is {bound(p)}, {test}"


def paired_difference(p):
    test = ("one-sided exact McNemar test on 0/1 values, else a Wilcoxon signed-rank test"
            if p.get("reduce", "mean") == "mean" else "one-sided bootstrap test")
    return (f"{reduced(p, '[' + sel(p['a']) + ']')} minus the same for [{sel(p['b'])}], paired by "
            f"{p.get('unit', 'sample')}, is ≥ {p.get('min', 0.0):g} ({test}, {alpha_text(p)})")


def exceeds_baseline(p):
    return (f"the observed [{sel(p['observed'])}] exceeds the {p.get('quantile', 0.99):g} quantile of the "
            f"baseline [{sel(p['baseline'])}] (Monte Carlo rank p < {p.get('alpha', 0.05):g})")


def all_of(p):
    return "all of: " + "; ".join(f"({i + 1}) {s}" for i, s in enumerate(subrules(p)))


def gated(p):
    parts = subrules(p)
    if not parts:
        return "no rules given"
    pre = "; ".join(f"({i + 1}) {s}" for i, s in enumerate(parts[:-1]))
    decide = parts[-1]
    if not pre:
        return decide
    return (f"provided that {pre} (otherwise INCONCLUSIVE, nothing tested): "
            f"({len(parts)}) {decide}")


def group_comparison(p):
    side = "above" if p.get("side", "less") == "greater" else "below"
    delta = p.get("delta", 0.0)
    col = p.get("column", "cls")
    core = (f"`{p['metric']}`{where_clause(p)} for {col} {value(p['a'])} lies {side} that for {value(p['b'])}: "
            f"Cliff's δ beyond {delta:g}, its one-sided p < {p.get('alpha', 0.05):g} and its interval excluding 0, "
            f"both from a bootstrap over whole {p.get('unit', 'sample')}s (Boschloo's exact test when each "
            f"{p.get('unit', 'sample')} holds one 0/1 value)")
    if p.get("over"):
        core += f"; compared per {p['over']}, holding in more than half of them"
    return core


def correlation(p):
    method = "Spearman ρ" if p.get("method") == "spearman" else "Pearson r"
    if p.get("given"):
        method = f"the partial Pearson r given [{sel(p['given'])}]"
    return (f"{method} between [{sel(p['x'])}] and [{sel(p['y'])}] is > {p.get('min', 0.0):g}, its bootstrap "
            f"interval over {p.get('unit', 'sample')}s excluding it ({alpha_text(p)})")


def correlation_difference(p):
    a, b = p.get("subjects", ["base", "instruct"])[:2]
    return (f"the Pearson r of [{sel(p['x'])}] and [{sel(p['y'])}] differs between {a} and {b} by at least "
            f"{p.get('min_abs', 0.2):g} in absolute value (bootstrap over {p.get('unit', 'sample')}s)")


def trend(p):
    return (f"Spearman ρ between {p.get('over', 'layer')} and the mean `{p['metric']}`{where_clause(p)} per "
            f"{p.get('over', 'layer')} is {bound(p)} (bootstrap over {p.get('unit', 'sample')}s, {alpha_text(p)})")


def layer_majority(p):
    return (f"in more than half of the {p.get('over', 'layer')}s, the mean `{p['metric']}`{where_clause(p)} over "
            f"{p.get('unit', 'sample')}s is {bound(p)} ({alpha_text(p)})")


def layer_summary(p):
    dropped = skipped(p)
    return (f"the {p.get('reduce', 'median')} over {p.get('over', 'layer')}s{dropped} of the per-"
            f"{p.get('over', 'layer')} mean `{p['metric']}`{where_clause(p)} is {bound(p)}, exactly (no sampling)")


def accuracy_drop(p, unit: str = "question"):
    return (f"accuracy under [{sel(p['a'])}] minus under [{sel(p['b'])}], paired by {p.get('unit', unit)}, is > "
            f"{p.get('min', 0.0):g} (exact McNemar test, {alpha_text(p)}; exact interval from the discordant pairs)")


def crossfit_summary(p):
    over, dropped = p.get("over", "layer"), skipped(p)
    return (f"the {p.get('reduce', 'median')} over {over}s{dropped} of the held-out score 1 − Σ `{p['resid']}` / "
            f"Σ `{p['total']}` (fitted on other {p.get('unit', 'sample')}s) is {bound(p)} (bootstrap over "
            f"{p.get('unit', 'sample')}s, {alpha_text(p)})")
