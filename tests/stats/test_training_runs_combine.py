"""bench.stats.training_runs.decide with a scripted per-run rule: each run's verdict is written by hand, so the
combined outcome, estimate, interval, p, reason and sensitivity are known exactly; split hands each run its own
rows plus the shared ones, in run order."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.stats import Outcome, Verdict
from bench.stats.training_runs import decide, split

S, R, I, E = Outcome.SUPPORTED, Outcome.REFUTED, Outcome.INCONCLUSIVE, Outcome.ERROR


def _frame(runs=(2, 0, 1), shared: int = 1) -> pd.DataFrame:
    """Two rows per run (values run·10 and run·10 + 1, in the order given) and `shared` rows with no run."""
    seeds = [r for r in runs for _ in range(2)] + [None] * shared
    values = [r * 10 + i for r in runs for i in range(2)] + [-1.0] * shared
    return pd.DataFrame({"train_seed": pd.array(seeds, dtype="Int64"), "metric": "m", "value": values})


def _v(outcome, est=0.5, lo=0.4, hi=0.6, p=0.01, sens=None, n=30, alpha=0.05) -> Verdict:
    return Verdict(outcome, f"{outcome.value.lower()} here", "threshold", "m", est, lo, hi, p, None, n,
                   None if est is None else est - 0.4, "margin", "mean ≥ 0.4", alpha, sensitivity=sens)


def _scripted(by_run: dict):
    """The per-run rule: the verdict scripted for the run whose rows it is given (shared rows carry no run)."""
    seen = []

    def one(rows: pd.DataFrame) -> Verdict:
        seen.append(rows)
        named = rows["train_seed"].dropna().unique().tolist()
        return by_run[named[0] if named else None]
    return one, seen


def test_split_gives_each_run_its_rows_and_the_shared_ones_in_run_order():
    parts = split(_frame(), "train_seed")
    assert [r for r, _ in parts] == [0, 1, 2]
    for r, rows in parts:
        assert sorted(rows["value"].tolist()) == [-1.0, r * 10, r * 10 + 1]
    with pytest.raises(ValueError, match=r"^training_runs: the frame has no column 'seed' \(columns: train_seed, "
                                         r"metric, value\)$"):
        split(_frame(), "seed")


def test_every_run_supporting_combines_mean_estimate_widest_interval_and_largest_p():
    one, seen = _scripted({0: _v(S, 0.5, 0.45, 0.55, 0.01), 1: _v(S, 0.6, 0.55, 0.65, 0.03),
                           2: _v(S, 0.95, 0.9, 0.99, 0.02)})
    v = decide(_frame(), "train_seed", one)
    assert [sorted(rows["value"].tolist()) for rows in seen] == [[-1.0, 0, 1], [-1.0, 10, 11], [-1.0, 20, 21]]
    assert v.outcome is S and v.runs == 3 and len(v.parts) == 3 and v.sensitivity is None
    assert (v.estimate, v.ci_low, v.ci_high, v.p_value) == (pytest.approx(2.05 / 3), 0.45, 0.99, 0.03)
    assert (v.rule, v.metric, v.n, v.effect, v.effect_name, v.threshold, v.alpha) == (
        "threshold", "m", 30, pytest.approx(0.1), "margin", "mean ≥ 0.4", 0.05)
    assert v.reason == ("holds in every one of 3 training runs × 30 units (largest p 0.03): train_seed 0: SUPPORTED "
                        "(supported here); train_seed 1: SUPPORTED (supported here); train_seed 2: SUPPORTED "
                        "(supported here)")


def test_a_missing_number_in_one_run_leaves_it_missing_in_the_combination():
    one, _ = _scripted({0: _v(I, est=None, lo=None, hi=0.7, p=None, n=None), 1: _v(I, 0.8, 0.7, 0.9, 0.02)})
    v = decide(_frame((0, 1)), "train_seed", one)
    assert (v.estimate, v.ci_low, v.ci_high, v.p_value) == (None, None, 0.9, None)
    assert v.reason.startswith("undecided in every one of 2 training runs: ")  # the first run names no n
    one, _ = _scripted({0: _v(I, est=0.3, hi=None), 1: _v(I, est=0.5, lo=None)})
    v = decide(_frame((0, 1)), "train_seed", one)
    assert (v.estimate, v.ci_low, v.ci_high) == (pytest.approx(0.4), None, None)
    assert v.reason.startswith("undecided in every one of 2 training runs × 30 units: ")


def test_every_run_refuting_is_refuted_with_each_runs_sensitivity():
    one, _ = _scripted({0: _v(R, sens="power 0.9"), 1: _v(R, sens="power 0.95")})
    v = decide(_frame((1, 0)), "train_seed", one)
    assert v.outcome is R and v.sensitivity == "train_seed 0: power 0.9; train_seed 1: power 0.95"
    assert v.reason == ("fails in every one of 2 training runs × 30 units: train_seed 0: REFUTED (refuted here); "
                        "train_seed 1: REFUTED (refuted here)")
    one, _ = _scripted({0: _v(R, sens="power 0.9"), 1: _v(R)})
    assert decide(_frame((0, 1)), "train_seed", one).sensitivity == "train_seed 0: power 0.9"
    one, _ = _scripted({0: _v(R), 1: _v(R)})
    assert decide(_frame((0, 1)), "train_seed", one).sensitivity is None


def test_runs_that_disagree_or_fail_and_a_lone_run():
    one, _ = _scripted({0: _v(S), 1: _v(R, sens="power 0.9")})
    v = decide(_frame((0, 1)), "train_seed", one)
    assert v.outcome is I and v.sensitivity is None
    assert v.reason == ("the 2 training runs × 30 units disagree: train_seed 0: SUPPORTED (supported here); "
                        "train_seed 1: REFUTED (refuted here)")
    one, _ = _scripted({0: _v(S, n=None), 1: _v(I, n=None)})
    assert decide(_frame((0, 1)), "train_seed", one).reason.startswith("the 2 training runs disagree: ")
    one, _ = _scripted({0: _v(S), 1: _v(E)})
    failed = decide(_frame((0, 1)), "train_seed", one)
    assert failed.outcome is E and failed.reason.startswith("a training run failed: train_seed 0: SUPPORTED")
    one, _ = _scripted({4: _v(S)})
    lone = decide(_frame((4,)), "train_seed", one)
    assert lone.outcome is I and lone.runs == 1
    assert lone.reason == ("one training run cannot show what the run's luck contributes (2 needed): train_seed 4: "
                           "SUPPORTED (supported here)")
    one, _ = _scripted({4: _v(E)})
    assert decide(_frame((4,)), "train_seed", one).outcome is E  # a failure is named before the count


def test_no_run_named_evaluates_the_whole_frame_but_decides_nothing():
    one, seen = _scripted({None: _v(R, sens="power 0.9")})
    v = decide(_frame((), shared=3), "train_seed", one)
    assert len(seen) == 1 and len(seen[0]) == 3
    assert v.outcome is I and v.sensitivity is None
    assert v.reason == "no training run named in 'train_seed' (refuted here)"
    one, _ = _scripted({None: _v(E)})
    assert decide(_frame((), shared=2), "train_seed", one).outcome is E


def test_runs_of_an_exact_rule_have_no_p_and_still_combine():
    """An exact rule (no sampling) gives no p: every run supporting is SUPPORTED, without a largest p."""
    one, _ = _scripted({0: _v(S, 0.6, None, None, None), 1: _v(S, 0.8, None, None, None)})
    v = decide(_frame((0, 1)), "train_seed", one)
    assert v.outcome is S and v.p_value is None and v.estimate == pytest.approx(0.7)
    assert v.reason == ("holds in every one of 2 training runs × 30 units: train_seed 0: SUPPORTED (supported here); "
                        "train_seed 1: SUPPORTED (supported here)")


def test_layer_summary_over_training_runs_is_decided():
    from bench.stats import evaluate

    f = pd.DataFrame({"train_seed": pd.array([0, 0, 1, 1], dtype="Int64"), "layer": [0, 1, 0, 1], "metric": "m",
                      "value": [0.5, 0.6, 0.5, 0.7]})
    v = evaluate(f, "layer_summary", {"metric": "m", "reduce": "max", "min": 0.1, "training_runs": "train_seed"})
    assert v.outcome is S and v.estimate == pytest.approx(0.65) and v.runs == 2


def test_the_combined_verdict_keeps_the_runs_alpha():
    one, _ = _scripted({r: _v(S, alpha=0.1) for r in (0, 1, 2)})
    assert decide(_frame(), "train_seed", one).alpha == 0.1
