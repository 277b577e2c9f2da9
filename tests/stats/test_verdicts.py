"""Decision rules on frames with known answers; p-values and intervals agree with scipy called directly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench.stats import Outcome, Verdict, adjust, evaluate


def sample_frame(values, metric="m") -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(len(values)), "metric": metric, "value": np.asarray(values, float)})


def heads_frame(means: np.ndarray, n: int = 20, noise: float = 0.02, seed: int = 0) -> pd.DataFrame:
    """Per-(sample, layer, head) rows whose per-head means are `means` (layers, heads)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n):
        for (l, h), mu in np.ndenumerate(means):
            rows.append((s, l, h, "score", mu + noise * rng.standard_normal()))
    return pd.DataFrame(rows, columns=["sample", "layer", "head", "metric", "value"])


def test_threshold_mean_supported_refuted_inconclusive():
    rng = np.random.default_rng(1)
    high = evaluate(sample_frame(0.8 + 0.05 * rng.standard_normal(30)), "threshold", {"metric": "m", "min": 0.5})
    assert high.outcome is Outcome.SUPPORTED and high.ci_low > 0.5 and high.n == 30
    low = evaluate(sample_frame(0.2 + 0.05 * rng.standard_normal(30)), "threshold", {"metric": "m", "min": 0.5})
    assert low.outcome is Outcome.REFUTED and low.ci_high < 0.5
    mid = evaluate(sample_frame(0.5 + 0.3 * rng.standard_normal(30)), "threshold", {"metric": "m", "min": 0.5})
    assert mid.outcome is Outcome.INCONCLUSIVE and mid.ci_low < 0.5 < mid.ci_high


def test_threshold_mean_p_is_scipy_one_sample_t():
    vals = np.random.default_rng(2).normal(0.6, 0.2, 25)
    v = evaluate(sample_frame(vals), "threshold", {"metric": "m", "min": 0.5})
    assert v.p_value == pytest.approx(stats.ttest_1samp(vals, 0.5, alternative="greater").pvalue)
    assert v.estimate == pytest.approx(vals.mean())


def test_threshold_upper_bound_side():
    v = evaluate(sample_frame(np.full(10, 0.1) + np.linspace(0, 0.01, 10)), "threshold", {"metric": "m", "max": 0.4})
    assert v.outcome is Outcome.SUPPORTED and v.threshold == "≤ 0.4"


def test_too_few_samples_is_inconclusive():
    v = evaluate(sample_frame([0.9, 0.95, 0.92]), "threshold", {"metric": "m", "min": 0.4})
    assert v.outcome is Outcome.INCONCLUSIVE and "only 3" in v.reason


def test_max_group_mean_finds_best_head():
    means = np.full((3, 4), 0.05)
    means[2, 1] = 0.7
    v = evaluate(heads_frame(means), "threshold",
                 {"metric": "score", "reduce": "max_group_mean", "by": ["layer", "head"], "min": 0.4})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.7, abs=0.01)
    none = evaluate(heads_frame(np.full((3, 4), 0.05)), "threshold",
                    {"metric": "score", "reduce": "max_group_mean", "by": ["layer", "head"], "min": 0.4})
    assert none.outcome is Outcome.REFUTED


def test_exact_worst_case():
    ok = evaluate(sample_frame([1e-7, 3e-6, 2e-6]), "threshold", {"metric": "m", "reduce": "max", "max": 1e-4})
    assert ok.outcome is Outcome.SUPPORTED and ok.estimate == pytest.approx(3e-6) and ok.p_value is None
    bad = evaluate(sample_frame([1e-7, 3e-3]), "threshold", {"metric": "m", "reduce": "max", "max": 1e-4})
    assert bad.outcome is Outcome.REFUTED


def test_paired_difference_matches_wilcoxon():
    rng = np.random.default_rng(3)
    first = rng.normal(10, 0.5, 20)
    second = first - 3 + rng.normal(0, 0.3, 20)
    frame = pd.concat([sample_frame(first, "a"), sample_frame(second, "b")])
    v = evaluate(frame, "paired_difference", {"a": {"metric": "a"}, "b": {"metric": "b"}, "min": 1.0})
    d = first - second
    assert v.outcome is Outcome.SUPPORTED
    assert v.estimate == pytest.approx(d.mean())
    assert v.p_value == pytest.approx(stats.wilcoxon(d - 1.0, alternative="greater").pvalue)
    assert v.effect == pytest.approx(d.mean() / d.std(ddof=1))
    small = evaluate(frame, "paired_difference", {"a": {"metric": "a"}, "b": {"metric": "b"}, "min": 5.0})
    assert small.outcome is Outcome.REFUTED


def test_paired_difference_of_best_heads():
    a = heads_frame(np.array([[0.1, 0.8]]), seed=1).assign(subject="two")
    b = heads_frame(np.array([[0.1, 0.2]]), seed=2).assign(subject="one")
    frame = pd.concat([a, b])
    p = {"a": {"subject": "two", "metric": "score"}, "b": {"subject": "one", "metric": "score"},
         "reduce": "max_group_mean", "by": ["layer", "head"], "min": 0.3}
    v = evaluate(frame, "paired_difference", p)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.6, abs=0.02)


def test_exceeds_baseline_monte_carlo_p():
    base = np.random.default_rng(4).normal(0, 1, 199)
    frame = pd.concat([
        pd.DataFrame({"kind": "observed", "metric": "s", "value": [5.0]}),
        pd.DataFrame({"kind": "baseline", "metric": "r", "value": base})])
    v = evaluate(frame, "exceeds_baseline", {"observed": {"kind": "observed"}, "baseline": {"kind": "baseline"}})
    assert v.outcome is Outcome.SUPPORTED and v.p_value == pytest.approx(1 / 200)
    frame.loc[frame["kind"] == "observed", "value"] = 0.0
    v = evaluate(frame, "exceeds_baseline", {"observed": {"kind": "observed"}, "baseline": {"kind": "baseline"}})
    assert v.outcome is Outcome.REFUTED


def test_missing_rows_are_inconclusive_with_probe_notes():
    frame = sample_frame([1.0, 2.0])
    frame.attrs["notes"] = ["the model has no such thing"]
    v = evaluate(frame, "threshold", {"metric": "absent", "min": 0.0})
    assert v.outcome is Outcome.INCONCLUSIVE and "no such thing" in v.reason


def test_all_combines_parts():
    frame = sample_frame(np.linspace(0.8, 0.9, 12))
    ok = {"rule": "threshold", "metric": "m", "min": 0.5}
    bad = {"rule": "threshold", "metric": "m", "min": 0.95}
    v = evaluate(frame, "all", {"of": [ok, ok]})
    assert v.outcome is Outcome.SUPPORTED and len(v.parts) == 2
    v = evaluate(frame, "all", {"of": [ok, bad]})
    assert v.outcome is Outcome.REFUTED and "m:" in v.reason


def test_one_conjunction_policy_for_every_multi_part_rule():
    from bench.stats import conjunction

    S, R, I, E = Outcome.SUPPORTED, Outcome.REFUTED, Outcome.INCONCLUSIVE, Outcome.ERROR
    assert conjunction([S, S]) is S
    assert conjunction([S, R]) is R and conjunction([I, R]) is R  # one false part makes the conjunction false
    assert conjunction([S, I]) is I and conjunction([]) is I
    assert conjunction([R, E]) is E


def test_bh_adjustment_matches_scipy_and_downgrades():
    ps = [0.001, 0.02, 0.03, 0.04]
    vs = [Verdict(Outcome.SUPPORTED, "x", "threshold", "m", 1.0, p_value=p) for p in ps]
    out = adjust(vs)
    expected = stats.false_discovery_control(ps, method="bh")
    assert [o.p_adjusted for o in out] == pytest.approx(list(expected))
    assert all(o.p_adjusted >= o.p_value for o in out)
    assert out[0].outcome is Outcome.SUPPORTED
    assert all(o.outcome is Outcome.INCONCLUSIVE for o in out[1:] if o.p_adjusted >= 0.05)


def test_bh_sees_parts_once_and_recombines():
    part_ok = Verdict(Outcome.SUPPORTED, "x", "threshold", "m", 1.0, p_value=0.001)
    part_weak = Verdict(Outcome.SUPPORTED, "x", "threshold", "m", 1.0, p_value=0.045)
    from bench.stats import combine

    combined = combine([part_ok, part_weak], 0.05)
    others = [Verdict(Outcome.REFUTED, "x", "threshold", "m", 1.0, p_value=p) for p in (0.3, 0.5)]
    out = adjust([combined, *others])
    assert out[0].parts[1].p_adjusted == pytest.approx(stats.false_discovery_control([0.001, 0.045, 0.3, 0.5])[1])
    assert out[0].outcome is Outcome.INCONCLUSIVE  # the weak part no longer holds after adjustment


def test_verdict_json_round_trip():
    v = evaluate(sample_frame(np.linspace(0.8, 0.9, 12)), "all",
                 {"of": [{"rule": "threshold", "metric": "m", "min": 0.5}]})
    back = Verdict.from_json(v.to_json())
    assert back == v
