"""Small-sample calibration of the bootstrap p-values and intervals, at the unit counts the shipped smoke profiles
decide on (the smallest is 8 texts: the logit lens; contextualization uses 12).

Null data are clustered: texts whose tokens share a text effect (sd 1) plus token noise, so the unit is the
text.  Under a true null at the bound, a calibrated one-sided test at α = 0.05 rejects 5% ± 2% of the time.  The
plain percentile bootstrap over 8 units rejects about 7–8% (anti-conservative); the corrected one
(:func:`bench.stats._boot_p` with the unit count, :func:`bench.stats.expanded_confidence`) keeps the level.
The fast tests resample with numpy exactly as ``scipy.stats.bootstrap`` does (unit indices with replacement) to
afford 2,000 data sets; the slow one goes through the rules themselves.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import CALIBRATED_MIN_N, Outcome, _boot_p, evaluate, expanded_confidence

ALPHA, SIMS, B = 0.05, 2000, 999


def _unit_means(rng, n: int, per: int = 6) -> np.ndarray:
    """(SIMS, n) per-text means of clustered tokens with population mean 0."""
    text = rng.normal(size=(SIMS, n, 1))
    return (text + 0.5 * rng.normal(size=(SIMS, n, per))).mean(axis=-1)


def _boot_means(rng, x: np.ndarray) -> np.ndarray:
    """(SIMS, B) bootstrap means of each row of x, resampling its units."""
    n = x.shape[1]
    out = np.empty((x.shape[0], B))
    for i in range(0, x.shape[0], 200):  # bounded memory: 200 data sets at a time
        idx = rng.integers(0, n, size=(min(200, x.shape[0] - i), B, n), dtype=np.int32)
        out[i : i + 200] = np.take_along_axis(x[i : i + 200, None, :], idx, axis=2).mean(axis=-1)
    return out


@pytest.mark.parametrize("n", [CALIBRATED_MIN_N, 12, 16])
def test_bootstrap_p_keeps_its_level_at_the_shipped_unit_counts(n):
    rng = np.random.default_rng(n)
    boot = _boot_means(rng, _unit_means(rng, n))
    rate = np.mean([_boot_p(b, 0.0, +1, n) < ALPHA for b in boot])
    assert abs(rate - ALPHA) <= 0.02, f"n = {n}: false-positive rate {rate:.3f}"


def test_the_plain_percentile_p_is_anti_conservative_at_eight_units():
    """The reason for the correction: without the unit count the same replicates reject too often."""
    rng = np.random.default_rng(CALIBRATED_MIN_N)
    boot = _boot_means(rng, _unit_means(rng, CALIBRATED_MIN_N))
    rate = np.mean([_boot_p(b, 0.0, +1) < ALPHA for b in boot])
    assert rate > ALPHA + 0.02, f"plain percentile rate {rate:.3f}"


@pytest.mark.parametrize("n", [CALIBRATED_MIN_N, 12])
def test_expanded_interval_covers_at_its_level(n):
    rng = np.random.default_rng(100 + n)
    boot = _boot_means(rng, _unit_means(rng, n))
    tail = (1 - expanded_confidence(0.95, n)) / 2
    lo, hi = np.quantile(boot, tail, axis=1), np.quantile(boot, 1 - tail, axis=1)
    miss = np.mean((lo > 0) | (hi < 0))
    assert abs(miss - 0.05) <= 0.02, f"n = {n}: non-coverage {miss:.3f}"


def test_bootstrap_rules_refuse_below_their_calibrated_n():
    rng = np.random.default_rng(1)
    s = np.repeat(np.arange(CALIBRATED_MIN_N - 1), 4)
    f = pd.DataFrame({"sample": s, "metric": "m", "value": 5 + 0.1 * rng.normal(size=s.size)})
    v = evaluate(f, "threshold", {"metric": "m", "min": 0.0, "reduce": "max_group_mean", "by": []})
    assert v.outcome is Outcome.INCONCLUSIVE and f"calibrated from {CALIBRATED_MIN_N}" in v.reason


def _texts(rng, n: int, per: int = 12) -> pd.DataFrame:
    s = np.repeat(np.arange(n), per)
    share = rng.uniform(0.2, 0.8, n)
    cls = np.where(rng.uniform(size=s.size) < share[s], "determiner", "noun")
    x = rng.normal(size=n)[s] + 0.3 * rng.normal(size=s.size)
    y = rng.normal(size=n)[s] + 0.3 * rng.normal(size=s.size)
    pos = np.tile(np.arange(per), n)
    return pd.concat([pd.DataFrame({"sample": s, "position": pos, "cls": cls, "metric": "x", "value": x}),
                      pd.DataFrame({"sample": s, "position": pos, "cls": cls, "metric": "y", "value": y})],
                     ignore_index=True)


CASES = {
    "threshold": {"metric": "x", "min": 0.0, "reduce": "max_group_mean", "by": []},
    "correlation": {"x": {"metric": "x"}, "y": {"metric": "y"}},
    "group_comparison": {"metric": "x", "a": ["determiner"], "b": ["noun"], "side": "less", "min_n": 5},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_rules_keep_their_level_on_eight_clustered_texts(name):
    seeds = 600
    hits = sum(evaluate(_texts(np.random.default_rng(7000 + s), CALIBRATED_MIN_N), name,
                        {**CASES[name], "n_resamples": 499}).p_value < ALPHA for s in range(seeds))
    rate = hits / seeds
    # The level is kept: at most α + 2% false positives (600 null data sets; the binomial SE at α is 0.009).
    # A rate below α costs power, not false claims (the correlation bootstrap gives 0.028 at 8 texts); below α/2
    # the rule would be so conservative that a broken test statistic could hide there.
    assert ALPHA / 2 <= rate <= ALPHA + 0.02, f"{name}: false-positive rate {rate:.3f}"
