"""The correlation rule's partial form (`given`): the correlation two measurements keep once a shared covariate is
regressed out of each, with texts as the resampling unit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import Outcome, evaluate
from bench.stats.correlations import weighted_partial


def _frame(x, y, z, per_text: int = 20) -> pd.DataFrame:
    n = len(x)
    sample, position = np.arange(n) // per_text, np.arange(n) % per_text
    return pd.concat([pd.DataFrame({"sample": sample, "position": position, "metric": m, "value": v})
                      for m, v in (("c", x), ("e", y), ("prior", z))], ignore_index=True)


RULE = {"x": {"metric": "c"}, "y": {"metric": "e"}, "given": {"metric": "prior"}}


def test_partial_r_equals_the_correlation_of_residuals():
    rng = np.random.default_rng(0)
    z = rng.normal(size=500)
    x = z + rng.normal(size=500)
    y = 0.5 * z + 0.3 * x + rng.normal(size=500)
    design = np.column_stack([np.ones_like(z), z])
    res = [v - design @ np.linalg.lstsq(design, v, rcond=None)[0] for v in (x, y)]
    assert weighted_partial(np.ones(500), x, y, z) == pytest.approx(np.corrcoef(*res)[0, 1], abs=1e-12)
    w = rng.integers(0, 3, size=500).astype(float)  # weights = repeated rows
    rep = np.repeat(np.arange(500), w.astype(int))
    res = [v[rep] - design[rep] @ np.linalg.lstsq(design[rep], v[rep], rcond=None)[0] for v in (x, y)]
    assert weighted_partial(w, x, y, z) == pytest.approx(np.corrcoef(*res)[0, 1], abs=1e-12)


def test_a_correlation_that_only_the_covariate_carries_is_not_supported():
    """x and y both follow z (how predictable a prefix is, say) and nothing else: the plain r is large and
    significant, the partial r is not."""
    rng = np.random.default_rng(1)
    z = rng.normal(size=600)
    x, y = z + rng.normal(scale=0.5, size=600), z + rng.normal(scale=0.5, size=600)
    f = _frame(x, y, z)
    assert evaluate(f, "correlation", {"x": {"metric": "c"}, "y": {"metric": "e"}}).outcome is Outcome.SUPPORTED
    v = evaluate(f, "correlation", RULE)
    assert v.outcome is not Outcome.SUPPORTED and abs(v.estimate) < 0.1
    assert v.effect > 0.7 and "without the covariate r = 0.76" in v.reason


def test_a_correlation_beyond_the_covariate_is_supported():
    rng = np.random.default_rng(2)
    z, s = rng.normal(size=600), rng.normal(size=600)
    x, y = z + s + rng.normal(scale=0.5, size=600), s + rng.normal(scale=0.5, size=600)
    v = evaluate(_frame(x, y, z), "correlation", RULE)
    assert v.outcome is Outcome.SUPPORTED and v.estimate > 0.5 and v.n == 30  # 30 texts of 20 tokens


def test_given_needs_pearson():
    f = _frame(np.arange(60.0), np.arange(60.0), np.arange(60.0))
    with pytest.raises(ValueError):
        evaluate(f, "correlation", {**RULE, "method": "spearman"})
