"""Every registered rule reports an estimate inside its own interval, on random frames of the shape it reads.

A rule added to the registry without a case here fails `test_every_rule_has_a_case`, so the property covers all
of them.  The frames are random in size, spread, effect and (where a rule reads 0/1 values) in being binary, so
biased statistics (a maximum over heads, a share of layers, an arg-max) and degenerate data both come up.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.ground import registry
from bench.stats import Verdict, evaluate

COLS = ["method", "set_lang", "language", "layer", "head", "sample", "metric", "value"]
LANGS = ["de", "en", "es", "fr"]


def _f(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLS)


def _units(rng, metric="m", binary=False, n=None):
    n = n or int(rng.integers(8, 30))
    vals = (rng.uniform(size=n) < rng.uniform()).astype(float) if binary else rng.normal(rng.normal(), rng.uniform(0.05, 2), n)
    return _f([(None, None, None, None, None, i, metric, v) for i, v in enumerate(vals)])


def _heads(rng):
    tied = rng.uniform() < 0.7  # many equal heads: the resampled maximum lies above the observed one
    n, L, H = (int(rng.integers(20, 40)), 6, 10) if tied else (int(rng.integers(8, 20)), 3, 4)
    means = np.full((L, H), 0.3) if tied else rng.uniform(0, 1, (L, H))
    return _f([(None, None, None, l, h, s, "m", means[l, h] + rng.uniform(0.01, 0.5) * rng.normal())
               for s in range(n) for l in range(L) for h in range(H)])


def _layers(rng, metric="m"):
    n, L = int(rng.integers(8, 25)), int(rng.integers(4, 10))
    slope = rng.normal(0, 0.2)
    return _f([(None, None, None, l, None, s, metric, slope * l + rng.normal())
               for s in range(n) for l in range(L)])


def _pair(rng, binary):
    n = int(rng.integers(8, 30))
    a, b = _units(rng, "a", binary, n), _units(rng, "b", binary, n)
    return pd.concat([a, b], ignore_index=True)


def _tokens(rng):
    n, per = int(rng.integers(8, 20)), 10
    s = np.repeat(np.arange(n), per)
    cls = np.where(rng.uniform(size=s.size) < 0.5, "determiner", "noun")
    shift = rng.normal(0, 0.5)
    x = rng.normal(size=n)[s] + 0.3 * rng.normal(size=s.size) + shift * (cls == "determiner")
    y = rng.normal(0, 0.5) * x + rng.normal(size=s.size)
    z = rng.normal(size=s.size)
    pos = np.tile(np.arange(per), n)
    out = []
    for subject in ("base", "instruct"):
        for metric, v in (("x", x), ("y", y if subject == "base" else -y), ("z", z)):
            out.append(pd.DataFrame({"sample": s, "position": pos, "cls": cls, "layer": pos % 3, "metric": metric,
                                     "value": v, "subject": subject}))
    return pd.concat(out, ignore_index=True)


def _deact(rng):
    n = int(rng.integers(8, 20))
    rows = []
    for y in LANGS:
        for i in range(n):
            rows += [("none", None, y, None, None, i, "bits", 100.0), (None, None, y, None, None, i, "bytes", 100.0)]
    for method in ("lape", "random", "lap"):
        mat = rng.uniform(0, 0.3, (4, 4))
        for a, x in enumerate(LANGS):
            for b, y in enumerate(LANGS):
                rows += [(method, x, y, None, None, i, "bits", 100 + 100 * (mat[a, b] + rng.uniform(0.01, 0.2)
                                                                             * rng.normal())) for i in range(n)]
    return _f(rows)


def _shares(rng):
    edge, total = int(rng.integers(0, 100)), 100
    rows = [("lape", None, None, None, None, None, "edge_count", edge),
            ("lape", None, None, None, None, None, "total_count", total),
            ("lape", None, None, None, None, None, "uniform_share", 0.4)]
    bias = rng.uniform(0.02, 0.1)  # halves select differently from the whole (seen on an untrained control)
    spread = rng.uniform(0.005, 0.05)
    for r in range(int(rng.integers(10, 40))):
        share = float(np.clip(edge / total - bias + rng.normal(0, spread), 0, 1))
        rows += [("lape", None, None, None, None, r, "edge_count", round(share * 1000)),
                 ("lape", None, None, None, None, r, "total_count", 1000)]
    return _f(rows)


def _crossfit(rng):
    n, L = int(rng.integers(10, 25)), 6
    rows = [(None, None, None, l, None, s, m, v) for s in range(n) for l in range(L)
            for m, v in (("resid", rng.uniform(0.1, 1)), ("total", rng.uniform(1, 2)))]
    rows += [(None, None, None, None, None, None, "n_tokens", 1e6), (None, None, None, None, None, None, "hidden_size", 8)]
    return _f(rows)


def _baselines(rng):
    rows = [(None, None, None, None, None, None, "obs", rng.normal(0, 2))]
    rows += [(None, None, None, None, None, i, "r", v) for i, v in enumerate(rng.normal(0, 1, 199))]
    rows += [(None, None, None, None, None, i, "q", v) for i, v in enumerate(rng.normal(0.5, 1, 199))]
    return _f(rows)


def _argmax(rng):
    n, L, peak = int(rng.integers(8, 20)), 10, int(rng.integers(0, 10))
    return _f([(None, None, None, l, None, s, "c", 1 - 0.05 * abs(l - peak) + rng.uniform(0.01, 0.2) * rng.normal())
               for s in range(n) for l in range(L)])


T = {"rule": "threshold", "metric": "m", "min": 0.0}
PAIR = {"a": {"metric": "a"}, "b": {"metric": "b"}}
CASES = {
    "threshold": lambda r: ((_units(r, binary=r.uniform() < 0.5), {"metric": "m", "min": float(r.uniform(-1, 1))})
                            if r.uniform() < 0.4 else
                            (_heads(r), {"metric": "m", "min": 0.5, "reduce": "max_group_mean", "by": ["layer", "head"]})),
    "paired_difference": lambda r: (_pair(r, r.uniform() < 0.5), {**PAIR, "min": 0.0}),
    "all": lambda r: (_units(r), {"of": [T, {**T, "min": float(r.normal())}]}),
    "gated": lambda r: (_units(r), {"of": [T, {**T, "min": float(r.normal())}]}),
    "beside": lambda r: (_units(r), {"of": [{**T, "min": float(r.normal())}, T]}),
    "exceeds_baseline": lambda r: (_baselines(r), {"observed": {"metric": "obs"}, "baseline": {"metric": "r"}}),
    "exceeds_baselines": lambda r: (_baselines(r), {"observed": {"metric": "obs"},
                                                    "baselines": [{"metric": "r"}, {"metric": "q"}]}),
    "trend": lambda r: (_layers(r), {"metric": "m", "min": 0.0}),
    "layer_majority": lambda r: (_layers(r), {"metric": "m", "min": 0.0}),
    "layer_summary": lambda r: (_layers(r), {"metric": "m", "min": 0.0}),
    "accuracy_drop": lambda r: (_pair(r, True), {**PAIR, "min_n": 5}),
    "mcnemar_gain": lambda r: (_pair(r, True), {**PAIR, "unit": "sample", "min_n": 5}),
    "accuracy_floor": lambda r: (_units(r, "correct", True, 30), {"min": float(r.uniform(0.1, 0.9))}),
    "accuracy_ceiling": lambda r: (_units(r, "format_ok", True, 30), {"max": float(r.uniform(0.1, 0.9))}),
    "correlation": lambda r: (_tokens(r).query("subject == 'base'"), {"x": {"metric": "x"}, "y": {"metric": "y"}}),
    "correlation_difference": lambda r: (_tokens(r), {"x": {"metric": "x"}, "y": {"metric": "y"}, "min_abs": 0.2}),
    "group_comparison": lambda r: (_tokens(r).query("subject == 'base'"),
                                   {"metric": "x", "a": ["determiner"], "b": ["noun"], "min_n": 5,
                                    **({"over": "layer"} if r.uniform() < 0.5 else {})}),
    "crossfit_summary": lambda r: (_crossfit(r), {"resid": "resid", "total": "total", "min": 0.3}),
    "diagonal_dominance": lambda r: (_deact(r), {"method": "lape"}),
    "baseline_ratio": lambda r: (_deact(r), {"numerator": {"method": "lape"}, "denominator": {"method": "random"},
                                             "min": 2.0}),
    "largest_of": lambda r: (_deact(r), {"target": "lape", "methods": ["random", "lap"]}),
    "related_exceeds_unrelated": lambda r: (_deact(r), {"method": "lape", "groups": [["de", "en"], ["es", "fr"]]}),
    "binomial_share": lambda r: (_shares(r), {"min_share": 0.6}),
    "arg_extreme": lambda r: (_argmax(r), {"metric": "c", "over": "layer", "band": [0.2, 0.8], "unit": "sample"}),
}


def _flat(v: Verdict):
    yield v
    for p in v.parts:
        yield from _flat(p)


def test_every_rule_has_a_case():
    assert set(registry.rules()) <= set(CASES), sorted(set(registry.rules()) - set(CASES))


@pytest.mark.parametrize("name", sorted(CASES))
def test_estimate_lies_inside_its_interval(name):
    for seed in range(12):
        rng = np.random.default_rng(seed)
        frame, params = CASES[name](rng)
        v = evaluate(frame, name, {**params, **({"n_resamples": 299} if "n_resamples" in registry.rule(name).params
                                                else {})})
        for part in _flat(v):
            if part.estimate is None or part.ci_low is None or part.ci_high is None:
                continue
            assert part.ci_low - 1e-12 <= part.estimate <= part.ci_high + 1e-12, (name, seed, part)


@pytest.mark.parametrize("name", ["threshold", "paired_difference", "baseline_ratio", "binomial_share"])
def test_the_difference_from_a_control_lies_inside_its_interval(name):
    """Claims decided against their control (bench.stats.control): trained − control, on two random frames of
    the rule's shape, for every rule that registers an arm."""
    from bench.stats.control import difference, supports

    assert supports(name)
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        (trained, params), (control, _) = CASES[name](rng), CASES[name](rng)
        if name == "threshold":
            trained, control = _units(rng, n=20), _units(rng, n=20)
            params = {"metric": "m", "min": 0.0}
        v = difference(trained, control, name, {**params, "n_resamples": 299})
        if v.estimate is None or v.ci_low is None:
            continue
        assert v.ci_low - 1e-12 <= v.estimate <= v.ci_high + 1e-12, (name, seed, v)
