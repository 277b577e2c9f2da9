"""Training runs as units (bench.stats.training_runs): a claim is decided on every run, never on one run's luck."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.stats import Outcome, adjust, evaluate


def runs(*means: float, n: int = 30, sd: float = 0.05) -> pd.DataFrame:
    """One training run per mean: `n` units each, values spread evenly around the run's mean with standard
    deviation `sd`; column `train_seed` names the run."""
    z = np.linspace(-1, 1, n)
    z = z / z.std(ddof=1)
    return pd.concat([pd.DataFrame({"train_seed": r, "sample": np.arange(n), "metric": "m",
                                    "value": mu + sd * z}) for r, mu in enumerate(means)],
                     ignore_index=True).astype({"train_seed": "Int64"})


RULE = {"metric": "m", "min": 0.4, "training_runs": "train_seed"}


def test_runs_that_disagree_are_not_decided_on_one_run():
    frame = runs(0.8, 0.1)  # run 0 forms the effect, run 1 does not
    one = evaluate(frame[frame["train_seed"] == 0], "threshold", {"metric": "m", "min": 0.4})
    assert one.outcome is Outcome.SUPPORTED  # what a single-seed run would have printed
    v = evaluate(frame, "threshold", RULE)
    assert v.outcome is Outcome.INCONCLUSIVE and "disagree" in v.reason
    assert v.runs == 2 and [p.outcome for p in v.parts] == [Outcome.SUPPORTED, Outcome.REFUTED]
    assert v.ci_low < 0.4 < v.ci_high  # the interval spans both runs


def test_every_run_supporting_is_supported_with_the_largest_p():
    v = evaluate(runs(0.45, 0.8), "threshold", RULE)
    assert v.outcome is Outcome.SUPPORTED
    assert v.p_value == pytest.approx(max(p.p_value for p in v.parts))
    assert v.estimate == pytest.approx(np.mean([p.estimate for p in v.parts]))
    assert "2 training runs × 30 units" in v.reason


def test_every_run_refuting_is_refuted_with_each_runs_sensitivity():
    v = evaluate(runs(0.1, 0.2), "threshold", RULE)
    assert v.outcome is Outcome.REFUTED and v.sensitivity and "train_seed 1" in v.sensitivity


def test_runs_that_are_all_undecided_are_not_said_to_disagree():
    v = evaluate(runs(0.41, 0.39, sd=0.2), "threshold", RULE)
    assert v.outcome is Outcome.INCONCLUSIVE and "undecided in every one of 2" in v.reason


def test_one_run_cannot_decide():
    v = evaluate(runs(0.9), "threshold", RULE)
    assert v.outcome is Outcome.INCONCLUSIVE and "one training run" in v.reason


def test_rows_without_a_run_belong_to_every_run():
    frame = runs(0.8, 0.9)
    shared = pd.DataFrame({"train_seed": pd.array([None] * 30, dtype="Int64"), "sample": np.arange(30),
                           "metric": "shared", "value": 1.0})
    v = evaluate(pd.concat([frame, shared], ignore_index=True), "all", {
        "training_runs": "train_seed",
        "of": [{"rule": "threshold", "metric": "m", "min": 0.4},
               {"rule": "threshold", "metric": "shared", "max": 2.0, "reduce": "max"}]})
    assert v.outcome is Outcome.SUPPORTED and all(len(p.parts) == 2 for p in v.parts)


def test_a_missing_run_column_is_named():
    with pytest.raises(ValueError, match="no column 'seed_of_run'"):
        evaluate(runs(0.8, 0.9), "threshold", {**RULE, "training_runs": "seed_of_run"})


def test_bh_withdraws_a_replicated_supported_when_one_run_loses_significance():
    v = evaluate(runs(0.44, 0.8, n=10), "threshold", RULE)  # run 0: t = 2.5 on 9 df, p ≈ 0.016
    assert v.outcome is Outcome.SUPPORTED and 0.01 < v.p_value < 0.02
    others = [evaluate(runs(0.41, n=10), "threshold", {"metric": "m", "min": 0.4}) for _ in range(8)]
    out = adjust([v] + others)[0]
    assert out.outcome is Outcome.INCONCLUSIVE and out.runs == 2
    assert out.p_adjusted == pytest.approx(max(p.p_adjusted for p in out.parts))


def test_the_rule_sentence_says_it_decides_on_every_training_run():
    from bench.ground.prose import describe

    words = describe("threshold", RULE)
    assert "decided on every training run (`train_seed`)" in words and "training_runs" not in words
