"""The language-neuron rules in words: each function is the ``sentence`` its rule declares on ``rule_def``."""

from __future__ import annotations

from bench.ground.prose import alpha_text, bound, sel, value


def diagonal_dominance(p):
    return (f"for method {p.get('method', 'lape')}, the share of languages whose own-language ΔBPB exceeds every "
            f"other entry of their row is ≥ {p.get('min_share', 0.8):g}, and the diagonal exceeds the row's "
            f"off-diagonal mean (bootstrap interval of the margin excluding 0, {alpha_text(p)})")


def binomial_share(p):
    return (f"for method {p.get('method', 'lape')}, the share of selected neurons in the bottom and top layers is "
            f"≥ {p.get('min_share', 0.6):g} (one-sided exact binomial test, {alpha_text(p)}; Clopper–Pearson "
            f"interval; the uniform share is shown beside it)")


def baseline_ratio(p):
    return (f"mean ΔBPB of [{sel(p['numerator'])}] is {bound(p)} times the mean ΔBPB of "
            f"[{sel(p['denominator'])}] (bootstrap interval of the ratio, {alpha_text(p)})")


def largest_of(p):
    return (f"method {p.get('target', 'lape')}'s mean ΔBPB over the {p.get('entries', 'diagonal')} entries is the "
            f"largest among {value(p.get('methods', []))}, its interval not overlapping the runner-up's")


def related_exceeds_unrelated(p):
    return (f"for method {p.get('method', 'lape')}, switching off a language's neurons raises ΔBPB on its related "
            f"languages (groups {value(p.get('groups', []))}) more than on unrelated ones (bootstrap interval of the "
            f"mean difference above 0, {alpha_text(p)})")


def arg_extreme(p):
    which = "smallest" if p.get("extreme", "max") == "min" else "largest"
    if p.get("expect"):
        target = f"one of {value(p['expect'])}"
    elif p.get("band"):
        lo, hi = p["band"][:2]
        target = f"within the relative band {lo:g}–{hi:g} of the {p['over']} range"
    else:
        target = "as expected"
    test = (f"the position bootstrapped over {p['unit']}s ({alpha_text(p)})" if p.get("unit")
            else "exactly (one row per value)")
    among = f"among rows with {sel(p['where'])}, " if p.get("where") else ""
    return f"{among}the {p['over']} where `{p['metric']}` is {which} is {target}, {test}"
