"""Claims across models: which effects are pooled, with what numbers, and what the one-line reading says."""

from __future__ import annotations

import math

import pytest

from bench.spine.synthesis import synthesise, threshold_side

Z = 1.959963984540054  # a 95% normal interval is estimate ± Z · SE


def cell(claim, model, est, se=0.5, *, threshold="≥ 0.4", outcome="SUPPORTED", spec_hash="h1", metric="m"):
    ci = (est - Z * se, est + Z * se) if se is not None else (None, None)
    return {"spec": {"id": claim, "title": claim, "hash": spec_hash, "verdict": {"metric": metric}},
            "model": model, "seed": 0,
            "verdict": {"outcome": outcome, "estimate": est, "ci_low": ci[0], "ci_high": ci[1],
                        "metric": metric, "threshold": threshold}}


def record(run_id, cells):
    return {"run_id": run_id, "cells": cells}


def test_three_models_pool_to_the_hand_computed_values_and_the_control_is_not_pooled():
    # the three-model case of tests/stats/test_meta.py: effects 0, 1, 2 with SE 0.5 → mean 1, τ² 0.75, I² 0.75
    runs = [record("r1", [cell("f.c", "a", 0.0), cell("f.c", "b", 1.0),
                          cell("f.c", "a+random-init", 9.0, outcome="REFUTED")]),
            record("r2", [cell("f.c", "c", 2.0)])]
    (s,) = synthesise(runs)
    p = s.pooled
    assert p.k == 3 and p.estimate == pytest.approx(1.0, abs=1e-9)
    assert p.tau2 == pytest.approx(0.75, abs=1e-6) and p.i2 == pytest.approx(0.75, abs=1e-9)
    assert p.se == pytest.approx(math.sqrt(1 / 3), abs=1e-6)
    control = next(r for r in s.rows if r.model == "a+random-init")
    assert control.control and not control.pooled and "never pooled" in control.note
    assert {r.model for r in s.rows if r.pooled} == {"a", "b", "c"}
    # the prediction interval, 1 ± 13.2, crosses the threshold 0.4
    assert s.reading == ("holds on 3 of 3 models; the prediction interval crosses the threshold: model-specific; "
                         "0 of 1 random-init control also holds")


def test_the_reading_follows_the_prediction_interval():
    tight = [cell("f.c", m, e, se=0.05) for m, e in (("a", 0.90), ("b", 0.92), ("c", 0.88))]
    (s,) = synthesise([record("r", tight)])
    assert s.pooled.pi_low > 0.4 and "expected to hold on a new model" in s.reading
    wrong = [cell("f.c", m, e, se=0.01, outcome="REFUTED") for m, e in (("a", 0.1), ("b", 0.12))]
    (s,) = synthesise([record("r", wrong)])
    assert "holds on 0 of 2 models" in s.reading and "wrong side" in s.reading


@pytest.mark.parametrize("second, reason", [
    (cell("f.c", "b", 1.0, threshold="> q0.99 of baseline (0.05)"), "threshold is derived per model"),
    (cell("f.c", "b", 1.0, spec_hash="h2"), "spec differs between the runs"),
    (cell("f.c", "b", 1.0, metric="other"), "different metrics"),
])
def test_effects_that_are_not_comparable_are_not_pooled(second, reason):
    (s,) = synthesise([record("r", [cell("f.c", "a", 0.5), second])])
    assert s.pooled is None and reason in s.not_pooled and reason in s.reading


def test_exact_checks_and_single_models_are_not_pooled():
    (s,) = synthesise([record("r", [cell("f.c", "a", 1e-6, se=None), cell("f.c", "b", 2e-6, se=None)])])
    assert s.pooled is None and "no model has an interval" in s.not_pooled
    (s,) = synthesise([record("r", [cell("f.c", "a", 0.5), cell("f.c", "a+random-init", 0.5)])])
    assert s.pooled is None and "pooling needs 2" in s.not_pooled


def test_a_model_in_two_runs_counts_once():
    runs = [record("r1", [cell("f.c", "a", 0.0), cell("f.c", "b", 1.0)]),
            record("r2", [cell("f.c", "a", 0.2)])]
    (s,) = synthesise(runs)
    assert s.pooled.k == 2 and next(r for r in s.rows if r.model == "a").run_id == "r2"


def test_threshold_labels():
    assert threshold_side("≥ 0.4") == (0.4, 1) and threshold_side("≤ 1e-4") == (1e-4, -1)
    assert threshold_side("> q0.99 of baseline (0.04)") is None and threshold_side(None) is None


def test_the_same_effect_from_two_models_counts_once():
    # a truncated model shares its embeddings with the full one: the direct-path effect is the same numbers
    twins = [cell("f.c", "full", 0.26), cell("f.c", "half", 0.26), cell("f.c", "other", 1.26)]
    (s,) = synthesise([record("r", twins)])
    assert s.pooled.k == 2 and s.pooled.estimate == pytest.approx(0.76, abs=1e-9)  # equal SEs: the plain mean
    assert "same estimate and interval as full: counted once" in next(r.note for r in s.rows if r.model == "half")
    same = [cell("f.c", m, 0.72, se=0.007) for m in ("a", "b", "c")]  # a probe that trains its own toy models
    (s,) = synthesise([record("r", same)])
    assert s.pooled is None and "does not depend on the model" in s.not_pooled
